"""`DNNClassifier`, `DNNRegressor` and `DNNEstimator`: a feed-forward network over
`tf.feature_column` input (`tf.estimator.DNN*` of tensorflow-estimator 2.15).

The network is written with graph variables under the original's names
(`dnn/input_from_feature_columns/input_layer/...`, `dnn/hiddenlayer_<i>/{kernel,bias}`,
`dnn/hiddenlayer_<i>/batchnorm_<i>/...`, `dnn/logits/{kernel,bias}`) and the original's
layers: Dense (Glorot-uniform kernel, zero bias) with `activation_fn`, then dropout in
training, then batch normalization (momentum 0.999, epsilon 0.001) when asked.
"""
import numbers

import tensorflow as tf

from tpu_estimator.canned import canned_estimator
from tpu_estimator.canned import classification_heads
from tpu_estimator.canned import head_base
from tpu_estimator.canned import regression_heads
from tpu_estimator import errors
from tpu_estimator.specs import ModeKeys

_v1 = tf.compat.v1
LEARNING_RATE = 0.001  # the original's for optimizer='Adagrad' (Keras' default)
_BN_MOMENTUM = 0.999
_BN_EPSILON = 0.001


def dense(inputs, units, activation_fn):
  """A Dense layer's variables (`kernel`, `bias`) in the current variable scope."""
  kernel = _v1.get_variable('kernel', [inputs.shape[-1], units], tf.float32,
                            initializer=_v1.glorot_uniform_initializer())
  bias = _v1.get_variable('bias', [units], tf.float32, initializer=_v1.zeros_initializer())
  outputs = tf.nn.bias_add(tf.matmul(inputs, kernel), bias)
  return activation_fn(outputs) if activation_fn is not None else outputs


def batch_norm(inputs, name, training):
  """Keras 2 BatchNormalization over the batch axis: batch statistics (and moving-average
  updates, returned) in training, the moving averages otherwise.  Under the v1 estimators'
  partitioner its variables are (single-part) PartitionedVariables, whose slots the original
  named `<variable>/t_0/<Optimizer>`: they are read as tensors."""
  units = inputs.shape[-1]
  with _v1.variable_scope(name):
    gamma = _v1.get_variable('gamma', [units], initializer=_v1.ones_initializer())
    beta = _v1.get_variable('beta', [units], initializer=_v1.zeros_initializer())
    moving_mean = _v1.get_variable('moving_mean', [units], trainable=False,
                                   initializer=_v1.zeros_initializer())
    moving_variance = _v1.get_variable('moving_variance', [units], trainable=False,
                                       initializer=_v1.ones_initializer())
  gamma, beta = tf.convert_to_tensor(gamma), tf.convert_to_tensor(beta)
  if not training:
    return tf.nn.batch_normalization(inputs, tf.convert_to_tensor(moving_mean),
                                     tf.convert_to_tensor(moving_variance), beta, gamma,
                                     _BN_EPSILON), []
  mean, variance = tf.nn.moments(inputs, axes=[0])
  updates = [
      _v1.assign_sub(moving_mean, (moving_mean - mean) * (1. - _BN_MOMENTUM)),
      _v1.assign_sub(moving_variance, (moving_variance - variance) * (1. - _BN_MOMENTUM)),
  ]
  return tf.nn.batch_normalization(inputs, mean, variance, beta, gamma, _BN_EPSILON), updates


def _layer_summaries(net, scope):
  _v1.summary.scalar('%s/fraction_of_zero_values' % scope, tf.math.zero_fraction(net))
  _v1.summary.histogram('%s/activation' % scope, net)


def check_hidden_units(hidden_units, name='hidden_units'):
  if isinstance(hidden_units, (int, str)) or not hasattr(hidden_units, '__iter__') or \
      not list(hidden_units) or not all(errors.is_int(u) and u > 0 for u in hidden_units):
    raise errors.value_error('%s must be a non-empty list of positive ints.' % name,
                             'E.g. %s=[64, 32].' % name, **{name: hidden_units})
  return [int(u) for u in hidden_units]


def check_dropout(dropout, name='dropout'):
  if dropout is not None and not (isinstance(dropout, numbers.Real) and
                                  not isinstance(dropout, bool) and 0 <= dropout < 1):
    raise errors.value_error('%s must be None or a probability in [0, 1).' % name,
                             **{name: dropout})
  return dropout


def _activation(activation_fn):
  """A callable, None, or a Keras activation's name ('relu', 'tanh', ...), which the
  original's Dense layers took too."""
  if activation_fn is None or callable(activation_fn):
    return activation_fn
  if isinstance(activation_fn, str):
    try:
      import tf_keras  # pylint: disable=import-outside-toplevel
      activations = tf_keras.activations  # the original's (Keras 2) functions
    except ImportError:
      activations = tf.keras.activations
    try:
      return activations.get(activation_fn)
    except ValueError:
      pass
  raise errors.type_error('activation_fn must be callable or a Keras activation name.',
                          'E.g. activation_fn=tf.nn.relu or \'relu\'.',
                          activation_fn=activation_fn)


