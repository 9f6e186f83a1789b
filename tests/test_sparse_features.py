"""SparseTensor features on shards (distribute/sparse_features.py): split (PER_HOST_V1) or one
element per shard (PER_HOST_V2), a partial final evaluation/prediction batch included, they
reach each shard's model_fn as SparseTensors and give one device's results."""
import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te

_v1 = tf.compat.v1
IDS = np.random.RandomState(0).randint(-1, 10, size=(70, 3))  # -1: no id in that slot
LABELS = (np.maximum(IDS, 0).sum(1) % 2).astype(np.int64)


def _sparse_row(row):
  where = tf.where(row >= 0)
  return tf.SparseTensor(where, tf.gather_nd(row, where), [3])


def _input_fn(params, repeat=True):
  data = tf.data.Dataset.from_tensor_slices((IDS, LABELS))
  data = data.map(lambda ids, y: ({'ids': _sparse_row(ids)}, y))
  if repeat:
    return data.repeat().batch(params['batch_size'], drop_remainder=True)
  return data.batch(params['batch_size'])


def _model_fn(features, labels, mode, params):
  assert isinstance(features['ids'], tf.SparseTensor)
  column = tf.feature_column.embedding_column(
      tf.feature_column.categorical_column_with_identity('ids', 10), 4, combiner='mean',
      initializer=_v1.truncated_normal_initializer(stddev=0.5, seed=1))
  net = _v1.feature_column.input_layer(features, [column])
  weights = _v1.get_variable('w', [4, 2], initializer=_v1.glorot_uniform_initializer(seed=2))
  logits = tf.matmul(net, weights)
  if mode == te.ModeKeys.PREDICT:
    return te.TPUEstimatorSpec(mode, predictions={'logits': logits})
  loss = _v1.losses.sparse_softmax_cross_entropy(labels, logits)
  optimizer = te.CrossShardOptimizer(_v1.train.GradientDescentOptimizer(0.5))
  return te.TPUEstimatorSpec(
      mode, loss=loss, train_op=optimizer.minimize(loss, _v1.train.get_global_step()),
      eval_metrics=(lambda labels, logits: {
          'acc': _v1.metrics.accuracy(labels, tf.argmax(logits, 1))}, [labels, logits]))


@pytest.mark.parametrize('input_mode', [te.InputPipelineConfig.PER_HOST_V1,
                                        te.InputPipelineConfig.PER_HOST_V2])
def test_sparse_features_on_two_shards_give_one_devices_results(tmp_path, input_mode):
  results = []
  for name, use_tpu, shards in (('one', False, None), ('two', True, 2)):
    config = h.tpu_config(num_shards=shards, iterations_per_loop=3, tf_random_seed=3,
                          model_dir=str(tmp_path / name), per_host_input_for_training=input_mode)
    est = te.TPUEstimator(_model_fn, config=config, use_tpu=use_tpu, train_batch_size=16,
                          eval_batch_size=16, predict_batch_size=16)
    est.train(_input_fn, max_steps=6)
    evaluation = est.evaluate(lambda params: _input_fn(params, repeat=False), steps=None)
    predictions = [p['logits'] for p in est.predict(
        lambda params: _input_fn(params, repeat=False).map(lambda f, y: f))]
    results.append((evaluation, np.array(predictions)))
  (one, one_predictions), (two, two_predictions) = results
  assert two_predictions.shape == (70, 2)  # the partial final batch (6 rows) included
  np.testing.assert_allclose(two_predictions, one_predictions, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(two['loss'], one['loss'], rtol=1e-5)
  assert two['acc'] == one['acc'] and two['global_step'] == 6
