"""Graphs and sessions of `evaluate()`/`predict()` and `train()` kept for the next call with
the same arguments.  (Training's additions: `_TrainCreator`, `checkpoint_state`, and random ops
allowed when unseeded, `why_not_kept(unseeded_ok=True)`; docs/design-decisions.md, "Training
graphs kept across train() calls".)

The original built a new graph and session for every call: `model_fn` traced again, the graph
optimized again, the executor built again, then the checkpoint restored.  For the repeated
evaluations of `train_and_evaluate` that fixed cost was most of the call.  Here a call whose
graph would be built again identically keeps it, with its open session, for the next one,
which only restores the new checkpoint, re-runs the local initializers (metrics, `eval_step`,
tables) and restarts the input iterators.

A graph is kept only where reusing it is provably the same as rebuilding it, given that
`model_fn` and `input_fn` build the same graph when called again with the same arguments
(`RunConfig(reuse_eval_graphs=False)` turns reuse off for those that do not):

* the same mode, `input_fn` (the same object, or one that calling cannot tell apart from it,
  a lambda written anew in each call: function_identity.py), `steps`, `name` and
  `predict_keys` (the key);
* no hooks from `model_fn`'s spec (the graph's own: they may keep state between sessions);
  hooks passed to the call run in it as in a new graph, unless their `begin()` builds ops
  (the kept graph is finalized: `Stale`, and that call builds a graph of its own, which is not
  kept either: `HookWatch`);
* the input is `tf.data` (initializable iterators; a one-shot iterator or queue cannot
  restart) and nothing else in the graph keeps state across sessions: no stateful random op
  runs (a new graph would start its sequence again), no queue, no mutable table;
* the scaffold has TensorFlow's default init/ready/local-init ops;
* a checkpoint was restored (prediction without one initializes at random);
* every later checkpoint has the variables (names, shapes, dtypes) of the one restored first;
  any other is evaluated in a new graph, as before.
Anything else is built per call, as the original did.

A call with the same arguments but another `input_fn` calls it (in a new graph, as always)
and, where its datasets have the kept ones' element specs and nothing in them keeps state
(training: nothing seeded), has the kept graph read them instead (`read_new_input`): the
model is not traced again.
"""
import os
import threading
import weakref

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.checkpoints import scaffolds
from tpu_estimator.core import fetch_plans
from tpu_estimator.core import function_identity
from tpu_estimator.core import held_checkpoint
from tpu_estimator.distribute import device_loop
from tpu_estimator.distribute import iterators

_v1 = tf.compat.v1
_log = tf.get_logger()

# Op types whose results depend on state kept in the session between calls.
_STATEFUL_RANDOM = frozenset([
    'TruncatedNormal', 'ParameterizedTruncatedNormal', 'Multinomial', 'RngSkip',
    'RngReadAndSkip', 'NonDeterministicInts', 'AnonymousSeedGenerator',
    'AnonymousRandomSeedGenerator', 'SamplingDataset', 'ExperimentalRandomDataset',
    'OneShotIterator', 'ConditionalAccumulator', 'SparseConditionalAccumulator', 'Barrier',
])
_STATEFUL_PREFIXES = ('Random', 'Stateful', 'MutableHashTable', 'MutableDenseHashTable',
                      'FIFOQueue', 'PaddingFIFOQueue', 'PriorityQueue')
_NOT_STATEFUL = frozenset(['StatefulPartitionedCall'])
# A Python function in the graph (`tf.numpy_function`, `py_func`, `py_function`; not inside a
# dataset's functions) may keep state in Python objects, which a kept graph would carry into
# the next call: a metric_fn's list of detections (EfficientDet's COCO metric).
_PYTHON_STATE = frozenset(['PyFunc', 'PyFuncStateless', 'EagerPyFunc'])
_DATASET_STATE = frozenset(['CacheDataset', 'CacheDatasetV2'])  # `_reusable`
# Not registered as stateful, yet read what can change between runs (`_made_from_outside`,
# `_reads_files`).
_OUTSIDE = frozenset(['MatchingFiles', 'ReadFile'])
_CUSTOM_SCAFFOLD_PARTS = ('_init_op', '_init_feed_dict', '_init_fn', '_ready_op',
                          '_ready_for_local_init_op', '_local_init_op', '_local_init_feed_dict')
