"""What the package relies on in TensorFlow's private APIs (tpu_estimator/_tf_internals.py).

Each test pins the behaviour one internal stands in for, in a bare graph, without an estimator:
when a TensorFlow release moves or changes one, these fail first, naming it."""
import gc
import json
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator import _tf_internals as internals
from tpu_estimator.checkpoints import saving

v1 = tf.compat.v1


def test_global_step_read_is_the_cached_read_hooks_fetch(graph):
  assert internals.global_step_read() is None  # no global step yet
  step = v1.train.get_or_create_global_step()
  saving.cache_global_step_read(step)
  read = internals.global_step_read()
  assert read is v1.get_collection(internals.GLOBAL_STEP_READ_KEY)[0]
  with v1.Session() as session:
    session.run(step.initializer)
    session.run(step.assign(7))
    assert session.run(read) == 7


def test_global_step_read_is_created_when_none_is_cached(graph):
  step = v1.train.get_or_create_global_step()
  read = internals.global_step_read()
  assert read is internals.global_step_read()  # created once, then cached
  with v1.Session() as session:
    session.run(step.initializer)
    assert session.run(read) == 0


def test_control_outputs_are_the_reverse_of_control_inputs(graph):
  first = tf.no_op(name='first')
  with tf.control_dependencies([first]):
    second = tf.no_op(name='second')
  assert internals.control_outputs(first) == [second]
  assert internals.control_outputs(second) == []


def test_add_control_inputs_orders_an_existing_op_after_others(graph):
  var = v1.Variable(0, use_resource=True)
  read = var.read_value()
  update = var.assign_add(1, read_value=False)
  internals.add_control_inputs(update, [read.op])
  assert read.op in update.control_inputs
  with v1.Session() as session:
    session.run(var.initializer)
    seen = [session.run([read, update])[0] for _ in range(20)]
  assert seen == list(range(20))  # always the value before this run's increment


def test_graph_function_finds_functions_called_in_the_graph(graph):
  @tf.function
  def double(x):
    return x * 2

  double(tf.constant(1.0))
  calls = [op for op in graph.get_operations() if op.type in ('PartitionedCall',
                                                              'StatefulPartitionedCall')]
  name = calls[0].get_attr('f').name
  function = internals.graph_function(graph, name)
  assert function is not None
  assert 'Mul' in [node.op for node in function.definition.node_def]
  assert internals.graph_function(graph, 'no_such_function') is None


def test_registered_kernel_devices_lists_device_types():
  assert 'CPU' in internals.registered_kernel_devices('MatMul')
  assert internals.registered_kernel_devices('NoSuchOpType') == []


def test_enable_xla_cpu_auto_clustering_is_callable_again():
  internals.enable_xla_cpu_auto_clustering()  # xla.py calls it once on import; idempotent


# A fresh process (TensorFlow reads its XLA flags once per process, and importing the package
# reads them): _tf_internals loaded alone, by path, without the package.
_READ_XLA_FLAGS_PROGRAM = r"""
import importlib.util, json, os, sys
import tensorflow as tf
spec = importlib.util.spec_from_file_location('internals', sys.argv[1])
internals = importlib.util.module_from_spec(spec)
spec.loader.exec_module(internals)
internals.read_xla_flags_with('--tf_xla_persistent_cache_directory=' + sys.argv[2])
env_after = os.environ.get('TF_XLA_FLAGS')
internals.read_xla_flags_with('--tf_xla_persistent_cache_directory=' + sys.argv[3])  # too late
v1 = tf.compat.v1
graph = tf.Graph()
with graph.as_default():
  out = tf.xla.experimental.compile(lambda a: a * 2.0, [tf.constant(3.0)])
with v1.Session(graph=graph) as session:
  value = float(session.run(out)[0])
from tensorflow.python.client import pywrap_tf_session
print(json.dumps({'env_after': env_after, 'value': value,
                  'cpu_global_jit': pywrap_tf_session.TF_SetTfXlaCpuGlobalJit(False)}))
"""


