"""`tf.contrib.metrics`: TF 1.x streaming metrics, each returning `(value, update_op)` over
local variables, as `eval_metric_ops` / a TPUEstimator `metric_fn` want them.

Most are `tf.compat.v1.metrics` functions under their contrib names, with contrib's argument
order (`predictions` before `labels`).  Own implementations, following TF 1.15's documented
formulas: `streaming_concat` (all values seen, concatenated along `axis`),
`streaming_covariance` (unbiased, comoment / (sum of weights - 1), NaN until more than one
example), `streaming_pearson_correlation` (cov(p, l) / sqrt(var p * var l)) and `f1_score`
(the best F1 over `num_thresholds` thresholds in [0, 1]).
"""
import tensorflow as tf

from tpu_estimator import errors

_v1 = tf.compat.v1
_metrics = _v1.metrics

__all__ = [
    'aggregate_metric_map', 'aggregate_metrics', 'f1_score', 'streaming_accuracy',
    'streaming_auc', 'streaming_concat', 'streaming_covariance', 'streaming_false_negatives',
    'streaming_false_positives', 'streaming_mean', 'streaming_mean_absolute_error',
    'streaming_mean_cosine_distance', 'streaming_mean_iou', 'streaming_mean_relative_error',
    'streaming_mean_squared_error', 'streaming_mean_tensor', 'streaming_pearson_correlation',
    'streaming_percentage_less', 'streaming_precision', 'streaming_precision_at_thresholds',
    'streaming_recall', 'streaming_recall_at_thresholds', 'streaming_root_mean_squared_error',
    'streaming_sparse_precision_at_k', 'streaming_sparse_recall_at_k',
    'streaming_true_negatives', 'streaming_true_positives',
]


def _predictions_first(v1_metric, doc):
  """contrib's `f(predictions, labels, ...)` for `tf.compat.v1.metrics`' `f(labels,
  predictions, ...)`."""

  def metric(predictions, labels, *args, **kwargs):
    return v1_metric(labels, predictions, *args, **kwargs)
  metric.__doc__ = doc + ' `tf.compat.v1.metrics.%s` with predictions first.' % (
      v1_metric.__name__)
  return metric


streaming_accuracy = _predictions_first(_metrics.accuracy, 'Fraction of predictions == labels.')
streaming_precision = _predictions_first(_metrics.precision, 'tp / (tp + fp).')
streaming_recall = _predictions_first(_metrics.recall, 'tp / (tp + fn).')
streaming_auc = _predictions_first(_metrics.auc, 'Area under the ROC (or PR) curve.')
streaming_mean_absolute_error = _predictions_first(_metrics.mean_absolute_error, '|p - l|.')
streaming_mean_squared_error = _predictions_first(_metrics.mean_squared_error, '(p - l)^2.')
streaming_root_mean_squared_error = _predictions_first(
    _metrics.root_mean_squared_error, 'sqrt(mean((p - l)^2)).')
streaming_mean_relative_error = _predictions_first(
    _metrics.mean_relative_error, '|p - l| / normalizer.')
streaming_mean_iou = _predictions_first(_metrics.mean_iou, 'Mean intersection over union.')
streaming_true_positives = _predictions_first(_metrics.true_positives, 'Count of tp.')
streaming_false_positives = _predictions_first(_metrics.false_positives, 'Count of fp.')
streaming_true_negatives = _predictions_first(_metrics.true_negatives, 'Count of tn.')
streaming_false_negatives = _predictions_first(_metrics.false_negatives, 'Count of fn.')
streaming_precision_at_thresholds = _predictions_first(
    _metrics.precision_at_thresholds, 'Precision at each threshold.')
streaming_recall_at_thresholds = _predictions_first(
    _metrics.recall_at_thresholds, 'Recall at each threshold.')
streaming_mean = _metrics.mean
streaming_mean_tensor = _metrics.mean_tensor
streaming_percentage_less = _metrics.percentage_below


def streaming_mean_cosine_distance(predictions, labels, dim, weights=None,
                                   metrics_collections=None, updates_collections=None,
                                   name=None):
  """Mean of 1 - sum(p * l, axis=dim) over unit-normalised vectors."""
  return _metrics.mean_cosine_distance(labels, predictions, dim, weights=weights,
                                       metrics_collections=metrics_collections,
                                       updates_collections=updates_collections, name=name)