_INIT_COLLECTIONS = (_v1.GraphKeys.INIT_OP, _v1.GraphKeys.LOCAL_INIT_OP,
                     _v1.GraphKeys.READY_OP, _v1.GraphKeys.READY_FOR_LOCAL_INIT_OP)


def _keeps_state(op_type):
  if op_type in _NOT_STATEFUL:
    return False
  return op_type in _STATEFUL_RANDOM or op_type.startswith(_STATEFUL_PREFIXES) or \
      ('Shuffle' in op_type and not op_type.startswith('Stateless'))


_SEEDS = ('seed', 'seed2')


def _draws_random(op_type):
  """Random numbers and shuffles (not queues, tables or iterators, which keep other state)."""
  return _keeps_state(op_type) and 'Queue' not in op_type and 'Table' not in op_type and \
      'Iterator' not in op_type and op_type not in (
          'ConditionalAccumulator', 'SparseConditionalAccumulator', 'Barrier')


def _unseeded(attrs, seed_inputs):
  """Whether a random op draws from seeds TensorFlow picks anew in every new graph (neither a
  graph nor an op seed was set): its seed attributes and its `seed`/`seed2` inputs, constants,
  are all 0.  A new graph then draws another random sequence, as a kept one going on does."""
  if not attrs and not seed_inputs:
    return False
  values = list(attrs) + [tf.get_static_value(t) for t in seed_inputs]
  return all(v is not None and int(v) == 0 for v in values)


def _graph_op_unseeded(op):
  attrs = [op.get_attr(a) for a in _SEEDS if a in op.node_def.attr]
  args = [a.name for a in op.op_def.input_arg]
  inputs = [t for t, name in zip(op.inputs, args) if name in _SEEDS]
  return _unseeded(attrs, inputs)


def _stateful_op(graph, roots, unseeded_ok=False, also=frozenset()):
  """The type of an op that keeps state between sessions and runs for `roots` (ops or
  tensors), in the graph or in a function they call; None if there is none.  `unseeded_ok`:
  random ops drawing from unseeded sequences do not count (see `_unseeded`).  `also`: more
  op types that count."""
  drained = set(graph.get_collection(device_loop.DRAINED_QUEUES))
  seen, stack, functions = set(), [getattr(r, 'op', r) for r in roots], []
  while stack:
    op = stack.pop()
    if op is None or op.name in seen:
      continue
    seen.add(op.name)
    if (_keeps_state(op.type) or op.type in also) and op.name not in drained and not (
        unseeded_ok and _draws_random(op.type) and _graph_op_unseeded(op)):
      return op.type
    functions.extend(_tf_internals.called_function_names(op.node_def))
    stack.extend(t.op for t in op.inputs)
    stack.extend(op.control_inputs)
  done = set()
  while functions:
    name = functions.pop()
    if name in done:
      continue
    done.add(name)
    function = _tf_internals.graph_function(graph, name)
    if function is None:
      return 'unknown function %s' % name
    definition = function.cached_definition if hasattr(function, 'cached_definition') else \
        function.definition
    for node in definition.node_def:
      seeds = [node.attr[a].i for a in _SEEDS if a in node.attr]
      if (_keeps_state(node.op) or node.op in also) and not (
          unseeded_ok and _draws_random(node.op) and 'Dataset' not in node.op and
          _unseeded(seeds, [])):
        return node.op
      functions.extend(_tf_internals.called_function_names(node))
      if _tf_internals.graph_function(graph, node.op) is not None:
        functions.append(node.op)
  return None


