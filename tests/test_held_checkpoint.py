"""evaluate()/predict() called again on the checkpoint the kept session restored last restore
nothing (core/held_checkpoint.py): results equal a new estimator's, a checkpoint rewritten at
the same path is restored, and a graph that can change a restored variable restores at every
call, as the original did."""
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te
from tpu_estimator.core import held_checkpoint

v1 = tf.compat.v1


@pytest.fixture
def restores(monkeypatch):
  """The checkpoints Saver.restore restores, in order."""
  paths = []
  original = v1.train.Saver.restore

  def counted(self, sess, save_path):
    paths.append(save_path)
    return original(self, sess, save_path)

  monkeypatch.setattr(v1.train.Saver, 'restore', counted)
  return paths


def _estimator(model_dir, shards, model_fn=None):
  model_fn = model_fn or h.make_model_fn(tpu=shards is not None)
  if shards is None:
    return te.Estimator(model_fn, model_dir=str(model_dir), params={'batch_size': 16})
  return te.TPUEstimator(model_fn, config=h.tpu_config(shards, 4, model_dir=str(model_dir)),
                         train_batch_size=16, eval_batch_size=16, predict_batch_size=16)


def _probabilities(est, x, **kwargs):
  def input_fn(params):
    return tf.data.Dataset.from_tensor_slices({'x': x}).batch(params['batch_size'])
  return np.array([p['probabilities'] for p in est.predict(input_fn, **kwargs)])


@pytest.mark.parametrize('shards', [None, 2])
def test_calls_on_the_same_checkpoint_restore_it_once(tmp_path, restores, shards):
  x, y = h.make_data(40)
  est = _estimator(tmp_path, shards)
  est.train(h.dataset_input_fn(x, y), steps=3)
  eval_fn = h.dataset_input_fn(x, y, repeat=False)
  first = est.evaluate(eval_fn)
  predicted = _probabilities(est, x)
  del restores[:]
  assert est.evaluate(eval_fn) == first
  np.testing.assert_allclose(_probabilities(est, x), predicted, rtol=1e-6)
  np.testing.assert_allclose(_probabilities(est, x[:7]), predicted[:7], rtol=1e-6)
  assert restores == []  # the kept sessions hold that checkpoint's values
  est.train(h.dataset_input_fn(x, y), steps=3)  # a new checkpoint is restored
  del restores[:]
  after = _probabilities(est, x)
  assert len(restores) == 1
  assert not np.allclose(after, predicted)
  np.testing.assert_allclose(after, _probabilities(_estimator(tmp_path, shards), x), rtol=1e-6)
  assert est.evaluate(eval_fn) == _estimator(tmp_path, shards).evaluate(eval_fn)


def test_a_checkpoint_rewritten_at_the_same_path_is_restored(tmp_path, restores):
  x, y = h.make_data(40)
  est = _estimator(tmp_path / 'a', None)
  est.train(h.dataset_input_fn(x, y), steps=3)
  other = _estimator(tmp_path / 'b', None, h.make_model_fn(learning_rate=0.5))
  other.train(h.dataset_input_fn(x, y), steps=3)
  path = str(tmp_path / 'a' / 'model.ckpt-3')
  before = _probabilities(est, x, checkpoint_path=path)
  # The same prefix written anew (as a copy over it would), with other values.
  for name in os.listdir(tmp_path / 'b'):
    if name.startswith('model.ckpt-3.'):
      shutil.copyfile(tmp_path / 'b' / name, str(tmp_path / 'a' / name) + '.tmp')
      os.replace(str(tmp_path / 'a' / name) + '.tmp', tmp_path / 'a' / name)
  del restores[:]
  rewritten = _probabilities(est, x, checkpoint_path=path)
  assert len(restores) == 1
  np.testing.assert_allclose(rewritten, _probabilities(other, x), rtol=1e-6)
  assert not np.allclose(rewritten, before)


