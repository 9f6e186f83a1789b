"""Classification heads: `BinaryClassHead` (one logit, sigmoid cross-entropy) and
`MultiClassHead` (n logits, softmax cross-entropy), with the original's predictions, metrics
and export signatures (`classification` as serving_default, `predict`, and for binary also
`regression` of the positive-class probability)."""
import tensorflow as tf

from tpu_estimator.canned import head_base
from tpu_estimator.canned import keys as keys_lib
from tpu_estimator.canned.keys import MetricKeys
from tpu_estimator.canned.keys import PredictionKeys
from tpu_estimator import errors
from tpu_estimator import export as export_lib

_v1 = tf.compat.v1


def check_label_vocabulary(label_vocabulary, n_classes):
  if label_vocabulary is None:
    return None
  if not isinstance(label_vocabulary, (list, tuple)) or \
      not all(isinstance(v, (str, bytes)) for v in label_vocabulary):
    raise errors.type_error('label_vocabulary must be a list or tuple of strings.',
                            label_vocabulary=label_vocabulary)
  label_vocabulary = [v.decode('utf-8') if isinstance(v, bytes) else v for v in label_vocabulary]
  if len(label_vocabulary) != n_classes:
    raise errors.value_error('label_vocabulary must have n_classes entries.',
                             label_vocabulary=label_vocabulary, n_classes=n_classes)
  if len(set(label_vocabulary)) != len(label_vocabulary):
    raise errors.value_error('label_vocabulary has duplicate entries.',
                             label_vocabulary=label_vocabulary)
  return list(label_vocabulary)


class _ClassHead(head_base.Head):
  """What binary and multi-class heads share: class ids from labels (through the vocabulary
  when given), class names in predictions, the classification export."""

  def __init__(self, n_classes, logits_dimension, weight_column, label_vocabulary,
               loss_reduction, loss_fn, name):
    super().__init__(logits_dimension, weight_column, loss_reduction, loss_fn, name)
    self._n_classes = n_classes
    self._label_vocabulary = check_label_vocabulary(label_vocabulary, n_classes)

  n_classes = property(lambda self: self._n_classes)

  def _class_ids_of_labels(self, labels):
    labels = self._expand_labels(labels, 1)
    if self._label_vocabulary is not None:
      if labels.dtype != tf.string:
        raise errors.value_error('With label_vocabulary, labels must be strings.',
                                 labels_dtype=labels.dtype.name)
      table = tf.lookup.StaticHashTable(
          tf.lookup.KeyValueTensorInitializer(
              self._label_vocabulary, tf.range(self._n_classes, dtype=tf.int64)),
          default_value=-1, name='class_id_lookup')
      ids = table.lookup(labels)
      check = tf.debugging.assert_non_negative(
          ids, message='Labels must be in the label_vocabulary %s.' % self._label_vocabulary)
    else:
      # Two classes take bool labels too, as the original's binary heads (which cast their
      # labels): tensorflow/models' census program gives `tf.equal(labels, '>50K')`.
      boolean = labels.dtype == tf.bool and self._n_classes == 2
      if labels.dtype == tf.string or not (labels.dtype.is_integer or labels.dtype.is_floating
                                           or boolean):
        raise errors.value_error('Labels must be integer class ids (or strings with '
                                 'label_vocabulary).', labels_dtype=labels.dtype.name)
      ids = tf.cast(labels, tf.int64)
      check = tf.debugging.assert_equal(
          tf.reduce_all((ids >= 0) & (ids < self._n_classes)), True,
          message='Labels must be class ids in [0, %d).' % self._n_classes)
    with tf.control_dependencies([check]):
      return tf.identity(ids)

  def _labels(self, labels):
    return self._class_ids_of_labels(labels)

  def _class_names(self, class_ids):
    if self._label_vocabulary is not None:
      return tf.gather(tf.constant(self._label_vocabulary), class_ids)
    return tf.strings.as_string(class_ids)

  def _class_predictions(self, class_ids, batch):
    all_ids = tf.range(self._n_classes, dtype=tf.int32)
    all_names = self._class_names(tf.cast(all_ids, tf.int64))
    return {
        PredictionKeys.CLASS_IDS: class_ids,
        PredictionKeys.CLASSES: self._class_names(class_ids),
        PredictionKeys.ALL_CLASS_IDS: tf.tile(all_ids[tf.newaxis], [batch, 1]),
        PredictionKeys.ALL_CLASSES: tf.tile(all_names[tf.newaxis], [batch, 1]),
    }

  def _classification_output(self, predictions):
    return export_lib.ClassificationOutput(scores=predictions[PredictionKeys.PROBABILITIES],
                                           classes=predictions[PredictionKeys.ALL_CLASSES])


