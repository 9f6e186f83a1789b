"""The canned estimators and heads (tpu_estimator.canned): losses and predictions of each head
against numpy, the estimators' metric/prediction keys, variable names, optimizers by name and
instance, weights, label vocabularies, warm starts, exports and argument errors.  The
comparison with the original is tests/test_canned_differential.py."""
import os

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator
from tpu_estimator import canned
from tpu_estimator.canned import MetricKeys
from tpu_estimator.canned import PredictionKeys

fc = tf.feature_column
_v1 = tf.compat.v1
CONFIG = tpu_estimator.EstimatorRunConfig(tf_random_seed=3)


def _run_graph(build):
  """Builds `build()` in a fresh graph and returns its value(s), tables initialised."""
  with tf.Graph().as_default():
    fetches = build()
    with _v1.Session() as session:
      session.run([_v1.global_variables_initializer(), _v1.local_variables_initializer(),
                   _v1.tables_initializer()])
      return session.run(fetches)


def _sigmoid(x):
  return 1. / (1. + np.exp(-x))


# ---------------------------------------------------------------------------------------------
# Heads, in a graph: loss reductions, weights and predictions against numpy.

LOGITS = np.array([[0.5], [-1.0], [2.0], [0.0]], np.float32)
LABELS = np.array([[1], [0], [0], [1]], np.int64)
WEIGHTS = np.array([[1.0], [2.0], [0.5], [1.5]], np.float32)


def _binary_losses():
  z, y = LOGITS, LABELS.astype(np.float32)
  return np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))


@pytest.mark.parametrize('reduction,expected', [
    ('sum_over_batch_size', lambda l: np.sum(l * WEIGHTS) / 4),
    ('sum', lambda l: np.sum(l * WEIGHTS)),
])
def test_binary_head_loss_is_weighted_and_reduced(reduction, expected):
  head = canned.BinaryClassHead(weight_column='w', loss_reduction=reduction)
  loss = _run_graph(lambda: head.loss(tf.constant(LABELS), tf.constant(LOGITS),
                                      features={'w': tf.constant(WEIGHTS)}))
  np.testing.assert_allclose(loss, expected(_binary_losses()), rtol=1e-5)


def test_binary_head_takes_bool_labels_as_the_original():
  """tensorflow/models' census program labels with `tf.equal(labels, '>50K')`: the original's
  binary heads cast bool labels; a multi-class head refuses them."""
  head = canned.BinaryClassHead()
  as_bool = _run_graph(lambda: head.loss(tf.constant(LABELS.astype(bool)), tf.constant(LOGITS)))
  np.testing.assert_allclose(as_bool, np.mean(_binary_losses()), rtol=1e-5)
  with pytest.raises(ValueError, match="labels_dtype='bool'"):
    _run_graph(lambda: canned.MultiClassHead(3).loss(tf.constant(LABELS.astype(bool)),
                                                     tf.constant(np.zeros([4, 3], np.float32))))


def test_binary_head_predictions():
  head = canned.BinaryClassHead(label_vocabulary=['no', 'yes'])
  got = _run_graph(lambda: head.predictions(tf.constant(LOGITS)))
  np.testing.assert_allclose(got[PredictionKeys.LOGISTIC], _sigmoid(LOGITS), rtol=1e-6)
  np.testing.assert_allclose(got[PredictionKeys.PROBABILITIES][:, 1], _sigmoid(LOGITS[:, 0]),
                             rtol=1e-6)
  assert got[PredictionKeys.CLASS_IDS].tolist() == [[1], [0], [1], [0]]
  assert got[PredictionKeys.CLASSES].tolist() == [[b'yes'], [b'no'], [b'yes'], [b'no']]
  assert got[PredictionKeys.ALL_CLASSES].tolist() == [[b'no', b'yes']] * 4
  assert got[PredictionKeys.ALL_CLASS_IDS].dtype == np.int32


