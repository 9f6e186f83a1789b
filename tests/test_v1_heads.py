"""The head-taking `tf.compat.v1.estimator` classes and the experimental logit_fn API, in
process: the original's constructor signatures, errors for bad arguments, the builders'
variables, `call_logit_fn`'s argument passing and result check, and the legacy paths they are
reachable at.  Their numbers against the original: tests/test_v1_heads_differential.py."""
import inspect

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator import canned
from tpu_estimator.canned import logit_fns
from tpu_estimator.canned import v1
from tpu_estimator.canned import v1_estimators
from tpu_estimator.canned import v1_heads
from tpu_estimator.compat import namespaces

_v1 = tf.compat.v1
X = tf.feature_column.numeric_column('x', shape=[2])
TRAIN = 'train'


def _defaults(cls):
  return [(p.name, p.default) for p in inspect.signature(cls.__init__).parameters.values()][1:]


def test_signatures_are_the_originals():
  """Argument names, order and defaults as tensorflow-estimator 2.15's v1 classes (the
  wide-and-deep one has no warm_start_from, as the original's)."""
  empty = inspect.Parameter.empty
  assert _defaults(v1_estimators.DNNEstimator) == [
      ('head', empty), ('hidden_units', empty), ('feature_columns', empty), ('model_dir', None),
      ('optimizer', 'Adagrad'), ('activation_fn', tf.nn.relu), ('dropout', None),
      ('input_layer_partitioner', None), ('config', None), ('warm_start_from', None),
      ('batch_norm', False)]
  assert _defaults(v1_estimators.LinearEstimator) == [
      ('head', empty), ('feature_columns', empty), ('model_dir', None), ('optimizer', 'Ftrl'),
      ('config', None), ('partitioner', None), ('sparse_combiner', 'sum'),
      ('warm_start_from', None)]
  assert _defaults(v1_estimators.DNNLinearCombinedEstimator) == [
      ('head', empty), ('model_dir', None), ('linear_feature_columns', None),
      ('linear_optimizer', 'Ftrl'), ('dnn_feature_columns', None), ('dnn_optimizer', 'Adagrad'),
      ('dnn_hidden_units', None), ('dnn_activation_fn', tf.nn.relu), ('dnn_dropout', None),
      ('input_layer_partitioner', None), ('config', None), ('batch_norm', False),
      ('linear_sparse_combiner', 'sum')]
  assert _defaults(v1_estimators.BaselineEstimator) == [
      ('head', empty), ('model_dir', None), ('optimizer', 'Ftrl'), ('config', None)]


def _make(name, head):
  return {
      'DNNEstimator': lambda: v1_estimators.DNNEstimator(head, [3], [X]),
      'LinearEstimator': lambda: v1_estimators.LinearEstimator(head, [X]),
      'DNNLinearCombinedEstimator': lambda: v1_estimators.DNNLinearCombinedEstimator(
          head, linear_feature_columns=[X]),
      'BaselineEstimator': lambda: v1_estimators.BaselineEstimator(head),
  }[name]()


@pytest.mark.parametrize('name', v1_estimators.NAMES)
@pytest.mark.parametrize('head', [None, 'binary', lambda: None])
def test_a_head_that_is_not_a_head_names_the_argument(name, head):
  with pytest.raises(TypeError, match=r'head must be a head.*Received: head=.*Pass e\.g\. '
                                      r'tf\.estimator\.BinaryClassHead'):
    _make(name, head)


@pytest.mark.parametrize('name', v1_estimators.NAMES)
def test_v1_and_v2_heads_are_taken(name):
  for head in (v1_heads.binary_head(), canned.RegressionHead(label_dimension=2)):
    assert _make(name, head).head is head


