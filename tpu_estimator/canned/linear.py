"""`LinearClassifier`, `LinearRegressor` and `LinearEstimator`: a linear model over
`tf.feature_column` input (`tf.estimator.Linear*` of tensorflow-estimator 2.15).

`tf.compat.v1.feature_column.linear_model` in the `linear` scope makes the original's
variables (`linear/linear_model/<column>/weights`, `linear/linear_model/bias_weights`, all
zero-initialised), and the default optimizer is Ftrl with learning rate
min(0.2, 1/sqrt(number of columns)), as the original's.
"""
import math

import tensorflow as tf

from tpu_estimator.canned import canned_estimator
from tpu_estimator.canned import classification_heads
from tpu_estimator.canned import head_base
from tpu_estimator.canned import regression_heads
from tpu_estimator.canned import sdca
from tpu_estimator import errors

_v1 = tf.compat.v1
_SPARSE_COMBINERS = ('mean', 'sqrtn', 'sum')


def learning_rate(feature_columns, ceiling=0.2):
  return min(ceiling, 1. / math.sqrt(len(feature_columns)))


def check_sparse_combiner(sparse_combiner):
  if sparse_combiner not in _SPARSE_COMBINERS:
    raise errors.value_error('sparse_combiner must be one of %s.' % (_SPARSE_COMBINERS,),
                             sparse_combiner=sparse_combiner)
  return sparse_combiner


def linear_part(feature_columns, optimizer, sparse_combiner='sum', argument='optimizer',
                rate_ceiling=0.2, partitioner=None):
  """The linear model as a `canned_estimator.Part` (scope `linear`; `partitioner`, the v1
  estimators', splits its variables)."""
  feature_columns = canned_estimator.check_feature_columns('feature_columns', feature_columns)
  check_sparse_combiner(sparse_combiner)

  def build(features, mode, logits_dimension):
    del mode
    features = canned_estimator.check_features(features)
    with _v1.variable_scope('linear', partitioner=partitioner):
      logits = _v1.feature_column.linear_model(features, feature_columns,
                                               units=logits_dimension,
                                               sparse_combiner=sparse_combiner)
    for bias in _v1.global_variables():
      if bias.op.name == 'linear/linear_model/bias_weights':
        _v1.summary.histogram('bias', bias)
    return logits, []

  return canned_estimator.Part('linear', build, optimizer,
                               learning_rate(feature_columns, rate_ceiling), argument)


def sdca_model_fn(head, feature_columns, optimizer, sparse_combiner, partitioner=None,
                  prefix=''):
  """The `model_fn` of a linear model trained by a `LinearSDCA` `optimizer`, after the checks
  the original made (binary or one-dimensional heads, v2 columns, sparse_combiner 'sum')."""
  feature_columns = canned_estimator.check_feature_columns('feature_columns', feature_columns)
  loss_type = sdca.check_estimator(head, feature_columns, sparse_combiner)
  return sdca.model_fn(head, feature_columns, optimizer, loss_type, partitioner, prefix)


class LinearEstimator(canned_estimator.CannedEstimator):
  """A linear model with any head (`tf.estimator.LinearEstimator`)."""

  def __init__(self, head, feature_columns, model_dir=None, optimizer='Ftrl', config=None,
               sparse_combiner='sum', warm_start_from=None):
    if isinstance(optimizer, sdca.LinearSDCA):
      super().__init__(head, [], model_dir, config, warm_start_from,
                       model_fn=sdca_model_fn(head, feature_columns, optimizer, sparse_combiner))
      return
    part = linear_part(feature_columns, optimizer, sparse_combiner)
    super().__init__(head, [part], model_dir, config, warm_start_from)


class LinearClassifier(LinearEstimator):
  """Classifies into `n_classes` with a linear model (`tf.estimator.LinearClassifier`)."""

  def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None,
               label_vocabulary=None, optimizer='Ftrl', config=None, warm_start_from=None,
               loss_reduction=head_base.SUM_OVER_BATCH_SIZE, sparse_combiner='sum'):
    head = classification_heads.classification_head(n_classes, weight_column, label_vocabulary,
                                                    loss_reduction)
    super().__init__(head, feature_columns, model_dir, optimizer, config, sparse_combiner,
                     warm_start_from)


class LinearRegressor(LinearEstimator):
  """Predicts `label_dimension` real values with a linear model
  (`tf.estimator.LinearRegressor`)."""

  def __init__(self, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
               optimizer='Ftrl', config=None, warm_start_from=None,
               loss_reduction=head_base.SUM_OVER_BATCH_SIZE, sparse_combiner='sum'):
    head = regression_heads.RegressionHead(label_dimension, weight_column, loss_reduction)
    super().__init__(head, feature_columns, model_dir, optimizer, config, sparse_combiner,
                     warm_start_from)
