"""Every use of TensorFlow's private APIs, in one place.

TensorFlow gives no compatibility promise for protected members or `tensorflow.python.*`
modules, and the package supports "TensorFlow 2.16 and newer": each use below may move in the
next release.  So each one is a small named function (or alias) here, with what public
behaviour it stands in for and the versions it was checked on; tests/test_tf_internals.py pins
what the package relies on, so a release that moves one fails those tests first.  The rest of
the core imports TensorFlow's public API only (`tensorflow_estimator`-era subclass overrides of
v1 optimizers and heads in `compat/` and `canned/` are the documented subclass API, not this).

Checked on TensorFlow 2.16 and 2.21 unless a comment says otherwise.
"""
import contextlib
import os

import tensorflow as tf
# pylint: disable=g-direct-tensorflow-import,protected-access
from tensorflow.python.client import pywrap_tf_session as _pywrap_tf_session
from tensorflow.python.client import session as _session
from tensorflow.python.distribute import distribute_utils as _distribute_utils
from tensorflow.python.distribute import mirrored_run as _mirrored_run
from tensorflow.python.framework import kernels as _kernels
from tensorflow.python.framework import meta_graph as _meta_graph
from tensorflow.python.lib.io import file_io as _file_io
from tensorflow.python.ops import control_flow_util as _control_flow_util
from tensorflow.python.ops import summary_ops_v2 as _summary_ops_v2
from tensorflow.python.saved_model import constants as _saved_model_constants
from tensorflow.python.saved_model.model_utils import export_output
from tensorflow.python.saved_model.model_utils import export_utils
from tensorflow.python.tpu import tpu_function as _tpu_function
from tensorflow.python.training import adam as _v1_adam
from tensorflow.python.training import checkpoint_state_pb2 as _checkpoint_state_pb2
from tensorflow.python.training import training_util as _training_util
from tensorflow.python.training.saving import saveable_object_util as _saveable_object_util
from tensorflow.python.util import deprecation as _deprecation
from tensorflow.python.eager import context as _context
from tensorflow.core.protobuf import saved_model_pb2 as _saved_model_pb2

_v1 = tf.compat.v1

# --- Modules with no public export since tf.estimator left TensorFlow (2.16) ----------------

# Imported above as `export_output`: `ExportOutput` and its subclasses (were
# `tf.estimator.export.*`); as `export_utils`: the signature helpers (`get_export_outputs`,
# `build_all_signature_defs`) and timestamped export directories.

# The collection a SavedModel's TRAIN MetaGraph names its train op in (what the SavedModel
# builder's own `_add_train_op` fills).
SAVED_MODEL_TRAIN_OP_KEY = _saved_model_constants.TRAIN_OP_KEY

# The `CheckpointState` proto of the `checkpoint` state file (what
# `tf.train.get_checkpoint_state` returns; the class itself is not exported).
CheckpointState = _checkpoint_state_pb2.CheckpointState


def atomic_write_string_to_file(path, text):
  """Writes `text` to `path` through a temporary file and a rename (what the Saver's own state
  file writer does; `tf.io.gfile` has no atomic write)."""
  _file_io.atomic_write_string_to_file(path, text)


# --- The global step --------------------------------------------------------------------

# The collection holding the one cached read of the global step that hooks fetch.
GLOBAL_STEP_READ_KEY = _training_util.GLOBAL_STEP_READ_KEY


def global_step_read():
  """The cached read of the global step that TensorFlow's own hooks fetch (the one
  `cache_global_step_read` registers, else TensorFlow creates it), or None without a global
  step.  Public stand-in: `tf.compat.v1.train.get_global_step().read_value()`, which would be a
  second read, unordered with the first."""
  return _training_util._get_or_create_global_step_read()


# --- Graphs and ops ---------------------------------------------------------------------


def copy_op(op, inputs):
  """A new op in the current graph like `op` (its type and attributes, without the private
  ones such as colocation) on `inputs`."""
  attrs = {name: value for name, value in op.node_def.attr.items() if not name.startswith('_')}
  return _v1.get_default_graph()._create_op_internal(
      op.type, inputs, [t.dtype for t in op.outputs], attrs=attrs, name=op.type)


def control_outputs(op):
  """The ops that have `op` as a control input (the reverse of `op.control_inputs`)."""
  return op._control_outputs


