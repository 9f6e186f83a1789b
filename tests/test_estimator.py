"""The Estimator core: train/evaluate/predict semantics, checkpoints, hooks, errors."""
import argparse
import functools
import glob
import os

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te

v1 = tf.compat.v1


@pytest.fixture
def data():
  return h.make_data(96)


def _est(model_dir, **kwargs):
  return te.Estimator(h.make_model_fn(), model_dir=str(model_dir), params={'batch_size': 16},
                      **kwargs)




def test_steps_are_incremental_and_max_steps_absolute(tmp_path, data):
  est = _est(tmp_path)
  input_fn = h.dataset_input_fn(*data)
  est.train(input_fn, steps=5)
  est.train(input_fn, steps=5)
  assert est.get_variable_value('global_step') == 10
  est.train(input_fn, max_steps=12)
  assert est.get_variable_value('global_step') == 12
  before = h.snapshot(str(tmp_path))
  est.train(input_fn, max_steps=12)  # already reached: nothing runs, nothing written
  assert h.snapshot(str(tmp_path)) == before


def test_float_step_counts_run_whole_steps_as_the_original(tmp_path, data):
  """tensorflow-estimator took float step counts and ran whole steps until the count was
  reached: steps=2.5 trains 3, evaluate(steps=1.5) reads 2 batches; the specs keep the
  value given."""
  x, y = data
  est = _est(tmp_path)
  est.train(h.dataset_input_fn(x, y), steps=2.5)
  assert est.get_variable_value('global_step') == 3
  est.train(h.dataset_input_fn(x, y), max_steps=np.float32(5.0))
  assert est.get_variable_value('global_step') == 5
  result = est.evaluate(h.dataset_input_fn(x, y), steps=1.5)
  np.testing.assert_allclose(result['mean_label'], y[:32].mean(), rtol=1e-6)
  assert te.TrainSpec(lambda: None, max_steps=10.5).max_steps == 10.5
  assert te.EvalSpec(lambda: None, steps=2.0).steps == 2.0


def test_trains_until_end_of_input_without_steps(tmp_path, data):
  est = _est(tmp_path)
  est.train(h.dataset_input_fn(*data, repeat=False))  # 96 / 16 = 6 batches
  assert est.get_variable_value('global_step') == 6


@pytest.mark.parametrize('kwargs,error,match', [
    ({'steps': 1, 'max_steps': 2}, ValueError, 'Can not provide both steps and max_steps'),
    ({'steps': 0}, ValueError, 'steps > 0.*steps=0'),
    ({'steps': -3}, ValueError, 'steps=-3'),
    ({'max_steps': 0}, ValueError, 'max_steps > 0.*max_steps=0'),
    ({'steps': '3'}, TypeError, "steps='3'"),
    ({'steps': True}, TypeError, 'steps=True'),
    ({'max_steps': float('nan')}, ValueError, 'max_steps=nan'),
    ({'steps': 1, 'hooks': ['not a hook']}, TypeError, 'SessionRunHook'),
    ({'steps': 1, 'saving_listeners': [object()]}, TypeError, 'CheckpointSaverListener'),
])
def test_train_argument_errors_leave_model_dir_intact(tmp_path, data, kwargs, error, match):
  est = _est(tmp_path)
  est.train(h.dataset_input_fn(*data), steps=1)
  before = h.snapshot(str(tmp_path))
  with pytest.raises(error, match=match):
    est.train(h.dataset_input_fn(*data), **kwargs)
  assert h.snapshot(str(tmp_path)) == before


def test_evaluate_returns_metrics_loss_and_global_step(tmp_path, data):
  x, y = data
  est = _est(tmp_path)
  est.train(h.dataset_input_fn(x, y), steps=4)
  result = est.evaluate(h.dataset_input_fn(x[:40], y[:40], repeat=False))
  # the original's order: metric names sorted (loss among them), then global_step
  assert list(result) == ['accuracy', 'loss', 'mean_label', 'global_step']
  assert result['global_step'] == 4
  # loss is the mean over batches (16, 16, 8) of each batch's mean loss
  kernel, bias = est.get_variable_value('dense/kernel'), est.get_variable_value('dense/bias')
  logits = x[:40] @ kernel + bias
  logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
  per_example = -logp[np.arange(40), y[:40]]
  batch_means = [per_example[i:i + 16].mean() for i in (0, 16, 32)]
  np.testing.assert_allclose(result['loss'], np.mean(batch_means), rtol=1e-5)
  np.testing.assert_allclose(result['accuracy'], np.mean(logits.argmax(1) == y[:40]))
  np.testing.assert_allclose(result['mean_label'], y[:40].mean(), rtol=1e-6)


