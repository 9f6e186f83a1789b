"""Inputs that used to give silently wrong results, or fail far from their cause (issue 16):
each is now either read as the original read it or refused with an error naming `input_fn` or
`predictions`, what was received and the fix.

- evaluate/predict sharded over 4 replicas with `input_fn` batches larger than
  eval_batch_size/predict_batch_size: the rows past the batch size were dropped (96 rows in
  batches of 32, batch size 8: 24 predictions, evaluation of 24 rows);
- sharded predictions that are not batch-major: a `[-1]`-reshaped tensor gave wrong rows, a
  scalar failed with TensorFlow's "Attempting to slice scalar input";
- `input_fn` returning `[features, labels]` (the original Estimator's reading) or a dataset of
  3-tuples (failed inside model_fn, naming nothing).
"""
import shutil

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te

X, Y = h.make_data(96)
SHARDS, BATCH = 4, 8


@pytest.fixture(scope='module')
def trained_dir(tmp_path_factory):
  path = str(tmp_path_factory.mktemp('bad_inputs') / 'model')
  _tpu(path).train(h.dataset_input_fn(X, Y), max_steps=2)
  return path


@pytest.fixture
def model_dir(trained_dir, tmp_path):
  path = str(tmp_path / 'model')
  shutil.copytree(trained_dir, path)
  return path


def _tpu(model_dir, model_fn=None, use_tpu=True):
  return te.TPUEstimator(model_fn or h.make_model_fn(tpu=True),
                         config=h.tpu_config(num_shards=SHARDS, model_dir=model_dir),
                         use_tpu=use_tpu, train_batch_size=16, eval_batch_size=BATCH,
                         predict_batch_size=BATCH)


def _batches_of(size, drop_remainder=False):
  return h.dataset_input_fn(X, Y, batch_size=size, repeat=False, drop_remainder=drop_remainder)


def _message(error):
  return str(error).replace('\\"', '"').replace("\\'", "'")


# ---------------------------------------------------------------------------------------------
# Batches larger than eval_batch_size / predict_batch_size

@pytest.mark.parametrize('call', ['predict', 'evaluate'])
def test_sharded_batches_larger_than_the_batch_size_are_refused_not_cut(model_dir, call):
  """Unknown batch size (no drop_remainder): refused when the first batch arrives."""
  est = _tpu(model_dir)
  with pytest.raises(ValueError) as info:
    if call == 'predict':
      list(est.predict(_batches_of(32)))
    else:
      est.evaluate(_batches_of(32))
  message = _message(info.value)
  assert 'input_fn' in message and 'params["batch_size"]' in message
  assert 'batch_rows=32, params_batch_size=8' in message
  assert isinstance(info.value.__cause__, tf.errors.InvalidArgumentError)  # the failed check


@pytest.mark.parametrize('call', ['predict', 'evaluate'])
def test_sharded_static_batches_larger_than_the_batch_size_fail_before_running(model_dir, call):
  """Known batch size (drop_remainder=True): a ValueError while the graph is built."""
  est = _tpu(model_dir)
  with pytest.raises(ValueError, match=r'input_fn.*batch_rows=32, params_batch_size=8'):
    if call == 'predict':
      next(est.predict(_batches_of(32, drop_remainder=True)))
    else:
      est.evaluate(_batches_of(32, drop_remainder=True))


def test_sharded_batches_of_the_batch_size_and_a_short_last_one_keep_every_row(model_dir):
  """What stays accepted: batches of params['batch_size'], and a short final one (5 rows)."""
  est = _tpu(model_dir)
  n = 93
  got = list(est.predict(h.dataset_input_fn(X[:n], Y[:n], repeat=False)))
  assert len(got) == n
  one_device = list(_tpu(model_dir, use_tpu=False).predict(
      h.dataset_input_fn(X[:n], Y[:n], repeat=False)))
  np.testing.assert_allclose([p['probabilities'] for p in got],
                             [p['probabilities'] for p in one_device], atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Sharded predictions must be batch-major

def _predicting(transform):
  def model_fn(features, labels, mode, params):
    del labels, params
    logits = h._logits(features)
    return te.TPUEstimatorSpec(mode, predictions={'logits': logits, 'bad': transform(logits)})
  return model_fn


def test_sharded_flattened_prediction_is_refused_not_misread(model_dir):
  est = _tpu(model_dir, _predicting(lambda t: tf.reshape(t, [-1])))
  with pytest.raises(ValueError) as info:
    list(est.predict(_batches_of(BATCH)))
  message = _message(info.value)
  assert 'Batch length of predictions' in message and "predictions['bad']" in message
  assert 'has 6 rows but the shard was fed 2 rows' in message  # 2 rows x 3 classes, flattened
  assert 'batch as first dimension' in message


def test_sharded_scalar_prediction_is_refused_like_one_device(model_dir):
  est = _tpu(model_dir, _predicting(tf.reduce_sum))
  with pytest.raises(ValueError, match=r"Batch length of predictions.*predictions\['bad'\].*"
                                       r"scalar.*batch as first dimension"):
    next(est.predict(_batches_of(BATCH)))
  with pytest.raises(ValueError, match='Batch length of predictions'):  # one device: the same
    next(_tpu(model_dir, _predicting(tf.reduce_sum), use_tpu=False).predict(_batches_of(BATCH)))


# ---------------------------------------------------------------------------------------------
# What input_fn returns

def _first_batch_tensors(params):
  return {'x': tf.constant(X[:params['batch_size']])}, tf.constant(Y[:params['batch_size']])


@pytest.mark.parametrize('use_tpu', [True, False])
def test_input_fn_list_of_features_and_labels_is_read_as_a_pair(model_dir, use_tpu):
  """The original Estimator read `[features, labels]` as (features, labels); labels used to be
  dropped and the list handed to model_fn as features."""
  est = _tpu(model_dir, use_tpu=use_tpu)
  as_list = est.evaluate(lambda params: list(_first_batch_tensors(params)), steps=1)
  as_tuple = est.evaluate(_first_batch_tensors, steps=1)
  for key in ('loss', 'accuracy'):
    assert as_list[key] == pytest.approx(as_tuple[key], abs=1e-6)


@pytest.mark.parametrize('kind', ['dataset', 'tensors'])
def test_input_fn_of_three_items_is_refused_naming_input_fn(model_dir, kind):
  def input_fn(params):
    items = ({'x': X}, Y, Y)
    if kind == 'tensors':
      return tuple(tf.nest.map_structure(tf.constant, items))
    return tf.data.Dataset.from_tensor_slices(items).batch(params['batch_size']).repeat()
  with pytest.raises(ValueError, match=r'`input_fn` must return features or \(features, '
                                       r'labels\).*3 items.*input_fn_returned='):
    _tpu(model_dir).train(input_fn, steps=1)