def test_binary_head_eval_metrics_against_numpy():
  head = canned.BinaryClassHead(weight_column='w', thresholds=[0.3])

  def build():
    spec = head.create_estimator_spec({'w': tf.constant(WEIGHTS)}, tpu_estimator.ModeKeys.EVAL,
                                      tf.constant(LOGITS), tf.constant(LABELS))
    return spec.eval_metric_ops

  with tf.Graph().as_default():
    metric_ops = build()
    with _v1.Session() as session:
      session.run([_v1.global_variables_initializer(), _v1.local_variables_initializer()])
      session.run([op for _, op in metric_ops.values()])
      got = session.run({k: v for k, (v, _) in metric_ops.items()})
  w, y = WEIGHTS[:, 0], LABELS[:, 0]
  pred = (LOGITS[:, 0] > 0).astype(np.int64)
  assert sorted(got) == sorted([
      'accuracy', 'accuracy_baseline', 'auc', 'auc_precision_recall', 'average_loss',
      'label/mean', 'prediction/mean', 'precision', 'recall', 'accuracy/positive_threshold_0.3',
      'precision/positive_threshold_0.3', 'recall/positive_threshold_0.3'])
  np.testing.assert_allclose(got[MetricKeys.ACCURACY], np.sum(w * (pred == y)) / w.sum(),
                             rtol=1e-5)
  np.testing.assert_allclose(got[MetricKeys.LOSS_MEAN],
                             np.sum(w * _binary_losses()[:, 0]) / w.sum(), rtol=1e-5)
  label_mean = np.sum(w * y) / w.sum()
  np.testing.assert_allclose(got[MetricKeys.LABEL_MEAN], label_mean, rtol=1e-5)
  np.testing.assert_allclose(got[MetricKeys.ACCURACY_BASELINE],
                             max(label_mean, 1 - label_mean), rtol=1e-5)
  np.testing.assert_allclose(got[MetricKeys.PREDICTION_MEAN],
                             np.sum(w * _sigmoid(LOGITS[:, 0])) / w.sum(), rtol=1e-5)


def test_multi_class_head_loss_and_predictions():
  logits = np.array([[1., 2., 0.], [0., 0., 3.]], np.float32)
  labels = np.array([1, 0], np.int64)
  head = canned.MultiClassHead(3, loss_reduction='sum')
  loss, predictions = _run_graph(lambda: (
      head.loss(tf.constant(labels), tf.constant(logits)), head.predictions(tf.constant(logits))))
  log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  np.testing.assert_allclose(loss, -log_softmax[[0, 1], labels].sum(), rtol=1e-5)
  assert predictions['class_ids'].tolist() == [[1], [2]]
  assert predictions['classes'].tolist() == [[b'1'], [b'2']]
  assert sorted(predictions) == ['all_class_ids', 'all_classes', 'class_ids', 'classes',
                                 'logits', 'probabilities']


def test_regression_heads_losses_and_inverse_links():
  logits = np.array([[0.5], [1.5]], np.float32)
  labels = np.array([[1.0], [2.0]], np.float32)

  def build():
    result = {}
    for name, head in (('mse', canned.RegressionHead()),
                       ('poisson', canned.PoissonRegressionHead(compute_full_loss=False)),
                       ('logistic', canned.LogisticRegressionHead())):
      labels_ = tf.constant(labels / 2 if name == 'logistic' else labels)
      result[name] = (head.loss(labels_, tf.constant(logits)),
                      head.predictions(tf.constant(logits)))
    return result

  got = _run_graph(build)
  np.testing.assert_allclose(got['mse'][0], np.mean((logits - labels) ** 2), rtol=1e-6)
  np.testing.assert_allclose(got['poisson'][0], np.mean(np.exp(logits) - labels * logits),
                             rtol=1e-6)
  np.testing.assert_allclose(got['poisson'][1]['predictions'], np.exp(logits), rtol=1e-6)
  np.testing.assert_allclose(got['logistic'][1]['predictions'], _sigmoid(logits), rtol=1e-6)
  assert sorted(got['mse'][1]) == ['predictions']
  assert sorted(got['poisson'][1]) == ['logits', 'predictions']


def test_label_outside_the_vocabulary_fails_at_run_time():
  head = canned.BinaryClassHead(label_vocabulary=['a', 'b'])
  with pytest.raises(tf.errors.InvalidArgumentError, match='label_vocabulary'):
    _run_graph(lambda: head.loss(tf.constant([['a'], ['c']]), tf.constant(LOGITS[:2])))


# ---------------------------------------------------------------------------------------------
# Estimators (tiny data, few steps).

N = 32
RNG = np.random.RandomState(0)
FEATURES = {'x': RNG.uniform(-1, 1, N).astype(np.float32),
            'color': RNG.choice(['red', 'green', 'blue'], N),
            'w': RNG.uniform(0.5, 1.5, N).astype(np.float32)}