def test_keras_metrics_and_add_metrics(tmp_path, data):
  """Keras Metric objects as eval_metric_ops values, and tf.estimator.add_metrics, as the
  original: the value is result(), updated by what model_fn/metric_fn did; the variables are
  local, reset by each evaluation (the second call does not accumulate the first's)."""
  tf_keras = pytest.importorskip('tf_keras')
  x, y = data
  est = _est(tmp_path)
  est.train(h.dataset_input_fn(x, y), steps=1)

  def metric_fn(labels, predictions, config):
    assert isinstance(config, te.EstimatorRunConfig)
    keras3 = tf.keras.metrics.Mean(name='k3')
    keras3.update_state(tf.cast(labels, tf.float32))
    legacy = tf_keras.metrics.Sum(name='k2')
    legacy.update_state(tf.ones_like(predictions['classes'], tf.float32))
    return {'k3_label': keras3, 'k2_rows': legacy, 'accuracy': (tf.constant(-1.0), tf.no_op())}

  extended = te.add_metrics(est, metric_fn)
  assert extended.model_dir == est.model_dir
  for _ in range(2):
    result = extended.evaluate(h.dataset_input_fn(x[:40], y[:40], repeat=False))
    assert list(result) == ['accuracy', 'k2_rows', 'k3_label', 'loss', 'mean_label',
                            'global_step']
    np.testing.assert_allclose(result['k3_label'], y[:40].mean(), rtol=1e-6)
    assert result['k2_rows'] == 40 and result['accuracy'] == -1.0
  assert set(extended.get_variable_names()) == set(est.get_variable_names())
  with pytest.raises(ValueError, match=r"metric_fn has arguments.*\['mode'\]"):
    te.add_metrics(est, lambda labels, mode: {})


def test_evaluate_steps_and_named_eval_dir(tmp_path, data):
  est = _est(tmp_path)
  est.train(h.dataset_input_fn(*data), steps=2)
  x, y = data
  one = est.evaluate(h.dataset_input_fn(x, y), steps=1, name='first')
  np.testing.assert_allclose(one['mean_label'], y[:16].mean(), rtol=1e-6)
  assert glob.glob(str(tmp_path / 'eval_first' / 'events.out.tfevents.*'))
  # where a program reads them back (the original's Estimator.eval_dir)
  assert est.eval_dir('first') == str(tmp_path / 'eval_first')
  assert est.eval_dir() == str(tmp_path / 'eval')
  assert 'mean_label' in te.experimental.read_eval_metrics(est.eval_dir('first'))[2]


def test_evaluate_without_checkpoint_raises_and_writes_nothing(tmp_path, data):
  est = _est(tmp_path / 'empty')
  with pytest.raises(ValueError, match='no checkpoint'):
    est.evaluate(h.dataset_input_fn(*data, repeat=False))
  assert not os.path.exists(tmp_path / 'empty' / 'eval')
  with pytest.raises(ValueError, match='checkpoint_path'):
    est.evaluate(h.dataset_input_fn(*data), checkpoint_path=str(tmp_path / 'nope' / 'ckpt-1'))


def test_evaluate_from_explicit_checkpoint(tmp_path, data):
  est = _est(tmp_path, config=te.EstimatorRunConfig(save_checkpoints_steps=2))
  est.train(h.dataset_input_fn(*data), steps=4)
  result = est.evaluate(h.dataset_input_fn(*data, repeat=False),
                        checkpoint_path=str(tmp_path / 'model.ckpt-2'))
  assert result['global_step'] == 2


def test_predict_rows_batches_and_keys(tmp_path, data):
  x, y = data
  est = _est(tmp_path)
  est.train(h.dataset_input_fn(x, y), steps=3)
  rows = list(est.predict(h.dataset_input_fn(x[:40], y[:40], repeat=False)))
  assert len(rows) == 40 and set(rows[0]) == {'classes', 'probabilities'}
  kernel, bias = est.get_variable_value('dense/kernel'), est.get_variable_value('dense/bias')
  np.testing.assert_array_equal([r['classes'] for r in rows], (x[:40] @ kernel + bias).argmax(1))
  only = list(est.predict(h.dataset_input_fn(x[:40], y[:40], repeat=False),
                          predict_keys=['classes']))
  assert set(only[0]) == {'classes'}
  batches = list(est.predict(h.dataset_input_fn(x[:40], y[:40], repeat=False),
                             yield_single_examples=False))
  assert [len(b['classes']) for b in batches] == [16, 16, 8]
  with pytest.raises(ValueError, match='predict_keys'):
    next(est.predict(h.dataset_input_fn(x, y, repeat=False), predict_keys=['nope']))