def why_not_kept(graph, scaffold, graph_hooks, roots, has_iterators, replicas,
                 unseeded_ok=False):
  """Why a just-built graph (its session not created yet) cannot serve the next call; None
  when it can.  `unseeded_ok`: unseeded random ops may run (see `_unseeded`).  Hooks passed
  to a call do not count: `HookWatch` sees whether they built ops in it."""
  if graph_hooks:
    return "model_fn's spec has hooks"
  if replicas.kind in ('multi_worker', 'parameter_servers'):
    return 'it runs on several workers'
  if not has_iterators:
    return 'input_fn did not return a tf.data.Dataset'
  custom = [p.strip('_') for p in _CUSTOM_SCAFFOLD_PARTS if getattr(scaffold, p, None) is not None]
  if custom:
    return 'the scaffold sets %s' % ', '.join(custom)
  if any(graph.get_collection(key) for key in _INIT_COLLECTIONS):
    return 'the graph has its own init or ready ops'
  if graph.get_collection(_v1.GraphKeys.QUEUE_RUNNERS):
    return 'the graph has queue runners'
  stateful = _stateful_op(graph, roots, unseeded_ok)
  if stateful:
    return 'a %s op keeps state between calls' % stateful
  if any(op.type in _PYTHON_STATE for op in graph.get_operations()):
    return 'a Python function (tf.numpy_function, py_func) may keep state between calls'
  return None


def checkpoint_signature(path):
  """{variable: (shape, dtype)} of a checkpoint: what its restore depends on."""
  reader = tf.train.load_checkpoint(path)
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  return {name: (tuple(shapes[name]), dtypes[name].name) for name in shapes}


class Key:
  """What a kept graph was built for: the mode, the `input_fn` (the same object, or one that
  calling cannot tell apart from it: function_identity.py) and the call's other arguments that
  shape the graph or its hooks."""

  def __init__(self, mode, input_fn, args):
    self.mode = mode
    self.input_fn = function_identity.Identity(input_fn)
    self.args = tuple(args)

  def same_call(self, other):
    """The same mode and arguments, whatever the `input_fn`."""
    return self.mode == other.mode and self.args == other.args

  def matches(self, other):
    return self.same_call(other) and self.input_fn.same_as(other.input_fn)


class _KeptSession(fetch_plans.PlannedSession):
  """A session the MonitoredSession of one call does not close; `release()` does."""

  _released = False
  kept_across_calls = True  # what the input's hook reads (distribute/iterators.py)

  def close(self):
    if self._released:
      super().close()
    else:
      self.forget_plans()  # the end of a call: its hooks are in the plans

  def release(self):
    self._released = True
    super().close()


class Entry:
  """One built graph: what the estimator needs to run it (`parts`) and, once kept, its
  session and the checkpoint variables it restored."""

  def __init__(self, key, graph, scaffold, parts):
    self.key = key
    self.graph = graph
    self.scaffold = scaffold
    self.parts = parts
    self.session = None
    self.signature = None
    self.saved = None  # training: `checkpoint_state` of the checkpoint the session holds
    self.holds = None  # otherwise: `held_checkpoint.identity` of the checkpoint restored last
    self._may_change = None  # whether the graph may write restored variables (found once)
    self.calls = 0

  def creator(self, checkpoint_path, master, session_config):
    if self.key.mode == 'train':
      return _TrainCreator(self, checkpoint_path, master, session_config)
    return _Creator(self, checkpoint_path, master, session_config)

  def holds_values_of(self, checkpoint_path):
    """Whether the session holds `checkpoint_path`'s values already: an earlier call restored
    these very files, and nothing in the graph can have changed them since (an evaluation or
    prediction needs no restore then)."""
    if self.session is None or self.holds is None or \
        self.holds != held_checkpoint.identity(checkpoint_path):
      return False
    if self._may_change is None:
      saver = self.scaffold.saver
      try:
        self._may_change = saver is None or held_checkpoint.may_change_restored(
            self.graph, saver, [self.scaffold.init_op])
      except (KeyError, ValueError) as error:  # an op or attribute it cannot read: restore
        _log.debug('Restoring at every call: %s', error)
        self._may_change = True
    return not self._may_change

  def fits(self, checkpoint_path):
    """Whether `checkpoint_path` restores into this graph as into a new one."""
    try:
      return checkpoint_signature(checkpoint_path) == self.signature
    except (tf.errors.OpError, ValueError):
      return False  # unreadable: a new graph's restore reports it

  def close(self):
    session, self.session = self.session, None
    if session is not None:
      session.release()