def _bumping_model_fn(tpu):
  """`w` (checkpointed) read after adding 1 to it, in prediction and evaluation: a graph
  that changes a restored variable.  The original restored at every call, so every call
  sees the checkpoint's w + 1."""
  def model_fn(features, labels, mode, params):
    del params
    w = v1.get_variable('w', [], initializer=tf.zeros_initializer())
    spec = te.TPUEstimatorSpec if tpu else te.EstimatorSpec
    bumped = tf.fill(tf.shape(features['x'])[:1], w.assign_add(1.0))
    if mode == te.ModeKeys.PREDICT:
      return spec(mode, predictions={'w': bumped})
    error = features['x'][:, 0] * w - tf.cast(labels, tf.float32)
    loss = tf.reduce_mean(error * error)
    if mode == te.ModeKeys.TRAIN:
      train_op = v1.train.GradientDescentOptimizer(0.01).minimize(
          loss, global_step=v1.train.get_global_step())
      return spec(mode, loss=loss, train_op=train_op)
    if tpu:
      return spec(mode, loss=loss, eval_metrics=(lambda w: {'w': v1.metrics.mean(w)},
                                                 [bumped]))
    return spec(mode, loss=loss, eval_metric_ops={'w': v1.metrics.mean(bumped)})
  return model_fn


@pytest.mark.parametrize('shards', [None, 1])
def test_a_graph_that_can_change_restored_variables_restores_every_call(tmp_path, shards):
  x, y = h.make_data(32)
  est = _estimator(tmp_path, shards, _bumping_model_fn(shards is not None))
  est.train(h.dataset_input_fn(x, y), steps=2)
  trained = est.get_variable_value('w')

  def predict_fn(params):  # one batch: w is bumped once per call
    return tf.data.Dataset.from_tensor_slices({'x': x[:4]}).batch(params['batch_size'])

  eval_fn = h.dataset_input_fn(x[:4], y[:4], repeat=False)
  for _ in range(3):
    np.testing.assert_allclose([p['w'] for p in est.predict(predict_fn)], [trained + 1] * 4,
                               rtol=1e-6)
    np.testing.assert_allclose(est.evaluate(eval_fn)['w'], trained + 1, rtol=1e-6)


def _graph(build):
  """(graph, saver, init op) of a graph whose variable `v` `build(v)` uses."""
  graph = tf.Graph()
  with graph.as_default():
    build()
    saver = v1.train.Saver()
    init = v1.global_variables_initializer()
  return graph, saver, init


def _resource():
  return v1.get_variable('v', [2], use_resource=True)


def _reference():
  return v1.get_variable('v', [2], use_resource=False)


def _in_loop(step):
  v = _resource()
  tf.while_loop(lambda i: i < 3, lambda i: step(v, i), [tf.constant(0)])


def _in_branch(use):
  v = _resource()
  tf.cond(tf.constant(True), lambda: use(v), lambda: tf.zeros([2]))


def _other_handle():
  v = _resource()
  handle = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[2], shared_name=v.handle.op.get_attr(
      'shared_name').decode())
  return tf.raw_ops.AssignVariableOp(resource=handle, value=[0.0, 0.0])


GRAPHS = {  # what the graph does with `v`: whether it may change it
    'read': (lambda: tf.identity(_resource().read_value()), False),
    'gathered': (lambda: v1.gather(_resource(), [0]), False),
    'assigned, never run': (lambda: _resource().assign_add([1.0, 1.0]), True),
    'read in a loop': (lambda: _in_loop(lambda v, i: i + tf.cast(v[0], tf.int32) * 0), False),
    'assigned in a loop': (lambda: _in_loop(lambda v, i: i + tf.cast(
        v.assign_add([1.0, 1.0])[0], tf.int32) * 0), True),
    'read in a branch': (lambda: _in_branch(lambda v: v.read_value()), False),
    'assigned in a branch': (lambda: _in_branch(lambda v: v.assign([0.0, 0.0])), True),
    'reference read': (lambda: _reference() * 2.0, False),
    'reference assigned': (lambda: v1.assign(_reference(), [0.0, 0.0]), True),
    'assigned through another handle': (_other_handle, True),
}


@pytest.mark.parametrize('name', sorted(GRAPHS))
def test_what_may_change_a_restored_variable(name):
  build, changes = GRAPHS[name]
  graph, saver, init = _graph(build)
  assert held_checkpoint.may_change_restored(graph, saver, [init]) is changes
