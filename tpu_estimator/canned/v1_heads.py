"""The TF1-semantics heads the head-taking `tf.compat.v1.estimator` classes were given:
tensorflow-estimator 2.15's head factories of `canned/head.py` (those `tf.contrib.estimator`'s
head functions wrapped in TF 1.x), with their argument order and defaults.

They return this package's heads with what the v1 heads did differently from
`tf.estimator`'s: the loss is reduced by a `tf.compat.v1.losses.Reduction` (`SUM` by default),
and a binary head's `auc` / `auc_precision_recall` are `tf.compat.v1.metrics.auc` ones.  Metric
keys, prediction keys and export signatures are the ones every head here has (the original's).
"""
from tpu_estimator.canned import classification_heads
from tpu_estimator.canned import regression_heads
from tpu_estimator.canned import v1

SUM = v1.SUM  # tf.compat.v1.losses.Reduction.SUM, the v1 heads' default


def binary_head(weight_column=None, thresholds=None, label_vocabulary=None, loss_reduction=SUM,
                loss_fn=None, name=None):
  """Two classes from one logit, sigmoid cross-entropy (the original's
  `_binary_logistic_head_with_sigmoid_cross_entropy_loss`)."""
  return v1.with_v1_loss(v1.BinaryClassHead(weight_column, thresholds, label_vocabulary,
                                            v1.loss_reduction_of(loss_reduction), loss_fn,
                                            name), loss_reduction)


def multi_class_head(n_classes, weight_column=None, label_vocabulary=None, loss_reduction=SUM,
                     loss_fn=None, name=None):
  """`n_classes` (> 2) classes, softmax cross-entropy (the original's
  `_multi_class_head_with_softmax_cross_entropy_loss`)."""
  return v1.with_v1_loss(classification_heads.MultiClassHead(
      n_classes, weight_column, label_vocabulary, v1.loss_reduction_of(loss_reduction),
      loss_fn, name), loss_reduction)


def regression_head(weight_column=None, label_dimension=1, loss_reduction=SUM, loss_fn=None,
                    inverse_link_fn=None, name=None):
  """`label_dimension` real values, mean squared error (the original's `_regression_head`)."""
  return v1.with_v1_loss(regression_heads.RegressionHead(
      label_dimension, weight_column, v1.loss_reduction_of(loss_reduction), loss_fn,
      inverse_link_fn, name), loss_reduction)


def binary_or_multi_class_head(n_classes, weight_column, label_vocabulary, loss_reduction):
  """The head a v1 classifier makes for `n_classes` (the original's
  `_binary_logistic_or_multi_class_head`)."""
  return v1.classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)


# The original's names (module tensorflow_estimator.python.estimator.canned.head).
LEGACY_NAMES = {
    '_binary_logistic_head_with_sigmoid_cross_entropy_loss': binary_head,
    '_multi_class_head_with_softmax_cross_entropy_loss': multi_class_head,
    '_regression_head': regression_head,
    '_binary_logistic_or_multi_class_head': binary_or_multi_class_head,
}