def test_read_xla_flags_with_adds_flags_for_this_process_only(tmp_path):
  first, late = tmp_path / 'first', tmp_path / 'late'
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', TF_XLA_FLAGS='--tf_xla_cpu_global_jit=true')
  proc = subprocess.run([sys.executable, '-c', _READ_XLA_FLAGS_PROGRAM, internals.__file__,
                         str(first), str(late)], env=env, capture_output=True, text=True,
                        timeout=300, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  got = json.loads(proc.stdout.strip().splitlines()[-1])
  assert got['value'] == 6.0
  assert got['env_after'] == '--tf_xla_cpu_global_jit=true'  # the environment put back
  assert got['cpu_global_jit'] == 1  # the environment's own flag read, and left as it was
  # The persistent compilation cache flag took effect: the executable was written there.
  assert [p.name.startswith('xla_compile_cache') for p in first.iterdir()] == [True]
  assert not late.exists()  # flags are read once: the second call changed nothing


def _loop_op_types():
  g = tf.Graph()
  with g.as_default():
    tf.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0)])
  return {op.type for op in g.get_operations()}


def test_control_flow_v2_builds_v2_loops_and_restores_the_switch():
  was_enabled = v1.control_flow_v2_enabled()
  v1.disable_control_flow_v2()
  try:
    assert 'Enter' in _loop_op_types()  # v1 loop
    with internals.control_flow_v2():
      types = _loop_op_types()
    assert 'Enter' not in types and types & {'While', 'StatelessWhile'}
    assert 'Enter' in _loop_op_types()  # restored
    with pytest.raises(RuntimeError):
      with internals.control_flow_v2():
        raise RuntimeError('body failed')
    assert not v1.control_flow_v2_enabled()  # restored when the body raised too
  finally:
    if was_enabled:
      v1.enable_control_flow_v2()


def test_graph_state_is_per_graph_and_dies_with_the_graph():
  g = tf.Graph()
  with g.as_default():
    tensor = tf.constant(1.0)
  internals.set_graph_state(g, 'probe', {'tensor': tensor})
  assert internals.graph_state(g, 'probe')['tensor'] is tensor
  assert internals.graph_state(tf.Graph(), 'probe') is None
  assert internals.graph_state(g, 'other') is None
  assert hasattr(g, '_tpu_estimator_probe')  # our prefix, clear of TensorFlow's names
  ref = weakref.ref(g)
  del g, tensor
  gc.collect()
  assert ref() is None


def test_root_graph_of_a_loop_body_is_the_graph_that_builds_the_loop(graph):
  bodies = []

  def body(i):
    bodies.append(v1.get_default_graph())
    assert internals.root_graph() is graph
    return i + 1

  tf.while_loop(lambda i: i < 2, body, [tf.constant(0)])
  assert bodies and bodies[0] is not graph  # a loop body is a graph of its own (FuncGraph)
  assert internals.root_graph(bodies[0]) is graph
  assert internals.root_graph() is graph and internals.root_graph(graph) is graph


def test_summary_writer_initializers_include_every_writer(graph, tmp_path):
  first = tf.summary.create_file_writer(str(tmp_path / 'a'))
  second = tf.summary.create_file_writer(str(tmp_path / 'b'))
  ops = internals.summary_writer_initializers()
  assert first.init() in ops and second.init() in ops


def test_file_writer_without_graph_is_the_cached_writer_and_writes_no_graph(graph, tmp_path):
  tf.constant(1.0, name='in_the_default_graph')
  logdir = str(tmp_path)
  writer = internals.file_writer_without_graph(logdir)
  assert v1.summary.FileWriterCache.get(logdir) is writer
  assert internals.file_writer_without_graph(logdir) is writer
  writer.add_session_log(v1.SessionLog(status=v1.SessionLog.START), 0)
  writer.flush()
  events = [e for path in tf.io.gfile.glob(logdir + '/events.*')
            for e in v1.train.summary_iterator(path)]
  assert any(e.HasField('session_log') for e in events)
  assert not any(e.HasField('graph_def') for e in events)
  v1.summary.FileWriterCache.clear()


def test_summary_op_of_a_summary_saver_hook(graph, tmp_path):
  summary = v1.summary.scalar('x', tf.constant(1.0))
  hook = v1.train.SummarySaverHook(save_steps=1, output_dir=str(tmp_path), summary_op=summary)
  assert summary in tf.nest.flatten(internals.summary_op_of(hook))


class _Rates(internals.StepCounterHook):

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self.records = []

  def record(self, steps_per_sec, global_step):
    self.records.append((steps_per_sec, global_step, self.summary_writer, self.summary_tag))