BINARY = np.where(FEATURES['x'] > 0, 'pos', 'neg')
VALUE = (2 * FEATURES['x'] + 1).astype(np.float32)
X = fc.numeric_column('x')
COLOR = fc.categorical_column_with_vocabulary_list('color', ['red', 'green', 'blue'])


def _input_fn(labels, repeat=True):
  def input_fn():
    data = tf.data.Dataset.from_tensor_slices((dict(FEATURES), labels)).batch(8)
    return data.repeat() if repeat else data
  return input_fn


def _predict_input_fn():
  return tf.data.Dataset.from_tensor_slices(dict(FEATURES)).batch(8)


def test_dnn_classifier_learns_with_the_original_keys_and_names(tmp_path):
  est = canned.DNNClassifier([8], [X, fc.embedding_column(COLOR, 2)], model_dir=str(tmp_path),
                             label_vocabulary=['neg', 'pos'], weight_column='w',
                             optimizer=tf.keras.optimizers.Adam(learning_rate=0.05),
                             config=CONFIG)
  est.train(_input_fn(BINARY), steps=60)
  metrics = est.evaluate(_input_fn(BINARY, repeat=False))
  assert list(metrics) == ['accuracy', 'accuracy_baseline', 'auc', 'auc_precision_recall',
                           'average_loss', 'label/mean', 'loss', 'precision',
                           'prediction/mean', 'recall', 'global_step']  # the original's order
  assert metrics['global_step'] == 60
  assert metrics['accuracy'] >= 0.85, metrics
  names = est.get_variable_names()
  for name in ('dnn/hiddenlayer_0/kernel', 'dnn/logits/bias', 'training/Adam/dnn/logits/kernel/m',
               'dnn/input_from_feature_columns/input_layer/color_embedding/embedding_weights'):
    assert name in names, names
  first = next(est.predict(_predict_input_fn))
  assert first['classes'][0] in (b'neg', b'pos')
  assert first['all_classes'].tolist() == [b'neg', b'pos']


def test_linear_regressor_fits_a_line_and_exports_regression_signatures(tmp_path):
  est = canned.LinearRegressor([X], model_dir=str(tmp_path), optimizer='SGD', config=CONFIG)
  est.train(_input_fn(VALUE), steps=300)
  weight = est.get_variable_value('linear/linear_model/x/weights')
  bias = est.get_variable_value('linear/linear_model/bias_weights')
  np.testing.assert_allclose([weight[0, 0], bias[0]], [2., 1.], atol=0.1)
  spec = fc.make_parse_example_spec([X])
  receiver = tpu_estimator.export.build_parsing_serving_input_receiver_fn(spec)
  export_dir = est.export_saved_model(str(tmp_path / 'export'), receiver)
  loaded = tf.saved_model.load(os.fsdecode(export_dir))
  assert sorted(loaded.signatures) == ['predict', 'regression', 'serving_default']
  example = tf.train.Example(features=tf.train.Features(feature={
      'x': tf.train.Feature(float_list=tf.train.FloatList(value=[0.5]))}))
  out = loaded.signatures['predict'](examples=tf.constant([example.SerializeToString()]))
  np.testing.assert_allclose(out['predictions'].numpy(), [[2.]], atol=0.1)


def test_wide_and_deep_and_baseline_train_each_part(tmp_path):
  est = canned.DNNLinearCombinedClassifier(
      str(tmp_path / 'wd'), linear_feature_columns=[X, COLOR],
      dnn_feature_columns=[X, fc.indicator_column(COLOR)], dnn_hidden_units=[4], n_classes=3,
      config=CONFIG)
  labels = np.digitize(FEATURES['x'], [-0.3, 0.3]).astype(np.int64)
  est.train(_input_fn(labels), steps=5)
  names = est.get_variable_names()
  assert 'training/Ftrl/iter' in names and 'training/Adagrad/iter' not in names
  assert est.get_variable_value('training/Ftrl/iter') == 5
  assert est.get_variable_value('global_step') == 5
  assert sorted(est.evaluate(_input_fn(labels, repeat=False))) == [
      'accuracy', 'average_loss', 'global_step', 'loss']
  baseline = canned.BaselineRegressor(
      str(tmp_path / 'baseline'), config=CONFIG,
      optimizer=lambda: tf.keras.optimizers.SGD(learning_rate=0.1))
  baseline.train(_input_fn(VALUE), steps=200)
  np.testing.assert_allclose(baseline.get_variable_value('baseline/bias'), [VALUE.mean()],
                             atol=0.05)


