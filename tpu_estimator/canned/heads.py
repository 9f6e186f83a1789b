"""The head factory functions of `tf.contrib.estimator` (TF 1.x), e.g.
`binary_classification_head(...)`, with their argument order, returning our head classes."""
from tpu_estimator.canned.classification_heads import BinaryClassHead
from tpu_estimator.canned.classification_heads import MultiClassHead
from tpu_estimator.canned import head_base
from tpu_estimator.canned.multi_head import MultiHead
from tpu_estimator.canned.multi_label_head import MultiLabelHead
from tpu_estimator.canned.regression_heads import LogisticRegressionHead
from tpu_estimator.canned.regression_heads import PoissonRegressionHead
from tpu_estimator.canned.regression_heads import RegressionHead

_MEAN = head_base.SUM_OVER_BATCH_SIZE


def binary_classification_head(weight_column=None, thresholds=None, label_vocabulary=None,
                               loss_reduction=_MEAN, loss_fn=None, name=None):
  return BinaryClassHead(weight_column, thresholds, label_vocabulary, loss_reduction, loss_fn,
                         name)


def multi_class_head(n_classes, weight_column=None, label_vocabulary=None,
                     loss_reduction=_MEAN, loss_fn=None, name=None):
  return MultiClassHead(n_classes, weight_column, label_vocabulary, loss_reduction, loss_fn,
                        name)


def multi_label_head(n_classes, weight_column=None, thresholds=None, label_vocabulary=None,
                     loss_reduction=_MEAN, loss_fn=None, classes_for_class_based_metrics=None,
                     name=None):
  return MultiLabelHead(n_classes, weight_column, thresholds, label_vocabulary, loss_reduction,
                        loss_fn, classes_for_class_based_metrics, name)


def regression_head(weight_column=None, label_dimension=1, loss_reduction=_MEAN, loss_fn=None,
                    inverse_link_fn=None, name=None):
  return RegressionHead(label_dimension, weight_column, loss_reduction, loss_fn,
                        inverse_link_fn, name)


def poisson_regression_head(weight_column=None, label_dimension=1, loss_reduction=_MEAN,
                            compute_full_loss=True, name=None):
  return PoissonRegressionHead(label_dimension, weight_column, loss_reduction,
                               compute_full_loss, name)


def logistic_regression_head(weight_column=None, loss_reduction=_MEAN, name=None):
  return LogisticRegressionHead(weight_column, loss_reduction, name)


def multi_head(heads, head_weights=None):
  return MultiHead(heads, head_weights)
