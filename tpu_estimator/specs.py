"""What a `model_fn` returns: `ModeKeys`, `EstimatorSpec`, `TPUEstimatorSpec`.

Both specs are namedtuples (users index them and call `_replace`) whose constructor validates
the fields for the mode, as the original did.  `TPUEstimatorSpec` carries functions to run on
the host (`eval_metrics`, `host_call`, `scaffold_fn`); `as_estimator_spec()` turns it into an
`EstimatorSpec` for one-device use.
"""
import collections
import inspect
import sys

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.core import host_calls
from tpu_estimator import errors

_v1 = tf.compat.v1


class ModeKeys:
  """Standard names for model modes."""
  TRAIN = 'train'
  EVAL = 'eval'
  PREDICT = 'infer'


_ALL_MODES = (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT)


def _check_mode(mode):
  if mode not in _ALL_MODES:
    raise errors.value_error('`mode` must be one of %s.' % (_ALL_MODES,), mode=mode)


def _check_from_graph(name, value):
  """Tensors, ops and variables in a spec must live in the graph the estimator is building."""
  graph = _v1.get_default_graph()
  for item in tf.nest.flatten(value):
    if isinstance(item, (tf.Tensor, tf.Operation, tf.Variable)) and item.graph is not graph:
      raise ValueError(
          '`%s` with %r must be from the default graph. Possible causes: the tensor was made '
          'outside model_fn (e.g. a global, or by a previous call), or in a different '
          'tf.Graph. Create every tensor inside model_fn.' % (name, item))


def _as_tensor(name, value):
  """`value` as a `tf.Tensor`, or None when it is not one: a `tf.Variable` is read where it is
  returned (the original took any TensorFlow tensor type, variables included)."""
  if isinstance(value, tf.Tensor):
    return value
  if isinstance(value, tf.Variable):
    _check_from_graph(name, value)
    return tf.convert_to_tensor(value)
  return None


def check_loss(loss, mode):
  """A scalar loss: a tensor (or variable) of one element, reshaped to a scalar; only a
  statically known element count other than one is refused before running, as the original
  did (a `(None,)` loss must hold one element when it runs)."""
  if loss is None:
    if mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
      raise ValueError('Missing loss. Received: loss=None in mode=%r; a model_fn must return a '
                       'scalar loss tensor for TRAIN and EVAL.' % mode)
    return None
  tensor = _as_tensor('loss', loss)
  if tensor is None:
    raise errors.type_error('`loss` must be a Tensor.', 'Return a scalar tf.Tensor.', loss=loss)
  shape = tensor.shape
  if shape.num_elements() not in (None, 1):
    # The original's words first ("Loss must be scalar, given: ..."), then ours.
    raise errors.value_error('Loss must be scalar, given: %s.' % (tensor,),
                             'Reduce it, e.g. tf.reduce_mean(loss).', loss_shape=str(shape))
  if not shape.is_compatible_with([]):
    _check_from_graph('loss', tensor)
    tensor = tf.reshape(tensor, [])
  return tensor


def _check_train_op(train_op, mode):
  if train_op is None:
    if mode == ModeKeys.TRAIN:
      raise ValueError('Missing train_op. Received: train_op=None in mode=%r; return e.g. '
                       'optimizer.minimize(loss, global_step=...).' % mode)
    return None
  if not isinstance(train_op, (tf.Operation, tf.Tensor)) and not hasattr(train_op, 'op'):
    raise errors.type_error('`train_op` must be an Operation or a Tensor.', train_op=train_op)
  return train_op


def _check_predictions(predictions, mode):
  if predictions is None:
    if mode == ModeKeys.PREDICT:
      raise ValueError('Missing predictions. Received: predictions=None in mode=%r; return a '
                       'Tensor or a dict of Tensors.' % mode)
    return {}
  if isinstance(predictions, dict):
    checked = {}
    for key, value in predictions.items():
      checked[key] = _as_tensor('predictions[%r]' % (key,), value)
      if checked[key] is None:
        raise errors.type_error('predictions[%r] must be a Tensor.' % (key,), value=value)
    return checked
  tensor = _as_tensor('predictions', predictions)
  if tensor is None:
    raise errors.type_error('predictions must be Tensor, given: %r: `predictions` must be a '
                            'Tensor or a dict of Tensors.' % (predictions,),
                            predictions=predictions)
  return tensor