class _Creator(_v1.train.SessionCreator):
  """Restores `checkpoint_path` into the entry's session (created the first time) as
  TensorFlow's SessionManager does: the Saver's restore, the local init op, the ready check."""

  def __init__(self, entry, checkpoint_path, master, session_config):
    self._entry = entry
    self._path = checkpoint_path
    self._master = master
    self._config = session_config

  def _open(self):
    """(the entry's session, created now if it had none; whether it was)."""
    entry = self._entry
    with entry.graph.as_default():
      scaffolds.add_ready_checks(entry.scaffold)
    entry.scaffold.finalize()
    fresh = entry.session is None
    if fresh:
      config = _unfolded(self._config) if _reads_files(entry) else self._config
      entry.session = _KeptSession(self._master, graph=entry.graph, config=config)
    return entry.session, fresh

  def _ready(self, session):
    """The local init op and the ready check, after the variables were restored."""
    scaffold = self._entry.scaffold
    session.run(scaffold.local_init_op, feed_dict=scaffold.local_init_feed_dict)
    if scaffold.ready_op is not None:
      missing = session.run(scaffold.ready_op)
      if missing is not None and getattr(missing, 'size', 0):
        raise RuntimeError('The model is not ready after restoring %s: %s are not '
                           'initialized.' % (self._path, list(missing)))
    self._entry.calls += 1
    return session

  def create_session(self):
    session, fresh = self._open()
    entry = self._entry
    if fresh:
      entry.signature = checkpoint_signature(self._path)
    if fresh or not entry.holds_values_of(self._path):
      entry.holds = None
      entry.scaffold.saver.restore(session, self._path)
      entry.holds = held_checkpoint.identity(self._path)
    return self._ready(session)


def checkpoint_state(path):
  """What identifies a checkpoint's content: its path and its index file's size and time."""
  try:
    info = os.stat(path + '.index')
  except OSError:
    return None
  return (path, info.st_size, info.st_mtime_ns)


class _TrainCreator(_Creator):
  """The session of a kept training graph, prepared as TensorFlow's SessionManager prepares a
  new one: `checkpoint` restored (the Saver told of the checkpoints before it, so it keeps
  deleting the oldest), or without one the init op and init_fn run; then the local init op
  and the ready check.  A later call whose checkpoint is the one this session saved last
  (`entry.saved`) restores nothing: the session holds those values already."""

  def create_session(self):
    session, fresh = self._open()
    scaffold = self._entry.scaffold
    if self._path is None:
      session.run(scaffold.init_op, feed_dict=scaffold.init_feed_dict)
      if scaffold.init_fn is not None:
        scaffold.init_fn(scaffold, session)
    elif fresh or checkpoint_state(self._path) != self._entry.saved:
      scaffold.saver.restore(session, self._path)
      state = tf.train.get_checkpoint_state(os.path.dirname(self._path))
      if state is not None:
        scaffold.saver.recover_last_checkpoints(list(state.all_model_checkpoint_paths))
    return self._ready(session)


