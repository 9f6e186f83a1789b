"""model_fns that build everything in every mode (the EstimatorSpec docs' own pattern): a
train_op with slot variables, EMA shadow variables, batch normalization, summaries, training
hooks and `get_or_create_global_step()` built in train, evaluate, predict and export, on one
device and on 1, 2 and 4 shards.  Built and ignored outside training, as the original does;
sharded evaluation of a checkpoint equals one device's."""
import numpy as np
import pytest
import tensorflow as tf

import helpers
import tpu_estimator as te

v1 = tf.compat.v1
LAYOUTS = [(False, None), (True, 1), (True, 2), (True, 4)]
OPTIMIZERS = {
    'sgd': lambda: v1.train.GradientDescentOptimizer(0.1),
    'momentum': lambda: v1.train.MomentumOptimizer(0.1, 0.9),
    'adam': lambda: v1.train.AdamOptimizer(0.05),
    'rmsprop': lambda: v1.train.RMSPropOptimizer(0.05),
}


class _CountRuns(v1.train.SessionRunHook):
  runs = 0

  def after_run(self, run_context, run_values):
    type(self).runs += 1


def _init(shape, seed):
  return tf.constant_initializer(np.random.RandomState(seed).randn(*shape) * 0.3)


def _metric_fn(labels, logits):
  return {'accuracy': v1.metrics.accuracy(labels, tf.argmax(logits, 1))}


def _batch_norm(inputs, training, synchronization=tf.VariableSynchronization.AUTO):
  """Batch normalization as tf.compat.v1.layers built it: moving averages updated through
  the UPDATE_OPS collection (averaged over replicas in their merge call; with
  `synchronization=ON_READ`, as the layer makes them, a copy per replica)."""
  size = inputs.shape[-1]
  moving_mean = v1.get_variable('bn/moving_mean', [size], initializer=tf.zeros_initializer(),
                                trainable=False, synchronization=synchronization,
                                aggregation=tf.VariableAggregation.MEAN)
  moving_var = v1.get_variable('bn/moving_variance', [size], initializer=tf.ones_initializer(),
                               trainable=False, synchronization=synchronization,
                               aggregation=tf.VariableAggregation.MEAN)
  if training:
    mean, variance = tf.nn.moments(inputs, [0])
    for var, value in ((moving_mean, mean), (moving_var, variance)):
      v1.add_to_collection(v1.GraphKeys.UPDATE_OPS, var.assign(var * 0.9 + value * 0.1))
  else:
    mean, variance = moving_mean, moving_var
  return tf.nn.batch_normalization(inputs, mean, variance, None, None, 1e-3)


def every_mode_model_fn(features, labels, mode, params):
  """Builds train_op, EMA, summaries and hooks whatever the mode (or, with
  params['eval_ema'], evaluates the EMA averages)."""
  step = v1.train.get_or_create_global_step()
  hidden = tf.nn.relu(tf.matmul(features['x'], v1.get_variable(
      'hidden', [helpers.NUM_FEATURES, 8], initializer=_init([helpers.NUM_FEATURES, 8], 1))))
  if params.get('batch_norm', True):
    hidden = _batch_norm(hidden, training=mode == te.ModeKeys.TRAIN)
  logits = tf.matmul(hidden, v1.get_variable(
      'out', [8, helpers.NUM_CLASSES], initializer=_init([8, helpers.NUM_CLASSES], 2)))
  predictions = {'classes': tf.argmax(logits, 1), 'logits': logits}
  loss = None
  if labels is not None:
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
  else:  # predict and export have no labels: a stand-in so the train_op is still built
    loss = tf.reduce_mean(tf.square(logits))
  v1.summary.scalar('model_fn_loss', loss)
  scaffold_fn = None
  if mode == te.ModeKeys.EVAL and params.get('eval_ema'):
    # Evaluate the averages (the image models of the TPU era): shadows exist only in train.
    restore = v1.train.ExponentialMovingAverage(0.5).variables_to_restore()
    if params['eval_ema'] == 'saver_in_model_fn':
      saver = v1.train.Saver(restore)
      scaffold_fn = lambda: v1.train.Scaffold(saver=saver)
    else:  # the Saver built on the host, in scaffold_fn (the TPU models' way)
      scaffold_fn = lambda: v1.train.Scaffold(saver=v1.train.Saver(restore))
    return te.TPUEstimatorSpec(mode, loss=loss, scaffold_fn=scaffold_fn,
                               eval_metrics=(_metric_fn, [labels, logits]))
  optimizer = OPTIMIZERS[params['optimizer']]()
  if params['cross_shard']:
    optimizer = te.CrossShardOptimizer(optimizer)
  with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
    minimize = optimizer.minimize(loss, step)
  ema = v1.train.ExponentialMovingAverage(0.5)
  with tf.control_dependencies([minimize]):
    train_op = ema.apply(v1.trainable_variables())
  return te.TPUEstimatorSpec(
      mode, loss=loss, train_op=train_op, predictions=predictions,
      eval_metrics=(_metric_fn, [labels, logits]) if labels is not None else None,
      training_hooks=[_CountRuns()], scaffold_fn=scaffold_fn,
      export_outputs={'out': te.export.PredictOutput(predictions)})