def _keras_metric_classes():
  """The Keras `Metric` base classes in use: Keras 3's (`tf.keras`), and tf_keras' once a
  program has imported it (its objects cannot exist before)."""
  classes = [tf.keras.metrics.Metric]
  tf_keras = sys.modules.get('tf_keras')
  if tf_keras is not None:
    classes.append(tf_keras.metrics.Metric)
  return tuple(classes)


def _graph_variable(variable):
  """The `tf.Variable` behind a metric variable (a Keras 3 variable holds one)."""
  return variable if isinstance(variable, tf.Variable) else getattr(variable, 'value', None)


def _metric_writes(variables):
  """The ops of the default graph that write `variables` (their initializers aside): what
  the model_fn's `update_state` calls built."""
  initializers = {v.initializer for v in variables}
  writes = []
  for variable in variables:
    for op in variable.handle.consumers():
      if op.type not in ('ReadVariableOp', 'VarIsInitializedOp') and op not in initializers \
          and op not in writes:
        writes.append(op)
  return writes


def local_metric_variables(variables):
  """Makes `variables` (a metric's state) local metric variables of the default graph, as
  TensorFlow's own metrics are: initialized by every evaluation's local init, never saved or
  trained.  Keras 3 puts its variables in the global (and trainable) collections; tf_keras's
  graph-mode metrics put theirs in none."""
  graph = _v1.get_default_graph()
  for name in (_v1.GraphKeys.GLOBAL_VARIABLES, _v1.GraphKeys.TRAINABLE_VARIABLES):
    collection = graph.get_collection_ref(name)
    collection[:] = [item for item in collection if not any(item is v for v in variables)]
  for name in (_v1.GraphKeys.LOCAL_VARIABLES, _v1.GraphKeys.METRIC_VARIABLES):
    present = graph.get_collection(name)
    for variable in variables:
      if not any(variable is item for item in present):
        graph.add_to_collection(name, variable)


def _keras_metric_pair(key, metric):
  """`(value, update_op)` of a Keras `Metric` the model_fn updated, as the original made it:
  `result()`, and the updates `update_state` built; its variables become local (reset by
  every evaluation, never checkpointed)."""
  variables = [_graph_variable(v) for v in metric.variables]
  variables = [v for v in variables if isinstance(v, tf.Variable)]
  updates = list(getattr(metric, 'updates', None) or ()) or _metric_writes(variables)
  if not updates:
    raise errors.value_error(
        'Please call update_state(...) on the "%s" metric.' % metric.name,
        'A Metric in eval_metric_ops must be updated in model_fn, e.g. '
        'metric.update_state(labels, predictions).', key=key, metric=metric)
  local_metric_variables(variables)
  update = updates[0] if len(updates) == 1 else tf.group(*updates)
  return metric.result(), update


def check_metric_ops(eval_metric_ops):
  """`{name: (value, update_op)}`: each value a `(value, update_op)` pair or a Keras
  `Metric` updated in the model_fn (made a pair here, as the original did)."""
  if eval_metric_ops is None:
    return {}
  if not isinstance(eval_metric_ops, dict):
    raise errors.type_error('`eval_metric_ops` must be a dict.',
                            'Map names to (value, update_op) tuples or Keras Metric objects.',
                            eval_metric_ops=eval_metric_ops)
  checked = {}
  metric_classes = _keras_metric_classes()
  for key, value in eval_metric_ops.items():
    if isinstance(value, metric_classes):
      checked[key] = _keras_metric_pair(key, value)
    elif isinstance(value, tuple) and len(value) == 2:
      checked[key] = value
    else:
      raise errors.type_error(
          'Values of `eval_metric_ops` must be (metric_value, update_op) tuples or Keras '
          'Metric objects.', 'Use e.g. tf.compat.v1.metrics.accuracy(labels, predictions) or a '
          'tf.keras.metrics.Metric updated in model_fn.', key=key, value=value)
  return checked