def test_step_counter_hook_subclass_records_rates(graph, tmp_path):
  step = v1.train.get_or_create_global_step()
  train_op = step.assign_add(1)
  hook = _Rates(every_n_steps=2, output_dir=str(tmp_path))
  assert isinstance(hook, v1.train.StepCounterHook)
  with v1.train.MonitoredSession(hooks=[hook]) as session:
    for _ in range(6):
      session.run(train_op)
  assert [r[1] for r in hook.records] == [3, 5]  # each rate at the step TF's timer fired on
  for rate, _, writer, tag in hook.records:
    assert rate > 0 and writer is not None and tag == 'global_step/sec'


class _Planned(internals.SessionOfPlannedRuns):
  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.asked = []

  def _plan_for(self, fetches):
    self.asked.append(fetches)
    return internals.fetch_plan(self.graph, fetches)


def test_session_of_planned_runs_runs_feedless_runs_with_the_plan_it_is_given(graph):
  x = v1.placeholder(tf.float32, [])
  a = tf.constant(2.0)
  counter = v1.Variable(0, use_resource=True)
  bump = counter.assign_add(1).op
  plan = internals.fetch_plan(graph, {'a': [a, a], 'bump': bump})
  assert plan.fetches() == [a] and plan.targets() == [bump]  # unique tensors and ops
  session = _Planned(graph=graph)
  session.run(counter.initializer)
  assert session.run({'a': [a, a], 'bump': bump}) == {'a': [2.0, 2.0], 'bump': None}
  assert session.run(counter) == 1
  assert session.run(a + x, feed_dict={x: 1.0}) == 3.0  # a run with feeds: not asked
  assert len(session.asked) == 3


def test_saver_var_list_and_options_rebuild_a_saver(graph):
  var = v1.Variable(1.0, name='v', use_resource=True)
  saver = v1.train.Saver({'key': var}, max_to_keep=3, keep_checkpoint_every_n_hours=2.0,
                         sharded=True, save_relative_paths=True, pad_step_number=True)
  assert internals.saver_var_list(saver) == {'key': var}
  options = internals.saver_options(saver)
  assert len(options) == 10  # every option is still where the rebuild reads it
  assert options['max_to_keep'] == 3 and options['sharded'] and options['pad_step_number']
  rebuilt = v1.train.Saver(var_list=internals.saver_var_list(saver), **options)
  for field in ('max_to_keep', 'keep_checkpoint_every_n_hours', 'sharded', 'version'):
    assert getattr(rebuilt.saver_def, field) == getattr(saver.saver_def, field)
  assert internals.saver_var_list(object()) is None


def test_save_slice_info_of_partitioned_variables(graph):
  whole = v1.get_variable('whole', [4])
  parts = v1.get_variable('parts', [4, 2], partitioner=v1.fixed_size_partitioner(2))
  assert internals.save_slice_info(whole) is None
  infos = [internals.save_slice_info(p) for p in parts]
  assert [i.full_name for i in infos] == ['parts', 'parts']
  assert [list(i.full_shape) for i in infos] == [[4, 2], [4, 2]]


def test_meta_graph_def_keeps_the_saver_and_collections(graph):
  v1.Variable(1.0, name='v')
  saver = v1.train.Saver()
  before = {k: list(graph.get_collection(k)) for k in graph.get_all_collection_keys()}
  meta = internals.meta_graph_def(graph.as_graph_def(add_shapes=True), saver.saver_def, graph)
  assert meta.saver_def.save_tensor_name == saver.saver_def.save_tensor_name
  assert 'variables' in meta.collection_def
  assert {k: list(graph.get_collection(k)) for k in graph.get_all_collection_keys()} == before


def test_checkpoint_state_proto_and_atomic_write(tmp_path):
  state = internals.CheckpointState(model_checkpoint_path='model.ckpt-3',
                                    all_model_checkpoint_paths=['model.ckpt-3'])
  path = str(tmp_path / 'checkpoint')
  internals.atomic_write_string_to_file(path, str(state))
  assert tf.train.get_checkpoint_state(str(tmp_path)).model_checkpoint_path.endswith(
      'model.ckpt-3')
  assert [p.name for p in tmp_path.iterdir()] == ['checkpoint']  # no temporary file left


