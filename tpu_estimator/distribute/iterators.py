"""The input's iterators, and the hook that starts them at the beginning of every call.

A graph kept across calls (core/graph_cache.py) restarts its input at each call.  Making an
iterator anew destroys the one it replaces, in that same run, and with tf.data's autotuning
(the default) the destruction can wait: the old pipeline's autotuning thread, woken to stop,
can miss the stop and sleep out the rest of its optimization period, a period that doubles
while the pipeline lives (tens of milliseconds after a short evaluation, up to a minute after
a long training call).  The new call waited for it (docs/design-decisions.md, "Speed of the
device loop").

So an iterator here is a few iterator resources (copies) behind one reader.  In a kept session
a call starts a copy that is idle, reads it through the reader (its handle held in a string
variable that the start sets: a handle fed to every run cost ~80 us a run, a quarter of a small
model's one-step run), and once the call is over releases it on a background thread: the copy
is made anew over an empty dataset, which starts no autotuning, and the teardown's wait happens
there.  The next call starts another copy, so no call waits for the previous one's teardown.
Starting and releasing take the copy's handle fed, one op each for every copy, so a session
prepares their first runs once, not once per copy.  Three copies:
a pipeline's period grows to about its lifetime, so a release can take about as long as the
call that used it; a copy is needed again two calls after its release began.  A session used
for one call only reads the first copy, started and set as the reader's in one run; an
evaluation's or prediction's is closed on a background thread (`ClosedInBackground`): closing
tears its pipelines down, with the same wait.

A kept graph's iterator can also start a copy over another call's dataset of the same element
spec, fed serialized (`read_instead`, graph_cache.read_new_input): the kept graph reads a new
input_fn's data.

A start also keeps the dataset it made in the session (a variant variable), and where that
dataset holds no state a call would see (graph_cache checks: no random op, no cache), the next
starts make their copy over it instead of making the dataset again from its ops, or from the
serialized graph fed: 1.5 ms less a start for a small in-memory input, and an evaluation of 64
small batches called again took 13-14 ms instead of 16-17 (the pipeline runs faster too)."""

import sys
import threading
import weakref

import tensorflow as tf

from tpu_estimator.core import fetch_plans

_v1 = tf.compat.v1
_log = tf.get_logger()

COPIES = 3  # iterator resources per input in a kept graph (why three: above)
_NOTHING = object()  # `Restartable._made` before a start kept a dataset it may reuse