def call_metric_fn(metric_fn, tensors):
  """`metric_fn` (of `eval_metrics`) over the host tensors; checks it returned {name: (value,
  update_op)}."""
  result = host_calls.call_host_fn(metric_fn, tensors)
  if not isinstance(result, dict):
    raise errors.type_error(
        'The metric_fn of `eval_metrics` must return a dict {name: (value, update_op)}.',
        'Return e.g. {"accuracy": tf.compat.v1.metrics.accuracy(labels, predictions)}.',
        metric_fn_returned=result)
  return check_metric_ops(result)


def _check_export_output_types(export_outputs):
  if export_outputs is not None:
    if not isinstance(export_outputs, dict):
      raise errors.type_error('`export_outputs` must be a dict.', export_outputs=export_outputs)
    for key, value in export_outputs.items():
      if not isinstance(value, _tf_internals.export_output.ExportOutput):
        raise errors.type_error(
            'Values in `export_outputs` must be ExportOutput objects '
            '(PredictOutput, ClassificationOutput, RegressionOutput).', key=key, value=value)


def _check_export_outputs(export_outputs, predictions, mode):
  if mode != ModeKeys.PREDICT:
    return export_outputs
  _check_export_output_types(export_outputs)
  return _tf_internals.export_utils.get_export_outputs(export_outputs, predictions)


class EstimatorSpec(
    collections.namedtuple('EstimatorSpec', [
        'mode', 'predictions', 'loss', 'train_op', 'eval_metric_ops', 'export_outputs',
        'training_chief_hooks', 'training_hooks', 'scaffold', 'evaluation_hooks',
        'prediction_hooks'
    ])):
  """Ops and objects returned from a `model_fn`, validated for `mode`."""

  def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metric_ops=None,
              export_outputs=None, training_chief_hooks=None, training_hooks=None,
              scaffold=None, evaluation_hooks=None, prediction_hooks=None):
    _check_mode(mode)
    loss = check_loss(loss, mode)
    train_op = _check_train_op(train_op, mode)
    predictions = _check_predictions(predictions, mode)
    eval_metric_ops = check_metric_ops(eval_metric_ops)
    export_outputs = _check_export_outputs(export_outputs, predictions, mode)
    if scaffold is not None and not isinstance(scaffold, _v1.train.Scaffold):
      raise errors.type_error('`scaffold` must be a tf.compat.v1.train.Scaffold.',
                              scaffold=scaffold)
    spec = super().__new__(
        cls, mode=mode, predictions=predictions, loss=loss, train_op=train_op,
        eval_metric_ops=eval_metric_ops, export_outputs=export_outputs,
        training_chief_hooks=errors.check_hooks('training_chief_hooks', training_chief_hooks),
        training_hooks=errors.check_hooks('training_hooks', training_hooks),
        scaffold=scaffold or _v1.train.Scaffold(),
        evaluation_hooks=errors.check_hooks('evaluation_hooks', evaluation_hooks),
        prediction_hooks=errors.check_hooks('prediction_hooks', prediction_hooks))
    for name in ('predictions', 'loss', 'train_op'):
      _check_from_graph(name, getattr(spec, name))
    for key, metric in spec.eval_metric_ops.items():
      if isinstance(metric, tuple):
        _check_from_graph('eval_metric_ops[%r]' % (key,), metric)
    return spec

  def _replace(self, **kwds):
    if 'mode' in kwds and kwds['mode'] != self.mode:
      raise errors.value_error('The mode of an EstimatorSpec cannot be changed.',
                               mode=kwds['mode'])
    fields = self._asdict()
    fields.update(kwds)
    return EstimatorSpec(**fields)