def test_bad_network_arguments_fail_at_construction():
  head = v1_heads.binary_head()
  with pytest.raises(ValueError, match='hidden_units'):
    v1_estimators.DNNEstimator(head, [], [X])
  with pytest.raises(ValueError, match='optimizer'):
    v1_estimators.DNNEstimator(head, [2], [X], optimizer='NoSuchOptimizer')
  with pytest.raises(TypeError, match='tf.compat.v1.train.Optimizer'):
    v1_estimators.LinearEstimator(head, [X], optimizer=object())
  with pytest.raises(ValueError, match='sparse_combiner'):
    v1_estimators.LinearEstimator(head, [X], sparse_combiner='max')
  with pytest.raises(ValueError, match='linear_feature_columns or dnn_feature_columns'):
    v1_estimators.DNNLinearCombinedEstimator(head)
  with pytest.raises(ValueError, match='dnn_hidden_units'):
    v1_estimators.DNNLinearCombinedEstimator(head, dnn_feature_columns=[X])
  with pytest.raises(TypeError):  # as the original's: no such argument
    v1_estimators.DNNLinearCombinedEstimator(head, linear_feature_columns=[X],
                                             warm_start_from='/tmp')


def test_v1_head_factories_take_the_v1_reductions():
  """The original's v1 heads reduce by tf.compat.v1.losses.Reduction (SUM by default) and a
  binary head's AUCs are tf.compat.v1.metrics.auc ones."""
  assert isinstance(v1_heads.binary_head(), v1.BinaryClassHead)
  assert v1_heads.regression_head().loss_reduction == 'sum'
  mean = v1_heads.multi_class_head(3, loss_reduction=_v1.losses.Reduction.MEAN)
  assert mean.loss_reduction == 'weighted_mean' and mean.logits_dimension == 3
  with pytest.raises(ValueError, match='loss_reduction'):
    v1_heads.regression_head(loss_reduction=_v1.losses.Reduction.NONE)
  assert v1_heads.binary_or_multi_class_head(2, None, None, 'weighted_sum').logits_dimension == 1


def test_a_v2_head_trains_with_the_v1_optimizer(tmp_path):
  """The original's v1 classes could not train a tf.estimator head (it asked for a Keras
  optimizer); here it trains with the v1 optimizer, slots beside the variables and Adam's
  other variables in the head's name scope inside the model's (the original's
  `dnn/<head name>/beta1_power` for its v1 heads)."""
  x = np.array([[0., 1.], [1., 0.], [1., 1.], [0., 0.]], np.float32)
  y = np.array([[1], [0], [1], [0]], np.int64)
  est = v1_estimators.DNNEstimator(canned.BinaryClassHead(name='buy'), [3], [X],
                                   model_dir=str(tmp_path), optimizer='Adam')
  est.train(lambda: tf.data.Dataset.from_tensor_slices(({'x': x}, y)).batch(4), steps=1)
  names = est.get_variable_names()
  assert 'dnn/logits/kernel/t_0/Adam' in names and 'global_step' in names
  assert 'dnn/buy/beta1_power' in names


def _graph_variables(build):
  with tf.Graph().as_default():
    result = build({'x': tf.constant([[1., 2.], [3., 4.]])})
    return result, {v.op.name: v.shape.as_list() for v in _v1.global_variables()}


def test_dnn_logit_fn_makes_the_networks_variables_in_the_callers_scope():
  def build(features):
    logit_fn = logit_fns.dnn_logit_fn_builder(3, [4], [X], tf.nn.relu, None, None, True)
    with _v1.variable_scope('dnn'):
      logits = logit_fn(features, TRAIN)
    return logits, len(_v1.get_collection(_v1.GraphKeys.UPDATE_OPS))
  (logits, updates), variables = _graph_variables(build)
  assert logits.shape.as_list() == [2, 3]
  assert variables['dnn/hiddenlayer_0/kernel'] == [2, 4]
  assert variables['dnn/logits/bias'] == [3]
  assert 'dnn/hiddenlayer_0/batchnorm_0/moving_mean' in variables
  assert updates == 2  # the moving mean and variance, for the model_fn's train op


