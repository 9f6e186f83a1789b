"""`SequentialHeadWrapper`: a head over per-step logits `[batch, time, dimension]` (an RNN
estimator with `return_sequences=True`), as tensorflow-estimator 2.15's
`head.sequential_head.SequentialHeadWrapper`.

In TRAIN and EVAL the steps where the sequence mask (a `[batch, time]` boolean feature) is
True are taken out of logits, labels and the named weight features, one row per step, and the
wrapped static head computes its loss and metrics on them.  In PREDICT the static head makes
its predictions of every step, and the mask is added to them under its feature key.
"""
import tensorflow as tf

from tpu_estimator.canned import head_base
from tpu_estimator.canned.multi_head import MultiHead
from tpu_estimator import errors
from tpu_estimator.specs import ModeKeys

_v1 = tf.compat.v1


class _SequentialHead(head_base.Head):
  """The base of heads over sequences (what `RNNEstimator(return_sequences=True)` takes):
  names the feature holding the sequence mask."""

  @property
  def input_sequence_mask_key(self):
    raise NotImplementedError


def _flat(tensor, mask, expected_length, what):
  """The rows of `tensor` [batch, time, ...] where `mask` is True: [steps, ...], and [steps, 1]
  for a [batch, time] tensor.  A SparseTensor gives its values (in index order)."""
  rank = tensor.shape.rank
  if rank is None or rank < 2:
    raise errors.value_error('%s must have at least 2 dimensions [batch, time, ...] with '
                             'return_sequences.' % what, shape=tensor.shape)
  if isinstance(tensor, tf.SparseTensor):
    flat = tf.sparse.reorder(tensor).values
    if rank > 2:
      flat = tf.reshape(flat, tf.concat([[-1], tensor.shape[2:]], axis=0))
  else:
    flat = tf.boolean_mask(tensor, mask)
  if rank == 2:
    flat = tf.expand_dims(flat, -1)
  check = _v1.debugging.assert_equal(tf.shape(flat)[0], expected_length, message=(
      '%s does not match the sequence mask (one row per unmasked step).' % what))
  with tf.control_dependencies([check]):
    return tf.identity(flat)


class SequentialHeadWrapper(_SequentialHead):
  """Wraps a static head (`BinaryClassHead`, `RegressionHead`, ...; not a `MultiHead`) for
  per-step logits; `sequence_length_mask` is the feature key of the mask, `feature_columns`
  the feature keys (e.g. the weight column) flattened with the labels."""

  def __init__(self, static_head, sequence_length_mask='sequence_length_mask',
               feature_columns=None):
    if not isinstance(sequence_length_mask, str):
      raise errors.type_error('sequence_mask must be a string (the feature key of the sequence '
                              'mask).', sequence_mask=sequence_length_mask)
    columns = feature_columns or []
    if isinstance(columns, str):
      columns = [columns]
    if not hasattr(columns, '__iter__'):
      raise errors.type_error('feature_columns must be a string or a list of strings.',
                              feature_columns=feature_columns)
    columns = list(columns)
    for column in columns:
      if not isinstance(column, str):
        raise errors.type_error(
            'With return_sequences the weight column must be None or a string (a feature '
            'key).', weight_column=column)
    if isinstance(static_head, MultiHead):
      raise errors.value_error('MultiHead is not supported with SequentialHeadWrapper.',
                               static_head=static_head)
    if not isinstance(static_head, head_base.Head):
      raise errors.type_error('static_head must be a tpu_estimator canned Head.',
                              static_head=static_head)
    self._static_head = static_head
    self._mask_key = sequence_length_mask
    self._feature_keys = columns

  input_sequence_mask_key = property(lambda self: self._mask_key)
  static_head = property(lambda self: self._static_head)
  logits_dimension = property(lambda self: self._static_head.logits_dimension)
  loss_reduction = property(lambda self: self._static_head.loss_reduction)
  optimizer_scope = property(lambda self: self._static_head.optimizer_scope)

  @property
  def name(self):
    name = self._static_head.name
    return '%s_sequential' % name if name else None

  def _flatten(self, labels, logits, features):
    if not isinstance(features, dict) or self._mask_key not in features:
      raise errors.value_error(
          'The sequence mask feature is not among the features.',
          'Add it to what input_fn returns, or let the RNN estimator compute it.',
          sequence_mask=self._mask_key,
          features=sorted(features) if isinstance(features, dict) else features)
    mask = features[self._mask_key]
    if mask.shape.rank != 2:
      raise errors.value_error('The sequence mask must have 2 dimensions [batch, time].',
                               shape=mask.shape)
    mask = tf.cast(mask, tf.bool)
    with tf.name_scope('flatten'):
      length = tf.reduce_sum(tf.cast(mask, tf.int32))
      flat_features = {}
      for key in self._feature_keys:
        if key not in features:
          raise errors.value_error('A feature the sequential head flattens is missing.',
                                   feature=key, features=sorted(features))
        flat_features[key] = _flat(features[key], mask, length, 'feature %r' % key)
      return (_flat(labels, mask, length, 'labels'), _flat(logits, mask, length, 'logits'),
              flat_features)

  def loss(self, labels, logits, features=None, mode=None, regularization_losses=None):
    flat_labels, flat_logits, flat_features = self._flatten(labels, logits, features)
    return self._static_head.loss(flat_labels, flat_logits, flat_features, mode,
                                  regularization_losses)

  def predictions(self, logits, keys=None):  # pylint: disable=redefined-outer-name
    return self._static_head.predictions(logits, keys=keys)

  def metrics(self, regularization_losses=None):
    return self._static_head.metrics(regularization_losses)

  def update_metrics(self, eval_metrics, features, logits, labels, regularization_losses=None,
                     mode=None):
    """The static head's update on the steps the sequence mask keeps."""
    flat_labels, flat_logits, flat_features = self._flatten(labels, logits, features)
    return self._static_head.update_metrics(eval_metrics, flat_features, flat_logits,
                                            flat_labels, regularization_losses, mode)

  def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None,
                            trainable_variables=None, train_op_fn=None, update_ops=None,
                            regularization_losses=None):
    if mode == ModeKeys.PREDICT:
      spec = self._static_head.create_estimator_spec(features, mode, logits)
      spec.predictions[self._mask_key] = features[self._mask_key]
      return spec
    flat_labels, flat_logits, flat_features = self._flatten(labels, logits, features)
    return self._static_head.create_estimator_spec(
        flat_features, mode, flat_logits, flat_labels, optimizer=optimizer,
        trainable_variables=trainable_variables, train_op_fn=train_op_fn,
        update_ops=update_ops, regularization_losses=regularization_losses)
