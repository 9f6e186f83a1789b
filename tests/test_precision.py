"""TPUConfig(precision=...): low-precision math, float32 variables and checkpoints, dynamic
loss scaling for float16."""
import math

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from helpers import NUM_CLASSES, NUM_FEATURES, XlaRunSpy, dataset_input_fn, make_data
from tpu_estimator.updates import precision

v1 = tf.compat.v1


def _model_fn(seen, keras=False):
  def model_fn(features, labels, mode, params):
    del params
    if keras:
      logits = tf.keras.layers.Dense(NUM_CLASSES, kernel_initializer='zeros')(features['x'])
    else:
      kernel = v1.get_variable('dense/kernel', [NUM_FEATURES, NUM_CLASSES],
                               initializer=tf.zeros_initializer())
      bias = v1.get_variable('dense/bias', [NUM_CLASSES], initializer=tf.zeros_initializer())
      logits = tf.matmul(features['x'], kernel) + bias
    seen['dtype'] = logits.dtype
    logits = tf.cast(logits, tf.float32)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    train_op = None
    if mode == te.ModeKeys.TRAIN:
      opt = te.CrossShardOptimizer(v1.train.AdamOptimizer(0.05))
      train_op = opt.minimize(loss, v1.train.get_global_step())
    return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)
  return model_fn


def _estimator(model_dir, model_fn, precision=None, shards=1, ipl=4, batch=16):
  config = te.RunConfig(model_dir=str(model_dir),
                        tpu_config=te.TPUConfig(iterations_per_loop=ipl, num_shards=shards,
                                                precision=precision))
  return te.TPUEstimator(model_fn, config=config, use_tpu=True, train_batch_size=batch,
                         eval_batch_size=batch)


@pytest.mark.parametrize('keras,shards', [(False, 1), (False, 2), (True, 2)])
def test_bfloat16_trains_close_to_float32_with_float32_checkpoints(tmp_path, keras, shards):
  x, y = make_data(96)
  results, names = {}, {}
  for precision in (None, 'mixed_bfloat16'):
    seen = {}
    est = _estimator(tmp_path / str(precision), _model_fn(seen, keras), precision, shards)
    est.train(dataset_input_fn(x, y), max_steps=20)
    assert seen['dtype'] == (tf.bfloat16 if precision else tf.float32)
    names[precision] = dict(tf.train.list_variables(str(tmp_path / str(precision))))
    # The low-precision checkpoint loads into the float32 model.
    plain = _estimator(tmp_path / str(precision), _model_fn({}, keras), None, shards)
    results[precision] = plain.evaluate(dataset_input_fn(x, y, repeat=False))['loss']
    reader = tf.train.load_checkpoint(str(tmp_path / str(precision)))
    kernel = 'dense/kernel'
    assert reader.get_variable_to_dtype_map()[kernel] == tf.float32
  assert names['mixed_bfloat16'] == names[None]
  start = math.log(NUM_CLASSES)  # the loss at zero weights
  assert results[None] < start - 0.2
  assert abs(results['mixed_bfloat16'] - results[None]) < 0.05 * start


def test_float16_skips_non_finite_steps_and_lowers_the_scale(tmp_path):
  x, y = make_data(96)
  x = x * 2000.0  # scaled gradients overflow float16 until the scale has come down
  seen = {}
  est = _estimator(tmp_path, _model_fn(seen), 'mixed_float16', ipl=1, batch=8)
  est.train(dataset_input_fn(x, y, repeat=False))  # 12 batches
  assert seen['dtype'] == tf.float16
  reader = tf.train.load_checkpoint(str(tmp_path))
  scale = reader.get_tensor('current_loss_scale')
  step = reader.get_tensor('global_step')
  skipped = int(round(math.log2(2.0 ** 15 / scale)))
  assert skipped >= 1  # some steps overflowed and were skipped, halving the scale each time
  assert step == 12 - skipped  # the global step counts applied updates only
  assert reader.get_variable_to_dtype_map()['dense/kernel'] == tf.float32
  assert np.all(np.isfinite(reader.get_tensor('dense/kernel')))
  assert np.any(reader.get_tensor('dense/kernel') != 0)


def test_float16_two_shards_train(tmp_path):
  x, y = make_data(96)
  est = _estimator(tmp_path, _model_fn({}), 'mixed_float16', shards=2)
  est.train(dataset_input_fn(x, y), max_steps=8)
  reader = tf.train.load_checkpoint(str(tmp_path))
  assert reader.get_tensor('global_step') == 8
  assert reader.get_tensor('current_loss_scale') == 2.0 ** 15  # nothing overflowed