def test_keras_3_and_tf1_optimizer_instances(tmp_path):
  keras3 = canned.LinearClassifier([X], model_dir=str(tmp_path / 'k3'),
                                   optimizer=tf.keras.optimizers.Adagrad(learning_rate=0.25))
  keras3.train(_input_fn((FEATURES['x'] > 0).astype(np.int64)), steps=2)
  assert keras3.get_variable_value('training/Adagrad/learning_rate') == 0.25
  tf1 = canned.LinearClassifier([X], model_dir=str(tmp_path / 'tf1'),
                                optimizer=lambda: _v1.train.AdagradOptimizer(0.1))
  tf1.train(_input_fn((FEATURES['x'] > 0).astype(np.int64)), steps=2)
  assert 'linear/linear_model/x/weights/Adagrad' in tf1.get_variable_names()
  assert tf1.get_variable_value('global_step') == 2


def _decayed(global_step):
  return _v1.train.exponential_decay(0.1, global_step=global_step, decay_steps=10000,
                                     decay_rate=0.96)


def test_optimizer_factory_runs_in_the_model_graph(tmp_path):
  """As the original: the factory is called inside the model's graph, so it may read the
  global step (the premade-estimator tutorials' decayed learning rate); a Keras 3 optimizer
  from a factory leaves no variables of its own in the checkpoint."""
  tf_keras = pytest.importorskip('tf_keras')
  labels = (FEATURES['x'] > 0).astype(np.int64)
  legacy = canned.LinearClassifier([X], model_dir=str(tmp_path / 'legacy'), optimizer=lambda:
                                   tf_keras.optimizers.legacy.Ftrl(
                                       learning_rate=_decayed(_v1.train.get_global_step())))
  legacy.train(_input_fn(labels), steps=2)
  assert legacy.get_variable_value('global_step') == 2
  scheduled = canned.LinearClassifier([X], model_dir=str(tmp_path / 'k3'), optimizer=lambda:
                                      tf.keras.optimizers.Ftrl(
                                          tf.keras.optimizers.schedules.ExponentialDecay(
                                              0.1, 10000, 0.96)))
  scheduled.train(_input_fn(labels), steps=2)
  names = scheduled.get_variable_names()
  assert not [n for n in names if not n.startswith(('linear/', 'training/Ftrl/', 'global'))]
  tensor_lr = canned.LinearClassifier([X], model_dir=str(tmp_path / 'bad'), optimizer=lambda:
                                      tf.keras.optimizers.Ftrl(
                                          _decayed(_v1.train.get_global_step())))
  with pytest.raises(TypeError, match='tf_keras.optimizers.legacy'):
    tensor_lr.train(_input_fn(labels), steps=1)


def test_head_trains_with_an_optimizer_whose_iterations_are_the_global_step(tmp_path):
  """The original's canned estimators (and TF-Lattice's model_fn) set `optimizer.iterations`
  to the global step before handing the optimizer to a head, which then only applied it; the
  model_fn's own optimizer is also reachable as `est.model_fn(features, labels, mode, config)`,
  bound to the estimator's params as the original's property."""
  tf_keras = pytest.importorskip('tf_keras')

  def model_fn(features, labels, mode, params):
    logits = tf.expand_dims(features['x'], 1) * _v1.get_variable('w', [1])
    optimizer = tf_keras.optimizers.legacy.Adagrad(params['rate'])
    optimizer.iterations = _v1.train.get_or_create_global_step()
    return canned.BinaryClassHead().create_estimator_spec(
        features=features, mode=mode, logits=logits, labels=labels, optimizer=optimizer,
        trainable_variables=_v1.trainable_variables())

  est = tpu_estimator.Estimator(model_fn, model_dir=str(tmp_path), params={'rate': 0.1})
  est.train(_input_fn((FEATURES['x'] > 0).astype(np.int64)), steps=3)
  assert est.get_variable_value('global_step') == 3
  with tf.Graph().as_default():
    spec = est.model_fn({'x': tf.constant(FEATURES['x'][:2])}, None,
                        tpu_estimator.ModeKeys.PREDICT, est.config)
    assert isinstance(spec, tpu_estimator.EstimatorSpec) and 'logits' in spec.predictions


