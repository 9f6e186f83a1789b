"""The loss and metrics a Keras model was compiled with, computed in a v1 graph.

Per output, as Keras 2's graph training computed them: each output's loss (a Keras `Loss`, a
loss function or its name; sample weights applied, averaged over the elements), weighted by
`loss_weights`, summed, plus the model's regularization losses; each output's metrics under
the names Keras reported (`accuracy`, `mae`, a metric object's `name`; prefixed by the output
name when the model has several outputs), as `(value, update_op)` pairs whose state is local
variables (reset per evaluation, never saved).
"""
import tensorflow as tf

from tpu_estimator.distribute import replication
from tpu_estimator import errors
from tpu_estimator import specs
from tpu_estimator.keras_models import backends

_v1 = tf.compat.v1
_ACCURACY = ('accuracy', 'acc')
_CROSSENTROPY = ('crossentropy', 'ce')


def per_output(spec, names, argument):
  """`spec` (None, one entry for every output, a list per output or a dict by output name) as
  a list with one entry (or None) per output."""
  if isinstance(spec, dict):
    unknown = sorted(set(spec) - set(names))
    if unknown:
      raise errors.value_error('`%s` names outputs the model does not have: %s.' % (
          argument, unknown), 'Key it by the output names %s.' % list(names),
                               **{argument: spec})
    return [spec.get(n) for n in names]
  if isinstance(spec, (list, tuple)) and len(names) > 1 and len(spec) == len(names):
    return list(spec)
  return [spec] * len(names)


def _loss_name(loss):
  if isinstance(loss, str):
    return loss
  return getattr(loss, '__name__', None) or type(loss).__name__


def _snake(name):
  out = ''.join('_' + c.lower() if c.isupper() else c for c in name)
  return out.lstrip('_')


def output_losses(backend, loss, names):
  """One loss callable (or None) per output, from the model's compiled `loss`."""
  losses = []
  for item in per_output(loss, names, 'loss'):
    losses.append(None if item is None else backend.keras.losses.get(item))
  return losses


def output_loss(loss_fn, y_true, y_pred, weights):
  """One output's loss: a Keras Loss applies its own reduction; a function's per-example
  values are weighted and averaged over their elements (Keras's SUM_OVER_BATCH_SIZE).  In a
  strategy's replicas (where tf_keras refuses to average a Loss by itself, as outside
  `compile`) a Loss's per-example values are reduced here the same way."""
  if hasattr(loss_fn, 'reduction') and hasattr(loss_fn, 'call'):
    if not replication.in_one_of_several_replicas():
      return loss_fn(y_true, y_pred, sample_weight=weights)
    summed = str(loss_fn.reduction).lower().endswith('sum')
    loss_fn = loss_fn.call
  else:
    summed = False
  values = tf.cast(loss_fn(y_true, y_pred), tf.float32)
  if weights is not None:
    weights = tf.cast(weights, values.dtype)
    if weights.shape.rank is not None and values.shape.rank is not None:
      while weights.shape.rank > values.shape.rank and weights.shape[-1] == 1:
        weights = tf.squeeze(weights, -1)
    values = values * weights
  if summed:
    return tf.reduce_sum(values)
  return tf.math.divide_no_nan(tf.reduce_sum(values), tf.cast(tf.size(values), values.dtype))


def total_loss(losses, loss_weights, targets, outputs, weights, regularization):
  """Σ loss_weight × output loss, plus `regularization` (the model's `losses`)."""
  terms = []
  for fn, factor, y, p, w in zip(losses, loss_weights, targets, outputs, weights):
    if fn is None:
      continue
    term = output_loss(fn, y, p, w)
    terms.append(term if factor is None else term * factor)
  terms.extend(tf.cast(r, tf.float32) for r in regularization)
  if not terms:
    raise errors.value_error('The Keras model was compiled without a loss.',
                             'Compile it with loss=...', loss=None)
  return tf.add_n(terms)


