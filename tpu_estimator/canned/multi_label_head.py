"""`MultiLabelHead`: any subset of `n_classes` classes per example, one sigmoid cross-entropy
per class averaged over the classes (`tf.estimator.MultiLabelHead`).

Labels are a multi-hot `[batch, n_classes]` Tensor, or a SparseTensor of class ids (or of class
names, with `label_vocabulary`).  Predictions: `logits`, `probabilities` (per-class sigmoid)
and `classes` (every class name, as the original).  Metrics: `average_loss`, `auc`,
`auc_precision_recall`, per-threshold accuracy/precision/recall, and per-class AUCs and mean
probability for `classes_for_class_based_metrics`.
"""
import tensorflow as tf

from tpu_estimator.canned import classification_heads
from tpu_estimator.canned import head_base
from tpu_estimator.canned import keys as keys_lib
from tpu_estimator.canned.keys import MetricKeys
from tpu_estimator.canned.keys import PredictionKeys
from tpu_estimator import errors
from tpu_estimator import export as export_lib


class MultiLabelHead(head_base.Head):
  """Multi-label classification over `n_classes` (>= 2) classes."""

  def __init__(self, n_classes, weight_column=None, thresholds=None, label_vocabulary=None,
               loss_reduction=head_base.SUM_OVER_BATCH_SIZE, loss_fn=None,
               classes_for_class_based_metrics=None, name=None):
    if not errors.is_int(n_classes) or n_classes < 2:
      raise errors.value_error('n_classes must be an int >= 2.', n_classes=n_classes)
    n_classes = int(n_classes)
    super().__init__(n_classes, weight_column, loss_reduction, loss_fn, name)
    self._n_classes = n_classes
    self._label_vocabulary = classification_heads.check_label_vocabulary(label_vocabulary,
                                                                         n_classes)
    self._thresholds = () if thresholds is None else tuple(thresholds)
    for threshold in self._thresholds:
      if not 0. < threshold < 1.:
        raise errors.value_error('thresholds must be in (0, 1).', thresholds=thresholds)
    self._class_ids_for_metrics = self._metric_classes(classes_for_class_based_metrics)

  n_classes = property(lambda self: self._n_classes)

  def _metric_classes(self, classes):
    ids = []
    for value in () if classes is None else classes:
      if isinstance(value, str):
        if self._label_vocabulary is None or value not in self._label_vocabulary:
          raise errors.value_error('classes_for_class_based_metrics names a class not in '
                                   'label_vocabulary.', value=value)
        ids.append(self._label_vocabulary.index(value))
      elif errors.is_int(value) and 0 <= value < self._n_classes:
        ids.append(int(value))
      else:
        raise errors.value_error('classes_for_class_based_metrics must hold class ids in '
                                 '[0, n_classes) or vocabulary names.', value=value)
    return ids

  def _labels(self, labels):
    if labels is None:
      raise ValueError('You must provide a labels Tensor. Given: None. Return labels from '
                       'input_fn in TRAIN and EVAL mode.')
    if isinstance(labels, tf.SparseTensor):
      values = labels.values
      if values.dtype == tf.string:
        if self._label_vocabulary is None:
          raise errors.value_error('String labels need label_vocabulary.',
                                   labels_dtype='string')
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                self._label_vocabulary, tf.range(self._n_classes, dtype=tf.int64)),
            default_value=-1, name='class_id_lookup')
        values = table.lookup(values)
      values = tf.cast(values, tf.int64)
      check = tf.debugging.assert_equal(
          tf.reduce_all((values >= 0) & (values < self._n_classes)), True,
          message='Labels must be class ids in [0, %d) (or in label_vocabulary).'
          % self._n_classes)
      with tf.control_dependencies([check]):
        ids = tf.SparseTensor(labels.indices, tf.identity(values), labels.dense_shape)
      multi_hot = tf.sparse.to_indicator(ids, self._n_classes)
      return tf.cast(multi_hot, tf.int64)
    labels = tf.convert_to_tensor(labels)
    if labels.dtype == tf.string:
      raise errors.value_error('String multi-label labels must come as a SparseTensor.',
                               labels_dtype='string')
    labels = tf.cast(labels, tf.int64)
    check = tf.debugging.assert_equal(tf.reduce_all((labels >= 0) & (labels <= 1)), True,
                                      message='Multi-hot labels must be 0 or 1.')
    with tf.control_dependencies([check]):
      return tf.identity(labels)

  def _unweighted_loss(self, labels, logits):
    losses = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(labels, tf.float32),
                                                     logits=logits)
    return tf.reduce_mean(losses, axis=-1, keepdims=True)

  def predictions(self, logits, keys=None):  # pylint: disable=redefined-outer-name
    logits = self._logits(logits)
    names = self._label_vocabulary or [str(i) for i in range(self._n_classes)]
    result = {PredictionKeys.LOGITS: logits,
              PredictionKeys.PROBABILITIES: tf.sigmoid(logits),
              PredictionKeys.CLASSES: tf.tile(tf.constant(names)[tf.newaxis],
                                              [tf.shape(logits)[0], 1])}
    return {k: v for k, v in result.items() if keys is None or k in keys}

  def _metric_inputs(self, labels, logits, predictions, unweighted_loss, weights):
    inputs = super()._metric_inputs(labels, logits, predictions, unweighted_loss, weights)
    probabilities = predictions[PredictionKeys.PROBABILITIES]
    float_labels = tf.cast(labels, tf.float32)
    inputs.update(float_labels=float_labels, all_weights=weights * tf.ones_like(probabilities))
    for class_id in self._class_ids_for_metrics:
      inputs['probabilities_%d' % class_id] = probabilities[:, class_id:class_id + 1]
      inputs['float_labels_%d' % class_id] = float_labels[:, class_id:class_id + 1]
    return inputs

  def _metric_entries(self):
    entry, scores = self._entry, ['float_labels', 'probabilities']
    entries = [entry(MetricKeys.LOSS_MEAN, 'Mean', ['loss']),
               entry(MetricKeys.AUC, 'AUC', scores, 'all_weights', curve='ROC'),
               entry(MetricKeys.AUC_PR, 'AUC', scores, 'all_weights', curve='PR')]
    for threshold in self._thresholds:
      for name, cls, kwargs in (
          (MetricKeys.ACCURACY_AT_THRESHOLD, 'BinaryAccuracy', {'threshold': threshold}),
          (MetricKeys.PRECISION_AT_THRESHOLD, 'Precision', {'thresholds': threshold}),
          (MetricKeys.RECALL_AT_THRESHOLD, 'Recall', {'thresholds': threshold})):
        entries.append(entry(name % threshold, cls, scores, 'all_weights', **kwargs))
    for class_id in self._class_ids_for_metrics:
      column = ['float_labels_%d' % class_id, 'probabilities_%d' % class_id]
      entries += [
          entry(MetricKeys.PROBABILITY_MEAN_AT_CLASS % class_id, 'Mean', column[1:]),
          entry(MetricKeys.AUC_AT_CLASS % class_id, 'AUC', column, curve='ROC'),
          entry(MetricKeys.AUC_PR_AT_CLASS % class_id, 'AUC', column, curve='PR')]
    return entries

  def _export_outputs(self, predictions):
    classification = export_lib.ClassificationOutput(
        scores=predictions[PredictionKeys.PROBABILITIES],
        classes=predictions[PredictionKeys.CLASSES])
    return {
        tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: classification,
        keys_lib.CLASSIFY_SIGNATURE: classification,
        keys_lib.PREDICT_SIGNATURE: head_base.predict_output(predictions),
    }
