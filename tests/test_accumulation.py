"""TPUConfig(gradient_accumulation_steps=N): N micro-batches per optimizer update make the
update one step on an N-times larger batch would, on one device and sharded."""
import glob

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from helpers import (NUM_CLASSES, NUM_FEATURES, XlaRunSpy, dataset_input_fn, make_data,
                     make_model_fn)

v1 = tf.compat.v1
MICRO = 8  # global micro-batch


def _estimator(model_dir, model_fn, batch, accumulate=1, shards=1, ipl=2, xla=None):
  config = te.RunConfig(model_dir=str(model_dir),
                        tpu_config=te.TPUConfig(iterations_per_loop=ipl, num_shards=shards,
                                                gradient_accumulation_steps=accumulate,
                                                xla=xla))
  return te.TPUEstimator(model_fn, config=config, use_tpu=True, train_batch_size=batch)


def _weights(est):
  return est.get_variable_value('dense/kernel'), est.get_variable_value('dense/bias')


@pytest.mark.parametrize('optimizer,shards', [('sgd', 1), ('adam', 1), ('adam', 2)])
def test_equals_one_step_on_the_larger_batch(tmp_path, optimizer, shards):
  x, y = make_data(96)
  model_fn = make_model_fn(tpu=True, optimizer=optimizer, cross_shard=shards > 1)
  big = _estimator(tmp_path / 'big', model_fn, MICRO * 4, shards=shards)
  big.train(dataset_input_fn(x, y), max_steps=3)
  seen = []
  acc = _estimator(tmp_path / 'acc', model_fn, MICRO, accumulate=4, shards=shards)

  def record(params):
    seen.append(params['batch_size'])
    return dataset_input_fn(x, y)(params)

  acc.train(record, max_steps=3)  # 3 updates: 2 in the first loop, 1 in a clipped one
  assert seen == [MICRO]  # input_fn batches are micro-batches
  assert acc.get_variable_value('global_step') == 3
  for got, want in zip(_weights(acc), _weights(big)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  # A plain run on micro-batches differs: the test can tell.
  plain = _estimator(tmp_path / 'plain', model_fn, MICRO, shards=shards)
  plain.train(dataset_input_fn(x, y), max_steps=3)
  assert not np.allclose(_weights(plain)[0], _weights(big)[0], atol=1e-4)


def test_model_fn_sees_the_micro_batch_and_the_loss_is_the_mean(tmp_path):
  x, y = make_data(96)
  seen = {}
  inner = make_model_fn(tpu=True)

  def model_fn(features, labels, mode, params):
    seen['batch_size'] = params['batch_size']
    seen['rows'] = features['x'].shape[0]
    return inner(features, labels, mode, params)

  est = _estimator(tmp_path, model_fn, MICRO, accumulate=3, shards=2, ipl=1)
  est.train(dataset_input_fn(x, y, drop_remainder=True), max_steps=1)
  assert seen == {'batch_size': MICRO // 2, 'rows': MICRO // 2}
  # The first update's reported loss is the mean over its 3 micro-batches (24 rows) at the
  # initial weights: the evaluation loss of those rows before training.
  kernel0 = np.linspace(-0.5, 0.5, NUM_FEATURES * NUM_CLASSES).reshape(NUM_FEATURES,
                                                                      NUM_CLASSES)
  logits = x[:24] @ kernel0
  logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
  want = -logp[np.arange(24), y[:24]].mean()
  events = tf.compat.v1.train.summary_iterator
  losses = [v.simple_value for path in glob.glob(str(tmp_path / 'events.*'))
            for e in events(path) for v in e.summary.value if v.tag == 'loss']
  assert losses and np.isclose(losses[0], want, rtol=1e-5)


def test_resume_between_calls_equals_one_call_and_saves_no_accumulators(tmp_path):
  x, y = make_data(96)
  model_fn = make_model_fn(tpu=True, optimizer='adam', cross_shard=True)
  once = _estimator(tmp_path / 'once', model_fn, MICRO, accumulate=3, shards=2, ipl=3)
  once.train(dataset_input_fn(x, y), max_steps=4)
  split = _estimator(tmp_path / 'split', model_fn, MICRO, accumulate=3, shards=2, ipl=3)
  # The second call starts from the checkpoint at step 1 and reads the data from its start
  # again, so feed it the micro-batches the one-call run saw next (from row 3 * MICRO).
  split.train(dataset_input_fn(x, y), max_steps=1)
  split.train(dataset_input_fn(np.roll(x, -3 * MICRO, 0), np.roll(y, -3 * MICRO, 0)),
              max_steps=4)
  assert split.get_variable_value('global_step') == 4
  for got, want in zip(_weights(split), _weights(once)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  names = [name for name, _ in tf.train.list_variables(str(tmp_path / 'split'))]
  assert 'dense/kernel/Adam' in names
  assert not [name for name in names if 'accumulator' in name]


def test_ends_with_the_input_after_whole_updates_only(tmp_path):
  x, y = make_data(40)  # 5 micro-batches: 2 updates of 2, the fifth batch is dropped
  est = _estimator(tmp_path, make_model_fn(tpu=True), MICRO, accumulate=2, ipl=10)
  est.train(dataset_input_fn(x, y, repeat=False))
  assert est.get_variable_value('global_step') == 2


def test_compiled_loop_accumulates_as_the_uncompiled_one(tmp_path):
  """One replica, the whole loop compiled: each step's micro-batches come from the group read
  before the loop; the updates, and where the input ends, are the uncompiled loop's."""
  x, y = make_data(104)  # 13 micro-batches: 3 updates of 4, the 13th is dropped
  model_fn = make_model_fn(tpu=True, optimizer='adam')
  results = {}
  for xla in (False, True):
    est = _estimator(tmp_path / str(xla), model_fn, MICRO, accumulate=4, xla=xla)
    spy = XlaRunSpy()
    est.train(dataset_input_fn(x, y, drop_remainder=True, repeat=False), hooks=[spy])
    results[xla] = (_weights(est), est.get_variable_value('global_step'), spy)
  assert results[True][1] == results[False][1] == 3
  assert results[True][2].whole_loop_runs == results[True][2].compiled_runs > 0
  assert results[False][2].compiled_runs == 0
  for got, want in zip(results[True][0], results[False][0]):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('value,error', [(0, ValueError), (-2, ValueError), (2.0, TypeError),
                                         (True, TypeError)])
def test_bad_steps_are_refused(value, error):
  with pytest.raises(error, match='gradient_accumulation_steps.*Received'):
    te.TPUConfig(gradient_accumulation_steps=value)


def test_default_changes_nothing():
  assert te.TPUConfig().gradient_accumulation_steps == 1
  assert te.TPUConfig(gradient_accumulation_steps=4)._replace(
      gradient_accumulation_steps=2).gradient_accumulation_steps == 2


def test_use_tpu_false_is_refused(tmp_path):
  x, y = make_data(32)
  config = te.RunConfig(model_dir=str(tmp_path),
                        tpu_config=te.TPUConfig(gradient_accumulation_steps=2))
  est = te.TPUEstimator(make_model_fn(tpu=True), config=config, use_tpu=False,
                        train_batch_size=MICRO)
  with pytest.raises(ValueError, match='gradient_accumulation_steps.*use_tpu=True'):
    est.train(dataset_input_fn(x, y), max_steps=1)


def test_host_call_is_refused(tmp_path):
  x, y = make_data(32)
  est = _estimator(tmp_path, make_model_fn(tpu=True, host_call=True), MICRO, accumulate=2)
  with pytest.raises(ValueError, match='host_call.*gradient_accumulation_steps'):
    est.train(dataset_input_fn(x, y), max_steps=1)


def test_a_model_fn_without_a_v1_optimizer_is_refused(tmp_path):
  x, y = make_data(32)

  def model_fn(features, labels, mode, params):
    del labels, params
    kernel = v1.get_variable('w', [NUM_FEATURES], initializer=tf.zeros_initializer())
    loss = tf.reduce_mean(tf.square(features['x'] - kernel))
    train_op = tf.group(kernel.assign_sub(0.1 * tf.gradients(loss, kernel)[0]),
                        v1.assign_add(v1.train.get_global_step(), 1))
    return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

  est = _estimator(tmp_path, model_fn, MICRO, accumulate=2)
  with pytest.raises(ValueError, match='no tf.compat.v1.train.Optimizer update'):
    est.train(dataset_input_fn(x, y), max_steps=1)


def test_keras_layers_sharded_equal_the_larger_batch(tmp_path):
  x, y = make_data(64)

  def model_fn(features, labels, mode, params):
    del params
    layer = tf.keras.layers.Dense(NUM_CLASSES, kernel_initializer='ones')
    logits = layer(features['x'])
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    opt = te.CrossShardOptimizer(v1.train.MomentumOptimizer(0.1, 0.9))
    return te.TPUEstimatorSpec(mode, loss=loss,
                               train_op=opt.minimize(loss, v1.train.get_global_step()))

  big = _estimator(tmp_path / 'big', model_fn, MICRO * 2, shards=2)
  big.train(dataset_input_fn(x, y), max_steps=2)
  acc = _estimator(tmp_path / 'acc', model_fn, MICRO, accumulate=2, shards=2)
  acc.train(dataset_input_fn(x, y), max_steps=2)
  for name in ('dense/kernel', 'dense/bias', 'dense/kernel/Momentum'):
    np.testing.assert_allclose(acc.get_variable_value(name), big.get_variable_value(name),
                               rtol=1e-5, atol=1e-6)
