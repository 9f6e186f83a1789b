"""Saving checkpoints: name-based (`tf.compat.v1.train.Saver`, V2 format, so a model_dir stays
readable by the original Estimator and the reverse), the variables saved, and the hook that saves
every N steps or seconds and at the end of training, each checkpoint written atomically."""
import concurrent.futures
import os
import threading
import uuid
import weakref

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.checkpoints import state as checkpoint_state
from tpu_estimator.hooks import periodic
from tpu_estimator import quiet

_v1 = tf.compat.v1
_log = tf.get_logger()


def cache_global_step_read(global_step):
  """Registers a plain read of the global step as the one TensorFlow's hooks fetch.

  Their default read is `cond(initialized, read, initial_value)`; a v2 cond computes both
  branches' inputs, and under a multi-worker strategy the initial value is a collective
  broadcast that only completes when every worker runs it: the chief would wait forever.
  """
  key = _tf_internals.GLOBAL_STEP_READ_KEY
  if not _v1.get_collection(key):
    value = global_step.values[0] if hasattr(global_step, 'values') else global_step
    _v1.add_to_collection(key, value.read_value())


def saveable_variables():
  """The global variables to save, with each mirrored variable once (its replica copies are
  saved through it, under the one-device name)."""
  variables = _v1.global_variables() + _v1.get_collection(_v1.GraphKeys.SAVEABLE_OBJECTS)
  components = set()
  for v in variables:
    for part in v.values if _tf_internals.is_distributed(v) else ():
      components.add(id(part))
  seen, result = set(), []
  for v in variables:
    if id(v) in components or id(v) in seen:
      continue
    seen.add(id(v))
    result.append(v)
  return result


def ensure_saver(config):
  """Registers the default Saver unless the model_fn's scaffold or graph brought one."""
  if _v1.get_collection(_v1.GraphKeys.SAVERS):
    return
  variables = saveable_variables()
  saver = _v1.train.Saver(
      var_list=variables, sharded=not _in_this_process_cpu(variables),
      max_to_keep=config.keep_checkpoint_max,
      keep_checkpoint_every_n_hours=config.keep_checkpoint_every_n_hours,
      save_relative_paths=True)
  _v1.add_to_collection(_v1.GraphKeys.SAVERS, saver)


def _in_this_process_cpu(variables):
  """Whether every variable lives in this process's CPU memory (no device, or a CPU device of
  no job): then one data file is written, as the original's CPU checkpoints were.  A sharded
  Saver writes one file per device string, and '' and '/device:CPU:0' are two: a training
  loop compiled on the CPU (its variables placed there) wrote its checkpoints in two files
  beside a global step of no device, where programs look for `.data-00000-of-00001`
  (google-research/uda's evaluation skipped them).  Variables on GPUs or on ps tasks are
  still saved one file per device, as by the original's sharded Saver."""
  for variable in variables:
    device = getattr(variable, 'device', None)
    if not isinstance(device, str):
      return False
    spec = tf.DeviceSpec.from_string(device)
    if spec.job is not None or spec.device_type not in (None, 'CPU'):
      return False
  return True


_writer_pool = []
_writer_pool_lock = threading.Lock()


def _graph_writer():
  """One background thread for every call's graph writing.  A new thread per call gets a new
  malloc arena from glibc each time: peak RSS then grew 7.8% over 10 train/evaluate cycles
  instead of 4.3%."""
  with _writer_pool_lock:
    if not _writer_pool:
      _writer_pool.append(concurrent.futures.ThreadPoolExecutor(
          max_workers=1, thread_name_prefix='tpu_estimator-graph-writer'))
    return _writer_pool[0]


# graph -> {checkpoint dir: the graph's version when it was written there}: a graph kept across
# calls (graph_cache) that has no op more stands written for the next calls.
_written_graphs = weakref.WeakKeyDictionary()
_written_lock = threading.Lock()


def _written_before(graph, checkpoint_dir, graph_pbtxt):
  """Whether `graph` (with its graph.pbtxt, where one is written) is in `checkpoint_dir`
  already."""
  with _written_lock:
    done = _written_graphs.get(graph, {}).get(checkpoint_dir) == graph.version
  return done and (not graph_pbtxt or tf.io.gfile.exists(
      os.path.join(checkpoint_dir, 'graph.pbtxt')))