def add_control_inputs(op, inputs):
  """Makes the already-built `op` wait for the ops `inputs`: `tf.control_dependencies` for an op
  that exists (the public context manager only applies to ops built inside it)."""
  op._add_control_inputs(inputs)


def graph_function(graph, name):
  """The function named `name` in `graph`'s library (or its outer graphs'), or None.  Public
  stand-in: searching `graph.as_graph_def().library`, a copy of the whole graph per lookup."""
  return graph._get_function(name)


@contextlib.contextmanager
def python_functions(reuse=()):
  """Within: the Python functions `tf.numpy_function`, `py_func` and `py_function` register
  (TensorFlow's wrappers around the user's function) are appended to the list this yields, in
  order; while `reuse` (such a list) lasts, its functions are registered instead of the new
  ones, so the ops run them (and the objects they hold).  (The registry's `insert`, where every
  such op's token comes from.)  Checked on 2.16-2.21."""
  from tensorflow.python.ops import script_ops  # pylint: disable=g-import-not-at-top
  registry = script_ops._py_funcs  # pylint: disable=protected-access
  remaining, made, insert = iter(list(reuse)), [], registry.insert

  def inserting(function):
    function = next(remaining, function)
    made.append(function)
    return insert(function)

  registry.insert = inserting
  try:
    yield made
  finally:
    del registry.insert


def called_function_names(node_def):
  """The names of the functions a node calls through its attributes (loop bodies, branches,
  called functions): what to look up with `graph_function` to walk a graph's functions.  (Public
  proto fields only; here beside `graph_function`, which every such walk needs.)"""
  names = []
  for value in node_def.attr.values():
    if value.HasField('func'):
      names.append(value.func.name)
    names.extend(f.name for f in value.list.func)
  return names


def registered_kernel_devices(op_type):
  """The device types (`'CPU'`, `'XLA_CPU_JIT'`, ...) with a kernel registered for `op_type`."""
  return [k.device_type for k in _kernels.get_registered_kernels_for_op(op_type).kernel]


def enable_xla_cpu_auto_clustering():
  """Lets sessions that ask for a jit level auto-cluster on CPU too (the process-wide switch
  `TF_XLA_FLAGS=--tf_xla_cpu_global_jit` sets; read once, by the process's first session)."""
  _pywrap_tf_session.TF_SetTfXlaCpuGlobalJit(True)


def read_xla_flags_with(extra_flags):
  """Has TensorFlow read its XLA flags now, from `TF_XLA_FLAGS` with `extra_flags` (a string of
  `--name=value` flags) after the environment's own, for this process only: the environment
  variable is put back before returning, so child processes do not inherit them.  TensorFlow
  reads these flags once per process, when one is first used (the first XLA compilation or
  auto-clustering pass, or a setter such as `tf.config.optimizer.set_jit`): after that this
  changes nothing.  There is no public setter for most of them (the persistent compilation
  cache's among them)."""
  saved = os.environ.get('TF_XLA_FLAGS')
  os.environ['TF_XLA_FLAGS'] = ('%s %s' % (saved or '', extra_flags)).strip()
  try:
    # Any use of a flag reads them all; this setter returns the value it replaced: put back.
    previous = _pywrap_tf_session.TF_SetTfXlaCpuGlobalJit(False)
    _pywrap_tf_session.TF_SetTfXlaCpuGlobalJit(previous)
  finally:
    if saved is None:
      del os.environ['TF_XLA_FLAGS']
    else:
      os.environ['TF_XLA_FLAGS'] = saved


@contextlib.contextmanager
def control_flow_v2():
  """Builds while-loops and conds with control flow v2 inside the block whatever the global
  toggle, then restores it exactly.  `tf.compat.v1.enable_control_flow_v2()` sets the same
  switch, but there is no public reader of the switch itself to restore it
  (`control_flow_v2_enabled()` also answers True inside any function graph)."""
  saved = _control_flow_util.ENABLE_CONTROL_FLOW_V2
  _control_flow_util.ENABLE_CONTROL_FLOW_V2 = True
  try:
    yield
  finally:
    _control_flow_util.ENABLE_CONTROL_FLOW_V2 = saved


