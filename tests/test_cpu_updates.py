"""Adam in CPU device loops: mid-size variables are updated with element-wise ops instead of the
fused ResourceApplyAdam kernel (faster on CPU), with the same results and checkpoints."""
import collections
import gc
import threading
import weakref

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from tpu_estimator.updates import cpu_updates

from helpers import tpu_config

v1 = tf.compat.v1
IN, HIDDEN, OUT = 32, 16, 3  # kernel 0: 512 elements (element-wise); the rest <= 256 (fused)


def _data(n=64):
  rng = np.random.RandomState(3)
  x = rng.randn(n, IN).astype(np.float32)
  y = (np.abs(x[:, 0]) * 2).astype(np.int64) % OUT
  return x, y


def _input_fn(params):
  x, y = _data()
  return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(params['batch_size'],
                                                                     drop_remainder=True)


class _OpCounter(v1.train.SessionRunHook):
  """Counts op types in the training graph, loop bodies (functions) included."""

  def __init__(self):
    self.counts = collections.Counter()

  def begin(self):
    graph_def = v1.get_default_graph().as_graph_def()
    self.counts.update(node.op for node in graph_def.node)
    for function in graph_def.library.function:
      self.counts.update(node.op for node in function.node_def)


def _model_fn(features, labels, mode, params):
  del params
  init = lambda shape, i: tf.constant_initializer(
      np.sin(np.arange(np.prod(shape)) + i).reshape(shape) * 0.3)
  w0 = v1.get_variable('hidden/kernel', [IN, HIDDEN], initializer=init([IN, HIDDEN], 0))
  b0 = v1.get_variable('hidden/bias', [HIDDEN], initializer=tf.zeros_initializer())
  w1 = v1.get_variable('out/kernel', [HIDDEN, OUT], initializer=init([HIDDEN, OUT], 1))
  b1 = v1.get_variable('out/bias', [OUT], initializer=tf.zeros_initializer())
  logits = tf.matmul(tf.nn.relu(tf.matmul(features, w0) + b0), w1) + b1
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits))
  train_op = v1.train.AdamOptimizer(0.05).minimize(loss, v1.train.get_global_step())
  return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def _train(model_dir, use_tpu, shards=None, steps=12):
  counter = _OpCounter()
  est = te.TPUEstimator(_model_fn, config=tpu_config(shards, 4, model_dir=str(model_dir)),
                        use_tpu=use_tpu, train_batch_size=16)
  est.train(_input_fn, steps=steps, hooks=[counter])
  names = est.get_variable_names()
  return {n: est.get_variable_value(n) for n in names}, counter.counts


@pytest.mark.parametrize('shards', [1, 2])
def test_adam_in_cpu_loops_matches_fused_kernel(tmp_path, shards):
  fused, fused_ops = _train(tmp_path / 'fused', use_tpu=False)
  looped, looped_ops = _train(tmp_path / 'loop', use_tpu=True, shards=shards)
  # Same checkpoint: variables, Adam slots and beta powers, under the same names.
  assert sorted(looped) == sorted(fused)
  assert {'hidden/kernel/Adam', 'hidden/kernel/Adam_1', 'beta1_power'} <= set(looped)
  assert int(looped['global_step']) == 12
  for name, value in fused.items():
    np.testing.assert_allclose(looped[name], value, rtol=2e-5, atol=1e-6, err_msg=name)
  # The weights moved, so the comparison is not between untouched initial values.
  assert np.abs(looped['hidden/kernel'] - _initial_hidden_kernel()).max() > 1e-2
  # One step per run keeps TensorFlow's kernel for all 4 variables; the loop updates the
  # 512-element kernel element-wise (on each replica) and keeps the fused kernel for the small
  # ones.  GPU replicas (a GPU machine) keep the fused kernel throughout.
  on_gpu = bool(tf.config.list_physical_devices('GPU'))
  assert fused_ops['ResourceApplyAdam'] == 4
  assert looped_ops['ResourceApplyAdam'] == (4 if on_gpu else 3) * shards


def _initial_hidden_kernel():
  return (np.sin(np.arange(IN * HIDDEN)) * 0.3).reshape(IN, HIDDEN)


def test_outside_tpu_estimator_loops_adam_is_untouched(tmp_path):
  _train(tmp_path, use_tpu=True, shards=1, steps=4)
  with tf.Graph().as_default() as graph:
    var = v1.get_variable('v', [IN, HIDDEN], initializer=tf.ones_initializer())
    v1.train.AdamOptimizer(0.1).minimize(tf.reduce_sum(var * var))
    ops = [op.type for op in graph.get_operations()]
  assert ops.count('ResourceApplyAdam') == 1


def test_size_range_model_size_and_locking():
  # Inside the scope only mid-size, unlocked updates in small models change; outside nothing
  # does.
  def apply_ops(size, use_locking=False, active=True, other_elements=0):
    with tf.Graph().as_default() as graph, cpu_updates.elementwise_adam(active):
      var = v1.get_variable('v', [size], initializer=tf.ones_initializer())
      if other_elements:  # another trainable variable the optimizer does not update here
        v1.get_variable('other', [other_elements], initializer=tf.zeros_initializer())
      v1.train.AdamOptimizer(0.1, use_locking=use_locking).minimize(tf.reduce_sum(var * var))
      return [op.type for op in graph.get_operations()].count('ResourceApplyAdam')

  assert apply_ops(cpu_updates.MIN_ELEMENTS) == 1
  assert apply_ops(cpu_updates.MIN_ELEMENTS + 1) == 0
  assert apply_ops(cpu_updates.MAX_ELEMENTS) == 0
  assert apply_ops(cpu_updates.MAX_ELEMENTS + 1) == 1
  assert apply_ops(4096, use_locking=True) == 1
  assert apply_ops(4096, active=False) == 1
  # In a large model the step is compute-bound: the fused kernel stays everywhere.
  assert apply_ops(4096, other_elements=cpu_updates.MAX_MODEL_ELEMENTS - 4096) == 0
  assert apply_ops(4096, other_elements=cpu_updates.MAX_MODEL_ELEMENTS - 4095) == 1


@pytest.mark.parametrize('reuse', [False, True])
def test_training_graphs_are_freed_after_train(tmp_path, reuse):
  # The update's scalars are cached per graph; the cache must not keep old graphs alive:
  # with a new graph per train() call, none outlives its call; a graph kept for the next call
  # (reuse_train_graphs) lives as long as the estimator.
  graphs = []

  class _Graphs(v1.train.SessionRunHook):

    def begin(self):
      graphs.append(weakref.ref(v1.get_default_graph()))

  # (xla=False: the element-wise update is built in uncompiled loops, and with the default the
  # second call would build the compiled loop once.)
  config = tpu_config(1, 4, model_dir=str(tmp_path), reuse_train_graphs=reuse, xla=False)
  est = te.TPUEstimator(_model_fn, config=config, use_tpu=True, train_batch_size=16)
  for _ in range(3):
    est.train(_input_fn, steps=4, hooks=[_Graphs()])
  gc.collect()
  assert len(graphs) == 3
  if reuse:
    assert all(ref() is graphs[0]() is not None for ref in graphs)  # one graph, still kept
    del est
    # A kept session's input copies are released on threads that hold it while they run
    # (distribute/iterators.py): the graph goes with the last of them.
    for thread in threading.enumerate():
      if thread.name == 'tpu_estimator_input_release':
        thread.join(timeout=60)
    gc.collect()
  assert all(ref() is None for ref in graphs)
