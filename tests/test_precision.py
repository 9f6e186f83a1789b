"""TPUConfig(precision=...): low-precision math, float32 variables and checkpoints, dynamic
loss scaling for float16."""
import math

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from helpers import NUM_CLASSES, NUM_FEATURES, XlaRunSpy, dataset_input_fn, make_data
from tpu_estimator.distribute import xla as xla_lib
from tpu_estimator.updates import precision

v1 = tf.compat.v1


def _model_fn(seen, keras=False, optimizer=lambda: v1.train.AdamOptimizer(0.05)):
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
      opt = te.CrossShardOptimizer(optimizer())
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


class _OwnUpdate(v1.train.GradientDescentOptimizer):
  """Applies its gradients itself (as BERT's AdamWeightDecayOptimizer does)."""

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    return tf.group(*[v.assign_sub(0.05 * g) for g, v in grads_and_vars],
                    global_step.assign_add(1))


class _ThroughBase(v1.train.AdamOptimizer):
  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    return super().apply_gradients(grads_and_vars, global_step=global_step, name=name)


@pytest.mark.parametrize('shards', [1, 2])
def test_float16_refuses_an_own_update_that_would_apply_overflowed_steps(tmp_path, shards):
  x, y = make_data(96)
  own = _estimator(tmp_path / 'own', _model_fn({}, optimizer=lambda: _OwnUpdate(0.05)),
                   'mixed_float16', shards=shards)
  with pytest.raises(ValueError, match='_OwnUpdate.*mixed_bfloat16'):
    own.train(dataset_input_fn(x, y), max_steps=2)
  assert tf.train.latest_checkpoint(str(tmp_path / 'own')) is None
  # An own apply_gradients that ends in the base class's is scaled and checked as usual.
  base = _estimator(tmp_path / 'base', _model_fn({}, optimizer=lambda: _ThroughBase(0.05)),
                    'mixed_float16', shards=shards)
  base.train(dataset_input_fn(x, y), max_steps=2)
  assert tf.train.load_checkpoint(str(tmp_path / 'base')).get_tensor('global_step') == 2


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
def test_compiled_loop_trains_as_the_uncompiled_one(tmp_path, precision, caplog, monkeypatch):
  """The whole loop compiled by XLA (xla=True; the default for long or repeated calls) keeps
  the low-precision math, float32 variables and, for float16, the skipped overflowing steps
  and the lowered scale.  Where this TensorFlow's XLA CPU backend keeps float16 products in
  float32 (TF 2.16), the default runs the loop uncompiled, with those same results, and
  xla=True compiles it with a warning saying the results differ."""
  monkeypatch.setattr(xla_lib, 'AUTO_MIN_STEPS', 3)  # the default compiles these 12 steps
  x, y = make_data(96)
  x = x * (2000.0 if precision == 'mixed_float16' else 1.0)
  rounded = precision == 'mixed_bfloat16' or xla_lib.float16_products_rounded()
  readers = {}
  for xla in (False, True, None):
    seen = {}
    config = te.RunConfig(model_dir=str(tmp_path / str(xla)), tpu_config=te.TPUConfig(
        iterations_per_loop=3, precision=precision, xla=xla))
    est = te.TPUEstimator(_model_fn(seen), config=config, use_tpu=True, train_batch_size=8)
    spy = XlaRunSpy()
    caplog.clear()
    est.train(dataset_input_fn(x, y, drop_remainder=True, repeat=False), hooks=[spy],
              steps=12)  # (a call of known length: the default may compile it)
    compiled = xla is True or (xla is None and rounded)
    assert spy.whole_loop_runs == (4 if compiled else 0)  # 12 batches in loops of 3
    assert ('gives other results than the uncompiled one' in caplog.text) == (
        xla is True and not rounded)
    assert seen['dtype'] == (tf.bfloat16 if precision == 'mixed_bfloat16' else tf.float16)
    readers[xla] = tf.train.load_checkpoint(str(tmp_path / str(xla)))
  names = readers[False].get_variable_to_dtype_map()
  assert names['dense/kernel'] == tf.float32
  for xla in (True, None) if rounded else (None,):
    assert readers[xla].get_variable_to_dtype_map() == names
    for name in names:
      np.testing.assert_allclose(readers[xla].get_tensor(name), readers[False].get_tensor(name),
                                 rtol=2e-2, atol=1e-3, err_msg='%s, xla=%s' % (name, xla))
  if precision == 'mixed_float16':
    assert readers[False].get_tensor('global_step') < 12  # some steps overflowed: skipped
    if not rounded:  # as the warning says: compiled, no product overflowed, no step skipped
      assert readers[True].get_tensor('global_step') == 12


def test_evaluation_the_default_compiles_gives_float16s_own_results(tmp_path, caplog,
                                                                     monkeypatch):
  """An evaluation the default compiles (steps= at least AUTO_MIN_BATCHES) of a float16 model
  whose products pass float16's range: the loss is not finite, as uncompiled, also where
  this TensorFlow's XLA CPU backend keeps float16 products in float32 (the loop then runs
  uncompiled); xla=True there compiles it with a warning, and its loss is finite."""
  monkeypatch.setattr(xla_lib, 'AUTO_MIN_BATCHES', 2)
  x, y = make_data(64)
  x = np.abs(x) * 1000.0 + 30000.0  # each value a float16, every sum of them past its range

  def model_fn(features, labels, mode, params):
    del params
    kernel = v1.get_variable('dense/kernel', [NUM_FEATURES, NUM_CLASSES],
                             initializer=tf.ones_initializer())
    logits = tf.cast(tf.matmul(features['x'], kernel), tf.float32)  # past 65504: inf
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    if mode == te.ModeKeys.TRAIN:  # a checkpoint of the initial weights
      return te.TPUEstimatorSpec(mode, loss=tf.zeros([]), train_op=v1.assign_add(
          v1.train.get_global_step(), 1))
    return te.TPUEstimatorSpec(mode, loss=loss)

  rounded = xla_lib.float16_products_rounded()
  losses = {}
  for xla in (False, None, True):
    config = te.RunConfig(model_dir=str(tmp_path), tpu_config=te.TPUConfig(
        iterations_per_loop=2, precision='mixed_float16', xla=xla))
    est = te.TPUEstimator(model_fn, config=config, use_tpu=True, train_batch_size=8,
                          eval_batch_size=8)
    if xla is False:
      est.train(dataset_input_fn(x, y), steps=1)
    spy = XlaRunSpy()
    caplog.clear()
    losses[xla] = est.evaluate(dataset_input_fn(x, y, repeat=False), steps=4,
                               hooks=[spy])['loss']
    compiled = xla is True or (xla is None and rounded)
    assert (spy.whole_loop_runs > 0) == compiled
    assert ('gives other results than the uncompiled one' in caplog.text) == (
        xla is True and not rounded)
  assert not np.isfinite(losses[False])
  assert not np.isfinite(losses[None])
  assert np.isfinite(losses[True]) != rounded
