"""What every canned head shares: labels, weights and loss reduction, Keras 2 metrics as graph
`(value, update_op)` pairs, and turning logits into an `EstimatorSpec` for each mode.

A head owns everything after the logits: the loss, the predictions, the evaluation metrics and
the export signatures, so every canned estimator is "a network that makes logits + a head".
Subclasses say how labels are checked, what the per-example loss is, what the predictions
and metrics are (`_labels`, `_unweighted_loss`, `predictions`, `_metric_entries`,
`_export_outputs`).  A head's metrics come from one table (`_metric_entries`) three ways:
`(value, update_op)` pairs in the EVAL spec, and, as `tf.estimator.Head`'s public methods,
`metrics()` (new Keras metric objects) and `update_metrics()` (updating them).
"""
import collections

import tensorflow as tf

from tpu_estimator.canned import keys
from tpu_estimator.canned import optimizers
from tpu_estimator.distribute import input_fn as input_fn_lib
from tpu_estimator import errors
from tpu_estimator import export as export_lib
from tpu_estimator import specs
from tpu_estimator.specs import EstimatorSpec
from tpu_estimator.specs import ModeKeys

_v1 = tf.compat.v1
SUM_OVER_BATCH_SIZE = 'sum_over_batch_size'
SUM = 'sum'
AUTO = 'auto'  # tf.keras.losses.Reduction.AUTO, which the original took: the batch mean here
# tf.compat.v1.losses.Reduction's weighted means (the v1 estimators'): the weighted sum over
# the sum of the weights, or over the number of non-zero weights.
WEIGHTED_MEAN = 'weighted_mean'
NONZERO_WEIGHTS_MEAN = 'weighted_sum_by_nonzero_weights'
_REDUCTIONS = (SUM_OVER_BATCH_SIZE, SUM, AUTO, WEIGHTED_MEAN, NONZERO_WEIGHTS_MEAN)


def check_loss_reduction(loss_reduction):
  """The v2 heads' reductions: the mean over all loss elements, or their sum."""
  if loss_reduction not in _REDUCTIONS:
    raise errors.value_error('Invalid loss_reduction.',
                             'Use one of %s (tf.keras.losses.Reduction).' % (_REDUCTIONS[:3],),
                             loss_reduction=loss_reduction)
  return loss_reduction


def weight_key(weight_column):
  """The feature key of `weight_column` (a string or a numeric feature column), or None."""
  if weight_column is None:
    return None
  if isinstance(weight_column, str):
    return weight_column
  key = getattr(weight_column, 'key', None)
  if isinstance(key, str) and hasattr(weight_column, 'dtype'):
    return key
  raise errors.type_error('weight_column must be a string or a numeric_column.',
                          weight_column=weight_column)


def keras_metric(class_name, *args, **kwargs):
  """A Keras 2 metric (the original's metric objects, so values match exactly)."""
  import tf_keras  # pylint: disable=import-outside-toplevel
  return getattr(tf_keras.metrics, class_name)(*args, **kwargs)


def metric_pair(metric, *args, sample_weight=None):
  """`(value, update_op)` of a Keras 2 metric in the graph; its variables are local (reset
  by every evaluation's local init, never checkpointed)."""
  update = metric.update_state(*args, sample_weight=sample_weight)
  value = metric.result()
  specs.local_metric_variables(metric.variables)
  return value, update


def mean_pair(values, weights):
  return metric_pair(keras_metric('Mean'), values, sample_weight=weights)


# A `MetricEntry.class_name`: the best accuracy of always predicting one class, max(mean,
# 1 - mean) of the label mean entry whose key is the entry's `args[0]` (as an object, a Keras
# `Mean` whose result is that, updated through its source's update).
BASELINE = 'accuracy_baseline'


class MetricEntry(collections.namedtuple('MetricEntry', 'key name class_name kwargs args '
                                                        'weight')):
  """One EVAL metric of a head: `key` in the metrics, a Keras 2 metric
  `class_name(name=name, **kwargs)` updated with the head's `_metric_inputs` named in `args`
  (and `weight`, None for none)."""