def _estimator(model_dir, use_tpu, shards, optimizer, cross_shard, eval_ema=False,
               batch_norm=True):
  config = te.RunConfig(model_dir=str(model_dir), tf_random_seed=1,
                        tpu_config=te.TPUConfig(iterations_per_loop=4, num_shards=shards))
  return te.TPUEstimator(
      every_mode_model_fn, config=config, use_tpu=use_tpu, train_batch_size=16,
      eval_batch_size=16, predict_batch_size=16,
      params={'optimizer': optimizer, 'cross_shard': cross_shard, 'eval_ema': eval_ema,
              'batch_norm': batch_norm})


def _serving_input_fn():
  x = v1.placeholder(tf.float32, [None, helpers.NUM_FEATURES], name='x')
  return te.export.ServingInputReceiver({'x': x}, {'x': x})


X, Y = helpers.make_data(72)


@pytest.mark.parametrize('use_tpu,shards,optimizer,cross_shard', [
    (False, None, 'sgd', False), (True, 1, 'momentum', True), (True, 2, 'adam', True),
    (True, 4, 'rmsprop', False)])
def test_train_evaluate_predict_export_every_mode(tmp_path, use_tpu, shards, optimizer,
                                                  cross_shard):
  est = _estimator(tmp_path / 'model', use_tpu, shards, optimizer, cross_shard)
  runs = _CountRuns.runs
  est.train(helpers.dataset_input_fn(X, Y), max_steps=8)
  assert _CountRuns.runs > runs  # training_hooks run in training
  names = est.get_variable_names()
  assert 'hidden' in names and 'hidden/ExponentialMovingAverage' in names
  assert est.get_variable_value('global_step') == 8
  # The train_op (slots, EMA, summaries) is built in evaluate and predict and does not run:
  # the checkpoint is evaluated as written, twice with the same result.
  eval_input = helpers.dataset_input_fn(X, Y, repeat=False)
  first = est.evaluate(eval_input)
  again = est.evaluate(eval_input)
  assert first['global_step'] == again['global_step'] == 8
  assert first['loss'] == pytest.approx(again['loss'])
  rows = list(est.predict(lambda params: tf.data.Dataset.from_tensor_slices(
      {'x': X}).batch(params['batch_size'])))
  assert len(rows) == len(X)
  assert est.get_variable_value('global_step') == 8
  export_dir = est.export_saved_model(str(tmp_path / 'export'), _serving_input_fn)
  assert tf.io.gfile.exists(export_dir)


@pytest.fixture(scope='module')
def one_device_checkpoint(tmp_path_factory):
  model_dir = tmp_path_factory.mktemp('every_mode') / 'model'
  est = _estimator(model_dir, False, None, 'adam', False)
  est.train(helpers.dataset_input_fn(X, Y), max_steps=12)
  return model_dir