def test_warm_start_from_another_model_dir(tmp_path):
  columns = [X, fc.indicator_column(COLOR)]
  source = canned.DNNRegressor([4], columns, model_dir=str(tmp_path / 'a'), config=CONFIG)
  source.train(_input_fn(VALUE), steps=3)
  frozen = tpu_estimator.EstimatorRunConfig(tf_random_seed=99)
  target = canned.DNNRegressor([4], columns, model_dir=str(tmp_path / 'b'), config=frozen,
                               optimizer=lambda: tf.keras.optimizers.SGD(learning_rate=0.0),
                               warm_start_from=str(tmp_path / 'a'))
  target.train(_input_fn(VALUE), steps=1)
  for name in ('dnn/hiddenlayer_0/kernel', 'dnn/logits/bias'):
    np.testing.assert_array_equal(target.get_variable_value(name),
                                  source.get_variable_value(name))


@pytest.mark.parametrize('make,match', [
    (lambda: canned.DNNClassifier([4], [X], n_classes=1), 'n_classes'),
    (lambda: canned.DNNClassifier([], [X]), 'hidden_units'),
    (lambda: canned.DNNClassifier([4], [X], optimizer='Adadelta2'), 'optimizer'),
    (lambda: canned.DNNClassifier([4], [X], label_vocabulary=['a']), 'label_vocabulary'),
    (lambda: canned.DNNRegressor([4], [X], dropout=1.5), 'dropout'),
    (lambda: canned.LinearClassifier([X], loss_reduction='none'), 'loss_reduction'),
    (lambda: canned.LinearRegressor([X], sparse_combiner='max'), 'sparse_combiner'),
    (lambda: canned.DNNLinearCombinedClassifier(), 'linear_feature_columns'),
    (lambda: canned.DNNLinearCombinedRegressor(dnn_feature_columns=[X]), 'dnn_hidden_units'),
])
def test_bad_arguments_raise_value_errors_naming_them(make, match):
  with pytest.raises(ValueError, match=match):
    make()


@pytest.mark.parametrize('make,match', [
    (lambda: canned.LinearClassifier('x'), 'feature_columns'),
    (lambda: canned.DNNRegressor([4], [X], optimizer=3), 'optimizer'),
    (lambda: canned.LinearRegressor([X], weight_column=5), 'weight_column'),
])
def test_wrong_types_raise_type_errors_naming_them(make, match):
  with pytest.raises(TypeError, match=match):
    make()


def test_numpy_numbers_and_bytes_vocabulary_are_taken_as_by_the_original(tmp_path):
  """The original compared these values (hidden_units from numpy, np.int64 n_classes and
  label_dimension, a numpy dropout, a bytes vocabulary) and its Dense layers took an
  activation by name; they were refused as not int/str/callable."""
  est = canned.DNNClassifier(np.array([4, 2]), [X], model_dir=str(tmp_path), n_classes=2,
                             dropout=np.float32(0.1), label_vocabulary=(b'neg', b'pos'),
                             activation_fn='tanh', config=CONFIG)
  est.train(_input_fn(BINARY), steps=1)
  assert est.get_variable_value('dnn/hiddenlayer_1/kernel').shape == (4, 2)
  canned.DNNClassifier([4], [X], n_classes=np.int64(3))
  with pytest.raises(TypeError, match="activation_fn='nope'"):
    canned.DNNRegressor([4], [X], activation_fn='nope')
  canned.LinearRegressor([X], label_dimension=np.int64(2))
  canned.BaselineRegressor(label_dimension=np.int32(1))
  assert canned.LinearRegressor([X], loss_reduction='auto').head.loss_reduction == 'auto'
  assert tpu_estimator.EvalSpec(lambda: None, throttle_secs=np.float32(1.5)).throttle_secs == 1.5


def test_multi_label_head_loss_averages_classes_and_takes_sparse_labels():
  logits = np.array([[0.5, -1., 2.], [0., 1., -0.5]], np.float32)
  multi_hot = np.array([[1, 0, 1], [0, 1, 0]], np.int64)
  head = canned.multi_label_head(3, label_vocabulary=['a', 'b', 'c'])
  sparse = lambda: tf.SparseTensor(indices=[[0, 0], [0, 1], [1, 0]], values=['a', 'c', 'b'],
                                   dense_shape=[2, 2])
  dense_loss, sparse_loss, predictions = _run_graph(lambda: (
      head.loss(tf.constant(multi_hot), tf.constant(logits)),
      head.loss(sparse(), tf.constant(logits)), head.predictions(tf.constant(logits))))
  per_class = np.maximum(logits, 0) - logits * multi_hot + np.log1p(np.exp(-np.abs(logits)))
  np.testing.assert_allclose(dense_loss, per_class.mean(-1).mean(), rtol=1e-6)
  np.testing.assert_allclose(sparse_loss, dense_loss, rtol=1e-6)
  assert sorted(predictions) == ['classes', 'logits', 'probabilities']
  assert predictions['classes'].tolist() == [[b'a', b'b', b'c']] * 2