_OWN_PREFIX = '_tpu_estimator_'


def graph_state(graph, name):
  """Our state `name` kept on `graph` (None when unset).  State is kept as an attribute of the
  graph so it lives and dies with it: a global map from graphs to values holding their
  tensors would keep every graph alive.  Every name is prefixed `_tpu_estimator_`."""
  return getattr(graph, _OWN_PREFIX + name, None)


def set_graph_state(graph, name, value):
  setattr(graph, _OWN_PREFIX + name, value)


def root_graph(graph=None):
  """The outermost graph of `graph` (default: the current one): itself, unless it is the body
  of a loop or function (a `FuncGraph`), whose ops belong to the call its `outer_graph` builds.
  Our per-graph state is kept there."""
  graph = graph if graph is not None else _v1.get_default_graph()
  while getattr(graph, 'outer_graph', None) is not None:
    graph = graph.outer_graph
  return graph


# --- Summaries --------------------------------------------------------------------------


def summary_writer_initializers():
  """The init ops of every TF2 summary writer created in the current graph (was
  `tf.contrib.summary.summary_writer_initializer_op()`)."""
  return _summary_ops_v2.summary_writer_initializer_op()


def file_writer_without_graph(logdir):
  """`FileWriterCache.get(logdir)`, except that a writer it creates now writes no graph event
  (`get` serializes the default graph on the caller's thread for it): for a caller that writes
  the graph itself.  Other callers on `logdir` get this writer from the cache."""
  cache = _v1.summary.FileWriterCache
  with cache._lock:
    writer = cache._cache.get(logdir)
    if writer is None:
      writer = cache._cache[logdir] = _v1.summary.FileWriter(logdir)
    return writer


def summary_op_of(summary_saver_hook):
  """The summary op a `tf.compat.v1.train.SummarySaverHook` fetches when it saves (its
  `summary_op`, else the merged `SUMMARIES` collection), or None."""
  return summary_saver_hook._get_summary_op()


class StepCounterHook(_v1.train.StepCounterHook):
  """`tf.compat.v1.train.StepCounterHook` whose subclasses write their own rate: they override
  `record(steps_per_sec, global_step)` (with `self.summary_writer`, None without one, and
  `self.summary_tag`, `<global step name>/sec`) instead of the private `_log_and_record`.  It
  stays a StepCounterHook, with TensorFlow's own timing."""

  def _log_and_record(self, elapsed_steps, elapsed_time, global_step):
    self.record(elapsed_steps / elapsed_time, global_step)

  def record(self, steps_per_sec, global_step):
    raise NotImplementedError

  @property
  def summary_writer(self):
    return self._summary_writer

  @property
  def summary_tag(self):
    return self._summary_tag


# --- Savers and checkpoints -------------------------------------------------------------

# A Saver's constructor options, as (attribute on the Saver, constructor argument).
_SAVER_OPTIONS = (('_reshape', 'reshape'), ('_sharded', 'sharded'),
                  ('_max_to_keep', 'max_to_keep'),
                  ('_keep_checkpoint_every_n_hours', 'keep_checkpoint_every_n_hours'),
                  ('_restore_sequentially', 'restore_sequentially'),
                  ('_allow_empty', 'allow_empty'), ('_write_version', 'write_version'),
                  ('_pad_step_number', 'pad_step_number'), ('_filename', 'filename'),
                  ('_save_relative_paths', 'save_relative_paths'))


def saver_var_list(saver):
  """The `var_list` a `tf.compat.v1.train.Saver` was built with (a dict {checkpoint key:
  variable} or a list), or None when it has none."""
  return getattr(saver, '_var_list', None)


def saver_options(saver):
  """The keyword arguments (other than `var_list`) that rebuild `saver` with its options."""
  return {arg: getattr(saver, attr) for attr, arg in _SAVER_OPTIONS if hasattr(saver, attr)}


def save_slice_info(variable):
  """The `Variable.SaveSliceInfo` (full name and shape) of one part of a partitioned variable,
  or None for a whole variable."""
  return getattr(variable, '_save_slice_info', None)


def mirrored_saveables(variable):
  """{name: saveable or factory(name)} saving and restoring a mirrored variable in every
  replica's copy, as a name-based Saver does for one."""
  return _saveable_object_util.saveable_objects_from_trackable(variable, tf1_saver=True)


