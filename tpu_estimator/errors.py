"""Exception types and the helpers that word error messages the same way everywhere.

Every message says what was expected, what was received and how to fix it, e.g.
``train_batch_size must be divisible by the number of shards. Received: train_batch_size=30
with 4 shards. Fix: ...``.
"""
import contextlib
import math
import numbers
import re

import tensorflow as tf

class NanLossDuringTrainingError(tf.compat.v1.train.NanLossDuringTrainingError):
  """The training loss became NaN or infinite; names the step.  A subclass of TensorFlow's
  type, so code catching `tf.compat.v1.train.NanLossDuringTrainingError` still catches it."""

  def __init__(self, step=None, loss=None):
    super().__init__()
    self.step = step
    self.loss = loss

  def __str__(self):
    where = ' at global step %s' % self.step if self.step is not None else ''
    return ('NaN loss during training%s (loss=%s). The model_dir keeps the last checkpoint '
            'saved before it.' % (where, self.loss))


class NoCheckpointError(ValueError):
  """`evaluate`/`predict`/`export` found no checkpoint to restore."""


def received(**values):
  """`Received: a=1, b='x'` for error messages."""
  return 'Received: ' + ', '.join('%s=%r' % kv for kv in values.items())


def value_error(what, fix=None, **values):
  msg = '%s %s.' % (what, received(**values))
  if fix:
    msg += ' ' + fix
  return ValueError(msg)


def type_error(what, fix=None, **values):
  msg = '%s %s.' % (what, received(**values))
  if fix:
    msg += ' ' + fix
  return TypeError(msg)


def is_int(value):
  """An integer, numpy's included (the original's checks compared values, so they took
  them), not a bool."""
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_positive_int(name, value, allow_none=False):
  """Raises unless `value` is an int > 0 (or None when allowed)."""
  if value is None and allow_none:
    return
  if not is_int(value):
    raise type_error('`%s` must be an int.' % name, 'Pass a positive integer.', **{name: value})
  if value <= 0:
    raise value_error('`%s` must be positive.' % name, 'Pass an integer > 0.', **{name: value})


def step_count(name, value):
  """A count of steps as an int: None stays None; a positive int, or a positive finite float
  (tensorflow-estimator took floats and ran whole steps until the count was reached, so 2.5
  runs 3), rounded up.  Refused: bools, strings, zero, negatives, NaN and infinities."""
  if value is None:
    return None
  if isinstance(value, bool) or not isinstance(value, numbers.Real):
    raise type_error('`%s` must be a number of steps.' % name, 'Pass a positive integer.',
                     **{name: value})
  if not math.isfinite(value):
    raise value_error('`%s` must be finite.' % name, 'Pass None for no limit.', **{name: value})
  if value <= 0:
    raise value_error('Must specify %s > 0.' % name, 'Pass a positive integer.',
                      **{name: value})
  return int(math.ceil(value))


def check_non_negative(name, value, allow_none=True):
  """Raises unless `value` is a number >= 0 (or None when allowed)."""
  if value is None and allow_none:
    return
  if isinstance(value, bool) or not isinstance(value, numbers.Real):
    raise type_error('`%s` must be a number.' % name, **{name: value})
  if value < 0:
    raise value_error('`%s` must be >= 0.' % name, **{name: value})


def check_positive_number(name, value, allow_none=True):
  """Raises unless `value` is a number > 0 (or None when allowed)."""
  check_non_negative(name, value, allow_none)
  if value is not None and value <= 0:
    raise value_error('`%s` must be > 0.' % name, **{name: value})


def check_hooks(name, hooks):
  """`hooks` as a tuple, each checked to be a `SessionRunHook`."""
  hooks = tuple(hooks or ())
  for hook in hooks:
    if not isinstance(hook, tf.compat.v1.train.SessionRunHook):
      raise type_error('All hooks in `%s` must be SessionRunHook instances.' % name, hook=hook)
  return hooks


# The starts of the messages of the library's own run-time checks on what input_fn and model_fn
# return (tf.debugging.Assert in inputs.py and host_calls.py): a failed one is the user's bad
# input, reported as the ValueError a check at graph-building time gives.
_RUNTIME_CHECKS = ('The first training batch has', 'Batch length of predictions',
                   'params_batch_size=')


@contextlib.contextmanager
def runtime_checks_as_value_errors():
  """Re-raises a failed run-time input check (an `InvalidArgumentError` from an Assert the
  library built) as a `ValueError` with the check's own words; other errors pass unchanged."""
  try:
    yield
  except tf.errors.InvalidArgumentError as e:
    message = e.message or ''
    if 'assertion failed' not in message or not any(m in message for m in _RUNTIME_CHECKS):
      raise
    text = message.split('assertion failed:', 1)[1].split('\n')[0]
    text = re.sub(r'\s+', ' ', text.replace('] [', ' ').strip(' []'))
    text = text.replace('= ', '=').replace(' ,', ',').replace("\\'", "'").replace('\\"', '"')
    raise ValueError(text) from e