def test_predict_features_only_dataset_and_tensor_predictions(tmp_path, data):
  x, _ = data

  def model_fn(features, mode):
    return te.EstimatorSpec(mode, predictions=h._logits(features))

  est = te.Estimator(model_fn, model_dir=str(tmp_path))
  out = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices({'x': x}).batch(10)))
  assert len(out) == 96 and out[0].shape == (h.NUM_CLASSES,)


def test_arguments_the_original_took(tmp_path, data):
  """params of any type (an argparse.Namespace, as HParams were), predict_keys as any
  collection (empty: all keys), a model_fn partial binding an argument by position, and
  TPUEstimator flags given as 1/0."""
  x, y = data
  inner = h.make_model_fn()

  def model_fn(features, labels, mode, params):
    return inner(features, labels, mode, {})

  def input_fn(params):
    return h.dataset_input_fn(x, y, repeat=False)({'batch_size': params.batch_size})

  est = te.Estimator(model_fn, model_dir=str(tmp_path), params=argparse.Namespace(batch_size=16))
  est.train(input_fn, steps=1)
  assert set(next(est.predict(input_fn, predict_keys=[]))) == {'classes', 'probabilities'}
  assert set(next(est.predict(input_fn, predict_keys={'classes'}))) == {'classes'}
  bound = functools.partial(lambda scale, features, labels, mode: inner(
      features, labels, mode, {'scale': scale}), 2.0)
  te.Estimator(bound, model_dir=str(tmp_path / 'partial')).train(
      h.dataset_input_fn(x, y, batch_size=16), steps=1)
  tpu = te.TPUEstimator(h.make_model_fn(tpu=True), config=h.tpu_config(1, model_dir=str(
      tmp_path / 'tpu')), train_batch_size=16, use_tpu=0, export_to_tpu=np.bool_(False))
  assert tpu._use_tpu is False  # pylint: disable=protected-access
  # None is false, as the original read it (object detection's model_lib passes it)
  tpu = te.TPUEstimator(h.make_model_fn(tpu=True), config=h.tpu_config(1, model_dir=str(
      tmp_path / 'tpu')), train_batch_size=16, use_tpu=True, export_to_tpu=None)
  assert tpu._use_tpu is True and tpu._layout.export_to_tpu is False  # pylint: disable=protected-access
  with pytest.raises(TypeError, match="use_tpu='False'"):
    te.TPUEstimator(h.make_model_fn(tpu=True), config=h.tpu_config(1, model_dir=str(tmp_path)),
                    train_batch_size=16, use_tpu='False')


def test_model_fn_calls_as_the_original(tmp_path, data):
  """model_fn gets labels=None in PREDICT, so one without a labels argument predicts from a
  labelled input_fn; a spec built for another mode (a model_fn with no `mode` argument
  returning a TRAIN spec) serves the call's mode."""
  x, y = data
  inner = h.make_model_fn()

  def always_train(features, labels, params):
    return inner(features, labels, te.ModeKeys.TRAIN, params)

  est = te.Estimator(always_train, model_dir=str(tmp_path / 'train_spec'),
                     params={'batch_size': 16})
  est.train(h.dataset_input_fn(x, y), steps=2)
  result = est.evaluate(h.dataset_input_fn(x, y), steps=1)
  assert result['global_step'] == 2 and 'accuracy' in result

  def no_labels(features, mode, params):
    return te.EstimatorSpec(mode, predictions=h._logits(features))

  predictor = te.Estimator(no_labels, model_dir=str(tmp_path / 'no_labels'),
                           params={'batch_size': 16})
  assert next(predictor.predict(h.dataset_input_fn(x, y, repeat=False))).shape == (
      h.NUM_CLASSES,)


def test_input_fn_variants(tmp_path, data):
  x, y = data
  seen = {}

  def tuple_input_fn(mode, config, params, input_context):
    seen.update(mode=mode, config=config, params=params, context=input_context)
    ds = tf.data.Dataset.from_tensor_slices(({'x': x}, y)).repeat().batch(16)
    return v1.data.make_one_shot_iterator(ds).get_next()  # (features, labels) tensors

  est = _est(tmp_path)
  est.train(tuple_input_fn, steps=2)
  assert est.get_variable_value('global_step') == 2
  assert seen['mode'] == te.ModeKeys.TRAIN
  assert seen['params'] == {'batch_size': 16}
  assert seen['config'].model_dir == str(tmp_path)
  with pytest.raises(TypeError, match='input_fn'):
    est.train(lambda: 'not data', steps=1)


