"""The TF1-semantics canned estimators (tpu_estimator.canned.v1, `tf.compat.v1.estimator.*`):
the summed loss, tf.compat.v1.train optimizers (by name, instance or callable; Keras ones
refused), the original's partitioned variable and slot names, wide-and-deep's single global
step, and where the legacy namespaces put them.  Values against the original are in
tests/test_canned_differential.py (the `v1_*` models)."""
import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator
from tpu_estimator import canned
from tpu_estimator.canned import v1
from tpu_estimator.canned import v1_estimators
from tpu_estimator.compat import namespaces

fc = tf.feature_column
_v1 = tf.compat.v1
CONFIG = tpu_estimator.EstimatorRunConfig(tf_random_seed=3)
N = 32
RNG = np.random.RandomState(1)
FEATURES = {'x': RNG.uniform(-1, 1, N).astype(np.float32),
            'color': RNG.choice(['red', 'green', 'blue'], N)}
BINARY = (FEATURES['x'] > 0).astype(np.int64)
VALUE = (2 * FEATURES['x'] + 1).astype(np.float32)
X = fc.numeric_column('x')
COLOR = fc.categorical_column_with_vocabulary_list('color', ['red', 'green', 'blue'])


def _input_fn(labels, repeat=True, batch=8):
  def input_fn():
    data = tf.data.Dataset.from_tensor_slices((dict(FEATURES), labels)).batch(batch)
    return data.repeat() if repeat else data
  return input_fn


class _Fetch(tf.compat.v1.train.SessionRunHook):
  """Fetches graph tensors by name at every step, as a LoggingTensorHook given names does."""

  def __init__(self, names):
    self.names, self.values = names, []

  def before_run(self, run_context):
    return tf.compat.v1.train.SessionRunArgs({name: name + ':0' for name in self.names})

  def after_run(self, run_context, run_values):
    self.values.append(run_values.results)


@pytest.mark.parametrize('make,labels,expected', [
    (lambda d: v1.LinearClassifier([X], model_dir=d, config=CONFIG), BINARY,
     {'linear/head/truediv': np.log(2.), 'linear/head/weighted_loss/Sum': 8 * np.log(2.)}),
    (lambda d: v1.LinearRegressor([X], model_dir=d, config=CONFIG,
                                  loss_reduction=_v1.losses.Reduction.SUM_OVER_BATCH_SIZE),
     VALUE, {'linear/head/weighted_loss/value': np.mean(VALUE[:8] ** 2)}),
])
def test_head_tensors_have_the_names_tf1_programs_log(tmp_path, make, labels, expected):
  """tensorflow/models' census and movielens programs log the v1 heads' average and training
  loss by tensor name ('linear/head/truediv', 'dnn/head/weighted_loss/value'); the values at
  the first step (the linear model starts at zero) are the original's."""
  hook = _Fetch(sorted(expected))
  make(str(tmp_path)).train(_input_fn(labels), steps=2, hooks=[hook])
  for name, value in expected.items():
    np.testing.assert_allclose(hook.values[0][name], value, rtol=1e-5, err_msg=name)


def test_dnn_classifier_sums_the_loss_and_names_slots_as_the_original(tmp_path):
  est = v1.DNNClassifier([4], [X, fc.embedding_column(COLOR, 2)], model_dir=str(tmp_path),
                         config=CONFIG)
  est.train(_input_fn(BINARY), steps=3)
  names = est.get_variable_names()
  for name in ('dnn/hiddenlayer_0/kernel', 'dnn/hiddenlayer_0/kernel/t_0/Adagrad',
               'dnn/logits/bias/t_0/Adagrad',
               'dnn/input_from_feature_columns/input_layer/color_embedding/embedding_weights/'
               't_0/Adagrad'):
    assert name in names, names
  assert not any(n.startswith('training/') for n in names)  # no Keras optimizer variables
  metrics = est.evaluate(_input_fn(BINARY, repeat=False))
  # loss: the summed loss of a batch of 8 (mean over batches); average_loss: per example
  np.testing.assert_allclose(metrics['loss'], 8 * metrics['average_loss'], rtol=1e-4)
  v2 = canned.DNNClassifier([4], [X, fc.embedding_column(COLOR, 2)],
                            model_dir=str(tmp_path / 'v2'), config=CONFIG)
  v2.train(_input_fn(BINARY), steps=1)
  v2_metrics = v2.evaluate(_input_fn(BINARY, repeat=False))
  np.testing.assert_allclose(v2_metrics['loss'], v2_metrics['average_loss'], rtol=1e-4)