class Restartable:
  """An initializable iterator over `dataset` with `copies` resources behind one reader
  (`get_next`, `get_next_as_optional`)."""

  def __init__(self, dataset, copies=COPIES):
    self._copies = [_v1.data.make_initializable_iterator(dataset) for _ in range(copies)]
    self.element_spec = dataset.element_spec
    first = self._copies[0]
    self._fed = None
    self._reader = first
    self._initializer = first.initializer
    self._start = self._release = self._swap = self._restart = None
    self.own_data = tf.data.experimental.to_variant(dataset)  # what graph_cache checks
    if copies > 1:
      self._handle_ops = [c.string_handle() for c in self._copies]
      iterator_op = self._handle_ops[0].op.inputs[0].op  # the first copy's IteratorV2
      with iterator_op.graph.colocate_with(iterator_op):  # the reader where the copies live
        self._restart_ops(dataset, iterator_op)
    # What the hook may run (graph_cache checks them): the other copies' own initializers never.
    self.ops = [self._initializer] if self._fed is None else [
        self._initializer, self._start, self._release, self._swap, self._restart]
    self._instead = None  # the serialized dataset kept calls start over, None: this one
    self._own_reused = self._instead_reused = False  # a start may reuse the dataset made
    self._session = None  # a weak reference to the kept session the state below is for
    self._handles = None
    self._threads = [None] * copies
    self._current = 0
    self._unreleased = None
    self._made = _NOTHING  # the `_instead` whose dataset the session's `data` holds

  def _restart_ops(self, dataset, iterator_op):
    """The reader over the copy a start chose, and the ops that start and release copies."""
    graph = iterator_op.graph
    types, shapes = iterator_op.get_attr('output_types'), iterator_op.get_attr('output_shapes')
    # The copy the reader reads: a string variable of no collection (never saved, never in a
    # readiness check), set by the start (raw ops: no strategy mirrors it).
    name = graph.unique_name('input_copy_current')
    current = tf.raw_ops.VarHandleOp(dtype=tf.string, shape=[], shared_name=name, name=name)
    read = tf.raw_ops.IteratorFromStringHandleV2(
        string_handle=tf.raw_ops.ReadVariableOp(resource=current, dtype=tf.string),
        output_types=types, output_shapes=shapes)
    self._reader = _v1.data.Iterator(
        read, None, _v1.data.get_output_types(dataset), _v1.data.get_output_shapes(dataset),
        _v1.data.get_output_classes(dataset))
    self._initializer = tf.group(
        self._copies[0].initializer,
        tf.raw_ops.AssignVariableOp(resource=current, value=self._handle_ops[0]),
        name='input_copy_first')
    # One start and one release for every copy, the copy chosen by the handle fed: a session
    # prepares each op's first run once (~7 ms for a small input), not per copy.
    self._fed = _v1.placeholder(tf.string, [], name='input_copy_handle')
    fed_copy = tf.raw_ops.IteratorFromStringHandleV2(
        string_handle=self._fed, output_types=types, output_shapes=shapes)
    # The dataset a start made, kept in the session for the next starts (`reuse_own_data`,
    # `read_instead`): a variant variable of no collection, as `current`.
    name = graph.unique_name('input_copy_data')
    data = tf.raw_ops.VarHandleOp(dtype=tf.variant, shape=[], shared_name=name, name=name)

    def starting(value, op_name):  # sets `data` to `value` first, unless None
      sets = [] if value is None else [tf.raw_ops.AssignVariableOp(resource=data, value=value)]
      with tf.control_dependencies(sets):
        dataset_kept = tf.raw_ops.ReadVariableOp(resource=data, dtype=tf.variant)
      return tf.group(tf.raw_ops.MakeIterator(dataset=dataset_kept, iterator=fed_copy),
                      tf.raw_ops.AssignVariableOp(resource=current, value=self._fed),
                      name=op_name)

    self._start = starting(self.own_data, 'input_copy_start')
    self._restart = starting(None, 'input_copy_restart')
    self._release = tf.raw_ops.MakeIterator(
        dataset=tf.data.experimental.to_variant(dataset.take(0)), iterator=fed_copy,
        name='input_copy_release')
    self._fed_dataset = _v1.placeholder(tf.string, [], name='input_copy_dataset')
    self._swap = starting(tf.raw_ops.DatasetFromGraph(graph_def=self._fed_dataset),
                          'input_copy_swap')

  @property
  def restartable_over_other_data(self):
    """Whether a kept session can start this iterator over another dataset (`read_instead`)."""
    return self._swap is not None

  def read_instead(self, graph_def, reused=False):
    """Kept calls from now on start their copy over the dataset serialized in `graph_def` (of
    this iterator's element spec), or over this iterator's own dataset (None).  `reused`:
    the dataset holds no state a call would see (graph_cache checks), so the one the first
    start makes serves the next."""
    self._instead = graph_def
    self._instead_reused = reused

  def reuse_own_data(self):
    """Kept calls over this iterator's own dataset start their copies over the one the first
    start made: it holds no state a call would see (graph_cache checks)."""
    self._own_reused = True

  @property
  def initializer(self):
    """Starts the first copy and has the reader read it (a session used for one call)."""
    return self._initializer

  def get_next(self):
    return self._reader.get_next()

  def get_next_as_optional(self):
    return self._reader.get_next_as_optional()

  def start(self, session, kept):
    """The op that starts this call's input in `session` and points the reader at it, and
    what to feed it.  `kept`: the session serves later calls (rotate over the copies)."""
    if self._fed is None or not kept:
      return self.initializer, {}
    if self._session is None or self._session() is not session:
      self._session = weakref.ref(session)
      self._handles = session.run(self._handle_ops)
      self._threads = [None] * len(self._copies)
      self._unreleased = None
      self._made = _NOTHING
    if self._unreleased is not None:  # the last call ended without `end()` (an exception)
      self.release(session)
    self._current = self._idle_copy()
    self._unreleased = self._current
    feed = {self._fed: self._handles[self._current]}
    reused = self._own_reused if self._instead is None else self._instead_reused
    if reused and self._made is self._instead:
      return self._restart, feed
    self._made = _NOTHING  # until the start has run (`started`): it sets `data`
    if self._instead is not None:
      feed[self._fed_dataset] = self._instead
      return self._swap, feed
    return self._start, feed

  def started(self):
    """The start `start` returned has run: `data` holds the dataset it made."""
    self._made = self._instead

  def _idle_copy(self):
    """The next copy after the current one whose release is over (waiting for the one whose
    release began first when none is)."""
    count = len(self._copies)
    order = [(self._current + step) % count for step in range(1, count + 1)]
    for index in order:
      thread = self._threads[index]
      if thread is None or not thread.is_alive():
        return index
    self._threads[order[0]].join()
    return order[0]

  def release(self, session):
    """Releases the copy this call read, on a background thread (kept sessions only)."""
    index, self._unreleased = self._unreleased, None
    if index is None:
      return
    thread = threading.Thread(target=_quiet_run,
                              args=(session, self._release, {self._fed: self._handles[index]}),
                              name='tpu_estimator_input_release')
    thread.start()  # not a daemon: the interpreter's exit waits for it, then closes sessions
    self._threads[index] = thread