def test_model_fn_with_fewer_arguments_and_keras_layers(tmp_path, data):
  x, y = data

  def model_fn(features, labels, mode):
    logits = tf.keras.layers.Dense(h.NUM_CLASSES, name='dense')(features['x'])
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    train_op = v1.train.AdamOptimizer(0.01).minimize(loss, v1.train.get_global_step())
    return te.EstimatorSpec(mode, loss=loss, train_op=train_op,
                            predictions={'logits': logits})

  est = te.Estimator(model_fn, model_dir=str(tmp_path))
  est.train(h.dataset_input_fn(x, y, batch_size=16), steps=3)
  names = est.get_variable_names()
  assert 'dense/kernel' in names and 'global_step' in names
  assert est.evaluate(h.dataset_input_fn(x, y, batch_size=16, repeat=False))['global_step'] == 3


def test_checkpoints_layout_and_retention(tmp_path, data):
  config = te.EstimatorRunConfig(save_checkpoints_steps=2, keep_checkpoint_max=2)
  est = _est(tmp_path, config=config)
  est.train(h.dataset_input_fn(*data), steps=8)
  assert est.latest_checkpoint() == str(tmp_path / 'model.ckpt-8')
  kept = sorted(os.path.basename(p)[:-len('.index')] for p in glob.glob(str(tmp_path / '*.index')))
  assert kept == ['model.ckpt-6', 'model.ckpt-8']
  assert os.path.exists(tmp_path / 'graph.pbtxt')
  assert est.get_variable_names() == ['dense/bias', 'dense/kernel', 'global_step']


def test_nan_loss_stops_training_and_never_becomes_latest(tmp_path, data):
  x, y = data

  def model_fn(features, labels, mode, params):
    spec = h.make_model_fn()(features, labels, mode, params)
    step = v1.train.get_global_step()
    loss = tf.where(step >= 3, np.nan, spec.loss)
    with tf.control_dependencies([spec.train_op]):
      loss = tf.identity(loss)
    return spec._replace(loss=loss)

  est = te.Estimator(model_fn, model_dir=str(tmp_path), params={'batch_size': 16},
                     config=te.EstimatorRunConfig(save_checkpoints_steps=1))
  with pytest.raises(te.NanLossDuringTrainingError):
    est.train(h.dataset_input_fn(x, y), steps=10)
  latest = est.latest_checkpoint()
  assert latest and int(latest.rsplit('-', 1)[1]) <= 3
  assert np.all(np.isfinite(tf.train.load_variable(latest, 'dense/kernel')))


def test_hooks_listeners_and_default_summaries(tmp_path, data):
  calls = []

  class Hook(v1.train.SessionRunHook):
    def begin(self):
      self.step = v1.train.get_global_step()

    def before_run(self, run_context):
      return v1.train.SessionRunArgs(self.step)

    def after_run(self, run_context, run_values):
      calls.append(int(run_values.results))

  class Listener(v1.train.CheckpointSaverListener):
    def after_save(self, session, global_step_value):
      calls.append(('saved', global_step_value))

  est = _est(tmp_path, config=te.EstimatorRunConfig(save_summary_steps=1,
                                                    log_step_count_steps=1))
  est.train(h.dataset_input_fn(*data), steps=3, hooks=[Hook()], saving_listeners=[Listener()])
  steps = [c for c in calls if not isinstance(c, tuple)]
  assert len(steps) == 3 and steps == sorted(steps)  # one call per step, read with the step
  assert ('saved', 3) in calls
  tags = set()
  for path in glob.glob(str(tmp_path / 'events.out.tfevents.*')):
    for event in v1.train.summary_iterator(path):
      tags.update(v.tag for v in event.summary.value)
  assert {'loss', 'global_step/sec'} <= tags