def check_network_arguments(feature_columns, hidden_units, activation_fn, dropout):
  """The checked network arguments: (feature_columns, hidden_units, activation_fn, dropout)."""
  feature_columns = canned_estimator.check_feature_columns('feature_columns', feature_columns)
  hidden_units = check_hidden_units(hidden_units)
  dropout = check_dropout(dropout)
  return feature_columns, hidden_units, _activation(activation_fn), dropout


def network(features, mode, units, feature_columns, hidden_units, activation_fn, dropout,
            batch_norm_, input_layer_partitioner=None):
  """The network's logits ([batch, units]) and batch-norm update ops, its variables made in
  the current variable scope (`input_from_feature_columns/...`, `hiddenlayer_<i>/...`,
  `logits/...`); the arguments are checked ones."""
  training = mode == ModeKeys.TRAIN
  update_ops = []
  features = canned_estimator.check_features(features)
  with _v1.variable_scope('input_from_feature_columns', partitioner=input_layer_partitioner):
    net = _v1.feature_column.input_layer(features, feature_columns)
  for index, layer_units in enumerate(hidden_units):
    with _v1.variable_scope('hiddenlayer_%d' % index) as scope:
      net = dense(net, layer_units, activation_fn)
      if dropout and training:
        net = tf.nn.dropout(net, rate=dropout)
      if batch_norm_:
        net, updates = batch_norm(net, 'batchnorm_%d' % index, training)
        update_ops.extend(updates)
    _layer_summaries(net, scope.name)
  with _v1.variable_scope('logits') as scope:
    logits = dense(net, units, None)
  _layer_summaries(logits, scope.name)
  return logits, update_ops


def dnn_part(feature_columns, hidden_units, activation_fn, dropout, batch_norm_, optimizer,
             argument='optimizer', learning_rate=LEARNING_RATE, partitioner=None,
             input_layer_partitioner=None):
  """The network as a `canned_estimator.Part` (scope `dnn`).  The partitioners (the v1
  estimators') split the variables of `dnn` and of its input layer."""
  feature_columns, hidden_units, activation_fn, dropout = check_network_arguments(
      feature_columns, hidden_units, activation_fn, dropout)

  def build(features, mode, logits_dimension):
    with _v1.variable_scope('dnn', partitioner=partitioner):
      return network(features, mode, logits_dimension, feature_columns, hidden_units,
                     activation_fn, dropout, batch_norm_, input_layer_partitioner)

  return canned_estimator.Part('dnn', build, optimizer, learning_rate, argument)


class DNNEstimator(canned_estimator.CannedEstimator):
  """A DNN with any head (`tf.estimator.DNNEstimator`)."""

  def __init__(self, head, hidden_units, feature_columns, model_dir=None, optimizer='Adagrad',
               activation_fn=tf.nn.relu, dropout=None, config=None, warm_start_from=None,
               batch_norm=False):  # pylint: disable=redefined-outer-name
    part = dnn_part(feature_columns, hidden_units, activation_fn, dropout, batch_norm,
                    optimizer)
    super().__init__(head, [part], model_dir, config, warm_start_from)


class DNNClassifier(DNNEstimator):
  """Classifies into `n_classes` with a DNN (`tf.estimator.DNNClassifier`)."""

  def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2,
               weight_column=None, label_vocabulary=None, optimizer='Adagrad',
               activation_fn=tf.nn.relu, dropout=None, config=None, warm_start_from=None,
               loss_reduction=head_base.SUM_OVER_BATCH_SIZE,
               batch_norm=False):  # pylint: disable=redefined-outer-name
    head = classification_heads.classification_head(n_classes, weight_column, label_vocabulary,
                                                    loss_reduction)
    super().__init__(head, hidden_units, feature_columns, model_dir, optimizer, activation_fn,
                     dropout, config, warm_start_from, batch_norm)


class DNNRegressor(DNNEstimator):
  """Predicts `label_dimension` real values with a DNN (`tf.estimator.DNNRegressor`)."""

  def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension=1,
               weight_column=None, optimizer='Adagrad', activation_fn=tf.nn.relu, dropout=None,
               config=None, warm_start_from=None, loss_reduction=head_base.SUM_OVER_BATCH_SIZE,
               batch_norm=False):  # pylint: disable=redefined-outer-name
    head = regression_heads.RegressionHead(label_dimension, weight_column, loss_reduction)
    super().__init__(head, hidden_units, feature_columns, model_dir, optimizer, activation_fn,
                     dropout, config, warm_start_from, batch_norm)
