"""`DNNLinearCombinedClassifier`, `DNNLinearCombinedRegressor` and
`DNNLinearCombinedEstimator`: wide-and-deep, the sum of a linear model's and a DNN's logits
(`tf.estimator.DNNLinearCombined*` of tensorflow-estimator 2.15).

Each part trains with its own optimizer on its own variables (`linear/...` with Ftrl,
learning rate min(0.005, 1/sqrt(columns)); `dnn/...` with Adagrad, 0.001, by default).  The
DNN's optimizer advances the global step; the linear one then counts its own iterations
(`training/Ftrl/iter`), as in the original's checkpoints.
"""
import tensorflow as tf

from tpu_estimator.canned import canned_estimator
from tpu_estimator.canned import classification_heads
from tpu_estimator.canned import dnn
from tpu_estimator.canned import head_base
from tpu_estimator.canned import linear
from tpu_estimator.canned import regression_heads
from tpu_estimator import errors

LINEAR_LEARNING_RATE_CEILING = 0.005


def combined_parts(linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
                   dnn_hidden_units, dnn_activation_fn, dnn_dropout, batch_norm,
                   linear_sparse_combiner, dnn_partitioner=None, input_layer_partitioner=None):
  """The DNN part (first: it owns the global step) and the linear part, those configured
  (the partitioners are the v1 estimators')."""
  if not linear_feature_columns and not dnn_feature_columns:
    raise errors.value_error(
        'Either linear_feature_columns or dnn_feature_columns must be defined.',
        linear_feature_columns=linear_feature_columns, dnn_feature_columns=dnn_feature_columns)
  parts = []
  if dnn_feature_columns:
    if not dnn_hidden_units:
      raise errors.value_error('dnn_hidden_units must be defined when dnn_feature_columns is '
                               'specified.', dnn_hidden_units=dnn_hidden_units)
    parts.append(dnn.dnn_part(dnn_feature_columns, dnn_hidden_units, dnn_activation_fn,
                              dnn_dropout, batch_norm, dnn_optimizer, argument='dnn_optimizer',
                              partitioner=dnn_partitioner,
                              input_layer_partitioner=input_layer_partitioner))
  if linear_feature_columns:
    parts.append(linear.linear_part(linear_feature_columns, linear_optimizer,
                                    linear_sparse_combiner, argument='linear_optimizer',
                                    rate_ceiling=LINEAR_LEARNING_RATE_CEILING,
                                    partitioner=input_layer_partitioner))
  return parts


class DNNLinearCombinedEstimator(canned_estimator.CannedEstimator):
  """Wide-and-deep with any head (`tf.estimator.DNNLinearCombinedEstimator`)."""

  def __init__(self, head, model_dir=None, linear_feature_columns=None, linear_optimizer='Ftrl',
               dnn_feature_columns=None, dnn_optimizer='Adagrad', dnn_hidden_units=None,
               dnn_activation_fn=tf.nn.relu, dnn_dropout=None, config=None,
               batch_norm=False, linear_sparse_combiner='sum', warm_start_from=None):
    parts = combined_parts(linear_feature_columns, linear_optimizer, dnn_feature_columns,
                           dnn_optimizer, dnn_hidden_units, dnn_activation_fn, dnn_dropout,
                           batch_norm, linear_sparse_combiner)
    super().__init__(head, parts, model_dir, config, warm_start_from)


class DNNLinearCombinedClassifier(canned_estimator.CannedEstimator):
  """Wide-and-deep classifier (`tf.estimator.DNNLinearCombinedClassifier`)."""

  def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer='Ftrl',
               dnn_feature_columns=None, dnn_optimizer='Adagrad', dnn_hidden_units=None,
               dnn_activation_fn=tf.nn.relu, dnn_dropout=None, n_classes=2, weight_column=None,
               label_vocabulary=None, config=None, warm_start_from=None,
               loss_reduction=head_base.SUM_OVER_BATCH_SIZE, batch_norm=False,
               linear_sparse_combiner='sum'):
    head = classification_heads.classification_head(n_classes, weight_column, label_vocabulary,
                                                    loss_reduction)
    parts = combined_parts(linear_feature_columns, linear_optimizer, dnn_feature_columns,
                           dnn_optimizer, dnn_hidden_units, dnn_activation_fn, dnn_dropout,
                           batch_norm, linear_sparse_combiner)
    super().__init__(head, parts, model_dir, config, warm_start_from)


class DNNLinearCombinedRegressor(canned_estimator.CannedEstimator):
  """Wide-and-deep regressor (`tf.estimator.DNNLinearCombinedRegressor`)."""

  def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer='Ftrl',
               dnn_feature_columns=None, dnn_optimizer='Adagrad', dnn_hidden_units=None,
               dnn_activation_fn=tf.nn.relu, dnn_dropout=None, label_dimension=1,
               weight_column=None, config=None, warm_start_from=None,
               loss_reduction=head_base.SUM_OVER_BATCH_SIZE, batch_norm=False,
               linear_sparse_combiner='sum'):
    head = regression_heads.RegressionHead(label_dimension, weight_column, loss_reduction)
    parts = combined_parts(linear_feature_columns, linear_optimizer, dnn_feature_columns,
                           dnn_optimizer, dnn_hidden_units, dnn_activation_fn, dnn_dropout,
                           batch_norm, linear_sparse_combiner)
    super().__init__(head, parts, model_dir, config, warm_start_from)
