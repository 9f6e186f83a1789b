"""Keras 3 layers and models built inside model_fn (tests/differential/keras_program.py: a Dense
MLP, Conv2D + BatchNormalization + Dropout, a two-input functional model, a subclassed model
and a Sequential, none with layer names): every mode and export, one device and 2/4 logical
CPU shards, several calls per process with the same variable names, train_and_evaluate, warm
starts, and the user's own Keras state left alone."""
import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from differential import keras_program as kp

v1 = tf.compat.v1
# The names Keras 2 gave these model_fns in the original (tests/test_keras_differential.py
# checks them against it); Adam slots and the global step besides.
KERNELS = {
    'mlp': ['dense/kernel', 'dense_1/kernel'],
    'conv_bn_dropout': ['conv2d/kernel', 'batch_normalization/gamma',
                        'batch_normalization/moving_mean', 'dense/kernel'],
    'two_inputs': ['dense/kernel', 'dense_1/kernel', 'dense_2/kernel'],
    'subclassed': ['net/dense/kernel', 'net/dense_1/kernel'],
    'sequential': ['sequential/dense/kernel', 'sequential/dense_1/kernel'],
}
# One layout per model for the whole cycle (all layouts are covered by the checkpoint test).
CYCLE = [('mlp', True, 4), ('conv_bn_dropout', True, 2), ('two_inputs', False, None),
         ('subclassed', True, 2), ('sequential', False, None)]


def _estimator(model, model_dir, use_tpu=False, shards=None, **kwargs):
  return kp.make_estimator(model, str(model_dir), 'ours', use_tpu=use_tpu, shards=shards,
                           **kwargs)


def _predict(est):
  return np.stack([p['logits'] for p in est.predict(kp.predict_input_fn)])