class Cache:
  """At most one kept graph per mode.  A call takes the entry out while it runs (a second call
  at the same time builds its own) and puts it back when it finished cleanly; the estimator's
  garbage collection or the process's exit closes the sessions."""

  def __init__(self, owner):
    self._entries = {}
    self._lock = threading.Lock()
    weakref.finalize(owner, _close_all, self._entries, self._lock)

  def take(self, key):
    """The entry kept for `key` (taken out), or None."""
    return self._take(key.mode, lambda kept: kept.matches(key))

  def take_other_input(self, key):
    """The entry kept for `key`'s mode and arguments whatever its `input_fn` (taken out), or
    None: a call with another input may have it read that input (`read_new_input`)."""
    return self._take(key.mode, lambda kept: kept.same_call(key))

  def _take(self, mode, accepts):
    with self._lock:
      entry = self._entries.get(mode)
      if entry is None or not accepts(entry.key):
        return None
      del self._entries[mode]
      return entry

  def put(self, entry):
    """Keeps `entry` (finalizing its graph: a later hook cannot add ops to it), closing the
    one it replaces."""
    if not entry.graph.finalized:  # kept for the first time
      _reuse_own_datasets(entry)
    entry.graph.finalize()
    with self._lock:
      old = self._entries.get(entry.key.mode)
      self._entries[entry.key.mode] = entry
    if old is not None and old is not entry:
      old.close()

  def clear(self):
    _close_all(self._entries, self._lock)


def _reusable(graph, dataset):
  """Whether a kept session may start its calls over the dataset (variant tensor or op) that
  the first start made, rather than one made anew: it holds no state a call would see,
  neither random ops, seeded or not (their sequence would go on or repeat where a new dataset
  draws anew) nor a cache (a new dataset reads its source again), and the values it was made
  from are the same at every call (`_made_from_outside`)."""
  return _stateful_op(graph, [dataset], also=_DATASET_STATE) is None and \
      _made_from_outside(dataset) is None


def _made_from_outside(dataset):
  """The type of an op outside the datasets (computing their arguments in the graph, not in a
  dataset's functions, which run for every iterator anyway) whose value can differ from one
  run to the next: a file listing or read (`Dataset.list_files` lists when the dataset is
  made), a variable, a Python function, any op TensorFlow registers as stateful; None if
  there is none."""
  seen, stack = set(), [getattr(dataset, 'op', dataset)]
  while stack:
    op = stack.pop()
    if op.name in seen:
      continue
    seen.add(op.name)
    if 'Dataset' not in op.type and (op.type in _OUTSIDE or op.op_def.is_stateful):
      return op.type
    stack.extend(t.op for t in op.inputs)
    stack.extend(op.control_inputs)
  return None


def _reads_files(entry):
  """Whether the entry's graph lists or reads files (its input's `Dataset.list_files`, a
  `tf.io.read_file` in model_fn): ops TensorFlow does not register as stateful, so a session
  folds them into constants when it first runs them (OptimizerOptions L1), and a kept session
  would read what its first call found forever."""
  return any(op.type in _OUTSIDE for op in entry.graph.get_operations())


def _unfolded(config):
  """`config` (a ConfigProto or None) with the session's own constant folding off (common
  subexpressions still eliminated): the graph's file listings and reads run at every call."""
  unfolded = _v1.ConfigProto()
  if config is not None:
    unfolded.CopyFrom(config)
  options = unfolded.graph_options.optimizer_options
  options.opt_level = _v1.OptimizerOptions.L0
  options.do_common_subexpression_elimination = True
  options.do_constant_folding = False
  return unfolded


def _reuse_own_datasets(entry):
  """Lets the kept graph's iterators start over the dataset their first start made where it
  is `_reusable` (iterators.Restartable.reuse_own_data)."""
  host_input = getattr(entry.parts, 'host_input', None)
  for iterator in getattr(host_input, 'iterators', None) or ():
    if iterator.restartable_over_other_data and _reusable(entry.graph, iterator.own_data):
      iterator.reuse_own_data()  # (one copy, on a GPU: made anew in place at every call)


def _close_all(entries, lock):
  with lock:
    kept = list(entries.values())
    entries.clear()
  for entry in kept:
    entry.close()