def _check_host_fn(name, value):
  """`eval_metrics`/`host_call` are `(fn, tensors)` with tensors a list, tuple or dict."""
  if value is None:
    return
  if not isinstance(value, (tuple, list)) or len(value) != 2:
    raise errors.type_error('`%s` must be a tuple (fn, tensors).' % name, **{name: value})
  fn, tensors = value
  if not callable(fn):
    raise errors.type_error('`%s[0]` must be callable.' % name, **{name: fn})
  if isinstance(tensors, dict):
    return
  if not isinstance(tensors, (tuple, list)):
    raise errors.type_error('`%s[1]` must be a list, tuple or dict of Tensors.' % name,
                            **{name: tensors})
  try:
    argspec = inspect.getfullargspec(fn)
  except TypeError:
    return
  if argspec.varargs:
    return
  args = list(argspec.args)
  if inspect.ismethod(fn) or (args and args[0] == 'self'):
    args = args[1:]
  required = len(args) - len(argspec.defaults or ())
  if not required <= len(tensors) <= len(args):
    raise errors.value_error(
        'In `%s`, the function takes %d arguments but %d tensors were given.' %
        (name, len(args), len(tensors)),
        'Pass one tensor per argument of the function (or a dict keyed by argument name).',
        arguments=args, num_tensors=len(tensors))


class TPUEstimatorSpec(
    collections.namedtuple('TPUEstimatorSpec', [
        'mode', 'predictions', 'loss', 'train_op', 'eval_metrics', 'export_outputs',
        'scaffold_fn', 'host_call', 'training_hooks', 'evaluation_hooks', 'prediction_hooks'
    ])):
  """What a `TPUEstimator` model_fn returns.

  `eval_metrics=(metric_fn, tensors)` and `host_call=(fn, tensors)` run on the host with the
  tensors of all shards concatenated along the batch axis.  `scaffold_fn` is a no-argument
  function returning a `Scaffold`, called on the host.
  """

  def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metrics=None,
              export_outputs=None, scaffold_fn=None, host_call=None, training_hooks=None,
              evaluation_hooks=None, prediction_hooks=None):
    # The original validated loss, train_op and predictions here too, with the same rules as
    # EstimatorSpec: a spec missing its train_op fails where it is built, not steps later.
    _check_mode(mode)
    loss = check_loss(loss, mode)
    train_op = _check_train_op(train_op, mode)
    if predictions is not None or mode == ModeKeys.PREDICT:
      predictions = _check_predictions(predictions, mode)
    if mode == ModeKeys.PREDICT:
      _check_export_output_types(export_outputs)
    _check_host_fn('eval_metrics', eval_metrics)
    _check_host_fn('host_call', host_call)
    if scaffold_fn is not None and not callable(scaffold_fn):
      raise errors.type_error('`scaffold_fn` must be callable.', scaffold_fn=scaffold_fn)
    return super().__new__(
        cls, mode=mode, predictions=predictions, loss=loss, train_op=train_op,
        eval_metrics=eval_metrics, export_outputs=export_outputs, scaffold_fn=scaffold_fn,
        host_call=host_call,
        training_hooks=errors.check_hooks('training_hooks', training_hooks),
        evaluation_hooks=errors.check_hooks('evaluation_hooks', evaluation_hooks),
        prediction_hooks=errors.check_hooks('prediction_hooks', prediction_hooks))

  def _replace(self, **kwds):
    fields = self._asdict()
    fields.update(kwds)
    return TPUEstimatorSpec(**fields)

  def as_estimator_spec(self):
    """The equivalent `EstimatorSpec` on one device: host functions are called in place."""
    eval_metric_ops = None
    if self.eval_metrics is not None:
      eval_metric_ops = call_metric_fn(*self.eval_metrics)
    scaffold = self.scaffold_fn() if self.scaffold_fn else None
    host_hooks = []
    if self.host_call is not None:
      host_hooks.append(host_calls.HostCallHook(host_calls.call_host_fn(*self.host_call)))
    return EstimatorSpec(
        mode=self.mode, predictions=self.predictions, loss=self.loss, train_op=self.train_op,
        eval_metric_ops=eval_metric_ops, export_outputs=self.export_outputs, scaffold=scaffold,
        training_hooks=list(self.training_hooks) + host_hooks,
        evaluation_hooks=list(self.evaluation_hooks) + host_hooks,
        prediction_hooks=list(self.prediction_hooks) + host_hooks)