def meta_graph_def(graph_def, saver_def, graph):
  """The MetaGraphDef of `graph` (its collections included) for TensorBoard's graph view:
  `tf.compat.v1.train.export_meta_graph` without a file, minus the edits it makes to the
  graph's collections (it may run on a writer thread while the graph trains)."""
  return _meta_graph.create_meta_graph_def(graph_def=graph_def, saver_def=saver_def,
                                           graph=graph)


# --- Distribution -----------------------------------------------------------------------


def is_distributed(variable):
  """Whether `variable` is a mirrored (distributed) variable, with one copy per replica in
  `.values`."""
  return isinstance(variable, tf.distribute.DistributedValues) and hasattr(variable, 'values')


def mirrored_of(variable):
  """The mirrored variable that `variable` is one replica's copy of (None once that is gone),
  else `variable` itself."""
  container = getattr(variable, '_distributed_container', None)
  return container() if callable(container) else variable


def regroup(per_replica_values):
  """One nest of `PerReplica` values from a list of per-replica nests (what
  `strategy.run` does with its arguments)."""
  return _distribute_utils.regroup(per_replica_values)


def select_replica(index, structure):
  """Replica `index`'s values of a nest of per-replica values (what
  `strategy.experimental_local_results` does for one value)."""
  return _distribute_utils.select_replica(index, structure)


_MERGE_IN_CALLERS_SCOPE = '_tpu_estimator_merge_in_callers_scope'
_tf_merge_call = _mirrored_run._MirroredReplicaContext._merge_call


def merge_in_callers_name_scope(strategy):
  """Marks `strategy` (a MirroredStrategy or CentralStorageStrategy of ours): a `merge_call`
  from one of its replicas runs its function in the calling replica's name scope.  TensorFlow
  runs it there and then re-enters the caller's variable scope, which opens a name scope of
  that scope's last name inside it: under `variable_scope('training')` an Adam's non-slot
  variables became `training/training/beta1_power` on several replicas, `training/beta1_power`
  on one (and on a TPU), so a model_dir could not go on with another number of shards.
  (`_MirroredReplicaContext._merge_call`, the private class of both strategies' replica
  threads, is wrapped below; other strategies keep TensorFlow's names, as the original's
  Estimator had them.)"""
  setattr(strategy, _MERGE_IN_CALLERS_SCOPE, True)


def _merge_call(context, fn, args, kwargs):
  if not getattr(context._strategy, _MERGE_IN_CALLERS_SCOPE, False):
    return _tf_merge_call(context, fn, args, kwargs)
  graph = tf.compat.v1.get_default_graph()
  scope = graph.get_name_scope()

  def in_callers_scope(*merge_args, **merge_kwargs):
    with graph.name_scope(scope + '/' if scope else ''):
      return fn(*merge_args, **merge_kwargs)

  return _tf_merge_call(context, in_callers_scope, args, kwargs)


_mirrored_run._MirroredReplicaContext._merge_call = _merge_call


def uses_merge_call(strategy):
  """Whether `strategy`'s replicas reduce through `merge_call` where the current graph is
  built (all but a multi-GPU strategy's XLA-compiled replica function)."""
  return strategy.extended._use_merge_call()


def estimator_loss_scaling(strategy):
  """The context in which `strategy` (a MirroredStrategy) leaves losses unscaled by the number of
  replicas in v1 optimizers, as it did under tf.estimator: gradients are then averaged."""
  return strategy._scale_loss_for_estimator_enabled()


@contextlib.contextmanager
def loss_taken_as_mean():
  """While a v1 optimizer computes gradients in the current graph: under a strategy's estimator
  loss scaling, the loss is scaled by 1/replicas whatever the graph's last
  `tf.compat.v1.losses` call reduced by.  TensorFlow decides from that call (the graph's
  `_last_loss_reduction`) and skips the scaling after one that summed, even where model_fn
  then normalized the sum (tensorflow/tpu's RetinaNet: `huber_loss(reduction=SUM)`)."""
  graph = _v1.get_default_graph()
  saved = getattr(graph, '_last_loss_reduction', None)
  graph._last_loss_reduction = _v1.losses.Reduction.MEAN
  try:
    yield
  finally:
    graph._last_loss_reduction = saved