def test_multi_head_weights_losses_and_keys_predictions_by_head(tmp_path):
  head = canned.multi_head([canned.binary_classification_head(name='sign'),
                            canned.regression_head(name='value')], head_weights=[1., 3.])
  labels = {'sign': LABELS, 'value': np.ones_like(LOGITS)}
  total = _run_graph(lambda: head.loss(labels, {'sign': LOGITS, 'value': LOGITS}))
  expected = _binary_losses().mean() + 3 * np.mean((LOGITS - 1.) ** 2)
  np.testing.assert_allclose(total, expected, rtol=1e-5)
  est = canned.DNNEstimator(head, [4], [X], model_dir=str(tmp_path), config=CONFIG)
  est.train(_input_fn({'sign': (FEATURES['x'] > 0).astype(np.int64), 'value': VALUE}), steps=2)
  names = est.get_variable_names()
  assert 'training_2/Adagrad/dnn/logits/kernel/accumulator' in names, names
  first = next(est.predict(_predict_input_fn))
  assert ('sign', 'logistic') in first and ('value', 'predictions') in first
  metrics = est.evaluate(_input_fn({'sign': (FEATURES['x'] > 0).astype(np.int64),
                                    'value': VALUE}, repeat=False))
  assert {'loss/sign', 'loss/value', 'accuracy/sign', 'average_loss/value'} <= set(metrics)


def test_classifier_export_with_a_raw_receiver_keeps_predict_only(tmp_path):
  """As the original: a classification signature needs serialized Examples, so with raw
  tensors the export has `predict` and no `serving_default` (a warning, not an error)."""
  est = canned.LinearClassifier([X], model_dir=str(tmp_path), config=CONFIG)
  est.train(_input_fn((FEATURES['x'] > 0).astype(np.int64)), steps=1)
  receiver = tpu_estimator.export.build_raw_serving_input_receiver_fn(
      {'x': tf.zeros([2], tf.float32)})
  export_dir = est.export_saved_model(str(tmp_path / 'export'), receiver)
  assert sorted(tf.saved_model.load(os.fsdecode(export_dir)).signatures) == ['predict']


def test_parse_example_specs_add_label_and_weight():
  spec = canned.classifier_parse_example_spec([X], 'label', label_dtype=tf.string,
                                              weight_column='w')
  assert sorted(spec) == ['label', 'w', 'x']
  assert spec['label'].dtype == tf.string
  spec = canned.regressor_parse_example_spec([X], 'y', label_dimension=2)
  assert list(spec['y'].shape) == [2]
  with pytest.raises(ValueError, match='label_key'):
    canned.regressor_parse_example_spec([X], 'x')


def _metric_values(metric_ops):
  """Runs the update ops of `{key: (value, update_op)}` (or Keras metric objects) once, then
  returns the values."""
  pairs = tpu_estimator.specs.check_metric_ops(metric_ops)
  with _v1.Session() as session:
    session.run([_v1.global_variables_initializer(), _v1.local_variables_initializer(),
                 _v1.tables_initializer()])
    session.run([update for _, update in pairs.values()])
    return session.run({key: value for key, (value, _) in pairs.items()})


_SEQUENCE = {'mask': np.array([[1, 1, 0, 0], [1, 1, 1, 1]], np.int64)}


