"""tf.contrib.metrics: (value, update_op) pairs accumulated over batches, checked against
numpy / scikit-learn on the whole data, and usable as a TPUEstimator metric_fn sharded."""
import numpy as np
import pytest
import tensorflow as tf
from sklearn.metrics import roc_auc_score

import helpers as h
import tpu_estimator as te
from tpu_estimator.compat.contrib import metrics

v1 = tf.compat.v1


def _stream(metric, batches):
  """Runs `metric(*placeholders)`'s update over `batches` (tuples of arrays); returns the
  final value and the last update_op's value."""
  with tf.Graph().as_default():
    holders = [v1.placeholder(tf.as_dtype(a.dtype), [None] + list(a.shape[1:]))
               for a in batches[0]]
    value, update = metric(*holders)
    with v1.Session() as session:
      session.run(v1.local_variables_initializer())
      for batch in batches:
        last = session.run(update, dict(zip(holders, batch)))
      return session.run(value), last


def _split(*arrays, parts=3):
  return list(zip(*[np.array_split(a, parts) for a in arrays]))


def test_pearson_correlation_and_covariance_match_numpy():
  rng = np.random.RandomState(0)
  p = rng.randn(50).astype(np.float32)
  l = (0.7 * p + 0.5 * rng.randn(50)).astype(np.float32)
  r, last = _stream(metrics.streaming_pearson_correlation, _split(p, l))
  assert r == pytest.approx(np.corrcoef(p, l)[0, 1], rel=1e-4)
  assert last == pytest.approx(r, rel=1e-5)
  cov, _ = _stream(metrics.streaming_covariance, _split(p, l))
  assert cov == pytest.approx(np.cov(p, l)[0, 1], rel=1e-4)  # unbiased (n - 1)


def test_weighted_covariance_is_comoment_over_weight_sum_minus_one():
  rng = np.random.RandomState(1)
  p, l = rng.randn(2, 30).astype(np.float32)
  w = rng.randint(0, 3, 30).astype(np.float32)
  cov, _ = _stream(metrics.streaming_covariance, [(p, l, w)])
  mean_p, mean_l = np.average(p, weights=w), np.average(l, weights=w)
  expected = np.sum(w * (p - mean_p) * (l - mean_l)) / (w.sum() - 1)
  assert cov == pytest.approx(expected, rel=1e-4)
  one, _ = _stream(metrics.streaming_covariance, [(p[:1], l[:1])])
  assert np.isnan(one)  # undefined until more than one example


def test_streaming_auc_matches_sklearn_within_bucketing():
  rng = np.random.RandomState(2)
  labels = rng.randint(0, 2, 400).astype(np.int64)
  scores = np.clip(labels * 0.3 + rng.rand(400) * 0.7, 0, 1).astype(np.float32)
  auc, _ = _stream(lambda s, y: metrics.streaming_auc(s, y), _split(scores, labels))
  assert auc == pytest.approx(roc_auc_score(labels, scores), abs=5e-3)  # 200 thresholds


def test_f1_score_is_the_best_f1_over_thresholds():
  rng = np.random.RandomState(3)
  labels = rng.randint(0, 2, 200).astype(np.int64)
  scores = np.clip(labels * 0.4 + rng.rand(200) * 0.6, 0, 1).astype(np.float32)
  f1, _ = _stream(metrics.f1_score, _split(labels, scores))
  best = 0.0
  for threshold in [(i + 1) / 199.0 for i in range(198)]:
    predicted = scores > threshold
    tp = np.sum(predicted & (labels == 1))
    fp = np.sum(predicted & (labels == 0))
    fn = np.sum(~predicted & (labels == 1))
    best = max(best, 2 * tp / (2 * tp + fp + fn))
  assert f1 == pytest.approx(best, abs=1e-5)


def test_streaming_concat_keeps_every_batch_in_order():
  values = np.arange(14, dtype=np.float32).reshape(7, 2)
  out, _ = _stream(metrics.streaming_concat, _split(values))
  np.testing.assert_array_equal(out, values)
  capped, _ = _stream(lambda v: metrics.streaming_concat(v, max_size=4), _split(values))
  np.testing.assert_array_equal(capped, values[:4])
  with tf.Graph().as_default(), pytest.raises(ValueError, match='static'):
    metrics.streaming_concat(v1.placeholder(tf.float32, [None, None]))


def test_predictions_first_wrappers():
  p = np.array([1, 0, 1, 1], np.int64)
  l = np.array([1, 1, 1, 0], np.int64)
  assert _stream(metrics.streaming_accuracy, [(p, l)])[0] == pytest.approx(0.5)
  assert _stream(metrics.streaming_precision, [(p, l)])[0] == pytest.approx(2 / 3)
  assert _stream(metrics.streaming_recall, [(p, l)])[0] == pytest.approx(2 / 3)
  x = np.array([1.0, 2.0, 6.0], np.float32)
  assert _stream(metrics.streaming_mean, _split(x))[0] == pytest.approx(3.0)
  mse = _stream(metrics.streaming_mean_squared_error, [(x, np.zeros(3, np.float32))])[0]
  assert mse == pytest.approx(41 / 3)


@pytest.mark.parametrize('shards', [1, 2])
def test_contrib_metrics_in_a_sharded_metric_fn_see_the_whole_eval_set(tmp_path, shards):
  x, y = h.make_data(48)
  base = h.make_model_fn(tpu=True)

  def model_fn(features, labels, mode, params):
    spec = base(features, labels, mode, params)
    if mode != te.ModeKeys.EVAL:
      return spec

    def metric_fn(labels, feature0):
      return {'concat': metrics.streaming_concat(feature0),
              'pearson': metrics.streaming_pearson_correlation(
                  feature0, tf.cast(labels, tf.float32))}
    return te.TPUEstimatorSpec(mode, loss=spec.loss,
                               eval_metrics=(metric_fn, [labels, features['x'][:, 0]]))
  est = te.TPUEstimator(model_fn, use_tpu=True, config=h.tpu_config(shards, 2,
                                                                    model_dir=str(tmp_path)),
                        train_batch_size=16, eval_batch_size=16)
  est.train(h.dataset_input_fn(x, y), steps=1)
  result = est.evaluate(h.dataset_input_fn(x, y, repeat=False), steps=None)
  assert result['pearson'] == pytest.approx(np.corrcoef(x[:, 0], y)[0, 1], rel=1e-4)
  np.testing.assert_array_equal(result['concat'], x[:, 0])  # every row once, in order