def streaming_sparse_precision_at_k(predictions, labels, k, class_id=None, weights=None,
                                    metrics_collections=None, updates_collections=None,
                                    name=None):
  return _metrics.precision_at_k(labels, predictions, k, class_id=class_id, weights=weights,
                                 metrics_collections=metrics_collections,
                                 updates_collections=updates_collections, name=name)


def streaming_sparse_recall_at_k(predictions, labels, k, class_id=None, weights=None,
                                 metrics_collections=None, updates_collections=None,
                                 name=None):
  return _metrics.recall_at_k(labels, predictions, k, class_id=class_id, weights=weights,
                              metrics_collections=metrics_collections,
                              updates_collections=updates_collections, name=name)


def _local_variable(name, initial_value, shape=None):
  return _v1.Variable(initial_value, name=name, trainable=False, shape=shape,
                      use_resource=True,
                      collections=[_v1.GraphKeys.LOCAL_VARIABLES,
                                   _v1.GraphKeys.METRIC_VARIABLES])


def _add_to(collections, value):
  for collection in collections or ():
    _v1.add_to_collection(collection, value)


def streaming_concat(values, axis=0, max_size=None, use_locking=True,
                     metrics_collections=None, updates_collections=None, name=None):
  """All `values` seen so far, concatenated along `axis` (the first `max_size` of them if
  given).  The other dimensions must be static and the same in every batch."""
  del use_locking  # one assignment op; TensorFlow orders the updates of one run
  values = tf.convert_to_tensor(values)
  rank = values.shape.rank
  if rank is None or rank == 0:
    raise errors.value_error('streaming_concat needs `values` of known rank >= 1.',
                             'Pass a tensor with a batch-like axis.', values=values)
  axis = axis + rank if axis < 0 else axis
  dims = values.shape.as_list()
  if any(d is None for i, d in enumerate(dims) if i != axis):
    raise errors.value_error(
        'streaming_concat needs static sizes on every axis but `axis`.',
        'Give `values` a static shape (e.g. with tf.ensure_shape).', values=values, axis=axis)
  empty = dims[:axis] + [0] + dims[axis + 1:]
  with _v1.variable_scope(name, 'streaming_concat', [values]):
    array = _local_variable(
        'array', tf.zeros(empty, values.dtype),
        shape=tf.TensorShape(dims[:axis] + [None] + dims[axis + 1:]))
    joined = tf.concat([array.read_value(), values], axis=axis)
    if max_size is not None:
      begin = [0] * rank
      size = [-1] * rank
      size[axis] = tf.minimum(tf.shape(joined)[axis], max_size)
      joined = tf.slice(joined, begin, tf.stack(size))
    with tf.control_dependencies([array.assign(joined, read_value=False)]):
      update_op = tf.identity(joined)
    value = array.read_value()
  _add_to(metrics_collections, value)
  _add_to(updates_collections, update_op)
  return value, update_op


def _weights_for(weights, like):
  if weights is None:
    return tf.ones_like(like)
  return tf.broadcast_to(tf.cast(weights, like.dtype), tf.shape(like))


def streaming_covariance(predictions, labels, weights=None, metrics_collections=None,
                         updates_collections=None, name=None):
  """Unbiased (weighted) covariance of predictions and labels over all batches:
  sum(w (p - mean p)(l - mean l)) / (sum(w) - 1); NaN while sum(w) <= 1."""
  with _v1.variable_scope(name, 'covariance', (predictions, labels, weights)):
    p = tf.cast(tf.reshape(predictions, [-1]), tf.float32)
    l = tf.cast(tf.reshape(labels, [-1]), tf.float32)
    w = _weights_for(None if weights is None else tf.reshape(weights, [-1]), p)
    count = _local_variable('count', 0.0)
    mean_p = _local_variable('mean_prediction', 0.0)
    mean_l = _local_variable('mean_label', 0.0)
    comoment = _local_variable('comoment', 0.0)

    batch_count = tf.reduce_sum(w)
    batch_mean_p = tf.math.divide_no_nan(tf.reduce_sum(w * p), batch_count)
    batch_mean_l = tf.math.divide_no_nan(tf.reduce_sum(w * l), batch_count)
    batch_comoment = tf.reduce_sum(w * (p - batch_mean_p) * (l - batch_mean_l))
    # Chan et al.'s pairwise combination of (count, means, comoment).
    old_count, old_p, old_l, old_c = (count.read_value(), mean_p.read_value(),
                                      mean_l.read_value(), comoment.read_value())
    new_count = old_count + batch_count
    share = tf.math.divide_no_nan(batch_count, new_count)
    new_p = old_p + (batch_mean_p - old_p) * share
    new_l = old_l + (batch_mean_l - old_l) * share
    new_c = old_c + batch_comoment + (
        (batch_mean_p - old_p) * (batch_mean_l - old_l) * old_count * share)
    update = tf.group(count.assign(new_count), mean_p.assign(new_p), mean_l.assign(new_l),
                      comoment.assign(new_c))
    with tf.control_dependencies([update]):
      update_op = _covariance(comoment.read_value(), count.read_value())
    value = _covariance(comoment.read_value(), count.read_value())
  _add_to(metrics_collections, value)
  _add_to(updates_collections, update_op)
  return value, update_op