def test_sharded_evaluation_of_a_checkpoint_equals_one_device(one_device_checkpoint):
  """Slot and EMA variables built by evaluate on 2 and 4 shards are placed like the others:
  the metrics of one checkpoint agree on every layout."""
  eval_input = helpers.dataset_input_fn(X, Y, repeat=False)
  results = {}
  for use_tpu, shards in LAYOUTS:
    est = _estimator(one_device_checkpoint, use_tpu, shards, 'adam', use_tpu)
    results[shards] = est.evaluate(eval_input)
  for shards in (1, 2, 4):
    assert results[shards]['loss'] == pytest.approx(results[None]['loss'], rel=1e-4)
    assert results[shards]['accuracy'] == pytest.approx(results[None]['accuracy'], abs=1e-6)
    assert results[shards]['global_step'] == 12


def test_sharded_training_equals_one_device(tmp_path):
  """Sharded training with a model_fn that builds EMA and summaries in the replicas gives the
  weights one device gives on the same global batch (no batch norm: its batch statistics are
  per shard, as on TPU)."""
  values = {}
  for use_tpu, shards in ((False, None), (True, 2)):
    est = _estimator(tmp_path / str(shards), use_tpu, shards, 'momentum', use_tpu,
                     batch_norm=False)
    est.train(helpers.dataset_input_fn(X, Y, drop_remainder=True), max_steps=6)
    values[shards] = {name: est.get_variable_value(name)
                      for name in ('hidden', 'out', 'hidden/ExponentialMovingAverage',
                                   'hidden/Momentum')}
  for name, value in values[None].items():
    np.testing.assert_allclose(values[2][name], value, rtol=1e-4, atol=1e-5, err_msg=name)


def _ema_loss(model_dir):
  """The evaluation loss of the checkpoint's averages, computed in numpy."""
  reader = tf.train.load_checkpoint(str(model_dir))
  hidden = np.maximum(X @ reader.get_tensor('hidden/ExponentialMovingAverage'), 0)
  hidden = (hidden - reader.get_tensor('bn/moving_mean')) / np.sqrt(
      reader.get_tensor('bn/moving_variance') + 1e-3)
  logits = hidden @ reader.get_tensor('out/ExponentialMovingAverage')
  logits = logits - logits.max(1, keepdims=True)
  log_probs = logits - np.log(np.exp(logits).sum(1, keepdims=True))
  per_batch = [-log_probs[i:i + 16][np.arange(len(Y[i:i + 16])), Y[i:i + 16]].mean()
               for i in range(0, len(X), 16)]
  return float(np.mean(per_batch))


@pytest.mark.parametrize('where', ['saver_in_model_fn', 'saver_in_scaffold_fn'])
def test_evaluating_moving_averages_through_a_custom_saver(one_device_checkpoint, where):
  """An EVAL scaffold whose Saver maps the EMA shadows onto the variables restores the
  averages on every layout (sharded, model_fn runs in a loop body on mirrored variables: a
  Saver built there, or a dict of mirrored variables, used to restore the raw weights)."""
  eval_input = helpers.dataset_input_fn(X, Y, repeat=False)
  raw = _estimator(one_device_checkpoint, False, None, 'adam', False).evaluate(eval_input)
  expected = _ema_loss(one_device_checkpoint)
  assert abs(expected - raw['loss']) > 1e-3  # the averages differ from the weights
  for use_tpu, shards in LAYOUTS:
    est = _estimator(one_device_checkpoint, use_tpu, shards, 'adam', use_tpu, eval_ema=where)
    result = est.evaluate(eval_input)
    assert result['loss'] == pytest.approx(expected, rel=1e-4), (use_tpu, shards)
    assert result['global_step'] == 12