@pytest.mark.parametrize('model,use_tpu,shards', CYCLE)
def test_train_evaluate_predict_export_and_serve(tmp_path, model, use_tpu, shards):
  """Two train calls, evaluate, predict and an export served after tf.saved_model.load, in
  one process: every call names the variables as Keras 2 did."""
  est = _estimator(model, tmp_path / 'model', use_tpu, shards)
  est.train(kp.train_input_fn, max_steps=4)
  names = est.get_variable_names()
  assert set(KERNELS[model]) <= set(names), names
  assert not [n for n in names if 'seed_generator' in n or '_1_1' in n], names
  before = est.get_variable_value(KERNELS[model][0])
  est.train(kp.train_input_fn, max_steps=8)  # restores the first call's checkpoint by name
  assert sorted(est.get_variable_names()) == sorted(names)
  assert est.get_variable_value('global_step') == 8
  assert not np.allclose(est.get_variable_value(KERNELS[model][0]), before)
  result = est.evaluate(kp.eval_input_fn)
  assert result['global_step'] == 8 and np.isfinite(result['loss'])
  assert 0 <= result['accuracy'] <= 1
  logits = _predict(est)
  assert logits.shape == (kp.PREDICT_N, kp.NUM_CLASSES)
  export_dir = est.export_saved_model(str(tmp_path / 'export'), kp.make_serving_input_fn('ours'))
  served = kp.served(export_dir)
  np.testing.assert_allclose(served['logits'], logits, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(served['classes'], logits.argmax(1))


@pytest.fixture(scope='module')
def checkpoints(tmp_path_factory):
  """Each model trained 6 steps on one device."""
  root = tmp_path_factory.mktemp('keras_checkpoints')
  for model in kp.MODELS:
    _estimator(model, root / model).train(kp.train_input_fn, max_steps=6)
  return root


@pytest.mark.parametrize('model', kp.MODELS)
def test_sharded_evaluate_and_predict_equal_one_device(checkpoints, model):
  """One checkpoint, evaluated and predicted on one device and on 2 (and 4) shards: the same
  loss (a Keras loss is the shard's mean, not divided by the shards), metrics, predictions."""
  results = {}
  layouts = ((False, None), (True, 2)) + (((True, 4),) if model in ('mlp', 'two_inputs') else ())
  for use_tpu, shards in layouts:
    est = _estimator(model, checkpoints / model, use_tpu, shards)
    results[shards] = (est.evaluate(kp.eval_input_fn), _predict(est))
  expected, expected_logits = results[None]
  for shards in [s for _, s in layouts[1:]]:
    got, logits = results[shards]
    for key in ('loss', 'accuracy', 'mean_max_prob'):
      assert got[key] == pytest.approx(expected[key], rel=1e-5, abs=1e-6), (shards, key)
    np.testing.assert_allclose(logits, expected_logits, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('model', ['mlp', 'subclassed'])
def test_sharded_training_equals_one_device(tmp_path, model):
  """Training with a Keras loss (and, subclassed, its regularization loss) on 2 shards gives
  one device's weights and loss: gradients averaged once, not divided again by Keras."""
  values, losses = {}, {}
  for use_tpu, shards in ((False, None), (True, 2)):
    est = _estimator(model, tmp_path / str(shards), use_tpu, shards, learning_rate=0.1)
    est.train(kp.train_input_fn, max_steps=4)
    values[shards] = {n: est.get_variable_value(n) for n in KERNELS[model]}
    losses[shards] = est.evaluate(kp.eval_input_fn)['loss']
  for name in KERNELS[model]:
    np.testing.assert_allclose(values[2][name], values[None][name], rtol=1e-4, atol=1e-5)
  assert losses[2] == pytest.approx(losses[None], rel=1e-4)


def test_train_and_evaluate_and_warm_start(tmp_path):
  """train_and_evaluate on 2 shards, then a warm start of a new model_dir from it: the new
  estimator starts from the trained weights (a zero learning rate keeps them)."""
  source = _estimator('sequential', tmp_path / 'source', True, 2)
  metrics, _ = te.train_and_evaluate(
      source, te.TrainSpec(kp.train_input_fn, max_steps=6),
      te.EvalSpec(kp.eval_input_fn, steps=None, throttle_secs=0))
  assert metrics['global_step'] == 6
  warm = _estimator('sequential', tmp_path / 'warm', learning_rate=0.0,
                    warm_start_from=te.WarmStartSettings(str(tmp_path / 'source')))
  warm.train(kp.train_input_fn, max_steps=1)
  for name in KERNELS['sequential']:
    np.testing.assert_allclose(warm.get_variable_value(name), source.get_variable_value(name))
  assert warm.evaluate(kp.eval_input_fn)['loss'] == pytest.approx(metrics['loss'], rel=1e-5)


def test_user_keras_state_outside_our_calls_is_untouched(tmp_path):
  """A layer the user makes after our calls is numbered as if we had never run; layers made
  before keep their names and still work eagerly."""
  mine = tf.keras.layers.Dense(2)
  number = int(mine.name.rsplit('_', 1)[1]) if '_' in mine.name else 0
  est = _estimator('mlp', tmp_path / 'model')
  est.train(kp.train_input_fn, max_steps=2)
  est.evaluate(kp.eval_input_fn)
  after = tf.keras.layers.Dense(2)
  assert after.name == 'dense_%d' % (number + 1)
  assert mine(tf.ones([1, 3])).shape == (1, 2)  # eager Keras still works
  dropout = tf.keras.layers.Dropout(0.5, seed=1)  # and its random state advances eagerly
  first, second = (dropout(tf.ones([1, 64]), training=True).numpy() for _ in range(2))
  assert not np.array_equal(first, second)


def test_dropout_mask_changes_every_step(tmp_path):
  """A Dropout layer in model_fn draws a new mask per step (Keras 3's seed state is never
  advanced by a graph): with a constant input and dropout only, the logits vary."""

  def model_fn(features, labels, mode, params):
    del labels, params
    dropped = tf.keras.layers.Dropout(0.5)(features['x'], training=True)
    return te.TPUEstimatorSpec(mode, predictions={'y': dropped})

  est = te.TPUEstimator(model_fn, config=te.RunConfig(model_dir=str(tmp_path)),
                        use_tpu=False, predict_batch_size=4)

  def input_fn(params):
    return tf.data.Dataset.from_tensors({'x': tf.ones([4, 32])}).repeat(3)

  # predict needs a checkpoint: write one with the global step only.
  with tf.Graph().as_default():
    v1.train.get_or_create_global_step()
    with v1.Session() as session:
      session.run(v1.global_variables_initializer())
      v1.train.Saver().save(session, str(tmp_path / 'model.ckpt'), global_step=0)
  rows = [p['y'] for p in est.predict(input_fn, yield_single_examples=False)]
  assert len(rows) == 3
  assert not np.array_equal(rows[0], rows[1]) and not np.array_equal(rows[1], rows[2])


@pytest.mark.parametrize('call', ['minimize', 'apply_gradients'])
def test_keras_optimizer_in_model_fn_names_the_supported_pattern(tmp_path, call):
  """A Keras 3 optimizer cannot build a graph train_op: a TypeError says what to use."""

  def model_fn(features, labels, mode, params):
    del params
    logits = tf.keras.layers.Dense(kp.NUM_CLASSES)(features['x'])
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits)
    optimizer = tf.keras.optimizers.SGD(0.1)
    if call == 'minimize':
      train_op = optimizer.minimize(loss, v1.trainable_variables())
    else:
      variables = v1.trainable_variables()
      train_op = optimizer.apply_gradients(zip(tf.gradients(loss, variables), variables))
    return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

  est = te.TPUEstimator(model_fn, config=te.RunConfig(model_dir=str(tmp_path)), use_tpu=False,
                        train_batch_size=kp.BATCH)
  with pytest.raises(TypeError, match='tf.compat.v1.train'):
    est.train(kp.train_input_fn, max_steps=1)
