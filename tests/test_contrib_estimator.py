"""tf.contrib.estimator: add_metrics, forward_features, clip_gradients_by_norm and the export
helpers on our Estimator, with TF 1.15's documented behaviour; what is not provided names its
replacement."""
import os
import tempfile

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from tpu_estimator.compat.contrib import estimator as contrib_estimator

_v1 = tf.compat.v1
X = np.array([[1.], [2.], [3.], [4.]], np.float32)
Y = np.array([[2.], [4.], [6.], [8.]], np.float32)


def _input_fn():
  return tf.data.Dataset.from_tensor_slices(
      ({'x': X, 'id': np.arange(4, dtype=np.int64)}, Y)).batch(4)


def _model_fn(features, labels, mode, params):
  w = _v1.get_variable('w', initializer=tf.constant([[params['w0']]]))
  predictions = tf.matmul(features['x'], w)
  outputs = {'serving_default': te.export.PredictOutput({'y': predictions})}
  if mode == te.ModeKeys.PREDICT:
    return te.EstimatorSpec(mode, predictions={'y': predictions}, export_outputs=outputs)
  loss = tf.reduce_mean(tf.square(predictions - labels))
  optimizer = contrib_estimator.clip_gradients_by_norm(
      _v1.train.GradientDescentOptimizer(1.0), clip_norm=0.5)
  train_op = optimizer.minimize(loss, _v1.train.get_global_step())
  metrics = {'mse': _v1.metrics.mean_squared_error(labels, predictions)}
  return te.EstimatorSpec(mode, predictions={'y': predictions}, loss=loss, train_op=train_op,
                          eval_metric_ops=metrics)


def _estimator(w0=0.):
  return te.Estimator(_model_fn, model_dir=tempfile.mkdtemp(prefix='contrib_est_'),
                      params={'w0': w0})


def test_clip_gradients_by_norm_limits_the_step():
  """d(mse)/dw at w=0 is -2*mean(x*y) = -30: clipped to norm 0.5, one SGD step (lr 1) moves w
  by exactly 0.5."""
  est = _estimator()
  est.train(_input_fn, steps=1)
  np.testing.assert_allclose(est.get_variable_value('w'), [[0.5]], atol=1e-6)


@pytest.mark.parametrize('shards', [1, 2])
def test_clip_gradients_by_norm_clips_the_shards_mean_gradient(shards):
  """Under CrossShardOptimizer the clipped gradient is the shards' mean, as TF 1.x clipped in
  apply_gradients: the halves' gradients -10 and -50 (mean -30, norm clipped to 20) move w by
  0.01 * 20 on any number of shards (clipping each shard's part of the mean, -5 and -25,
  moved it by 0.25 on 2)."""
  def model_fn(features, labels, mode, params):
    del params
    w = _v1.get_variable('w', [1, 1], initializer=_v1.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(features['x'], w) - labels))
    optimizer = te.CrossShardOptimizer(contrib_estimator.clip_gradients_by_norm(
        _v1.train.GradientDescentOptimizer(0.01), clip_norm=20.))
    return te.TPUEstimatorSpec(mode, loss=loss,
                               train_op=optimizer.minimize(loss, _v1.train.get_global_step()))

  def input_fn(params):
    return _input_fn().unbatch().batch(params['batch_size'], drop_remainder=True)

  config = te.RunConfig(model_dir=tempfile.mkdtemp(prefix='contrib_clip_'),
                        tpu_config=te.TPUConfig(iterations_per_loop=1, num_shards=shards))
  est = te.TPUEstimator(model_fn, config=config, use_tpu=True, train_batch_size=4)
  est.train(input_fn, max_steps=1)
  np.testing.assert_allclose(est.get_variable_value('w'), [[0.2]], atol=1e-6)


def test_add_metrics_adds_metric_fn_results_to_evaluate():
  def metric_fn(labels, predictions, features):
    return {'mae': _v1.metrics.mean_absolute_error(labels, predictions['y']),
            'mean_x': _v1.metrics.mean(features['x'])}
  base = _estimator(w0=1.)
  base.train(_input_fn, steps=1)  # w: 1 -> 1.5 (the gradient -15 clipped to norm 0.5)
  est = contrib_estimator.add_metrics(base, metric_fn)
  result = est.evaluate(_input_fn, steps=1)
  # predictions 1.5x vs labels 2x: errors 0.5x for x = 1..4
  np.testing.assert_allclose(result['mae'], 0.5 * 2.5, rtol=1e-6)
  np.testing.assert_allclose(result['mse'], 0.25 * 7.5, rtol=1e-6)  # the model's own, kept
  np.testing.assert_allclose(result['mean_x'], 2.5, rtol=1e-6)
  with pytest.raises(ValueError, match=r'logits.*Use only features, labels, predictions, config'):
    contrib_estimator.add_metrics(_estimator(), lambda logits: {})


def test_forward_features_to_predictions_and_serving_signature():
  base = _estimator(w0=2.)
  est = contrib_estimator.forward_features(base, 'id')
  got = list(est.predict(_input_fn))
  assert [int(p['id']) for p in got] == [0, 1, 2, 3]
  np.testing.assert_allclose([p['y'][0] for p in got], 2 * X[:, 0])
  with pytest.raises(ValueError, match='not among the features'):
    next(contrib_estimator.forward_features(base, 'nope').predict(_input_fn))
  every = contrib_estimator.forward_features(base)  # keys=None: every feature
  assert sorted(next(every.predict(_input_fn))) == ['id', 'x', 'y']

  est.train(_input_fn, steps=1)
  receiver = te.export.build_raw_serving_input_receiver_fn(
      {'x': tf.constant(X), 'id': tf.constant(np.arange(4, dtype=np.int64))}, default_batch_size=4)
  path = contrib_estimator.export_all_saved_models(
      est, os.path.join(est.model_dir, 'export'), {te.ModeKeys.PREDICT: receiver})
  signature = tf.saved_model.load(path.decode()).signatures['serving_default']
  assert sorted(signature.structured_outputs) == ['id', 'y']


def test_boosted_trees_names_say_why_they_are_missing():
  from tpu_estimator.compat import contrib  # pylint: disable=import-outside-toplevel
  text = contrib._name_message('estimator')(None, 'boosted_trees_classifier_train_in_memory')
  assert 'no kernels' in text and 'TensorFlow Decision Forests' in text


def test_replicate_model_fn_names_the_replacement():
  with pytest.raises(NotImplementedError, match='train_distribute=tf.distribute.MirroredStrategy'):
    contrib_estimator.replicate_model_fn(_model_fn)
  with pytest.raises(NotImplementedError, match='CrossShardOptimizer'):
    contrib_estimator.TowerOptimizer(_v1.train.GradientDescentOptimizer(1.0))
  assert contrib_estimator.multi_class_head(3).logits_dimension == 3
