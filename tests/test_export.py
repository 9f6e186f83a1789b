"""Export: SavedModels that TF2 `tf.saved_model.load` and `saved_model_cli` serve, written
atomically; warm starting."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te

v1 = tf.compat.v1


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  root = tmp_path_factory.mktemp('export')
  x, y = h.make_data(96)
  est = te.TPUEstimator(h.make_model_fn(tpu=True), config=h.tpu_config(2, model_dir=str(
      root / 'model')), train_batch_size=16, predict_batch_size=16)
  est.train(h.dataset_input_fn(x, y), steps=8)
  return est, root, x, y


def _raw_receiver():
  return te.export.build_raw_serving_input_receiver_fn({'x': tf.zeros([1, h.NUM_FEATURES])})


def test_export_loads_in_tf2_and_matches_predict(trained):
  est, root, x, y = trained
  path = est.export_saved_model(str(root / 'exports'), _raw_receiver())
  assert isinstance(path, bytes) and os.path.basename(path).isdigit()
  assert sorted(os.listdir(root / 'exports')) == [os.path.basename(path).decode()]
  loaded = tf.saved_model.load(path.decode(), tags=['serve'])
  out = loaded.signatures['serving_default'](x=tf.constant(x[:20]))
  predicted = list(est.predict(h.dataset_input_fn(x[:20], y[:20], repeat=False)))
  np.testing.assert_array_equal(out['classes'].numpy(), [p['classes'] for p in predicted])
  np.testing.assert_allclose(out['probabilities'].numpy(),
                             np.stack([p['probabilities'] for p in predicted]), rtol=1e-5)
  # TPUEstimator's default also writes the [serve, tpu] MetaGraph, as the original
  saved = tf.compat.v1.saved_model.loader.maybe_saved_model_directory(path.decode())
  assert saved
  from tensorflow.core.protobuf import saved_model_pb2
  proto = saved_model_pb2.SavedModel()
  with open(os.path.join(path.decode(), 'saved_model.pb'), 'rb') as f:
    proto.ParseFromString(f.read())
  assert sorted(sorted(m.meta_info_def.tags) for m in proto.meta_graphs) == [
      ['serve'], ['serve', 'tpu']]


def test_saved_model_cli_runs_export(trained, tmp_path):
  est, root, x, _ = trained
  path = est.export_saved_model(str(tmp_path / 'cli'), _raw_receiver()).decode()
  np.save(tmp_path / 'x.npy', x[:3])
  # TensorFlow's own command, as its `saved_model_cli` script runs it.
  result = subprocess.run(
      [sys.executable, '-m', 'tensorflow.python.tools.saved_model_cli', 'run', '--dir', path, '--tag_set', 'serve', '--signature_def', 'serving_default',
       '--inputs', 'x=%s' % (tmp_path / 'x.npy')], capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'classes' in result.stdout and 'probabilities' in result.stdout


def test_parsing_receiver_takes_serialized_examples(trained, tmp_path):
  est, _, x, _ = trained
  spec = {'x': tf.io.FixedLenFeature([h.NUM_FEATURES], tf.float32)}
  receiver = te.export.build_parsing_serving_input_receiver_fn(spec)
  path = est.export_saved_model(str(tmp_path / 'parsing'), receiver).decode()
  loaded = tf.saved_model.load(path, tags=['serve'])
  examples = [tf.train.Example(features=tf.train.Features(feature={
      'x': tf.train.Feature(float_list=tf.train.FloatList(value=row))})).SerializeToString()
              for row in x[:4]]
  out = loaded.signatures['serving_default'](examples=tf.constant(examples))
  predicted = list(est.predict(h.dataset_input_fn(x[:4], np.zeros(4, np.int64),
                                                  repeat=False)))
  np.testing.assert_array_equal(out['classes'].numpy(), [p['classes'] for p in predicted])


def _saved_tags(path):
  from tensorflow.core.protobuf import saved_model_pb2
  proto = saved_model_pb2.SavedModel()
  with open(os.path.join(path, 'saved_model.pb'), 'rb') as f:
    proto.ParseFromString(f.read())
  return [sorted(m.meta_info_def.tags) for m in proto.meta_graphs]


def test_train_and_eval_graphs_export_with_their_signatures(trained, tmp_path):
  """experimental_export_all_saved_models writes TRAIN, EVAL and serving MetaGraphs in one
  SavedModel (TFMA's EvalSavedModel is its EVAL graph): the EVAL graph's metrics and loss
  equal evaluate()'s on the same rows, and the TRAIN graph's train op trains from the
  checkpoint."""
  est, root, x, y = trained
  supervised = te.experimental.build_raw_supervised_input_receiver_fn(
      {'x': tf.zeros([1, h.NUM_FEATURES])}, tf.zeros([1], tf.int64))
  path = est.experimental_export_all_saved_models(str(tmp_path / 'all'), {
      te.ModeKeys.TRAIN: supervised, te.ModeKeys.EVAL: supervised,
      te.ModeKeys.PREDICT: _raw_receiver()}).decode()
  assert _saved_tags(path) == [['train'], ['eval'], ['serve'], ['serve', 'tpu']]
  evaluator = te.TPUEstimator(h.make_model_fn(tpu=True), config=h.tpu_config(
      2, model_dir=str(root / 'model')), train_batch_size=16, eval_batch_size=32)
  expected = evaluator.evaluate(h.dataset_input_fn(x[:32], y[:32], batch_size=32, repeat=False))
  with tf.Graph().as_default(), v1.Session() as session:
    signature = v1.saved_model.load(session, ['eval'], path).signature_def['eval']
    assert sorted(signature.inputs) == ['label', 'x']
    assert sorted(signature.outputs) == ['loss', 'metrics/accuracy/update_op',
                                         'metrics/accuracy/value',
                                         'metrics/mean_label/update_op',
                                         'metrics/mean_label/value']
    feed = {signature.inputs['x'].name: x[:32], signature.inputs['label'].name: y[:32]}
    outputs = {name: info.name for name, info in signature.outputs.items()}
    session.run([outputs['metrics/accuracy/update_op'], outputs['metrics/mean_label/update_op']],
                feed)
    loss, accuracy, mean_label = session.run(
        [outputs['loss'], outputs['metrics/accuracy/value'], outputs['metrics/mean_label/value']],
        feed)
  np.testing.assert_allclose([loss, accuracy, mean_label],
                             [expected['loss'], expected['accuracy'], expected['mean_label']],
                             rtol=1e-5)
  with tf.Graph().as_default(), v1.Session() as session:
    signature = v1.saved_model.load(session, ['train'], path).signature_def['train']
    feed = {signature.inputs['x'].name: x[:32], signature.inputs['label'].name: y[:32]}
    (train_op,) = v1.get_collection('saved_model_train_op')
    step = v1.train.get_global_step()
    assert session.run(step) == est.get_variable_value('global_step')
    before = session.run(signature.outputs['loss'].name, feed)
    session.run(train_op, feed)
    assert session.run(step) == est.get_variable_value('global_step') + 1
    assert session.run(signature.outputs['loss'].name, feed) < before
  only_eval = est.export_saved_model(str(tmp_path / 'eval'), supervised,
                                     experimental_mode=te.ModeKeys.EVAL).decode()
  assert _saved_tags(only_eval) == [['eval']]


def test_raw_receivers_do_not_take_a_layer_scope_from_the_model(tmp_path):
  """A raw receiver's placeholder for feature 'x' must not take the name 'x' from the model's
  own scope 'x': its variables would be made as 'x_1/...' and not restore."""
  x, y = h.make_data(32)

  def model_fn(features, labels, mode, params):
    with tf.name_scope('x'):  # (a Keras layer named 'x' makes its variables the same way)
      weights = tf.Variable(tf.ones([h.NUM_FEATURES, h.NUM_CLASSES]) * 0.1, name='w')
    logits = tf.matmul(features['x'], weights)
    if mode == te.ModeKeys.PREDICT:
      return te.EstimatorSpec(mode, predictions={'classes': tf.argmax(logits, 1)})
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    return te.EstimatorSpec(mode, loss=loss, train_op=v1.train.GradientDescentOptimizer(
        0.1).minimize(loss, v1.train.get_global_step()))

  est = te.Estimator(model_fn, model_dir=str(tmp_path / 'm'))
  est.train(h.dataset_input_fn(x, y, batch_size=8), steps=2)
  features = {'x': tf.zeros([1, h.NUM_FEATURES])}
  path = est.experimental_export_all_saved_models(str(tmp_path / 'e'), {
      te.ModeKeys.EVAL: te.experimental.build_raw_supervised_input_receiver_fn(
          features, tf.zeros([1], tf.int64)),
      te.ModeKeys.PREDICT: te.export.build_raw_serving_input_receiver_fn(features)}).decode()
  assert _saved_tags(path) == [['eval'], ['serve']]


def test_tf1_export_savedmodel_takes_strip_default_attrs(trained, tmp_path):
  """TF 1.x's `export_savedmodel` had `strip_default_attrs` (default False) where
  `export_saved_model` has `experimental_mode`: TF 1.x programs pass it (by name or sixth)."""
  est = trained[0]
  from tensorflow.core.protobuf import saved_model_pb2

  def matmul_attrs(path):
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(path, b'saved_model.pb'), 'rb') as f:
      proto.ParseFromString(f.read())
    return {key for node in proto.meta_graphs[0].graph_def.node if node.op == 'MatMul'
            for key in node.attr}

  kept = est.export_savedmodel(str(tmp_path / 'kept'), _raw_receiver())
  stripped = est.export_savedmodel(str(tmp_path / 'stripped'), _raw_receiver(), None, False,
                                   None, True)
  assert 'transpose_a' in matmul_attrs(kept)  # False, its default: kept unless stripped
  assert 'transpose_a' not in matmul_attrs(stripped)
  assert 'transpose_a' not in matmul_attrs(est.export_saved_model(str(tmp_path / 'v2'),
                                                                  _raw_receiver()))


def test_supervised_receiver_names_and_refusals():
  with tf.Graph().as_default():
    receiver = te.experimental.build_raw_supervised_input_receiver_fn(
        tf.zeros([2, 3]), tf.zeros([2], tf.int32), default_batch_size=4)()
    assert sorted(receiver.receiver_tensors) == ['input', 'label']
    assert receiver.features.shape.as_list() == [4, 3]
    assert receiver.labels.dtype == tf.int32
  with pytest.raises(ValueError, match=r"overlapping_keys=\['a'\]"):
    te.experimental.build_raw_supervised_input_receiver_fn({'a': tf.zeros([1])},
                                                           {'a': tf.zeros([1])})
  with pytest.raises(ValueError, match='labels'):
    te.experimental.build_raw_supervised_input_receiver_fn({'a': tf.zeros([1])}, None)


def test_export_outputs_become_signatures(tmp_path):
  x, y = h.make_data(32)

  def model_fn(features, labels, mode, params):
    logits = h._logits(features)
    if mode != te.ModeKeys.PREDICT:
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                           logits=logits))
      return te.EstimatorSpec(mode, loss=loss, train_op=v1.train.GradientDescentOptimizer(
          0.1).minimize(loss, v1.train.get_global_step()))
    scores = tf.nn.softmax(logits)
    outputs = {
        'serving_default': te.export.PredictOutput({'scores': scores}),
        'classify': te.export.ClassificationOutput(scores=scores),
        'regress': te.export.RegressionOutput(value=tf.reduce_max(scores, 1)),
    }
    return te.EstimatorSpec(mode, predictions={'scores': scores}, export_outputs=outputs)

  est = te.Estimator(model_fn, model_dir=str(tmp_path / 'm'))
  est.train(h.dataset_input_fn(x, y, batch_size=8), steps=2)
  assets = tmp_path / 'vocab.txt'
  assets.write_text('a\nb\n')
  path = est.export_saved_model(str(tmp_path / 'e'), _raw_receiver(),
                                assets_extra={'extra/vocab.txt': str(assets)}).decode()
  loaded = tf.saved_model.load(path)
  # Classify/Regress signatures need serialized tf.Examples as input (TensorFlow's rule), so
  # with a raw receiver only the Predict one is servable...
  assert set(loaded.signatures) == {'serving_default'}
  spec = {'x': tf.io.FixedLenFeature([h.NUM_FEATURES], tf.float32)}
  path = est.export_saved_model(
      str(tmp_path / 'e2'), te.export.build_parsing_serving_input_receiver_fn(spec)).decode()
  # ... and with a parsing receiver all three are.
  assert {'serving_default', 'classify', 'regress'} <= set(tf.saved_model.load(path).signatures)
  path = est.export_saved_model(str(tmp_path / 'e3'), _raw_receiver(),
                                assets_extra={'extra/vocab.txt': str(assets)}).decode()
  assert open(os.path.join(path, 'assets.extra', 'extra', 'vocab.txt')).read() == 'a\nb\n'


def test_single_tensor_predictions_export(tmp_path):
  """A model_fn predicting one Tensor (not a dict) exports, its serving output named
  'output' as the original's default PredictOutput named it (was: a Tensor's truth value was
  asked)."""
  x, y = h.make_data(16)

  def model_fn(features, labels, mode):
    logits = h._logits(features)
    if mode == te.ModeKeys.PREDICT:
      return te.EstimatorSpec(mode, predictions=tf.nn.softmax(logits))
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    return te.EstimatorSpec(mode, loss=loss, train_op=v1.assign_add(
        v1.train.get_global_step(), 1))

  est = te.Estimator(model_fn, model_dir=str(tmp_path / 'm'))
  est.train(h.dataset_input_fn(x, y, batch_size=8), steps=1)
  path = est.export_saved_model(str(tmp_path / 'e'), _raw_receiver()).decode()
  out = tf.saved_model.load(path).signatures['serving_default'](x=tf.constant(x[:2]))
  assert list(out) == ['output'] and out['output'].shape == (2, h.NUM_CLASSES)


def test_metrics_returned_in_every_mode_do_not_stop_predict_or_export(tmp_path):
  """A model_fn that returns its eval_metric_ops whatever the mode (the original used them in
  EVAL only and ignored them elsewhere) trains, predicts and exports."""
  x, y = h.make_data(16)

  def model_fn(features, labels, mode):
    logits = h._logits(features)
    classes = tf.argmax(logits, axis=1)
    metrics = {'mean_class': v1.metrics.mean(tf.cast(classes, tf.float32))}
    if mode == te.ModeKeys.PREDICT:
      return te.EstimatorSpec(mode, predictions={'classes': classes}, eval_metric_ops=metrics)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    return te.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics, train_op=v1.assign_add(
        v1.train.get_global_step(), 1))

  est = te.Estimator(model_fn, model_dir=str(tmp_path / 'm'))
  est.train(h.dataset_input_fn(x, y, batch_size=8), steps=1)
  assert 'mean_class' in est.evaluate(h.dataset_input_fn(x, y, batch_size=8), steps=1)
  predict_input = lambda: tf.data.Dataset.from_tensor_slices({'x': x}).batch(8)
  assert len(list(est.predict(predict_input))) == 16
  path = est.export_saved_model(str(tmp_path / 'e'), _raw_receiver()).decode()
  out = tf.saved_model.load(path).signatures['serving_default'](x=tf.constant(x[:2]))
  assert list(out) == ['classes'] and out['classes'].shape == (2,)


@pytest.mark.parametrize('call,error,match', [
    (lambda est, d: est.export_saved_model(d, None), TypeError, 'serving_input_receiver_fn'),
    (lambda est, d: est.export_saved_model(d, lambda: 'x'), TypeError, 'ServingInputReceiver'),
    (lambda est, d: est.export_saved_model(d, _raw_receiver(), experimental_mode='serve'),
     ValueError, 'experimental_mode'),
    (lambda est, d: est.export_saved_model(d, lambda: 'x', experimental_mode='eval'),
     TypeError, 'SupervisedInputReceiver'),
    (lambda est, d: est.export_saved_model(d, _raw_receiver(), assets_extra=['x']), TypeError,
     'assets_extra'),
])
def test_export_errors_leave_no_directory(trained, tmp_path, call, error, match):
  est = trained[0]
  with pytest.raises(error, match=match):
    call(est, str(tmp_path / 'bad'))
  assert not (tmp_path / 'bad').exists() or not os.listdir(tmp_path / 'bad')


def test_export_without_checkpoint_or_targets(tmp_path):
  est = te.Estimator(h.make_model_fn(), model_dir=str(tmp_path / 'empty'))
  with pytest.raises(ValueError, match='no checkpoint'):
    est.export_saved_model(str(tmp_path / 'e'), _raw_receiver())
  with pytest.raises(ValueError, match='export_to_cpu'):
    te.TPUEstimator(h.make_model_fn(tpu=True), config=h.tpu_config(1, model_dir=str(tmp_path)),
                    train_batch_size=8, export_to_cpu=False, export_to_tpu=False
                    ).export_saved_model(str(tmp_path / 'e'), _raw_receiver())


def test_warm_start_from_checkpoint_and_saved_model(trained, tmp_path):
  est, root, x, y = trained
  source_kernel = est.get_variable_value('dense/kernel')
  export_path = est.export_saved_model(str(tmp_path / 'sm'), _raw_receiver()).decode()
  for name, source in (('ckpt', str(root / 'model')), ('savedmodel', export_path),
                       ('settings', te.WarmStartSettings(str(root / 'model'),
                                                         vars_to_warm_start='dense/kernel'))):
    warm = te.Estimator(h.make_model_fn(learning_rate=0.0), model_dir=str(tmp_path / name),
                        params={'batch_size': 16}, warm_start_from=source)
    warm.train(h.dataset_input_fn(x, y), steps=1)
    np.testing.assert_allclose(warm.get_variable_value('dense/kernel'), source_kernel)
    assert warm.get_variable_value('global_step') == 1  # the step is not warm-started
  with pytest.raises(TypeError, match='warm_start_from'):
    te.Estimator(h.make_model_fn(), warm_start_from=3)