def test_dnn_default_adagrad_learning_rate_is_the_v1_one(tmp_path):
  """One Adagrad step moves the logits bias by about the learning rate (0.05 in v1)."""
  est = v1.DNNRegressor([2], [X], model_dir=str(tmp_path), config=CONFIG)
  est.train(_input_fn(VALUE), steps=1)
  moved = abs(est.get_variable_value('dnn/logits/bias')[0])
  assert 0.03 < moved <= 0.05, moved


def test_tf1_optimizer_callable_and_an_input_layer_partitioner(tmp_path):
  est = v1.LinearRegressor([X, COLOR], model_dir=str(tmp_path / 'sgd'), config=CONFIG,
                           optimizer=lambda: _v1.train.GradientDescentOptimizer(0.01))
  est.train(_input_fn(VALUE), steps=150)
  np.testing.assert_allclose(est.get_variable_value('linear/linear_model/x/weights'), [[2.]],
                             atol=0.15)
  assert est.get_variable_value('global_step') == 150
  split = v1.DNNRegressor([2], [fc.embedding_column(COLOR, 2)], config=CONFIG,
                          input_layer_partitioner=_v1.fixed_size_partitioner(2))
  with tf.Graph().as_default():
    features, labels = _v1.data.make_one_shot_iterator(_input_fn(VALUE)()).get_next()
    split.model_fn(features, labels, tpu_estimator.ModeKeys.TRAIN, split.config)
    names = sorted(v.op.name for v in _v1.global_variables())
  weights = 'dnn/input_from_feature_columns/input_layer/color_embedding/embedding_weights'
  assert weights + '/part_0' in names and weights + '/part_1' in names, names
  assert 'dnn/hiddenlayer_0/kernel/part_0' in names  # the dnn scope's one-part partitioner


def test_dnn_batch_norm_evaluates_with_the_original_names(tmp_path):
  """The v1 estimators build `dnn` under a partitioner: batch normalization's variables are
  single-part PartitionedVariables (their slots named `<variable>/t_0/Adagrad`, as the
  original's), read as tensors, so evaluation can add epsilon to the moving variance."""
  est = v1.DNNClassifier([4], [X], batch_norm=True, model_dir=str(tmp_path), config=CONFIG)
  est.train(_input_fn(BINARY), steps=2)
  result = est.evaluate(_input_fn(BINARY, repeat=False))
  assert result['global_step'] == 2 and np.isfinite(result['loss'])
  names = est.get_variable_names()
  assert {'dnn/hiddenlayer_0/batchnorm_0/moving_variance',
          'dnn/hiddenlayer_0/batchnorm_0/gamma/t_0/Adagrad'} <= set(names), names


def test_wide_and_deep_trains_both_parts_and_counts_one_step(tmp_path):
  est = v1.DNNLinearCombinedClassifier(
      str(tmp_path), linear_feature_columns=[X, COLOR],
      dnn_feature_columns=[X, fc.indicator_column(COLOR)], dnn_hidden_units=[4],
      config=CONFIG)
  est.train(_input_fn(BINARY), steps=4)
  names = est.get_variable_names()
  assert 'dnn/hiddenlayer_0/kernel/Adagrad' in names
  assert 'linear/linear_model/x/weights/Ftrl' in names
  assert est.get_variable_value('global_step') == 4
  assert est.get_variable_value('linear/linear_model/x/weights')[0, 0] != 0.


