"""`MultiHead`: several named heads trained together on one network
(`tf.estimator.MultiHead`).

Logits come as a dict by head name (or one Tensor split in head order), labels as a dict by head
name.  The loss is the `head_weights`-weighted sum of the heads' losses; metrics are each head's
(already suffixed `/<name>`) plus `loss/<name>` (and `regularization_loss/<name>_<name>`);
predictions are keyed `(name, key)`; exports hold each head's signatures (`<name>` for its
default, `<name>/<key>` for the others), a merged `predict` and, as `serving_default`, the
first head's default.
"""
import tensorflow as tf

from tpu_estimator.canned import head_base
from tpu_estimator.canned import keys as keys_lib
from tpu_estimator.canned.keys import MetricKeys
from tpu_estimator import errors
from tpu_estimator.specs import EstimatorSpec
from tpu_estimator.specs import ModeKeys

_DEFAULT = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY


class MultiHead(head_base.Head):
  """Named heads sharing one network; see the module docstring."""

  def __init__(self, heads, head_weights=None):
    heads = list(heads or ())
    if not heads:
      raise errors.value_error('Must specify heads.', heads=heads)
    for head in heads:
      if not isinstance(head, head_base.Head) or isinstance(head, MultiHead):
        raise errors.type_error('heads must be canned (single) Heads.', head=head)
      if not head.name:
        raise errors.value_error('All given heads must have name specified.',
                                 'Pass name=... to each head.', head=head)
    if head_weights is not None and len(head_weights) != len(heads):
      raise errors.value_error('heads and head_weights must have the same size.',
                               heads=len(heads), head_weights=len(head_weights))
    # Named after its heads, as the original: 'regularization_loss/<head>_<head>'.
    super().__init__(sum(h.logits_dimension for h in heads),
                     name='_'.join(h.name for h in heads))
    self._heads = tuple(heads)
    self._head_weights = tuple(head_weights) if head_weights is not None else None

  heads = property(lambda self: self._heads)
  # The original's heads each opened a 'training' name scope before the optimizer made its
  # variables, so MultiHead checkpoints name optimizer variables training_<number of heads>/.
  optimizer_scope = property(lambda self: 'training_%d' % len(self._heads))

  def _split_logits(self, logits):
    if isinstance(logits, dict):
      missing = [h.name for h in self._heads if h.name not in logits]
      if missing:
        raise errors.value_error('logits must hold every head\'s name.', missing=missing)
      return {h.name: logits[h.name] for h in self._heads}
    parts = tf.split(tf.convert_to_tensor(logits),
                     [h.logits_dimension for h in self._heads], axis=-1)
    return {h.name: part for h, part in zip(self._heads, parts)}

  def _split_labels(self, labels):
    if not isinstance(labels, dict):
      raise errors.type_error('MultiHead labels must be a dict by head name.', labels=labels)
    missing = [h.name for h in self._heads if h.name not in labels]
    if missing:
      raise errors.value_error('labels must hold every head\'s name.', missing=missing)
    return labels

  def _weighted(self, losses):
    weights = self._head_weights or (1.,) * len(losses)
    return tf.add_n([w * l for w, l in zip(weights, losses)])

  def loss(self, labels, logits, features=None, mode=None, regularization_losses=None):
    logits, labels = self._split_logits(logits), self._split_labels(labels)
    total = self._weighted([h.loss(labels[h.name], logits[h.name], features, mode)
                            for h in self._heads])
    if regularization_losses:
      total = total + tf.add_n(list(regularization_losses))
    return total

  def predictions(self, logits, keys=None):  # pylint: disable=redefined-outer-name
    logits = self._split_logits(logits)
    result = {}
    for head in self._heads:
      for key, value in head.predictions(logits[head.name]).items():
        if keys is None or (head.name, key) in keys:
          result[(head.name, key)] = value
    return result

  def _loss_key(self, head):
    return '%s/%s' % (MetricKeys.LOSS, head.name)

  def metrics(self, regularization_losses=None):
    """Each head's metric objects, `loss/<name>` for each head's loss and, with
    `regularization_losses` (not None), the regularization loss's mean."""
    result = {}
    if regularization_losses is not None:
      result[self.metric_key(MetricKeys.LOSS_REGULARIZATION)] = head_base.keras_metric(
          'Mean', name=MetricKeys.LOSS_REGULARIZATION)
    for head in self._heads:
      result[self._loss_key(head)] = head_base.keras_metric('Mean', name=self._loss_key(head))
      result.update(head.metrics())
    return result

  def update_metrics(self, eval_metrics, features, logits, labels, regularization_losses=None,
                     mode=None):
    """Updates what `metrics()` made: each head's metrics and loss mean on its logits and
    labels."""
    del mode
    logits, labels = self._split_logits(logits), self._split_labels(labels)
    if regularization_losses is not None:
      key = self.metric_key(MetricKeys.LOSS_REGULARIZATION)
      head_base.metric_of(eval_metrics, key).update_state(tf.add_n(list(regularization_losses)))
    for head in self._heads:
      head_base.metric_of(eval_metrics, self._loss_key(head)).update_state(
          head.loss(labels[head.name], logits[head.name], features))
      head.update_metrics(eval_metrics, features, logits[head.name], labels[head.name])
    return eval_metrics

  def _export_outputs_of(self, logits):
    outputs, merged = {}, {}
    for index, head in enumerate(self._heads):
      predictions = head.predictions(logits[head.name])
      head_outputs = head._export_outputs(predictions)  # pylint: disable=protected-access
      for key, output in head_outputs.items():
        outputs[head.name if key == _DEFAULT else '%s/%s' % (head.name, key)] = output
        if index == 0 and key == _DEFAULT:
          outputs[_DEFAULT] = output
      merged.update({'%s/%s' % (head.name, k): v for k, v in predictions.items()})
    outputs[keys_lib.PREDICT_SIGNATURE] = head_base.predict_output(merged)
    return outputs

  def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None,
                            trainable_variables=None, train_op_fn=None, update_ops=None,
                            regularization_losses=None):
    logits = self._split_logits(logits)
    predictions = self.predictions(logits)
    if mode == ModeKeys.PREDICT:
      return EstimatorSpec(mode, predictions=predictions,
                           export_outputs=self._export_outputs_of(logits))
    labels = self._split_labels(labels)
    if mode == ModeKeys.TRAIN:
      total = self.loss(labels, logits, features, mode, regularization_losses)
    else:
      specs = [h.create_estimator_spec(features, ModeKeys.EVAL, logits[h.name], labels[h.name])
               for h in self._heads]
      total = self._weighted([s.loss for s in specs])
      metrics = {}
      if regularization_losses:
        regularization = tf.add_n(list(regularization_losses))
        total = total + regularization
        metrics[self.metric_key(MetricKeys.LOSS_REGULARIZATION)] = head_base.mean_pair(
            regularization, None)
      for head, spec in zip(self._heads, specs):
        metrics.update(spec.eval_metric_ops)
        metrics[self._loss_key(head)] = head_base.mean_pair(spec.loss, None)
      return EstimatorSpec(mode, predictions=predictions, loss=total, eval_metric_ops=metrics)
    train_op = self._train_op(total, optimizer, trainable_variables, train_op_fn, update_ops)
    return EstimatorSpec(mode, predictions=predictions, loss=total, train_op=train_op)

  def _train_op(self, loss, optimizer, trainable_variables, train_op_fn, update_ops):
    if optimizer is not None and train_op_fn is None:
      from tpu_estimator.canned import optimizers  # pylint: disable=import-outside-toplevel
      train_op_fn = lambda loss_: optimizers.minimize(
          optimizer, loss_, list(trainable_variables or tf.compat.v1.trainable_variables()),
          tf.compat.v1.train.get_or_create_global_step(), scope=self.optimizer_scope)
      optimizer = None
    return super()._train_op(loss, optimizer, trainable_variables, train_op_fn, update_ops)