def test_mirrored_variables_and_their_replica_copies(graph):
  strategy = tf.distribute.MirroredStrategy(['/cpu:0'])
  with strategy.scope():
    mirrored = tf.Variable(1.0, name='m')
  plain = tf.Variable(2.0, name='p')
  assert internals.is_distributed(mirrored) and not internals.is_distributed(plain)
  copy = mirrored.values[0]
  assert not internals.is_distributed(copy)
  # TensorFlow links each copy to its container (a resource copy through its handle).
  assert internals.mirrored_of(copy.handle) is mirrored
  assert internals.mirrored_of(plain) is plain
  saveables = internals.mirrored_saveables(mirrored)
  assert len(saveables) == 1


def test_regroup_and_select_replica_round_trip(graph):
  a, b = tf.constant(1), tf.constant(2)
  grouped = internals.regroup([(a, {'x': a}), (b, {'x': b})])
  assert internals.select_replica(0, grouped) == (a, {'x': a})
  assert internals.select_replica(1, grouped) == (b, {'x': b})


def test_estimator_loss_scaling_makes_v1_losses_averaged(graph):
  strategy = tf.distribute.MirroredStrategy(['/cpu:0'])
  with strategy.scope():
    assert v1.distribute.get_loss_reduction() == tf.distribute.ReduceOp.SUM
    with internals.estimator_loss_scaling(strategy):
      assert v1.distribute.get_loss_reduction() == tf.distribute.ReduceOp.MEAN
    assert v1.distribute.get_loss_reduction() == tf.distribute.ReduceOp.SUM


def test_v1_adam_builds_its_fused_update_from_the_replaceable_op_module(graph):
  original = internals.v1_adam_training_ops()
  calls = []

  class Recording:

    def __getattr__(self, name):
      return getattr(original, name)

    def resource_apply_adam(self, *args, **kwargs):
      calls.append(args[0])
      return original.resource_apply_adam(*args, **kwargs)

  var = v1.Variable(np.ones(3, np.float32), use_resource=True)
  internals.set_v1_adam_training_ops(Recording())
  try:
    v1.train.AdamOptimizer(0.1).minimize(tf.reduce_sum(var * var), var_list=[var])
  finally:
    internals.set_v1_adam_training_ops(original)
  assert calls == [var.handle]
  assert internals.v1_adam_training_ops() is original


def test_deprecation_notices_switch_round_trips():
  before = internals.deprecation_notices_enabled()
  assert isinstance(before, bool)
  try:
    internals.set_deprecation_notices_enabled(not before)
    assert internals.deprecation_notices_enabled() is (not before)
  finally:
    internals.set_deprecation_notices_enabled(before)


def test_export_modules_have_the_output_classes_and_helpers():
  output = internals.export_output.PredictOutput({'y': tf.constant([1.0])})
  assert isinstance(output, internals.export_output.ExportOutput)
  for helper in ('get_export_outputs', 'build_all_signature_defs', 'get_timestamped_export_dir',
                 'get_temp_export_dir'):
    assert callable(getattr(internals.export_utils, helper))


def test_object_graph_saveables_key_variables_by_object_path(graph):
  root = tf.train.Checkpoint()
  root.inner = tf.train.Checkpoint()
  root.inner.v = tf.Variable(1.0, name='v')
  internals.track_child(root, tf.Variable(2, name='step'), 'estimator_global_step')
  saver = tf.compat.v1.train.Saver(var_list=internals.object_graph_saveables(root))
  assert saver is not None
  names = sorted(spec.name for s in internals.object_graph_saveables(root) for spec in s.specs)
  assert names == ['_CHECKPOINTABLE_OBJECT_GRAPH',
                   'estimator_global_step/.ATTRIBUTES/VARIABLE_VALUE',
                   'inner/v/.ATTRIBUTES/VARIABLE_VALUE']


def test_loss_scaled_by_optimizer_is_set_by_v1_optimizers_under_estimator_scaling(graph):
  assert not internals.loss_scaled_by_optimizer(graph)
  strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
  with strategy.scope(), internals.estimator_loss_scaling(strategy):
    def step():
      w = v1.get_variable('w', [], initializer=tf.ones_initializer())
      return v1.train.GradientDescentOptimizer(0.1).minimize(w * 2.0)
    strategy.extended.call_for_each_replica(step)
  assert internals.loss_scaled_by_optimizer(graph)


def test_collective_server_started_reads_the_strategy_flag(graph):
  local = tf.distribute.MultiWorkerMirroredStrategy()  # no TF_CONFIG: no server of its own
  assert internals.collective_server_started(local) is False
  local.extended._std_server_started = True  # what an eagerly made cluster strategy sets
  assert internals.collective_server_started(local) is True


