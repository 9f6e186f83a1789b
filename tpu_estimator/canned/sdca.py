"""`LinearSDCA` (`tf.estimator.experimental.LinearSDCA` of tensorflow-estimator 2.15): trains a
`LinearClassifier` (binary) or `LinearRegressor` (one-dimensional label) by stochastic dual
coordinate ascent on TensorFlow's SDCA kernels, given as their `optimizer`.

The model is the linear model of `canned/linear.py` (the same variables, logits, head, metric
and prediction keys); only training differs: `canned/sdca_step.py` builds the step.  What the
original accepted and refused is checked when the estimator is made.
"""
import numbers
import warnings

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.canned import canned_estimator
from tpu_estimator.canned import classification_heads
from tpu_estimator.canned import regression_heads
from tpu_estimator.canned import sdca_step
from tpu_estimator import errors
from tpu_estimator import quiet
from tpu_estimator.specs import ModeKeys

_v1 = tf.compat.v1
_SCOPE = 'linear/linear_model/'


class LinearSDCA(object):
  """Stochastic dual coordinate ascent for `LinearClassifier` (binary) and `LinearRegressor`
  (one-dimensional), passed as their `optimizer` (it is not a `tf.train.Optimizer`).

  Args:
    example_id_column: the feature key of each example's id (a string Tensor of shape
      [batch_size]); the solver keeps one state per id across steps.
    num_loss_partitions: the number of workers training at once (1 on one machine).
    num_table_shards: the shards of the per-example state table (None: 1).
    symmetric_l1_regularization: a float >= 0.
    symmetric_l2_regularization: a float > 0 (typically larger than 1).
    adaptive: whether the solver samples examples adaptively.
  """

  def __init__(self, example_id_column, num_loss_partitions=1, num_table_shards=None,
               symmetric_l1_regularization=0.0, symmetric_l2_regularization=1.0,
               adaptive=False):
    if not isinstance(example_id_column, str) or not example_id_column:
      raise errors.type_error(
          'example_id_column must be the feature key (a string) of the example ids.',
          "E.g. LinearSDCA(example_id_column='example_id') with input_fn returning that key.",
          example_id_column=example_id_column)
    errors.check_positive_int('num_loss_partitions', num_loss_partitions)
    errors.check_positive_int('num_table_shards', num_table_shards, allow_none=True)
    _check_number('symmetric_l1_regularization', symmetric_l1_regularization, 0., False)
    _check_number('symmetric_l2_regularization', symmetric_l2_regularization, 0., True)
    if not isinstance(adaptive, bool):
      raise errors.type_error('adaptive must be a bool.', adaptive=adaptive)
    self._example_id_column = example_id_column
    self._num_loss_partitions = int(num_loss_partitions)
    self._num_table_shards = num_table_shards
    self._symmetric_l1_regularization = float(symmetric_l1_regularization)
    self._symmetric_l2_regularization = float(symmetric_l2_regularization)
    self._adaptive = adaptive

  example_id_column = property(lambda self: self._example_id_column)
  num_loss_partitions = property(lambda self: self._num_loss_partitions)
  num_table_shards = property(lambda self: self._num_table_shards)
  symmetric_l1_regularization = property(lambda self: self._symmetric_l1_regularization)
  symmetric_l2_regularization = property(lambda self: self._symmetric_l2_regularization)
  adaptive = property(lambda self: self._adaptive)

  def __repr__(self):
    return ('LinearSDCA(example_id_column=%r, num_loss_partitions=%d, num_table_shards=%r, '
            'symmetric_l1_regularization=%r, symmetric_l2_regularization=%r, adaptive=%r)' % (
                self._example_id_column, self._num_loss_partitions, self._num_table_shards,
                self._symmetric_l1_regularization, self._symmetric_l2_regularization,
                self._adaptive))


def _check_number(name, value, bound, strict):
  if isinstance(value, bool) or not isinstance(value, numbers.Real):
    raise errors.type_error('%s must be a float.' % name, **{name: value})
  if value < bound or (strict and value == bound):
    raise errors.value_error('%s must be %s %s.' % (name, '>' if strict else '>=', bound),
                             **{name: value})


def loss_type_of(head):
  """The kernel's loss for `head`: logistic for a binary classifier, squared for a
  one-dimensional regression; other heads are refused."""
  if isinstance(head, classification_heads.BinaryClassHead):
    return 'logistic_loss'
  if isinstance(head, classification_heads.MultiClassHead):
    raise errors.value_error('LinearSDCA cannot be used in a multi-class setting: it trains '
                             'binary classifiers only.',
                             'Use n_classes=2, or another optimizer (e.g. \'Ftrl\').',
                             n_classes=head.n_classes)
  plain_regression = isinstance(head, regression_heads.RegressionHead) and not isinstance(
      head, (regression_heads.PoissonRegressionHead, regression_heads.LogisticRegressionHead))
  if plain_regression and head.logits_dimension != 1:
    raise errors.value_error('LinearSDCA can only be used with a one-dimensional label.',
                             'Use label_dimension=1, or another optimizer.',
                             label_dimension=head.logits_dimension)
  if plain_regression:
    return 'squared_loss'
  raise errors.value_error('LinearSDCA trains a binary classification head (logistic loss) or '
                           'a one-dimensional regression head (squared loss) only.',
                           'Use another optimizer with this head.', head=head)