def test_baseline_classifier_learns_the_prior(tmp_path):
  est = v1.BaselineClassifier(str(tmp_path), config=CONFIG,
                              optimizer=_v1.train.GradientDescentOptimizer(0.01))
  est.train(_input_fn(BINARY), steps=200)
  prior = est.get_variable_value('baseline/bias')[0]
  np.testing.assert_allclose(1 / (1 + np.exp(-prior)), BINARY.mean(), atol=0.05)


@pytest.mark.parametrize('make, error, match', [
    (lambda: v1.DNNClassifier([2], [X], optimizer=tf.keras.optimizers.Adagrad()),
     TypeError, 'optimizer=.*Adagrad'),
    (lambda: v1.LinearRegressor([X], optimizer='Adadelta'), ValueError,
     "optimizer='Adadelta'"),
    (lambda: v1.DNNLinearCombinedRegressor(linear_feature_columns=[X], linear_optimizer='Nope'),
     ValueError, "linear_optimizer='Nope'"),
    (lambda: v1.LinearClassifier([X], loss_reduction='sum'), ValueError,
     "loss_reduction='sum'"),
    (lambda: v1.BaselineRegressor(loss_reduction=_v1.losses.Reduction.NONE), ValueError,
     "loss_reduction='none'"),
])
def test_bad_arguments_name_themselves(make, error, match):
  with pytest.raises(error, match=match):
    make()


def test_sum_over_batch_size_is_accepted(tmp_path):
  est = v1.LinearClassifier([X], model_dir=str(tmp_path), config=CONFIG,
                            loss_reduction=_v1.losses.Reduction.SUM_OVER_BATCH_SIZE)
  est.train(_input_fn(BINARY), steps=1)
  metrics = est.evaluate(_input_fn(BINARY, repeat=False))
  np.testing.assert_allclose(metrics['loss'], metrics['average_loss'], rtol=1e-4)


@pytest.mark.parametrize('reduction', [_v1.losses.Reduction.MEAN,
                                       _v1.losses.Reduction.SUM_BY_NONZERO_WEIGHTS])
def test_weighted_mean_reductions_as_the_original(reduction):
  """The original's v1 estimators took every Reduction but NONE: MEAN divides the weighted
  sum by the sum of the weights, SUM_BY_NONZERO_WEIGHTS by their non-zero count (values
  checked against tensorflow-estimator 2.15's LinearRegressor)."""
  head = v1._regression_head(1, 'w', v1.loss_reduction_of(reduction))
  labels = np.array([[1.], [2.], [3.], [4.]], np.float32)
  logits = np.array([[0.], [1.], [1.], [6.]], np.float32)
  weights = np.array([0., 1., 2., 0.5], np.float32)
  with tf.Graph().as_default(), _v1.Session() as sess:
    loss = sess.run(head.loss(tf.constant(labels), tf.constant(logits), {'w': weights}))
  total = (weights * (labels - logits)[:, 0] ** 2).sum()
  divisor = weights.sum() if reduction == 'weighted_mean' else np.count_nonzero(weights)
  np.testing.assert_allclose(loss, total / divisor, rtol=1e-6)


def test_legacy_namespaces_hold_the_v1_classes():
  built = namespaces.build()
  for name in v1.NAMES:
    assert getattr(built['_v1'], name) is getattr(v1, name)
    assert getattr(built['_v2'], name) is getattr(canned, name)
  modules = namespaces.canned_modules('tensorflow_estimator.python.estimator')
  dnn = modules['tensorflow_estimator.python.estimator.canned.dnn']
  assert dnn['DNNClassifier'] is v1.DNNClassifier
  assert dnn['DNNClassifierV2'] is canned.DNNClassifier
  assert dnn['DNNEstimator'] is v1_estimators.DNNEstimator  # the head-taking v1 class
  baseline = modules['tensorflow_estimator.python.estimator.canned.baseline']
  assert baseline['BaselineRegressor'] is v1.BaselineRegressor