@pytest.mark.parametrize('make,logits,labels,features', [
    (lambda: canned.BinaryClassHead(weight_column='w', thresholds=[0.3]), LOGITS, LABELS,
     {'w': WEIGHTS}),
    (lambda: canned.MultiClassHead(3, name='c'), np.arange(12, dtype=np.float32).reshape(4, 3)
     % 5, np.array([[2], [0], [1], [2]]), {}),
    (lambda: canned.RegressionHead(label_dimension=2, weight_column='w'),
     LOGITS * [1., -2.], LOGITS + [0.5, 1.], {'w': WEIGHTS}),
    (lambda: canned.MultiLabelHead(3, thresholds=[0.4], classes_for_class_based_metrics=[1]),
     np.array([[0.5, -1., 2.], [0., 1., -.5], [1., 1., 1.], [-2., 0., 3.]], np.float32),
     np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]]), {}),
    (lambda: canned.MultiHead([canned.BinaryClassHead(name='sign'),
                               canned.RegressionHead(name='value')]),
     np.concatenate([LOGITS, -LOGITS], -1), {'sign': LABELS, 'value': LOGITS * 2}, {}),
    (lambda: canned.SequentialHeadWrapper(canned.BinaryClassHead(), 'mask'),
     LOGITS.reshape(2, 2, 1).repeat(2, 1), np.array([[[1], [0], [0], [1]], [[1], [1], [0], [0]]]),
     _SEQUENCE),
], ids=['binary', 'multi_class', 'regression', 'multi_label', 'multi_head', 'sequential'])
def test_head_metrics_and_update_metrics_give_the_eval_spec_metrics(make, logits, labels,
                                                                    features):
  """`tf.estimator.Head.metrics()` / `update_metrics()`: a model_fn can build the head's metric
  objects, update them and return them as eval_metric_ops (the keys and values of the head's
  own EVAL spec, regularization included)."""
  head = make()
  as_tensors = lambda x: ({k: tf.constant(v) for k, v in x.items()} if isinstance(x, dict)
                          else tf.constant(x))
  regularization = lambda: [tf.constant(0.25), tf.constant(0.5)]
  with tf.Graph().as_default():
    spec = head.create_estimator_spec(
        as_tensors(features), tpu_estimator.ModeKeys.EVAL, as_tensors(logits),
        as_tensors(labels), regularization_losses=regularization())
    expected = _metric_values(spec.eval_metric_ops)
  with tf.Graph().as_default():
    objects = head.metrics(regularization_losses=regularization())
    assert sorted(objects) == sorted(expected)
    updated = head.update_metrics(objects, as_tensors(features), as_tensors(logits),
                                  as_tensors(labels), regularization_losses=regularization())
    assert updated is objects
    got = _metric_values(updated)
  assert sorted(got) == sorted(expected)
  for key, value in expected.items():
    np.testing.assert_allclose(got[key], value, rtol=1e-5, err_msg=key)


def test_head_update_metrics_names_a_missing_metric():
  head = canned.BinaryClassHead()
  with tf.Graph().as_default():
    metrics = head.metrics()
    del metrics[MetricKeys.AUC]
    with pytest.raises(ValueError, match="key='auc'.*head.metrics"):
      head.update_metrics(metrics, {}, tf.constant(LOGITS), tf.constant(LABELS))


def test_head_update_metrics_as_eval_metric_ops_in_evaluate(tmp_path):
  """A model_fn returning `head.update_metrics(head.metrics(), ...)` as eval_metric_ops:
  evaluate() over several batches (in its device loop) gives what the head's own spec gives."""
  head = canned.BinaryClassHead(weight_column='w', label_vocabulary=['neg', 'pos'])

  def model_fn(features, labels, mode, params):
    logits = tf.reshape(features['x'], [-1, 1]) * _v1.get_variable('w', [], initializer=tf.ones)
    if mode == tpu_estimator.ModeKeys.TRAIN:  # a step that leaves the weights as they are
      return head.create_estimator_spec(features, mode, logits, labels, train_op_fn=lambda _: (
          _v1.assign_add(_v1.train.get_global_step(), 1)))
    if params['objects']:
      metrics = head.update_metrics(head.metrics(), features, logits, labels)
      return tpu_estimator.EstimatorSpec(mode, loss=head.loss(labels, logits, features),
                                         eval_metric_ops=metrics)
    return head.create_estimator_spec(features, mode, logits, labels)

  results = []
  for objects in (False, True):
    est = tpu_estimator.Estimator(model_fn, str(tmp_path / str(objects)), CONFIG,
                                  params={'objects': objects})
    est.train(_input_fn(BINARY), steps=1)
    results.append(est.evaluate(_input_fn(BINARY, repeat=False)))
  assert results[0].keys() == results[1].keys()
  assert results[1]['global_step'] == 1 and 0.5 < results[1][MetricKeys.ACCURACY_BASELINE] < 1
  for key in results[0]:
    np.testing.assert_allclose(results[1][key], results[0][key], rtol=1e-5, err_msg=key)