# --- Session runs -----------------------------------------------------------------------


def fetch_plan(graph, fetches):
  """What `Session.run` makes of `fetches` before running, for a run without feeds
  (`_FetchHandler`): `fetches()` and `targets()`, the unique tensors to fetch and ops to run,
  and `build_results(session, values)`, the structure rebuilt from their values.  Raises as
  `Session.run` does for a fetch it cannot run."""
  return _session._FetchHandler(graph, fetches, {})


class SessionOfPlannedRuns(_v1.Session):
  """A v1 Session whose runs without feeds (not partial runs) take their fetch plan from
  `self._plan_for(fetches)` (a `fetch_plan`; None: planned at the run, as by TensorFlow),
  then run as `Session.run` would with it.  Overrides `BaseSession._run`, which every
  `run()` calls with its fetches and feeds once `options` are serialized."""

  def _plan_for(self, fetches):
    del fetches
    return None

  def _run(self, handle, fetches, feed_dict, options, run_metadata):
    plan = None
    if handle is None and not feed_dict and not self._closed and self.graph.version:
      plan = self._plan_for(fetches)
    if plan is None:
      return super()._run(handle, fetches, feed_dict, options, run_metadata)
    tensors, targets = plan.fetches(), plan.targets()
    values = self._do_run(None, targets, tensors, {}, options, run_metadata) \
        if tensors or targets else []
    return plan.build_results(self, values)


# --- v1 Adam's fused update -------------------------------------------------------------


def v1_adam_training_ops():
  """The op module `tf.compat.v1.train.AdamOptimizer` builds its fused updates from
  (`resource_apply_adam`, ...)."""
  return _v1_adam.gen_training_ops


def set_v1_adam_training_ops(ops):
  """Replaces that module, for every v1 AdamOptimizer built afterwards."""
  _v1_adam.gen_training_ops = ops


# --- Deprecation notices ----------------------------------------------------------------


def deprecation_notices_enabled():
  """Whether TensorFlow prints its deprecation notices (`tf.compat.v1` calls, ...)."""
  return _deprecation._PRINT_DEPRECATION_WARNINGS


def deprecation_decorators():
  """TensorFlow's `deprecated`, `deprecated_args` and `deprecated_arg_values` decorators
  (`tensorflow.python.util.deprecation`), which TF 1.x exported as `tf.contrib.framework`'s."""
  return {name: getattr(_deprecation, name)
          for name in ('deprecated', 'deprecated_args', 'deprecated_arg_values')}


def set_deprecation_notices_enabled(enabled):
  """Turns them on or off (`deprecation.silence()` does not restore the switch when its body
  raises, nor when two threads are inside it)."""
  _deprecation._PRINT_DEPRECATION_WARNINGS = enabled


def eager_mode():
  """A context in which ops run eagerly, also inside a graph being built (a Keras 3 optimizer
  made by a factory reads its variables eagerly).  `tf.init_scope` lifts to the outermost
  context instead, which is a graph under `tf.compat.v1`."""
  return _context.eager_mode()


def saved_model_proto():
  """An empty `SavedModel` protocol buffer (what `saved_model.pb` holds), to parse one."""
  return _saved_model_pb2.SavedModel()


def loss_scaled_by_optimizer(graph):
  """Whether a v1 optimizer in `graph` scaled the replicas' losses by 1/replicas (a strategy's
  Estimator loss scaling): the reported loss is then their mean, else their sum, as
  tf.estimator reported it."""
  return bool(getattr(graph, '_is_loss_scaled_by_optimizer', False))


def collective_server_started(strategy):
  """Whether a MultiWorkerMirroredStrategy made eagerly started its task's gRPC server in the
  eager context (then no other server may bind the task's port)."""
  return bool(getattr(strategy.extended, '_std_server_started', False))


# --- Object-based checkpoint names in a v1 graph --------------------------------------------


def object_graph_saveables(root):
  """The saveables of `root`'s object graph keyed as `tf.train.Checkpoint` keys them
  (`layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE`, ...), plus the serialized object
  graph: a name-based `Saver` over them writes what `root.save_weights` would (what
  tensorflow-estimator's `model_to_estimator(checkpoint_format='checkpoint')` saved)."""
  return tf.__internal__.tracking.ObjectGraphView(root).frozen_saveable_objects()