class BinaryClassHead(_ClassHead):
  """Two classes from one logit: sigmoid cross-entropy loss (`tf.estimator.BinaryClassHead`).
  `thresholds` add accuracy/precision/recall at those probabilities to the metrics."""

  def __init__(self, weight_column=None, thresholds=None, label_vocabulary=None,
               loss_reduction=head_base.SUM_OVER_BATCH_SIZE, loss_fn=None, name=None):
    super().__init__(2, 1, weight_column, label_vocabulary, loss_reduction, loss_fn, name)
    thresholds = () if thresholds is None else tuple(thresholds)
    for threshold in thresholds:
      if not 0. < threshold < 1.:
        raise errors.value_error('thresholds must be in (0, 1).', thresholds=thresholds)
    self._thresholds = thresholds

  def _unweighted_loss(self, labels, logits):
    return tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(labels, tf.float32),
                                                   logits=logits)

  def predictions(self, logits, keys=None):  # pylint: disable=redefined-outer-name
    logits = self._logits(logits)
    two_class_logits = tf.concat([tf.zeros_like(logits), logits], axis=-1)
    class_ids = tf.expand_dims(tf.argmax(two_class_logits, axis=-1), -1)
    result = {PredictionKeys.LOGITS: logits, PredictionKeys.LOGISTIC: tf.sigmoid(logits),
              PredictionKeys.PROBABILITIES: tf.nn.softmax(two_class_logits)}
    result.update(self._class_predictions(class_ids, tf.shape(logits)[0]))
    return {k: v for k, v in result.items() if keys is None or k in keys}

  def _metric_inputs(self, labels, logits, predictions, unweighted_loss, weights):
    inputs = super()._metric_inputs(labels, logits, predictions, unweighted_loss, weights)
    inputs['float_labels'] = tf.cast(labels, tf.float32)
    return inputs

  def _metric_entries(self):
    entry, scores = self._entry, ['float_labels', 'logistic']
    entries = [
        entry(MetricKeys.LOSS_MEAN, 'Mean', ['loss']),
        entry(MetricKeys.ACCURACY, 'Accuracy', ['labels', 'class_ids']),
        entry(MetricKeys.PRECISION, 'Precision', ['labels', 'class_ids']),
        entry(MetricKeys.RECALL, 'Recall', ['labels', 'class_ids']),
        entry(MetricKeys.PREDICTION_MEAN, 'Mean', ['logistic']),
        entry(MetricKeys.LABEL_MEAN, 'Mean', ['float_labels']),
        entry(MetricKeys.ACCURACY_BASELINE, head_base.BASELINE,
              [self.metric_key(MetricKeys.LABEL_MEAN)], None),
        entry(MetricKeys.AUC, 'AUC', scores, curve='ROC'),
        entry(MetricKeys.AUC_PR, 'AUC', scores, curve='PR'),
    ]
    for threshold in self._thresholds:
      entries += [
          entry(MetricKeys.ACCURACY_AT_THRESHOLD % threshold, 'BinaryAccuracy', scores,
                threshold=threshold),
          entry(MetricKeys.PRECISION_AT_THRESHOLD % threshold, 'Precision', scores,
                thresholds=threshold),
          entry(MetricKeys.RECALL_AT_THRESHOLD % threshold, 'Recall', scores,
                thresholds=threshold)]
    return entries

  def _export_outputs(self, predictions):
    classification = self._classification_output(predictions)
    return {
        tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: classification,
        keys_lib.CLASSIFY_SIGNATURE: classification,
        keys_lib.REGRESS_SIGNATURE: export_lib.RegressionOutput(
            value=predictions[PredictionKeys.LOGISTIC]),
        keys_lib.PREDICT_SIGNATURE: head_base.predict_output(predictions),
    }


class MultiClassHead(_ClassHead):
  """`n_classes` > 2 classes from as many logits: softmax cross-entropy loss
  (`tf.estimator.MultiClassHead`)."""

  def __init__(self, n_classes, weight_column=None, label_vocabulary=None,
               loss_reduction=head_base.SUM_OVER_BATCH_SIZE, loss_fn=None, name=None):
    if not errors.is_int(n_classes) or n_classes <= 2:
      raise errors.value_error('n_classes must be an int > 2 (use BinaryClassHead for 2).',
                               n_classes=n_classes)
    n_classes = int(n_classes)
    super().__init__(n_classes, n_classes, weight_column, label_vocabulary, loss_reduction,
                     loss_fn, name)

  def _unweighted_loss(self, labels, logits):
    return tf.expand_dims(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.squeeze(labels, -1), logits=logits), -1)

  def predictions(self, logits, keys=None):  # pylint: disable=redefined-outer-name
    logits = self._logits(logits)
    class_ids = tf.expand_dims(tf.argmax(logits, axis=-1), -1)
    result = {PredictionKeys.LOGITS: logits,
              PredictionKeys.PROBABILITIES: tf.nn.softmax(logits)}
    result.update(self._class_predictions(class_ids, tf.shape(logits)[0]))
    return {k: v for k, v in result.items() if keys is None or k in keys}

  def _metric_entries(self):
    return [self._entry(MetricKeys.LOSS_MEAN, 'Mean', ['loss']),
            self._entry(MetricKeys.ACCURACY, 'Accuracy', ['labels', 'class_ids'])]

  def _export_outputs(self, predictions):
    classification = self._classification_output(predictions)
    return {
        tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: classification,
        keys_lib.CLASSIFY_SIGNATURE: classification,
        keys_lib.PREDICT_SIGNATURE: head_base.predict_output(predictions),
    }


def classification_head(n_classes, weight_column=None, label_vocabulary=None,
                        loss_reduction=head_base.SUM_OVER_BATCH_SIZE, name=None):
  """The head a canned classifier uses for `n_classes` (binary for 2)."""
  if not errors.is_int(n_classes) or n_classes < 2:
    raise errors.value_error('n_classes must be an int >= 2.', n_classes=n_classes)
  n_classes = int(n_classes)
  if n_classes == 2:
    return BinaryClassHead(weight_column=weight_column, label_vocabulary=label_vocabulary,
                           loss_reduction=loss_reduction, name=name)
  return MultiClassHead(n_classes, weight_column=weight_column,
                        label_vocabulary=label_vocabulary, loss_reduction=loss_reduction,
                        name=name)