def _kind(column):
  """'sparse' (categorical: ids) or 'dense' (a rank-1 dense column) as the solver reads it."""
  if not isinstance(column, _tf_internals.FeatureColumnV2):
    raise errors.value_error('V2 feature columns (tf.feature_column.*) are required when the '
                             'optimizer is a LinearSDCA.', column=column)
  if hasattr(column, 'get_sparse_tensors') and hasattr(column, 'num_buckets'):
    return 'sparse'
  if isinstance(column, _tf_internals.DenseColumnV2):
    if column.variable_shape.rank != 1:
      raise errors.value_error('LinearSDCA takes dense columns of rank 1 only.',
                               column=column.name, rank=column.variable_shape.rank)
    if 'Embedding' in type(column).__name__:  # the solver would not train their tables
      raise errors.value_error('LinearSDCA does not support embedding columns.',
                               'Use the categorical column itself.', column=column.name)
    return 'dense'
  raise errors.value_error('LinearSDCA does not support this column type.',
                           column_type=type(column).__name__)


def check_estimator(head, feature_columns, sparse_combiner):
  """What the original refused for a LinearSDCA estimator: returns the kernel's loss type."""
  if sparse_combiner != 'sum':
    raise errors.value_error('sparse_combiner must be "sum" when the optimizer is a LinearSDCA.',
                             sparse_combiner=sparse_combiner)
  for column in feature_columns:
    _kind(column)
  return loss_type_of(head)


def _groups(columns, features, prefix, batch_size):
  """The kernel's inputs and variables, column by column in name order, the bias last."""
  cache = _tf_internals.feature_transformation_cache(features)
  groups = []
  for column in columns:
    model = sdca_step.model_parts(_SCOPE + column.name + '/weights')
    unshrunk = sdca_step.unshrunk_parts(model, prefix)
    if _kind(column) == 'sparse':
      rows, ids, values = sdca_step.sparse_triples(column.get_sparse_tensors(cache, None),
                                                   column.num_buckets)
      groups.append(sdca_step.Group(model, unshrunk, rows, ids, values, None))
    else:
      dense = tf.cast(column.get_dense_tensor(cache, None), tf.float32)
      groups.append(sdca_step.Group(model, unshrunk, None, None, None, dense))
  bias = sdca_step.model_parts(_SCOPE + 'bias_weights')
  groups.append(sdca_step.Group(bias, sdca_step.unshrunk_parts(bias, prefix), None, None, None,
                                tf.ones([batch_size, 1])))
  return groups


def _example_ids(features, sdca):
  key = sdca.example_id_column
  if key not in features:
    raise errors.value_error('The example_id_column of LinearSDCA is not among the features.',
                             'Return it from input_fn (a string Tensor of shape [batch_size]): '
                             'features=%s.' % sorted(features), example_id_column=key)
  return features[key]


def _summaries(groups_or_parts):
  bias, others = groups_or_parts
  _v1.summary.scalar('bias', bias[0][0])
  if others:
    zeros = tf.add_n([tf.reduce_sum(tf.cast(tf.equal(p, 0.), tf.float32)) for p in others])
    total = float(sum(p.shape.num_elements() for p in others))
    _v1.summary.scalar('fraction_of_zero_weights', zeros / total)


def model_fn(head, feature_columns, sdca, loss_type, partitioner=None, prefix=''):
  """The `model_fn` of a linear model trained by `sdca` (a `LinearSDCA`): the logits of
  `tf.compat.v1.feature_column.linear_model` in the `linear` scope (under `partitioner`, the
  v1 estimators'); in TRAIN, the SDCA step.  `prefix` goes before the unshrunk copies' names
  (the original's v1 estimators named them `linear/<part's name>_unshrunk`)."""
  columns = sorted(feature_columns, key=lambda column: column.name)

  def fn(features, labels, mode, config):
    del config
    features = canned_estimator.check_features(features)
    if mode == ModeKeys.TRAIN:
      example_ids = _example_ids(features, sdca)
    with quiet.internal_calls(), warnings.catch_warnings():  # tf.feature_column's TF1 code
      warnings.filterwarnings('ignore', message='`layer.add_variable` is deprecated')
      with _v1.variable_scope('linear', partitioner=partitioner):
        logits = _v1.feature_column.linear_model(features, feature_columns, units=1,
                                                 sparse_combiner='sum')
    bias = sdca_step.model_parts(_SCOPE + 'bias_weights')
    _summaries((bias, [p for c in columns
                       for p in sdca_step.model_parts(_SCOPE + c.name + '/weights')]))
    if mode != ModeKeys.TRAIN:
      return head.create_estimator_spec(features, mode, logits, labels)

    def train_op_fn(loss):
      targets = tf.cast(tf.reshape(head._labels(labels), [-1, 1]), tf.float32)  # pylint: disable=protected-access
      groups = _groups(columns, features, prefix, tf.shape(targets)[0])
      table = sdca_step.StateTable(sdca.num_table_shards or 1)
      weights = tf.reshape(head._weights(features, targets), [-1])  # pylint: disable=protected-access
      _v1.summary.scalar('approximate_duality_gap', sdca_step.duality_gap(sdca, table, groups))
      _v1.summary.scalar('examples_seen', table.size())
      return sdca_step.train_op(sdca, table, loss_type, groups, example_ids,
                                tf.reshape(targets, [-1]), weights, loss,
                                _v1.train.get_or_create_global_step())

    return head.create_estimator_spec(features, mode, logits, labels, train_op_fn=train_op_fn)
  return fn