def read_new_input(entry, key, graph, host_input, session_config, unseeded_ok=False):
  """Has the kept `entry` (its graph built for another `input_fn`) read the input this call
  prepared in its new `graph` (`host_input`'s datasets: its iterators are not made), and
  serve `key` from now on; False where that would not equal a new graph.

  The new input's datasets are serialized (TensorFlow's own dataset graph, run in a session
  of the new graph with `session_config`) and fed to the kept iterators' start
  (iterators.Restartable), so the model is not traced again and the session keeps its
  executors.  This needs: every iterator restartable over other data (not one prefetched to a
  GPU), the same number of pipelines with the same element specs (types, shapes and
  structure), nothing else left in the new graph by `input_fn` (a collection entry or
  variable `model_fn` could read), no op keeping state in the new datasets (a shuffle or
  random map would restart its sequence here, go on there), and datasets that can be
  serialized at all (a lookup table or a Python function in them holds state of this
  process's session: that fails).  `unseeded_ok` (training): unseeded random ops and shuffles
  may run, as in a kept training graph's own input (`why_not_kept`)."""
  kept = getattr(entry.parts, 'host_input', None)
  old, new = getattr(kept, 'iterators', None), host_input.datasets
  if not old or not new or len(old) != len(new) or not _input_only(graph):
    return False
  if not all(o.restartable_over_other_data and o.element_spec == n.element_spec
             for o, n in zip(old, new)):
    return False
  serializations = [iterators.serialization(dataset) for dataset in new]
  if _stateful_op(graph, serializations, unseeded_ok) or \
      any(_made_from_outside(serialized) is not None for serialized in serializations):
    return False  # serialized, a file listing or variable read would keep its first value
  try:
    with _v1.Session(graph=graph, config=session_config) as session:
      graph_defs = session.run(serializations)
  except tf.errors.OpError as error:
    _log.debug('The new input cannot be read by the kept graph: %s', error.message)
    return False
  for iterator, graph_def, serialization in zip(old, graph_defs, serializations):
    iterator.read_instead(graph_def, reused=_reusable(graph, serialization))
  entry.key = key
  return True


# What a call's graph holds once its input is built (`Estimator._call_graph`): the global step
# and its read, and the input's iterators.
_INPUT_COLLECTIONS = frozenset([_v1.GraphKeys.GLOBAL_VARIABLES, _v1.GraphKeys.GLOBAL_STEP,
                                _tf_internals.GLOBAL_STEP_READ_KEY, 'iterators'])


def _input_only(graph):
  """Whether `input_fn` left nothing in `graph` besides its datasets that `model_fn` might
  read (a collection entry, a variable): the kept graph's model was built without them."""
  if any(graph.get_collection(key) for key in graph.get_all_collection_keys()
         if key not in _INPUT_COLLECTIONS):
    return False
  step = {id(v) for v in graph.get_collection(_v1.GraphKeys.GLOBAL_STEP)}
  return all(id(v) in step for v in graph.get_collection(_v1.GraphKeys.GLOBAL_VARIABLES))


class Stale(Exception):
  """The kept graph cannot serve this call: the checkpoint to restore has other variables
  than it restored, or a hook passed to the call builds ops (a kept graph is finalized).
  Build anew."""


class HookWatch:
  """Whether the hooks passed to a call built ops in its graph (their `begin()` runs as its
  session is created): a graph holding one call's hook ops is not kept, since the next call's
  hook would build them again (a new graph for that call, as the original always made).
  `around(hooks)` brackets them with two hooks that note the graph's version."""

  def __init__(self):
    self._versions = {}

  def around(self, hooks):
    return [_VersionMark(self._versions, 'before')] + list(hooks) + \
        [_VersionMark(self._versions, 'after')]

  @property
  def built(self):
    return self._versions.get('before') != self._versions.get('after')


class _VersionMark(_v1.train.SessionRunHook):

  def __init__(self, versions, when):
    self._versions = versions
    self._when = when

  def begin(self):
    self._versions[self._when] = _v1.get_default_graph().version