def test_linear_logit_fn_makes_the_linear_models_variables():
  def build(features):
    return logit_fns.linear_logit_fn_builder(2, [X], 'mean')(features)
  logits, variables = _graph_variables(build)
  assert logits.shape.as_list() == [2, 2]
  assert variables == {'linear_model/x/weights': [2, 2], 'linear_model/bias_weights': [2]}


def test_logit_fn_builders_bad_arguments():
  with pytest.raises(ValueError, match='units must be an int'):
    logit_fns.dnn_logit_fn_builder(2.5, [4], [X], tf.nn.relu, None, None, False)
  bad_columns = logit_fns.dnn_logit_fn_builder(1, [4], 'x', tf.nn.relu, None, None, False)
  with pytest.raises(TypeError, match='feature_columns'):
    _graph_variables(lambda f: bad_columns(f, TRAIN))
  bad_combiner = logit_fns.linear_logit_fn_builder(1, [X], 'max')
  with pytest.raises(ValueError, match='sparse_combiner'):
    _graph_variables(bad_combiner)


def test_call_logit_fn_passes_what_the_logit_fn_takes():
  seen = {}

  def logit_fn(features, params, mode):
    seen.update(features=features, params=params, mode=mode)
    return {'a': tf.constant(1.)}
  with tf.Graph().as_default():
    result = logit_fns.call_logit_fn(logit_fn, {'x': 1}, TRAIN, {'p': 2}, 'config')
    assert seen == {'features': {'x': 1}, 'params': {'p': 2}, 'mode': TRAIN}
    assert list(result) == ['a']
    only_features = logit_fns.call_logit_fn(lambda features: tf.constant(features), 3., TRAIN,
                                            None, None)
    assert isinstance(only_features, tf.Tensor)


@pytest.mark.parametrize('returned', [3, [1.], {1: 'x'}, None])
def test_call_logit_fn_rejects_what_is_not_logits(returned):
  with pytest.raises(ValueError, match='logit_fn should return a Tensor or a dictionary'):
    logit_fns.call_logit_fn(lambda features: returned, {}, TRAIN, None, None)
  with pytest.raises(TypeError, match='logit_fn must be callable'):
    logit_fns.call_logit_fn(returned, {}, TRAIN, None, None)


def test_legacy_paths_hold_them():
  built = namespaces.build()
  for name in v1_estimators.NAMES:
    assert getattr(built['_v1'], name) is getattr(v1_estimators, name)
    assert getattr(built['_v2'], name) is getattr(canned, name)
  experimental_v1 = built['tensorflow.compat.v1.estimator.experimental']
  experimental_v2 = built['tensorflow.estimator.experimental']
  for name in logit_fns.NAMES:
    assert getattr(experimental_v1, name) is getattr(logit_fns, name)
  assert experimental_v2.call_logit_fn is logit_fns.call_logit_fn
  with pytest.raises(AttributeError):  # v1 only, as in the original
    experimental_v2.dnn_logit_fn_builder  # pylint: disable=pointless-statement
  base = 'tensorflow_estimator.python.estimator'
  assert built[base + '.canned.dnn'].DNNEstimator is v1_estimators.DNNEstimator
  assert built[base + '.canned.dnn'].DNNEstimatorV2 is canned.DNNEstimator
  assert built[base + '.canned.dnn'].dnn_logit_fn_builder is logit_fns.dnn_logit_fn_builder
  assert built[base + '.canned.linear'].linear_logit_fn_builder is \
      logit_fns.linear_logit_fn_builder
  assert built[base + '.canned.baseline'].BaselineEstimator is v1_estimators.BaselineEstimator
  assert built[base + '.model_fn'].call_logit_fn is logit_fns.call_logit_fn
  head_module = built[base + '.canned.head']
  # pylint: disable=protected-access
  assert head_module._regression_head is v1_heads.regression_head