def test_set_initializer_replaces_what_global_variables_initializer_runs(graph):
  variable = v1.get_variable('v', [], initializer=tf.zeros_initializer())
  internals.set_initializer(variable, variable.assign(5.0, read_value=False))
  with v1.Session() as session:
    session.run(v1.global_variables_initializer())
    assert session.run(variable) == 5.0


@pytest.mark.parametrize('init', ['random', 'kmeans_plus_plus', 'kmc2'])
def test_kmeans_graph_builds_the_clusters_variables_and_initializes_them(graph, init):
  points = tf.constant([[0., 0.], [0., 1.], [9., 9.], [9., 8.], [5., 5.]])
  built = internals.kmeans_graph(inputs=points, num_clusters=2, initial_clusters=init,
                                 distance_metric='squared_euclidean', use_mini_batch=False,
                                 mini_batch_steps_per_iteration=1, random_seed=3,
                                 kmeans_plus_plus_num_retries=2)
  all_distances, nearest, distances, initialized, init_op, update = built.training_graph()
  by_name = {v.op.name: v for v in v1.global_variables()}
  assert sorted(by_name) == ['clusters', 'initialized']
  with v1.Session(graph=graph) as session:
    session.run(v1.global_variables_initializer())
    assert not session.run(initialized)
    while not session.run(initialized):
      session.run(init_op)
    centers = session.run(by_name['clusters'])
    assert centers.shape == (2, 2)
    assert all(any((row == p).all() for p in session.run(points)) for row in centers)
    session.run(update)
    index, all_d, d = session.run([nearest[0], all_distances[0], distances[0]])
  assert index.shape == (5,) and all_d.shape == (5, 2)
  np.testing.assert_allclose(d, all_d[np.arange(5), index], rtol=1e-5, atol=1e-5)

def test_feature_column_classes_and_cache_give_one_columns_ids_and_dense_tensor(graph):
  fc = tf.feature_column
  color = fc.categorical_column_with_vocabulary_list('color', ['red', 'blue'])
  x = fc.numeric_column('x', shape=[2])
  assert isinstance(color, internals.FeatureColumnV2)
  assert isinstance(x, internals.DenseColumnV2) and not isinstance(color, internals.DenseColumnV2)
  cache = internals.feature_transformation_cache(
      {'color': tf.constant([['blue'], ['red']]), 'x': tf.constant([[1., 2.], [3., 4.]])})
  ids = color.get_sparse_tensors(cache, None).id_tensor
  dense = x.get_dense_tensor(cache, None)
  with v1.Session() as session:
    session.run(v1.tables_initializer())
    ids, dense = session.run([ids, dense])
  assert ids.values.tolist() == [1, 0] and ids.indices[:, 0].tolist() == [0, 1]
  assert dense.tolist() == [[1., 2.], [3., 4.]]

def test_feature_column_v2_reads_sequence_columns_through_a_state_manager(graph):
  """The RNN estimators' input (canned/sequence_input.py): `SequenceDenseColumn` and
  `DenseColumn`, `FeatureTransformationCache`, and `create_state`/`get_sequence_dense_tensor`
  asking a `StateManager` for the embedding variable."""
  fc_v2 = internals.feature_column_v2()
  made = {}

  class Manager(fc_v2.StateManager):
    def create_variable(self, feature_column, name, shape, dtype=None, trainable=True,
                        use_resource=True, initializer=None):
      made[name] = v1.get_variable(name, shape, dtype, initializer=tf.ones_initializer())
      return made[name]

    def get_variable(self, feature_column, name):
      return made[name]

  column = tf.feature_column.embedding_column(
      tf.feature_column.sequence_categorical_column_with_identity('ids', 3), 2)
  assert isinstance(column, fc_v2.SequenceDenseColumn)
  assert isinstance(tf.feature_column.numeric_column('x'), fc_v2.DenseColumn)
  ids = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], tf.constant([0, 2, 1], tf.int64), [2, 2])
  column.create_state(Manager())
  dense, length = column.get_sequence_dense_tensor(
      fc_v2.FeatureTransformationCache({'ids': ids}), Manager())
  assert list(made) == ['embedding_weights']
  with v1.Session() as session:
    session.run(v1.global_variables_initializer())
    dense, length = session.run([dense, length])
  assert dense.shape == (2, 2, 2) and length.tolist() == [2, 1]
  np.testing.assert_allclose(dense[1, 1], [0., 0.])  # the padded step