def _covariance(comoment, count):
  return tf.where(count <= 1.0, tf.constant(float('nan')), comoment / (count - 1.0))


def streaming_pearson_correlation(predictions, labels, weights=None, metrics_collections=None,
                                  updates_collections=None, name=None):
  """Pearson's r over all batches: cov(p, l) / (sqrt(var p) * sqrt(var l)), each from
  `streaming_covariance` with the same weights."""
  with _v1.variable_scope(name, 'pearson_r', (predictions, labels, weights)):
    cov, update_cov = streaming_covariance(predictions, labels, weights, name='covariance')
    var_p, update_p = streaming_covariance(predictions, predictions, weights,
                                           name='variance_predictions')
    var_l, update_l = streaming_covariance(labels, labels, weights, name='variance_labels')
    value = cov / (tf.sqrt(var_p) * tf.sqrt(var_l))
    update_op = update_cov / (tf.sqrt(update_p) * tf.sqrt(update_l))
  _add_to(metrics_collections, value)
  _add_to(updates_collections, update_op)
  return value, update_op


def f1_score(labels, predictions, weights=None, num_thresholds=200, metrics_collections=None,
             updates_collections=None, name=None):
  """The best F1 = 2 tp / (2 tp + fp + fn) over `num_thresholds` thresholds spread over
  [0, 1] (with end points just outside it), for `predictions` in [0, 1]."""
  errors.check_positive_int('num_thresholds', num_thresholds)
  if num_thresholds < 2:
    raise errors.value_error('`num_thresholds` must be at least 2.', 'Pass e.g. 200.',
                             num_thresholds=num_thresholds)
  epsilon = 1e-7
  thresholds = ([0.0 - epsilon] +
                [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)] +
                [1.0 + epsilon])
  with _v1.variable_scope(name, 'f1', (labels, predictions, weights)):
    predictions = tf.cast(predictions, tf.float32)
    labels = tf.cast(labels, tf.bool)
    tp, tp_up = _metrics.true_positives_at_thresholds(labels, predictions, thresholds, weights)
    fp, fp_up = _metrics.false_positives_at_thresholds(labels, predictions, thresholds,
                                                       weights)
    fn, fn_up = _metrics.false_negatives_at_thresholds(labels, predictions, thresholds,
                                                       weights)

    def best(tp, fp, fn):
      return tf.reduce_max(tf.math.divide_no_nan(2.0 * tp, 2.0 * tp + fp + fn))
    value = best(tp, fp, fn)
    update_op = best(tp_up, fp_up, fn_up)
  _add_to(metrics_collections, value)
  _add_to(updates_collections, update_op)
  return value, update_op


def aggregate_metrics(*value_update_tuples):
  """(list of values, list of update ops) from (value, update_op) pairs."""
  if not value_update_tuples:
    raise errors.value_error('aggregate_metrics needs at least one (value, update_op) pair.',
                             value_update_tuples=value_update_tuples)
  values, updates = zip(*value_update_tuples)
  return list(values), list(updates)


def aggregate_metric_map(names_to_tuples):
  """({name: value}, {name: update_op}) from {name: (value, update_op)}."""
  values = {name: pair[0] for name, pair in names_to_tuples.items()}
  updates = {name: pair[1] for name, pair in names_to_tuples.items()}
  return values, updates