def test_tpu_estimator_global_step_is_a_resource_variable_off_the_tpu(tmp_path):
  """The original TPUEstimator made its global step a resource variable, also with
  use_tpu=False where resource variables are off (TF 1.x programs under
  disable_v2_behavior()), and a learning rate read from it in the step that increments it
  (BERT's and UDA's `tf.group(apply, global_step.assign_add(1))`) got the step before the
  increment: lr 0, 1, ... 5 over 6 steps move w by -15 (a reference variable's read came
  after the increment, unordered: -21 to -20). The Estimator's stays as the scope says."""
  def model_fn(features, labels, mode, params):
    del labels, params
    step = v1.train.get_or_create_global_step()
    kinds.append(step.op.type)
    w = v1.get_variable('w', [], initializer=v1.zeros_initializer())
    loss = tf.reduce_mean(features['x'][:, 0]) * 0.0 + w
    optimizer = v1.train.GradientDescentOptimizer(tf.cast(step, tf.float32))
    train_op = tf.group(optimizer.apply_gradients([(tf.constant(1.0), w)]),
                        step.assign(step + 1))
    return te.EstimatorSpec(mode, loss=loss, train_op=train_op)

  kinds = []
  x, y = h.make_data(16)
  v1.disable_resource_variables()
  try:
    est = te.TPUEstimator(model_fn, config=h.tpu_config(1, 1, model_dir=str(tmp_path / 'tpu')),
                          use_tpu=False, train_batch_size=4)
    est.train(h.dataset_input_fn(x, y), max_steps=6)
    te.Estimator(model_fn, model_dir=str(tmp_path / 'est'), params={'batch_size': 4}).train(
        h.dataset_input_fn(x, y), steps=1)
  finally:
    v1.enable_resource_variables()
  assert kinds == ['VarHandleOp', 'VariableV2']
  assert est.get_variable_value('w') == -15.0


def test_image_metrics_written_as_image_summaries(tmp_path, data, caplog):
  """An eval metric whose value is a serialized Summary (object detection's side-by-side
  detection images) is written as its values, tagged `<key>/<i>`, as the original wrote it (not
  as a string tensor TensorBoard cannot show), and kept out of the results' log line."""
  def model_fn(features, labels, mode, params):
    spec = h.make_model_fn()(features, labels, mode, params)
    if mode != te.ModeKeys.EVAL:
      return spec
    metrics = dict(spec.eval_metric_ops, detections=(
        v1.summary.image('detections', tf.zeros([1, 4, 4, 3], tf.uint8), collections=[]),
        tf.no_op()))
    return spec._replace(eval_metric_ops=metrics)

  est = te.Estimator(model_fn, model_dir=str(tmp_path), params={'batch_size': 16})
  est.train(h.dataset_input_fn(*data), steps=1)
  with caplog.at_level('INFO', logger='tensorflow'):
    results = est.evaluate(h.dataset_input_fn(*data, repeat=False))
  assert isinstance(results['detections'], bytes)
  saved = [r.getMessage() for r in caplog.records if 'Saving dict' in r.getMessage()]
  assert saved and 'detections' not in saved[0] and 'loss = ' in saved[0]
  values = {}
  for path in glob.glob(str(tmp_path / 'eval' / 'events.out.tfevents.*')):
    for event in v1.train.summary_iterator(path):
      values.update((v.tag, v) for v in event.summary.value)
  assert values['detections/0'].image.width == 4 and 'detections' not in values


def test_model_fn_must_return_spec_and_loss_metric_reserved(tmp_path, data):
  est = te.Estimator(lambda features, labels, mode: 'nope', model_dir=str(tmp_path))
  with pytest.raises(TypeError, match='EstimatorSpec'):
    est.train(h.dataset_input_fn(*data, batch_size=16), steps=1)

  def model_fn(features, labels, mode, params):
    spec = h.make_model_fn()(features, labels, mode, params)
    if mode == te.ModeKeys.EVAL:
      return spec._replace(eval_metric_ops={'loss': v1.metrics.mean(spec.loss)})
    return spec

  est = te.Estimator(model_fn, model_dir=str(tmp_path / 'b'), params={'batch_size': 16})
  est.train(h.dataset_input_fn(*data), steps=1)
  with pytest.raises(ValueError, match='"loss" is not allowed'):
    est.evaluate(h.dataset_input_fn(*data, repeat=False))


def test_tf_random_seed_makes_runs_repeatable(tmp_path, data):
  def model_fn(features, labels, mode):
    kernel = v1.get_variable('k', [h.NUM_FEATURES, h.NUM_CLASSES])  # random initialiser
    logits = tf.matmul(features['x'], kernel)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    return te.EstimatorSpec(mode, loss=loss, train_op=v1.train.GradientDescentOptimizer(
        0.1).minimize(loss, v1.train.get_global_step()))

  values = []
  for name in ('a', 'b'):
    est = te.Estimator(model_fn, model_dir=str(tmp_path / name),
                       config=te.EstimatorRunConfig(tf_random_seed=7))
    est.train(h.dataset_input_fn(*data, batch_size=16), steps=2)
    values.append(est.get_variable_value('k'))
  np.testing.assert_array_equal(values[0], values[1])