@pytest.mark.parametrize('kwargs', [{'precision': 'float16'},
                                    {'precision': 'mixed_float16',
                                     'gradient_accumulation_steps': 2}])
def test_bad_precision_is_refused(kwargs):
  with pytest.raises(ValueError, match='precision.*Received'):
    te.TPUConfig(**kwargs)


def test_bfloat16_with_accumulation_matches_the_larger_batch(tmp_path):
  x, y = make_data(64)
  weights = []
  for name, batch, accumulate in (('big', 16, 1), ('acc', 8, 2)):
    config = te.RunConfig(model_dir=str(tmp_path / name), tpu_config=te.TPUConfig(
        iterations_per_loop=2, precision='mixed_bfloat16',
        gradient_accumulation_steps=accumulate))
    est = te.TPUEstimator(_model_fn({}), config=config, use_tpu=True, train_batch_size=batch)
    est.train(dataset_input_fn(x, y), max_steps=2)
    weights.append(est.get_variable_value('dense/kernel'))
  assert np.any(weights[0] != 0)
  np.testing.assert_allclose(weights[1], weights[0], atol=2e-2)



def _float16_update(config, gradient):
  """The variable after one `apply_gradients` of `gradient` built under float16's scope."""
  with tf.Graph().as_default():
    with precision.scope(config):
      variable = v1.get_variable('v', [], initializer=tf.zeros_initializer(), trainable=False)
      update = v1.train.GradientDescentOptimizer(1.0).apply_gradients(
          [(tf.constant(gradient), variable)])
    with v1.Session() as session:
      session.run(v1.global_variables_initializer())
      session.run(update)
      return session.run(variable)


def test_float16_loss_scaling_still_applies_after_accumulation_ran_in_the_process(tmp_path):
  """Accumulation and loss scaling both stand between optimizers and their updates: a
  float16 update built after an accumulating call ran (two estimators in one program) still
  goes through the loss-scale optimizer, which skips a non-finite gradient."""
  config = te.RunConfig(tpu_config=te.TPUConfig(precision='mixed_float16'))
  assert _float16_update(config, float('inf')) == 0.0
  x, y = make_data(32)
  accumulating = te.RunConfig(model_dir=str(tmp_path), tpu_config=te.TPUConfig(
      iterations_per_loop=1, gradient_accumulation_steps=2))
  te.TPUEstimator(_model_fn({}), config=accumulating, use_tpu=True,
                  train_batch_size=8).train(dataset_input_fn(x, y), max_steps=1)
  assert _float16_update(config, float('inf')) == 0.0
  assert _float16_update(config, 2.0) == -2.0  # a finite gradient is applied, unscaled


@pytest.mark.parametrize('precision', ['mixed_bfloat16', 'mixed_float16'])
def test_compiled_loop_trains_as_the_uncompiled_one(tmp_path, precision):
  """The whole loop compiled by XLA (xla=True; the default for long or repeated calls) keeps
  the low-precision math, float32 variables and, for float16, the skipped overflowing steps
  and the lowered scale."""
  x, y = make_data(96)
  x = x * (2000.0 if precision == 'mixed_float16' else 1.0)
  readers = {}
  for xla in (False, True):
    seen = {}
    config = te.RunConfig(model_dir=str(tmp_path / str(xla)), tpu_config=te.TPUConfig(
        iterations_per_loop=3, precision=precision, xla=xla))
    est = te.TPUEstimator(_model_fn(seen), config=config, use_tpu=True, train_batch_size=8)
    spy = XlaRunSpy()
    est.train(dataset_input_fn(x, y, drop_remainder=True, repeat=False), hooks=[spy])
    assert spy.whole_loop_runs == (4 if xla else 0)  # 12 batches in loops of 3
    assert seen['dtype'] == (tf.bfloat16 if precision == 'mixed_bfloat16' else tf.float16)
    readers[xla] = tf.train.load_checkpoint(str(tmp_path / str(xla)))
  names = readers[False].get_variable_to_dtype_map()
  assert readers[True].get_variable_to_dtype_map() == names
  assert names['dense/kernel'] == tf.float32
  for name in names:
    np.testing.assert_allclose(readers[True].get_tensor(name), readers[False].get_tensor(name),
                               rtol=2e-2, atol=1e-3, err_msg=name)
  if precision == 'mixed_float16':
    assert readers[True].get_tensor('global_step') == readers[False].get_tensor('global_step')
    assert readers[False].get_tensor('global_step') < 12  # some steps overflowed: skipped
