"""The experimental logit_fn API of tensorflow-estimator 2.15
(`tf.compat.v1.estimator.experimental.{dnn_logit_fn_builder, linear_logit_fn_builder,
call_logit_fn}`, also `tf.estimator.experimental.call_logit_fn`): a canned network as a
function `logit_fn(features[, mode])` a user's `model_fn` calls to get logits, then hands them
to a head.

The networks are the canned estimators' (`dnn.network`, `tf.compat.v1.feature_column.
linear_model`), their variables made in the variable scope the logit_fn is called in, under
the original's names (`hiddenlayer_0/kernel`, `logits/bias`, `linear_model/<column>/weights`,
`linear_model/bias_weights`): called inside `variable_scope('dnn')` they are the v1
`DNNEstimator`'s.  A DNN's batch-normalization updates go to `tf.GraphKeys.UPDATE_OPS`, which a
`model_fn` runs with its train op (the original's Keras layers put them there too).
"""
import warnings

import tensorflow as tf

from tpu_estimator.canned import canned_estimator
from tpu_estimator.canned import dnn
from tpu_estimator.canned import linear
from tpu_estimator.distribute import input_fn as input_fn_lib
from tpu_estimator import errors
from tpu_estimator import quiet

_v1 = tf.compat.v1


def dnn_logit_fn_builder(units, hidden_units, feature_columns, activation_fn, dropout,
                         input_layer_partitioner, batch_norm):
  """A `logit_fn(features, mode)` of a feed-forward network with `units` logits: Dense
  layers of `hidden_units` with `activation_fn`, dropout (rate `dropout`) in training, batch
  normalization when `batch_norm`; the input layer's variables under
  `input_layer_partitioner`."""
  if not errors.is_int(units):
    raise ValueError('units must be an int.  Given type: {}. Pass the number of logits, e.g. '
                     'units=head.logits_dimension.'.format(type(units)))

  def dnn_logit_fn(features, mode):
    # Checked here, where the original's network failed on them (no hidden layer: logits
    # straight from the input layer, as the original's).
    no_hidden = hasattr(hidden_units, '__len__') and len(hidden_units) == 0
    columns, hidden, activation, rate = dnn.check_network_arguments(
        feature_columns, [1] if no_hidden else hidden_units, activation_fn, dropout)
    logits, update_ops = dnn.network(features, mode, int(units), columns,
                                     [] if no_hidden else hidden, activation, rate, batch_norm,
                                     input_layer_partitioner)
    for op in update_ops:
      _v1.add_to_collection(_v1.GraphKeys.UPDATE_OPS, op)
    return logits

  return dnn_logit_fn


def _zero_fraction(variables):
  sizes = [tf.cast(tf.size(v), tf.float32) for v in variables]
  zeros = [tf.cast(tf.math.count_nonzero(tf.equal(v, 0.)), tf.float32) for v in variables]
  return tf.math.divide_no_nan(tf.add_n(zeros), tf.add_n(sizes))


def linear_logit_fn_builder(units, feature_columns, sparse_combiner='sum'):
  """A `logit_fn(features)` of a linear model with `units` logits over `feature_columns`
  (`sparse_combiner` reduces a multivalent categorical column: 'sum', 'mean' or 'sqrtn')."""

  def linear_logit_fn(features):  # checked here, where the original's model failed
    columns = canned_estimator.check_feature_columns('feature_columns', feature_columns)
    linear.check_sparse_combiner(sparse_combiner)
    features = canned_estimator.check_features(features)
    cols_to_vars = {}
    with quiet.internal_calls(), warnings.catch_warnings():  # tf.feature_column's TF1 code
      warnings.filterwarnings('ignore', message='`layer.add_variable` is deprecated')
      logits = _v1.feature_column.linear_model(features, columns, units=units,
                                               sparse_combiner=sparse_combiner,
                                               cols_to_vars=cols_to_vars)
    bias = cols_to_vars.pop('bias')
    weights = [part for parts in cols_to_vars.values() for part in parts]
    if units > 1:
      _v1.summary.histogram('bias', bias)
    else:
      _v1.summary.scalar('bias', tf.reshape(tf.convert_to_tensor(bias[0]), [-1])[0])
    if weights:
      _v1.summary.scalar('fraction_of_zero_weights', _zero_fraction(weights))
    return logits

  return linear_logit_fn


def call_logit_fn(logit_fn, features, mode, params, config):
  """Calls `logit_fn(features=features, ...)` with those of `mode`, `params` and `config` it
  takes; its result must be a Tensor or a dict of Tensors by string keys (a ValueError
  otherwise)."""
  if not callable(logit_fn):
    raise errors.type_error('logit_fn must be callable.', 'Pass e.g. the function '
                            'dnn_logit_fn_builder(...) returned.', logit_fn=logit_fn)
  kwargs = input_fn_lib.accepted_kwargs(logit_fn, mode=mode, params=params, config=config)
  result = logit_fn(features=features, **kwargs)
  tensor = lambda value: isinstance(value, (tf.Tensor, tf.Variable))
  if tensor(result) or (isinstance(result, dict) and all(
      isinstance(key, str) and tensor(value) for key, value in result.items())):
    return result
  raise ValueError('logit_fn should return a Tensor or a dictionary mapping strings to '
                   'Tensors.  logit_fn returned: %s. Return the logits from logit_fn.'
                   % (result,))


NAMES = ('call_logit_fn', 'dnn_logit_fn_builder', 'linear_logit_fn_builder')