def _baseline_of(label_mean):
  return tf.maximum(label_mean, 1. - label_mean)


class Head:
  """Base class of the canned heads (`tf.estimator.Head`)."""

  def __init__(self, logits_dimension, weight_column=None, loss_reduction=SUM_OVER_BATCH_SIZE,
               loss_fn=None, name=None):
    self._logits_dimension = logits_dimension
    self._weight_column = weight_column
    self._weight_key = weight_key(weight_column)
    self._loss_reduction = check_loss_reduction(loss_reduction)
    if loss_fn is not None and not callable(loss_fn):
      raise errors.type_error('loss_fn must be callable.', loss_fn=loss_fn)
    self._loss_fn = loss_fn
    self._name = name

  name = property(lambda self: self._name)
  logits_dimension = property(lambda self: self._logits_dimension)
  loss_reduction = property(lambda self: self._loss_reduction)
  optimizer_scope = 'training'  # the name scope of the optimizer's variables (checkpoint names)
  # A tf.compat.v1.losses.Reduction where the head stands for a v1 one (canned.v1): its loss
  # is then reduced with the v1 heads' own ops, whose names TF 1.x programs log.
  v1_reduction = None

  # --- subclass hooks -----------------------------------------------------------------------
  def _labels(self, labels):
    """Labels as the loss takes them, checked (a Tensor of shape [batch, ...])."""
    raise NotImplementedError

  def _unweighted_loss(self, labels, logits):
    raise NotImplementedError

  def predictions(self, logits, keys=None):  # pylint: disable=redefined-outer-name
    raise NotImplementedError

  def _metric_entries(self):
    """The head's EVAL metrics, a list of `MetricEntry` (made with `_entry`)."""
    raise NotImplementedError

  def _metric_inputs(self, labels, logits, predictions, unweighted_loss, weights):
    """The tensors `_metric_entries` name, by name: the predictions by their keys, `loss`,
    `weights` and `labels`; subclasses add their own."""
    del logits
    inputs = dict(predictions)
    inputs.update(loss=unweighted_loss, weights=weights, labels=labels)
    return inputs

  def _export_outputs(self, predictions):
    raise NotImplementedError

  # --- shared -------------------------------------------------------------------------------
  def metric_key(self, key):
    return '%s/%s' % (key, self._name) if self._name else key

  def _entry(self, name, class_name, args, weight='weights', **kwargs):
    return MetricEntry(self.metric_key(name), name, class_name, kwargs, tuple(args), weight)

  def _metrics(self, labels, logits, predictions, unweighted_loss, weights):
    """`{key: (value, update_op)}` of `_metric_entries`, for the EVAL spec."""
    inputs = self._metric_inputs(labels, logits, predictions, unweighted_loss, weights)
    pairs = {}
    for entry in self._metric_entries():
      if entry.class_name == BASELINE:
        mean, update = pairs[entry.args[0]]
        pairs[entry.key] = _baseline_of(mean), update
        continue
      metric = keras_metric(entry.class_name, name=entry.name, **entry.kwargs)
      pairs[entry.key] = metric_pair(metric, *[inputs[a] for a in entry.args],
                                     sample_weight=inputs.get(entry.weight))
    return pairs

  def metrics(self, regularization_losses=None):
    """New Keras metric objects of the head's EVAL metrics by key (`tf.estimator.Head.metrics`),
    for `update_metrics`; with `regularization_losses` (not None) also the regularization
    loss's mean."""
    with tf.name_scope('metrics'):
      result = {e.key: keras_metric('Mean' if e.class_name == BASELINE else e.class_name,
                                    name=e.name, **e.kwargs) for e in self._metric_entries()}
      if regularization_losses is not None:
        name = keys.MetricKeys.LOSS_REGULARIZATION
        result[self.metric_key(name)] = keras_metric('Mean', name=name)
    return result

  def update_metrics(self, eval_metrics, features, logits, labels, regularization_losses=None,
                     mode=None):
    """Updates the metric objects `metrics()` made with a batch (`tf.estimator.Head
    .update_metrics`); returns `eval_metrics`, which a model_fn can return as
    `eval_metric_ops`."""
    del mode
    logits = self._logits(logits)
    predictions = self.predictions(logits)
    labels = self._labels(labels)
    unweighted = self._per_example_loss(labels, logits, features)
    inputs = self._metric_inputs(labels, logits, predictions, unweighted,
                                 self._weights(features, unweighted))
    for entry in self._metric_entries():
      metric = metric_of(eval_metrics, entry.key)
      if entry.class_name == BASELINE:  # updated through its source's update
        source = metric_of(eval_metrics, entry.args[0])
        metric.add_update(tf.no_op())
        metric.result = lambda source=source: _baseline_of(source.result())
      else:
        metric.update_state(*[inputs[a] for a in entry.args],
                            sample_weight=inputs.get(entry.weight))
    if regularization_losses is not None:
      key = self.metric_key(keys.MetricKeys.LOSS_REGULARIZATION)
      metric_of(eval_metrics, key).update_state(tf.add_n(list(regularization_losses)))
    return eval_metrics

  def _logits(self, logits):
    logits = tf.convert_to_tensor(logits)
    if logits.dtype != tf.float32:
      logits = tf.cast(logits, tf.float32)
    if logits.shape.rank == 1 and self._logits_dimension == 1:
      logits = tf.expand_dims(logits, -1)
    last = logits.shape[-1] if logits.shape.rank else None
    if last is not None and last != self._logits_dimension:
      raise errors.value_error('logits shape must be [batch_size, %d].' % self._logits_dimension,
                               logits_shape=logits.shape.as_list())
    return logits

  def _weights(self, features, like):
    if self._weight_key is None:
      return tf.ones_like(like[:, :1])
    if not isinstance(features, dict) or self._weight_key not in features:
      raise errors.value_error('The weight_column is not among the features.',
                               'Add it to what input_fn returns.', weight_column=self._weight_key)
    weights = tf.cast(features[self._weight_key], tf.float32)
    if weights.shape.rank == 1:
      weights = tf.expand_dims(weights, -1)
    return weights

  @staticmethod
  def _expand_labels(labels, width):
    if labels is None:
      raise ValueError('You must provide a labels Tensor. Given: None. Return labels from '
                       'input_fn in TRAIN and EVAL mode.')
    if isinstance(labels, tf.SparseTensor):
      labels = tf.sparse.to_dense(labels, default_value=('' if labels.dtype == tf.string else 0))
    labels = tf.convert_to_tensor(labels)
    if labels.shape.rank == 1 and width == 1:
      labels = tf.expand_dims(labels, -1)
    return labels

  def _reduce(self, unweighted_loss, weights):
    if self.v1_reduction is not None:  # `<model>/head/weighted_loss/Sum` (or `/value`)
      return _v1.losses.compute_weighted_loss(unweighted_loss, weights,
                                              reduction=self.v1_reduction)
    weighted = unweighted_loss * weights
    total = tf.reduce_sum(weighted)
    if self._loss_reduction == SUM:
      return total
    if self._loss_reduction in (WEIGHTED_MEAN, NONZERO_WEIGHTS_MEAN):
      every = weights * tf.ones_like(unweighted_loss)  # one weight per loss element
      if self._loss_reduction == WEIGHTED_MEAN:
        return tf.math.divide_no_nan(total, tf.reduce_sum(every))
      return tf.math.divide_no_nan(total, tf.cast(tf.math.count_nonzero(every), tf.float32))
    return total / tf.cast(tf.size(weighted), tf.float32)

  def loss(self, labels, logits, features=None, mode=None, regularization_losses=None):
    """The training loss: weighted per-example losses reduced by `loss_reduction`, plus the
    regularization losses."""
    del mode
    logits = self._logits(logits)
    labels = self._labels(labels)
    unweighted = self._per_example_loss(labels, logits, features)
    loss = self._reduce(unweighted, self._weights(features, unweighted))
    if regularization_losses:
      loss = loss + tf.add_n(list(regularization_losses))
    return loss

  def _per_example_loss(self, labels, logits, features):
    if self._loss_fn is not None:
      kwargs = input_fn_lib.accepted_kwargs(self._loss_fn, features=features)
      unweighted = tf.cast(self._loss_fn(labels=labels, logits=logits, **kwargs), tf.float32)
    else:
      unweighted = self._unweighted_loss(labels, logits)
    if unweighted.shape.rank == 1:
      unweighted = tf.expand_dims(unweighted, -1)
    return unweighted

  def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None,
                            trainable_variables=None, train_op_fn=None, update_ops=None,
                            regularization_losses=None):
    """The `EstimatorSpec` for `mode`: predictions and exports in PREDICT; loss and metrics
    in EVAL; loss and the train op (`optimizer` over `trainable_variables`, or
    `train_op_fn(loss)`), grouped with `update_ops`, in TRAIN."""
    scope = self._name or 'head'
    with tf.name_scope(scope):
      logits = self._logits(logits)
      predictions = self.predictions(logits)
      if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions=predictions,
                             export_outputs=self._export_outputs(predictions))
      labels = self._labels(labels)
      unweighted = self._per_example_loss(labels, logits, features)
      weights = self._weights(features, unweighted)
      loss = self._reduce(unweighted, weights)
      regularization = tf.add_n(list(regularization_losses)) if regularization_losses else None
      total = loss + regularization if regularization is not None else loss
      if mode == ModeKeys.EVAL:
        metrics = self._metrics(labels, logits, predictions, unweighted, weights)
        if regularization is not None:
          metrics[self.metric_key(keys.MetricKeys.LOSS_REGULARIZATION)] = \
              mean_pair(regularization, None)
        return EstimatorSpec(mode, predictions=predictions, loss=total,
                             eval_metric_ops=metrics)
      # In the head's scope, as the original's: `<model>/head/truediv`, which TF 1.x programs
      # log as the average loss.
      average_loss = tf.reduce_sum(unweighted * weights) / tf.reduce_sum(weights)
    train_op = self._train_op(total, optimizer, trainable_variables, train_op_fn, update_ops)
    with _v1.get_default_graph().name_scope(''):  # tagged `average_loss`, whatever the scope
      _v1.summary.scalar(self.metric_key(keys.MetricKeys.LOSS_MEAN), average_loss)
    return EstimatorSpec(mode, predictions=predictions, loss=total, train_op=train_op)

  @staticmethod
  def _train_op(loss, optimizer, trainable_variables, train_op_fn, update_ops):
    if (optimizer is None) == (train_op_fn is None):
      raise ValueError('Exactly one of optimizer and train_op_fn must be set in TRAIN mode. '
                       'Received: optimizer=%r, train_op_fn=%r.' % (optimizer, train_op_fn))
    if optimizer is not None:
      if trainable_variables is None:
        trainable_variables = _v1.trainable_variables()
      train_op = optimizers.minimize(optimizer, loss, list(trainable_variables),
                                     _v1.train.get_or_create_global_step())
    else:
      train_op = train_op_fn(loss)
    if update_ops:
      train_op = tf.group(train_op, *update_ops)
    return train_op


def metric_of(eval_metrics, key):
  if not isinstance(eval_metrics, dict) or key not in eval_metrics:
    raise errors.value_error(
        'eval_metrics lacks a metric of this head.',
        'Pass the dict head.metrics() returned (with regularization_losses when you pass '
        'them here).', key=key,
        eval_metrics=sorted(eval_metrics) if isinstance(eval_metrics, dict) else eval_metrics)
  return eval_metrics[key]


def predict_output(predictions):
  return export_lib.PredictOutput(predictions)