class _CheckpointSaverHook(_v1.train.SessionRunHook):
  """Saves checkpoints every N steps or seconds (a `Saver` and a `periodic.StepTrigger`, the
  public pieces of `tf.compat.v1.train.CheckpointSaverHook`): the same files, events, listener
  calls and log lines as TensorFlow's hook, with three differences.

  It never rewrites an existing checkpoint in place.  At session start the hook saves the
  state at the current step; when training resumes, that checkpoint already exists, and
  rewriting it truncates its index first, so a kill at that moment left the latest checkpoint
  unloadable.  The existing one is kept instead (and the listeners still hear of it), unless it
  is damaged.  Later saves always write (a damaged checkpoint the trainer fell back past is
  replaced when training reaches its step again).

  It never moves the `checkpoint` state file back to an older step.

  It writes the graph (graph.pbtxt, and the graph and meta graph events for TensorBoard) on a
  background thread while the steps after the first run, instead of before them: serializing a
  graph as text takes 0.05-0.2 s per `train()` call (more with data embedded in the graph), and
  it is Python holding the GIL, so started at session creation it slowed the first run's
  preparation on the main thread.  Everything is written when `train()` returns; graph.pbtxt
  is replaced atomically.  A graph kept across `train()` calls is written by its first call
  only (while graph.pbtxt is there): it cannot have changed since.
  """

  def __init__(self, checkpoint_dir, save_secs=None, save_steps=None, scaffold=None,
               listeners=None, save_graph_def=True):
    _log.info('Create CheckpointSaverHook.')
    self._checkpoint_dir = checkpoint_dir
    self._save_path = os.path.join(checkpoint_dir, 'model.ckpt')
    self._scaffold = scaffold
    self._saver = None
    self._trigger = periodic.StepTrigger(every_steps=save_steps, every_secs=save_secs)
    self._step = periodic.StepAfterRun('CheckpointSaverHook', guess_single_steps=False)
    self._listeners = listeners or []
    self._save_graph_def = save_graph_def
    self._graph_written = self._graph_to_write = None
    self._at_start = False
    self._summary_writer = self._global_step = None

  def begin(self):
    # Its graph event is written with graph.pbtxt, in the background.
    self._summary_writer = _tf_internals.file_writer_without_graph(self._checkpoint_dir)
    self._global_step = _tf_internals.global_step_read()
    if self._global_step is None:
      raise RuntimeError('Global step should be created to use CheckpointSaverHook.')
    self._step.begin()
    for listener in self._listeners:
      listener.begin()

  def after_create_session(self, session, coord):
    del coord
    global_step = session.run(self._global_step)
    self._graph_to_write = _v1.get_default_graph()  # once the first run is done
    self._at_start = True
    try:
      self._save(session, global_step)  # the state at `global_step`, before any step
    finally:
      self._at_start = False
    self._trigger.fire(global_step)

  def before_run(self, run_context):
    del run_context
    return self._step.args()

  def _start_writing_graph(self):
    graph, self._graph_to_write = self._graph_to_write, None
    if graph is not None and not _written_before(graph, self._checkpoint_dir,
                                                 self._save_graph_def):
      self._graph_written = _graph_writer().submit(self._write_graph, graph)

  def after_run(self, run_context, run_values):
    self._start_writing_graph()
    global_step = self._trigger.due_step(self._step, run_context, run_values)
    if global_step is not None and self._save(run_context.session, global_step):
      run_context.request_stop()

  def end(self, session):
    self._start_writing_graph()
    if self._graph_written is not None:
      self._graph_written.result()  # raises what the writer raised
      self._graph_written = None
    last_step = session.run(self._global_step)
    if last_step != self._trigger.last_step():
      self._save(session, last_step)
    for listener in self._listeners:
      listener.end(session, last_step)

  def _get_saver(self):
    """The scaffold's Saver, else the one Saver of the graph's SAVERS collection."""
    if self._saver is not None:
      return self._saver
    if self._scaffold is not None:
      return self._scaffold.saver
    savers = _v1.get_collection(_v1.GraphKeys.SAVERS)
    if len(savers) != 1:
      raise RuntimeError(
          'The checkpoint saver needs exactly one Saver in the SAVERS collection. Received: %d '
          'Savers. Add one to the collection, or return a Scaffold(saver=...).' % len(savers))
    self._saver = savers[0]
    return self._saver

  def _write_graph(self, graph):
    version = graph.version
    graph_def = graph.as_graph_def(add_shapes=True)
    if self._save_graph_def:
      temp = 'graph.pbtxt.tmp-%s' % uuid.uuid4().hex
      tf.io.write_graph(graph_def, self._checkpoint_dir, temp)
      tf.io.gfile.rename(os.path.join(self._checkpoint_dir, temp),
                         os.path.join(self._checkpoint_dir, 'graph.pbtxt'), overwrite=True)
    saver = self._get_saver()
    with quiet.internal_calls():  # notes about the replicas' variables in collections
      meta_graph_def = _tf_internals.meta_graph_def(
          graph_def=graph_def, saver_def=saver.saver_def if saver else None, graph=graph)
    self._summary_writer.add_graph(graph)
    self._summary_writer.add_meta_graph(meta_graph_def)
    with _written_lock:  # a later call on this graph, kept, need not write it again
      _written_graphs.setdefault(graph, {})[self._checkpoint_dir] = version

  def _save(self, session, step):
    """Saves the state at `step` (or keeps an intact checkpoint of it at session start);
    whether a listener asked to stop training."""
    prefix = '%s-%d' % (self._save_path, step)
    if not (self._at_start and tf.io.gfile.exists(prefix + '.index') and
            checkpoint_state.problem(prefix) is None):
      return self._save_new(session, step, prefix)
    saver = self._get_saver()
    if prefix not in saver.last_checkpoints:
      saver.recover_last_checkpoints(saver.last_checkpoints + [prefix])
    for listener in self._listeners:
      listener.before_save(session, step)
    stops = [listener.after_save(session, step) for listener in self._listeners]
    return any(stops)

  def _save_new(self, session, step, prefix):
    """Writes the checkpoint, except that the state file never goes back to an older step (a
    second trainer forced onto the model_dir may have written a newer one)."""
    state, _ = checkpoint_state.read_state(self._checkpoint_dir)
    newer = state is not None and \
        (checkpoint_state.step_of(state.model_checkpoint_path) or -1) > step
    if not newer:
      with quiet.internal_calls():  # Saver's own deprecated helpers
        return self._write(session, step)
    _log.warning('Not naming checkpoint %s the latest in the `checkpoint` state file: it names '
                 'a newer one, %s (another trainer writes this model_dir).', prefix,
                 state.model_checkpoint_path)
    for listener in self._listeners:
      listener.before_save(session, step)
    self._get_saver().save(session, self._save_path, global_step=step, write_meta_graph=False,
                           write_state=False)
    return any([listener.after_save(session, step) for listener in self._listeners])

  def _write(self, session, step):
    """A checkpoint at `step`, its event for TensorBoard, the listeners around it (all of them
    hear of it even when one asks to stop)."""
    _log.info('Calling checkpoint listeners before saving checkpoint %d...', step)
    for listener in self._listeners:
      listener.before_save(session, step)
    _log.info('Saving checkpoints for %d into %s.', step, self._save_path)
    self._get_saver().save(session, self._save_path, global_step=step,
                           write_meta_graph=self._save_graph_def)
    self._summary_writer.add_session_log(
        _v1.SessionLog(status=_v1.SessionLog.CHECKPOINT, checkpoint_path=self._save_path), step)
    _log.info('Calling checkpoint listeners after saving checkpoint %d...', step)
    stops = [listener.after_save(session, step) for listener in self._listeners]
    for listener, stop in zip(self._listeners, stops):
      if stop:
        _log.info('A CheckpointSaverListener requested that training be stopped. listener: %s',
                  listener)
    return any(stops)


def saver_hook(model_dir, config, scaffold, listeners):
  """Saves checkpoints every `save_checkpoints_steps`/`_secs` and at the end of training."""
  if config.save_checkpoints_steps is None and config.save_checkpoints_secs is None:
    return None
  return _CheckpointSaverHook(
      model_dir, save_secs=config.save_checkpoints_secs,
      save_steps=config.save_checkpoints_steps, scaffold=scaffold,
      listeners=list(listeners or ()), save_graph_def=config.checkpoint_save_graph_def)