def _accuracy_kind(loss_fn, y_true, y_pred):
  """Which accuracy Keras picked for 'accuracy'/'acc': by the loss, else by the shapes."""
  name = _snake(_loss_name(loss_fn)) if loss_fn is not None else ''
  if 'sparse_categorical' in name:
    return 'sparse_categorical'
  if 'binary' in name:
    return 'binary'
  p_dim = y_pred.shape[-1] if y_pred.shape.rank else None
  if p_dim == 1:
    return 'binary'
  t_rank, p_rank = y_true.shape.rank, y_pred.shape.rank
  if t_rank is not None and p_rank is not None and (
      t_rank < p_rank or (y_true.shape[-1] == 1 and (p_dim or 2) > 1)):
    return 'sparse_categorical'
  return 'categorical'


def metric_object(backend, identifier, loss_fn, y_true, y_pred):
  """(reported name, fresh Keras metric object) for one compiled metric entry."""
  keras = backend.keras
  resolved = identifier
  if isinstance(identifier, str) and identifier in _ACCURACY + _CROSSENTROPY:
    kind = _accuracy_kind(loss_fn, y_true, y_pred)
    resolved = '%s_%s' % (kind, 'accuracy' if identifier in _ACCURACY else 'crossentropy')
  metric = keras.metrics.get(resolved)
  if isinstance(metric, keras.metrics.Metric):
    if metric is resolved:  # the user's object: a fresh copy of it (its state is its own)
      metric = type(metric).from_config(metric.get_config())
    return (identifier if isinstance(identifier, str) else metric.name), metric
  name = identifier if isinstance(identifier, str) else getattr(metric, '__name__', 'metric')
  return name, keras.metrics.MeanMetricWrapper(metric, name=name)


def _as_local(first, variables):
  """Makes a metric's state local metric variables (`specs.local_metric_variables`): the
  global variables from index `first` on (made since), and `variables` (tf_keras's graph-mode
  metrics put theirs in no collection)."""
  made = _v1.get_default_graph().get_collection(_v1.GraphKeys.GLOBAL_VARIABLES)[first:]
  specs.local_metric_variables(made + list(variables))


def _new_assignments(graph, before):
  """The variable writes added to `graph` since it had `before` operations."""
  kinds = ('AssignVariableOp', 'AssignAddVariableOp', 'AssignSubVariableOp')
  return [op for op in graph.get_operations()[before:] if op.type in kinds]


def metric_pair(backend, metric, y_true, y_pred, weights):
  """`(value, update_op)` of a fresh Keras metric object in the current graph."""
  graph = _v1.get_default_graph()
  before = len(graph.get_operations())
  # Every write waits for this batch: a count of a static batch size would otherwise also
  # run in the session.run that finds the input exhausted.
  with tf.control_dependencies([t for t in (y_true, y_pred, weights) if t is not None]):
    update = metric.update_state(y_true, y_pred, sample_weight=weights)
  if update is None or not backend.is_tf_keras:  # Keras 3 returns nothing in a graph
    update = tf.group(*_new_assignments(graph, before))
  with tf.control_dependencies(None):
    value = tf.identity(metric.result())
  return value, update


def metric_ops(backend, metrics, losses, names, targets, outputs, weights):
  """{reported name: (value, update_op)} for the compiled `metrics` of every output."""
  ops = {}
  for i, entries in enumerate(per_output(metrics, names, 'metrics')):
    if entries is None:
      continue
    for entry in (entries if isinstance(entries, (list, tuple)) else [entries]):
      first = len(_v1.global_variables())
      name, metric = metric_object(backend, entry, losses[i], targets[i], outputs[i])
      key = name if len(names) == 1 else '%s_%s' % (names[i], name)
      ops[key] = metric_pair(backend, metric, targets[i], outputs[i], weights[i])
      _as_local(first, backends.graph_variables(metric.variables))
  return ops
