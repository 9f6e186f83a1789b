"""Calling the user's `input_fn`: `call_input_fn` passes only the arguments the function takes
(`params`, `config`, `mode`, `input_context`), and what it returns is checked and split into
features and labels."""
import inspect
import threading

import tensorflow as tf

from tpu_estimator import errors

_v1 = tf.compat.v1


def fn_args(fn):
  """Names of the arguments a callable takes (bound `self` excluded)."""
  if hasattr(fn, 'func') and hasattr(fn, 'keywords'):  # functools.partial
    return tuple(a for a in fn_args(fn.func) if a not in (fn.keywords or {}))
  spec = inspect.signature(fn)
  return tuple(name for name, p in spec.parameters.items()
               if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def accepted_kwargs(fn, **available):
  """The entries of `available` whose names `fn` takes as arguments."""
  args = fn_args(fn)
  return {name: value for name, value in available.items() if name in args}


_calling = threading.local()  # .input_fn: the input_fn call_input_fn is calling on this thread


def call_input_fn(input_fn, mode, params, config, input_context=None):
  """Calls `input_fn` with the subset of (mode, params, config, input_context) it accepts."""
  if not callable(input_fn):
    raise errors.type_error('`input_fn` must be callable.', input_fn=input_fn)
  kwargs = accepted_kwargs(input_fn, mode=mode, params=params, config=config,
                           input_context=input_context)
  previous = getattr(_calling, 'input_fn', None)
  _calling.input_fn = input_fn
  try:
    with tf.device('/cpu:0'):
      return input_fn(**kwargs)
  finally:
    _calling.input_fn = previous


def called_by_the_estimator(input_fn):
  """Whether the estimator itself is calling `input_fn` (not another input_fn calling it)."""
  return getattr(_calling, 'input_fn', None) is input_fn


def split_features_labels(element):
  """A (features, labels) pair, or features alone (labels None), as the original read them:
  a tuple or list of two is (features, labels)."""
  if isinstance(element, (tuple, list)) and len(element) == 2:
    return element[0], element[1]
  if isinstance(element, tuple) and len(element) == 1:
    return element[0], None
  return element, None


def _check_pair(element, what, result):
  """Anything but one or two items is neither features nor (features, labels): say so here,
  naming input_fn, rather than let model_fn index a 3-tuple as if it were the features."""
  if isinstance(element, (tuple, list)) and len(element) not in (1, 2):
    raise errors.value_error(
        '`input_fn` must return features or (features, labels), but %s is a %s of %d items.' %
        (what, type(element).__name__, len(element)),
        'Return (features, labels), with extra inputs inside the features dict, e.g. '
        '({"x": x, "weight": w}, y).', input_fn_returned=result)


def check_result(result):
  if isinstance(result, tf.data.Dataset):
    _check_pair(result.element_spec, 'each dataset element', result)
    return result
  if isinstance(result, (tf.Tensor, dict, tuple, list, tf.SparseTensor)):
    _check_pair(result, 'its result', result)
    return result
  raise errors.type_error(
      '`input_fn` must return a tf.data.Dataset, a (features, labels) tuple, or features.',
      'Return e.g. tf.data.Dataset.from_tensor_slices((x, y)).batch(32).', result=result)
