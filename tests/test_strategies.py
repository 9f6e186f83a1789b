"""`RunConfig(train_distribute=..., eval_distribute=...)` on this machine's logical CPUs: what
the differential test against the original (tests/test_distribute_differential.py) cannot
show: warm starts under a strategy, summaries written once a step, and the errors."""
import glob

import keras
import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te

X = np.random.RandomState(0).randn(64, 4).astype(np.float32)
Y = (X.sum(1, keepdims=True) > 0).astype(np.float32)


def _strategy():
  # Made in a graph: eagerly it would need 2 logical CPUs configured before TensorFlow started
  # (the test process has one); the Estimator's sessions get theirs from us.
  with tf.Graph().as_default():
    return tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])


def _model_fn(features, labels, mode):
  logits = keras.layers.Dense(1, name='dense')(features['x'])
  loss = tf.compat.v1.losses.sigmoid_cross_entropy(labels, logits)
  tf.compat.v1.summary.scalar('model_loss', loss)
  train_op = tf.compat.v1.train.GradientDescentOptimizer(1.0).minimize(
      loss, tf.compat.v1.train.get_global_step())
  return te.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _input_fn(input_context=None):
  batch = input_context.get_per_replica_batch_size(16) if input_context else 16
  return tf.data.Dataset.from_tensor_slices(({'x': X}, Y)).batch(batch)


def test_warm_start_sets_every_replica_of_keras_3_layers(tmp_path):
  """Warm-started Keras 3 layers under 2 replicas take the first step one device takes (each
  copy starts from the checkpoint, none from its random initializer)."""
  source = te.Estimator(_model_fn, model_dir=str(tmp_path / 'source'))
  source.train(_input_fn, steps=2)
  kernels = []
  for name, strategy in (('one', None), ('two', _strategy())):
    est = te.Estimator(_model_fn, model_dir=str(tmp_path / name), warm_start_from=source.model_dir,
                       config=te.EstimatorRunConfig(train_distribute=strategy))
    est.train(_input_fn, steps=1)
    kernels.append(est.get_variable_value('dense/kernel'))
  np.testing.assert_allclose(kernels[1], kernels[0], rtol=1e-5, atol=1e-7)  # 2-replica sums round


def test_model_fn_summaries_are_written_once_a_step(tmp_path):
  est = te.Estimator(_model_fn, model_dir=str(tmp_path), config=te.EstimatorRunConfig(
      train_distribute=_strategy(), save_summary_steps=1))
  est.train(_input_fn, steps=3)
  steps = []
  for path in glob.glob(str(tmp_path / 'events.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      steps += [event.step for v in event.summary.value if v.tag == 'model_loss']
  assert sorted(steps) == [1, 2, 3]


def test_input_fn_must_return_a_dataset_under_a_strategy(tmp_path):
  est = te.Estimator(_model_fn, model_dir=str(tmp_path),
                     config=te.EstimatorRunConfig(train_distribute=_strategy()))
  with pytest.raises(TypeError, match='train_distribute.*tf.data.Dataset'):
    est.train(lambda: ({'x': tf.constant(X)}, tf.constant(Y)), steps=1)
  assert not glob.glob(str(tmp_path / 'model.ckpt*'))


def test_tpu_estimator_without_tpu_runs_its_runconfig_strategy(tmp_path):
  """TPUEstimator(use_tpu=False) with RunConfig(train_distribute=, eval_distribute=) runs its
  calls under that strategy, as the original's (an Estimator) did: google-research/bigbird's
  default path passes MirroredStrategy so.  Each replica reads its own element of
  `params['batch_size']` rows, the TPUEstimatorSpec is its `as_estimator_spec()` in each
  replica, and the result is the plain Estimator's with the same strategy."""
  seen_batch = []

  def core(features, labels, mode):  # fixed initial weights: both estimators start alike
    kernel = tf.compat.v1.get_variable('dense/kernel', [4, 1],
                                       initializer=tf.compat.v1.constant_initializer(0.1))
    loss = tf.compat.v1.losses.sigmoid_cross_entropy(labels, tf.matmul(features['x'], kernel))
    train_op = tf.compat.v1.train.GradientDescentOptimizer(1.0).minimize(
        loss, tf.compat.v1.train.get_global_step())
    return te.EstimatorSpec(mode, loss=loss, train_op=train_op)

  def tpu_model_fn(features, labels, mode, params):
    seen_batch.append(params['batch_size'])
    spec = core(features, labels, mode)
    return te.TPUEstimatorSpec(
        mode, loss=spec.loss, train_op=spec.train_op,
        eval_metrics=(lambda labels: {'label_mean': tf.compat.v1.metrics.mean(labels)},
                      [labels]))

  def plain_model_fn(features, labels, mode):
    spec = core(features, labels, mode)
    return te.EstimatorSpec(mode, loss=spec.loss, train_op=spec.train_op, eval_metric_ops={
        'label_mean': tf.compat.v1.metrics.mean(labels)})

  def tpu_input_fn(params):
    return tf.data.Dataset.from_tensor_slices(({'x': X}, Y)).batch(params['batch_size'])

  results = []
  for name in ('tpu', 'plain'):
    config_args = dict(model_dir=str(tmp_path / name), train_distribute=_strategy(),
                       eval_distribute=_strategy())
    if name == 'tpu':
      est = te.TPUEstimator(tpu_model_fn, config=te.RunConfig(**config_args), use_tpu=False,
                            train_batch_size=8, eval_batch_size=8)
      est.train(tpu_input_fn, steps=3)
      metrics = est.evaluate(tpu_input_fn)
    else:
      est = te.Estimator(plain_model_fn, config=te.EstimatorRunConfig(**config_args))
      batch_of_8 = lambda: _input_fn().unbatch().batch(8)  # noqa: E731
      est.train(batch_of_8, steps=3)
      metrics = est.evaluate(batch_of_8)
    results.append((est.get_variable_value('dense/kernel'), metrics))
  assert set(seen_batch) == {8}
  assert seen_batch.count(8) == 4  # one model_fn call a replica, in training and evaluation
  assert not np.allclose(results[0][0], 0.1)  # trained
  np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
  assert results[0][1]['global_step'] == results[1][1]['global_step'] == 3
  for key in ('loss', 'label_mean'):
    np.testing.assert_allclose(results[0][1][key], results[1][1][key], rtol=1e-6)
  with pytest.raises(ValueError, match='train_distribute'):  # sharded: TPUConfig's shards
    te.TPUEstimator(tpu_model_fn, config=te.RunConfig(train_distribute=_strategy()),
                    use_tpu=True, train_batch_size=8)
