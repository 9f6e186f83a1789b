"""Calling the user's `model_fn`: signature checks and argument injection."""
import inspect

import tensorflow as tf

from tpu_estimator.distribute.input_fn import accepted_kwargs
from tpu_estimator.distribute.input_fn import fn_args
from tpu_estimator import errors
from tpu_estimator import keras3
from tpu_estimator.keras3 import naming as keras_naming
from tpu_estimator import specs
from tpu_estimator.updates import precision

_log = tf.get_logger()
_ALLOWED_ARGS = frozenset(['features', 'labels', 'mode', 'params', 'config'])


def _model_fn_args(model_fn):
  """The argument names of `model_fn`, less those a `functools.partial` binds by position
  (the original's argument reading left them out too)."""
  args = fn_args(model_fn)
  if getattr(model_fn, 'args', None) and hasattr(model_fn, 'func'):
    remaining = inspect.signature(model_fn).parameters
    args = tuple(a for a in args if a in remaining)
  return args


def verify_model_fn(model_fn, params, require_params=False):
  """The constructor's checks: callable, takes `features`, no unknown arguments, `params`."""
  if model_fn is None:
    raise ValueError('Missing model_fn. Received: model_fn=None; pass a function '
                     'model_fn(features, labels, mode, params, config) returning a spec.')
  if not callable(model_fn):
    raise errors.type_error('`model_fn` must be callable.', model_fn=model_fn)
  args = set(_model_fn_args(model_fn))
  if 'features' not in args:
    raise errors.value_error('model_fn must take a `features` argument.',
                             'Define model_fn(features, labels, mode, params, config).',
                             model_fn_args=sorted(args))
  unexpected = args - _ALLOWED_ARGS
  if unexpected:
    raise errors.value_error(
        'model_fn has arguments it cannot be given: %s.' % sorted(unexpected),
        'Use only features, labels, mode, params, config.', model_fn_args=sorted(args))
  if params is not None and 'params' not in args:
    raise errors.value_error('model_fn does not take `params`, but params were passed.',
                             'Add a params argument to model_fn or drop params.',
                             params=params)
  if require_params and 'params' not in args:
    raise errors.value_error(
        'TPUEstimator needs model_fn to take `params` (it passes params["batch_size"]).',
        'Define model_fn(features, labels, mode, params).', model_fn_args=sorted(args))


def call_model_fn(model_fn, features, labels, mode, params, config, allow_tpu_spec=False):
  """Calls `model_fn` with the arguments it accepts and checks what it returns."""
  args = _model_fn_args(model_fn)
  if 'labels' not in args and labels is not None:
    raise errors.value_error('model_fn does not take `labels`, but input_fn returns labels.',
                             'Add a labels argument to model_fn.', model_fn_args=list(args))
  kwargs = accepted_kwargs(model_fn, labels=labels, mode=mode, params=params, config=config)
  keras3.install()
  try:
    with keras_naming.names(), precision.scope(config) as dtype:  # Keras 2's layer names
      if dtype is not None:
        features = precision.cast_features(features, dtype)
      spec = model_fn(features=features, **kwargs)
  except AttributeError as exc:
    if _keras_optimizer(getattr(exc, 'obj', None)):  # Keras 3 optimizers have no minimize
      raise keras_naming.optimizer_error(exc.obj, str(exc)) from exc
    raise
  allowed = (specs.EstimatorSpec, specs.TPUEstimatorSpec) if allow_tpu_spec else \
      (specs.EstimatorSpec,)
  if not isinstance(spec, allowed):
    raise errors.type_error('model_fn must return %s.' % ' or '.join(c.__name__ for c in allowed),
                            returned=spec)
  if spec.mode != mode:
    # The original used such a spec for the call's mode (a model_fn without a `mode` argument
    # returning a TRAIN spec also evaluated); it is checked again for that mode here.
    _log.warning('model_fn returned a spec for mode %r in a %r call; it is used for %r.',
                 spec.mode, mode, mode)
    try:
      spec = type(spec)(**dict(spec._asdict(), mode=mode))
    except (TypeError, ValueError) as exc:
      raise type(exc)('model_fn returned a spec for mode %r in a %r call, which it cannot '
                      'serve: %s Build the spec with the `mode` argument model_fn received.'
                      % (spec.mode, mode, exc)) from exc
  return spec


def _keras_optimizer(value):
  module = type(value).__module__
  return module.startswith('keras') and 'optimizers' in module


def tpu_spec_parts(spec):
  """(loss, train_op, predictions, eval_metrics, host_call, scaffold_fn, hooks...) for either
  spec type, so the sharded path handles both the same way."""
  if isinstance(spec, specs.TPUEstimatorSpec):
    return spec
  eval_metrics = None
  # Outside evaluation the metrics are not used (the original ignored them there too: a model_fn
  # returning them in every mode trains, predicts and exports).
  if spec.eval_metric_ops and spec.mode == specs.ModeKeys.EVAL:
    raise errors.value_error(
        'With use_tpu=True, evaluation metrics must come as TPUEstimatorSpec(eval_metrics='
        '(metric_fn, tensors)) so they can be computed over all shards.',
        eval_metric_ops=sorted(spec.eval_metric_ops))
  scaffold = spec.scaffold
  predictions = spec.predictions  # a Tensor, or a dict ({} when model_fn gave none)
  if isinstance(predictions, dict) and not predictions:
    predictions = None
  return specs.TPUEstimatorSpec(
      mode=spec.mode, predictions=predictions, loss=spec.loss,
      train_op=spec.train_op, eval_metrics=eval_metrics, export_outputs=spec.export_outputs,
      scaffold_fn=(lambda: scaffold) if scaffold is not None else None,
      training_hooks=spec.training_hooks, evaluation_hooks=spec.evaluation_hooks,
      prediction_hooks=spec.prediction_hooks)


def check_tpu_spec(spec, mode):
  """The TPUEstimatorSpec fields a sharded run needs, checked with the original's words."""
  if mode in (specs.ModeKeys.TRAIN, specs.ModeKeys.EVAL) and spec.loss is None:
    raise ValueError('Missing loss. Received: loss=None in mode=%r.' % mode)
  if mode == specs.ModeKeys.TRAIN and spec.train_op is None:
    raise ValueError('Missing train_op. Received: train_op=None in mode=%r.' % mode)
  if mode == specs.ModeKeys.PREDICT:
    if spec.predictions is None:
      raise ValueError('Missing predictions. Received: predictions=None in mode=%r.' % mode)
    if not isinstance(spec.predictions, (dict, tf.Tensor)):
      raise errors.type_error('`predictions` must be a Tensor or a dict of Tensors.',
                              predictions=spec.predictions)