def _on_read_ema_model_fn(features, labels, mode, params):
  """tensorflow/tpu's EfficientNet and MnasNet way: batch normalization's moving statistics
  synchronized on read (a copy per replica, as tf.compat.v1.layers makes them), moving
  averages of the weights and of those statistics, and evaluation of the averages through a
  Saver built in scaffold_fn."""
  training = mode == te.ModeKeys.TRAIN
  hidden = tf.nn.relu(tf.matmul(features['x'], v1.get_variable(
      'hidden', [helpers.NUM_FEATURES, 8], initializer=_init([helpers.NUM_FEATURES, 8], 1))))
  hidden = _batch_norm(hidden, training, tf.VariableSynchronization.ON_READ)
  logits = tf.matmul(hidden, v1.get_variable(
      'out', [8, helpers.NUM_CLASSES], initializer=_init([8, helpers.NUM_CLASSES], 2)))
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits))
  ema = v1.train.ExponentialMovingAverage(0.5)
  averaged = v1.trainable_variables() + [v for v in v1.global_variables() if 'moving_' in v.name]
  if training:
    with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
      minimize = v1.train.AdamOptimizer(0.05).minimize(loss, v1.train.get_global_step())
    with tf.control_dependencies([minimize]):
      return te.TPUEstimatorSpec(mode, loss=loss, train_op=ema.apply(averaged))
  scaffold_fn = None
  if params['eval_ema'] == 'saver_in_model_fn':
    saver = v1.train.Saver(ema.variables_to_restore(averaged))
    scaffold_fn = lambda: v1.train.Scaffold(saver=saver)
  elif params['eval_ema']:
    restore = ema.variables_to_restore(averaged)
    scaffold_fn = lambda: v1.train.Scaffold(saver=v1.train.Saver(restore))
  return te.TPUEstimatorSpec(mode, loss=loss, scaffold_fn=scaffold_fn,
                             eval_metrics=(_metric_fn, [labels, logits]))


class _LoadAveragesHook(v1.train.SessionRunHook):
  """tensorflow/tpu's MobileNet and Inception v3 evaluate the averages through a hook: a
  Saver over `variables_to_restore()` built in `begin()`, restored after the session is made
  (over the moving statistics too, keyed by `var.op.name`)."""

  def __init__(self, model_dir):
    self._model_dir = model_dir
    self._saver = None

  def begin(self):
    self._saver = v1.train.Saver(v1.train.ExponentialMovingAverage(0.5).variables_to_restore(
        v1.trainable_variables() + [v for v in v1.global_variables() if 'moving_' in v.name]))

  def after_create_session(self, session, coord):
    self._saver.restore(session, v1.train.latest_checkpoint(self._model_dir))


@pytest.mark.parametrize('where', ['saver_in_model_fn', 'saver_in_scaffold_fn', 'saver_in_hook'])
def test_moving_averages_of_per_replica_batch_norm_statistics_restore_on_every_layout(tmp_path,
                                                                                     where):
  """Sharded, the Saver's dict holds variables with a copy per replica, which TensorFlow's
  Saver refused ('Not a variable': EfficientNet and MnasNet on 2 cores stopped at
  evaluation) or, built in a hook, restored into the first replica's copy alone (Inception v3
  evaluated other weights on 2 cores, silently); their averages now restore into every copy,
  as on one device."""
  in_hook = where == 'saver_in_hook'

  def estimator(use_tpu, shards, eval_ema):
    config = te.RunConfig(model_dir=str(tmp_path), tf_random_seed=1, tpu_config=te.TPUConfig(
        iterations_per_loop=4, num_shards=shards))
    return te.TPUEstimator(_on_read_ema_model_fn, config=config, use_tpu=use_tpu,
                           train_batch_size=16, eval_batch_size=16,
                           params={'eval_ema': False if in_hook else eval_ema})

  def evaluate(use_tpu, shards, eval_ema):
    hooks = [_LoadAveragesHook(str(tmp_path))] if eval_ema and in_hook else None
    return estimator(use_tpu, shards, eval_ema).evaluate(eval_input, hooks=hooks)

  estimator(False, None, False).train(helpers.dataset_input_fn(X, Y), max_steps=8)
  eval_input = helpers.dataset_input_fn(X, Y, repeat=False)
  raw = estimator(False, None, False).evaluate(eval_input)
  averages = evaluate(False, None, where)
  assert abs(averages['loss'] - raw['loss']) > 1e-3  # the averages differ from the weights
  for use_tpu, shards in LAYOUTS[1:]:
    result = evaluate(use_tpu, shards, where)
    assert result['loss'] == pytest.approx(averages['loss'], rel=1e-4), shards
    assert result['accuracy'] == pytest.approx(averages['accuracy'], abs=1e-6), shards
