"""Regression heads: `RegressionHead` (squared error), `PoissonRegressionHead` (log-Poisson
loss, predictions `exp(logits)`) and `LogisticRegressionHead` (sigmoid cross-entropy on labels
in [0, 1], predictions `sigmoid(logits)`), with the original's predictions, metrics and export
signatures (`regression` as serving_default, `predict`)."""
import tensorflow as tf

from tpu_estimator.canned import head_base
from tpu_estimator.canned import keys as keys_lib
from tpu_estimator.canned.keys import MetricKeys
from tpu_estimator.canned.keys import PredictionKeys
from tpu_estimator import errors
from tpu_estimator import export as export_lib


class RegressionHead(head_base.Head):
  """`label_dimension` real-valued targets (`tf.estimator.RegressionHead`).  With
  `inverse_link_fn` the predictions are `inverse_link_fn(logits)` and the logits are predicted
  too."""

  def __init__(self, label_dimension=1, weight_column=None,
               loss_reduction=head_base.SUM_OVER_BATCH_SIZE, loss_fn=None, inverse_link_fn=None,
               name=None):
    if not errors.is_int(label_dimension) or label_dimension < 1:
      raise errors.value_error('label_dimension must be an int >= 1.',
                               label_dimension=label_dimension)
    if inverse_link_fn is not None and not callable(inverse_link_fn):
      raise errors.type_error('inverse_link_fn must be callable.',
                              inverse_link_fn=inverse_link_fn)
    super().__init__(int(label_dimension), weight_column, loss_reduction, loss_fn, name)
    self._inverse_link_fn = inverse_link_fn

  def _labels(self, labels):
    labels = self._expand_labels(labels, self._logits_dimension)
    if labels.dtype == tf.string:
      raise errors.value_error('Regression labels must be numbers.', labels_dtype='string')
    labels = tf.cast(labels, tf.float32)
    last = tf.compat.dimension_value(labels.shape[-1]) if labels.shape.rank else None
    if last is not None and last != self._logits_dimension:
      raise errors.value_error('labels shape must be [batch_size, %d] (label_dimension).'
                               % self._logits_dimension, labels_shape=labels.shape.as_list())
    return labels

  def _unweighted_loss(self, labels, logits):
    return tf.math.squared_difference(logits, labels)

  def predictions(self, logits, keys=None):  # pylint: disable=redefined-outer-name
    logits = self._logits(logits)
    if self._inverse_link_fn is None:
      result = {PredictionKeys.PREDICTIONS: logits}
    else:
      result = {PredictionKeys.PREDICTIONS: self._inverse_link_fn(logits),
                PredictionKeys.LOGITS: logits}
    return {k: v for k, v in result.items() if keys is None or k in keys}

  def _metric_entries(self):
    return [self._entry(MetricKeys.LOSS_MEAN, 'Mean', ['loss']),
            self._entry(MetricKeys.PREDICTION_MEAN, 'Mean', ['predictions']),
            self._entry(MetricKeys.LABEL_MEAN, 'Mean', ['labels'])]

  def _export_outputs(self, predictions):
    regression = export_lib.RegressionOutput(value=predictions[PredictionKeys.PREDICTIONS])
    return {
        tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: regression,
        keys_lib.REGRESS_SIGNATURE: regression,
        keys_lib.PREDICT_SIGNATURE: head_base.predict_output(predictions),
    }


class PoissonRegressionHead(RegressionHead):
  """Counts: log-Poisson loss on `logits = log(rate)`, predictions `exp(logits)`
  (`tf.estimator.PoissonRegressionHead`).  `compute_full_loss` adds Stirling's term."""

  def __init__(self, label_dimension=1, weight_column=None,
               loss_reduction=head_base.SUM_OVER_BATCH_SIZE, compute_full_loss=True, name=None):
    self._compute_full_loss = compute_full_loss
    super().__init__(label_dimension, weight_column, loss_reduction,
                     loss_fn=self._poisson_loss, inverse_link_fn=tf.exp, name=name)

  def _poisson_loss(self, labels, logits):
    check = tf.debugging.assert_non_negative(labels, message='Labels must be >= 0 (counts).')
    with tf.control_dependencies([check]):
      return tf.nn.log_poisson_loss(targets=labels, log_input=logits,
                                    compute_full_loss=self._compute_full_loss)


class LogisticRegressionHead(RegressionHead):
  """Probabilities as targets: sigmoid cross-entropy on labels in [0, 1], predictions
  `sigmoid(logits)` (`tf.estimator.LogisticRegressionHead`)."""

  def __init__(self, weight_column=None, loss_reduction=head_base.SUM_OVER_BATCH_SIZE,
               name=None):
    super().__init__(1, weight_column, loss_reduction, loss_fn=self._logistic_loss,
                     inverse_link_fn=tf.sigmoid, name=name)

  @staticmethod
  def _logistic_loss(labels, logits):
    checks = [tf.debugging.assert_non_negative(labels, message='Labels must be in [0, 1].'),
              tf.debugging.assert_less_equal(labels, 1., message='Labels must be in [0, 1].')]
    with tf.control_dependencies(checks):
      return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
