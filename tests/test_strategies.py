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