def serialization(dataset):
  """An op serializing `dataset` (to run in its graph's session): what a kept graph's
  iterator is given to read instead (`Restartable.read_instead`).  Its run fails where the
  dataset holds state of the session's (a table, a Python function): that one cannot move."""
  return tf.raw_ops.DatasetToGraphV2(
      input_dataset=tf.data.experimental.to_variant(dataset),
      external_state_policy=2, strip_device_assignment=True)  # 2: fail on external state


def _quiet_run(session, op, feeds):
  """Runs `op`; a session closed meanwhile (or any failure) only means the copy is released
  when it is next started, as before."""
  try:
    session.run(op, feed_dict=feeds)
  except Exception as error:  # pylint: disable=broad-except
    _log.debug('Releasing an input copy in the background did not complete: %s', error)


class InputStartHook(_v1.train.SessionRunHook):
  """Starts the input iterators once the session exists (at every call), pointing their
  readers at the copies started, and releases those when the call ends."""

  def __init__(self, iterators):
    self._iterators = list(iterators)
    self._ops = [op for it in self._iterators for op in it.ops]  # graph_cache reads these

  def after_create_session(self, session, coord):
    del coord
    kept = getattr(session, 'kept_across_calls', False)
    starts, feeds = [], {}
    for iterator in self._iterators:
      op, feed = iterator.start(session, kept)
      starts.append(op)
      feeds.update(feed)
    session.run(starts, feed_dict=feeds)
    if kept:
      for iterator in self._iterators:
        iterator.started()

  def end(self, session):
    for iterator in self._iterators:
      iterator.release(session)


class ClosedInBackground(fetch_plans.PlannedSessions):
  """Creates sessions with `creator` whose `close()` returns at once and closes them on a
  background thread: an evaluation's or prediction's session not kept for later calls (a
  training session, holding optimizer slots too, is closed before `train()` returns).
  Closing destroys its input pipelines, and that can wait out an autotuning period as a
  restart does (above): 0.14-0.15 s after an evaluation of 1280 small batches, in two of
  three processes.  The call's work is done by then (hooks ended: summaries written), so the
  call returns and the teardown happens meanwhile, as a kept session's copies are released.
  Its sessions reuse their fetch plans too (`PlannedSessions`)."""

  def create_session(self):
    return fetch_plans.planned(self._creator.create_session(), _SessionClosedInBackground)


class _SessionClosedInBackground(fetch_plans.PlannedSession):
  """A Session whose first `close()` starts a thread that closes it (not a daemon: the
  interpreter's exit waits for it).  A session destroyed without a close (a prediction not
  read to the end), or closed while the interpreter shuts down, is closed there and then:
  no thread holds it then, and none could start."""

  _close_started = False

  def close(self):
    self.forget_plans()  # they hold the call's hooks (core/fetch_plans.py)
    if self._close_started or sys.is_finalizing() or not threading.main_thread().is_alive():
      super().close()  # a no-op once closed
      return
    self._close_started = True
    threading.Thread(target=_closing, args=(self,), name='tpu_estimator_session_close').start()

  def __del__(self):
    self._close_started = True
    super().__del__()


def _closing(session):
  try:
    _v1.Session.close(session)
  except Exception as error:  # pylint: disable=broad-except
    _log.warning("Closing a finished call's session failed: %s", error)