def track_child(parent, child, name):
  """Makes `child` (a variable or trackable) a dependency of `parent` under `name` in its
  object graph, without it becoming one of `parent`'s weights."""
  parent._track_trackable(child, name=name, overwrite=True)


def set_initializer(variable, op):
  """Makes `op` the initializer of `variable` (what `global_variables_initializer` runs), as
  TensorFlow's own warm start does for the variables it initialises from a checkpoint."""
  variable._initializer_op = op  # pylint: disable=protected-access


# --- k-means -----------------------------------------------------------------------------


def kmeans_graph(**kwargs):
  """TensorFlow's k-means graph builder (`clustering_ops.KMeans(inputs, num_clusters, ...)`,
  whose `training_graph()` makes the `clusters`/`initialized` variables, the initialization op
  over the `KmeansPlusPlusInitialization`/`KMC2ChainInitialization` kernels and the Lloyd
  update on `NearestNeighbors`): what tensorflow-estimator's KMeans estimator built on, never
  exported.  Imported on first use."""
  from tensorflow.python.ops import clustering_ops  # pylint: disable=import-outside-toplevel
  return clustering_ops.KMeans(**kwargs)

# --- Feature columns as LinearSDCA reads them ---------------------------------------------

# The base classes of `tf.feature_column` (v2) columns and of their dense ones: the v2 check and
# the dense/categorical split of `canned/sdca.py` (`tf.__internal__.feature_column`, where
# Keras and tensorflow-estimator found them too).
FeatureColumnV2 = tf.__internal__.feature_column.FeatureColumn
DenseColumnV2 = tf.__internal__.feature_column.DenseColumn


def feature_transformation_cache(features):
  """The per-call cache v2 columns transform `features` through: what
  `column.get_sparse_tensors(cache, None)` and `column.get_dense_tensor(cache, None)` take
  (`tf.feature_column` has no public call giving one column's ids or dense tensor)."""
  return tf.__internal__.feature_column.FeatureTransformationCache(features)

def feature_column_v2():
  """TensorFlow's `feature_column_v2` module: the column base classes (`DenseColumn`,
  `SequenceDenseColumn`), `FeatureTransformationCache` and the `StateManager` interface, which
  `tf.feature_column` columns take in `get_dense_tensor`/`get_sequence_dense_tensor`/
  `create_state` and which only Keras' (2) feature layers used publicly.  Checked on 2.16-2.21."""
  from tensorflow.python.feature_column import feature_column_v2 as fc_v2  # pylint: disable=g-import-not-at-top
  return fc_v2


def embedding_spec_column_classes():
  """The feature column classes an `EmbeddingConfigSpec` takes, as the original's: TensorFlow's
  TPU embedding columns (`tf.compat.v1.tpu.experimental.embedding_column` and the shared ones,
  v1 and v2), embedding columns and numeric columns.  Checked on 2.16-2.21."""
  # pylint: disable=g-import-not-at-top,protected-access
  from tensorflow.python.feature_column import feature_column as fc_v1
  from tensorflow.python.tpu import feature_column as tpu_fc
  from tensorflow.python.tpu import feature_column_v2 as tpu_fc_v2
  fc_v2 = feature_column_v2()
  return (tpu_fc._TPUEmbeddingColumn, tpu_fc._TPUSharedEmbeddingColumn,
          tpu_fc_v2._TPUEmbeddingColumnV2, tpu_fc_v2._TPUSharedEmbeddingColumnV2,
          fc_v1._EmbeddingColumn, fc_v1._SharedEmbeddingColumn, fc_v2.EmbeddingColumn,
          fc_v1._NumericColumn, fc_v2.NumericColumn)


@contextlib.contextmanager
def tpu_shard_context(number_of_shards):
  """Within (this thread): `tpu_function.get_tpu_context().number_of_shards` is
  `number_of_shards`, as while a TPU computation was built; kept where the caller set one.
  None: nothing set (TPU embedding columns then look up as on a CPU)."""
  if number_of_shards is None or _tpu_function.get_tpu_context().number_of_shards is not None:
    yield
    return
  with _tpu_function.tpu_shard_context(number_of_shards):
    yield
