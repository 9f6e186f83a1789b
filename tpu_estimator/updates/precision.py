"""Mixed precision: `TPUConfig(precision='mixed_bfloat16' | 'mixed_float16')`.

While `model_fn` runs (every mode) under a mixed policy:
- floating-point features reach `model_fn` in the compute dtype (bfloat16 or float16);
- trainable variables made with `tf.compat.v1.get_variable` (directly or through
  `tf.compat.v1.layers`/tf_slim) are float32 variables, saved as float32 under their usual
  names, and their reads inside `model_fn` are cast to the compute dtype.  A variable asked for
  in the compute dtype is made float32 too (what `tf.compat.v1.tpu.bfloat16_scope` did);
- Keras 3 layers built in `model_fn` follow the Keras dtype policy of the same name (float32
  variables, compute-dtype math);
- with `mixed_float16`, every `tf.compat.v1.train` optimizer's gradients go through
  TensorFlow's `MixedPrecisionLossScaleOptimizer` with a dynamic loss scale: the loss is scaled
  up before differentiation and the gradients back down; a step whose gradients are not finite
  is skipped (no update, `global_step` not advanced) and the scale halved; after 2000 good
  steps it doubles.  The scale is saved (`current_loss_scale`, `good_steps`).

The user computes the loss from float32 (cast logits with `tf.cast(logits, tf.float32)`, as
Keras' mixed precision guide advises); optimizer slots stay float32.
"""
import contextlib
import threading

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import errors
from tpu_estimator.updates import interceptor
from tpu_estimator.updates import shard_sum
from tpu_estimator.updates import wrapping

_v1 = tf.compat.v1
_LossScaleOptimizer = _v1.mixed_precision.MixedPrecisionLossScaleOptimizer
POLICIES = {'mixed_bfloat16': tf.bfloat16, 'mixed_float16': tf.float16}
_STATE = 'precision'  # our state on the graph being built (updates/interceptor.py)


def policy_of(config):
  tpu_config = getattr(config, 'tpu_config', None)
  return getattr(tpu_config, 'precision', None)


class _Unwrapped(wrapping.Wrapping):
  """The user's optimizer as the loss-scale optimizer's inner one: its calls go on through the
  layers inside precision (`interceptor.inner`), never back through precision, which would
  wrap it again."""

  def __init__(self, opt):
    super().__init__(opt, opt.get_name())

  def compute_gradients(self, *args, **kwargs):
    return interceptor.inner(_STATE, 'compute_gradients', self._opt, *args, **kwargs)

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    return interceptor.inner(_STATE, 'apply_gradients', self._opt, grads_and_vars,
                             global_step=global_step, name=name)


class _Float16State:
  """Per graph: the loss-scale optimizer wrapped around each user optimizer."""

  def __init__(self):
    self._wrapped = {}
    self._lock = threading.Lock()
    self._calls = threading.local()  # per model_fn call (a replica's thread)

  def unapplied(self):
    """{id: optimizer} whose gradients this thread's `model_fn` call scaled and has not yet
    applied through the loss-scale optimizer."""
    if not hasattr(self._calls, 'unapplied'):
      self._calls.unapplied = {}
    return self._calls.unapplied

  def wrapper(self, opt):
    with self._lock:
      if id(opt) not in self._wrapped:
        self._wrapped[id(opt)] = (opt, _LossScaleOptimizer(_Unwrapped(opt), 'dynamic'))
      return self._wrapped[id(opt)][1]


def _intercept(state, method, optimizer, *args, **kwargs):
  """`Optimizer.compute_gradients`/`apply_gradients` of a float16 graph: the loss-scale
  optimizer's, around the user's."""
  if method == 'compute_gradients':
    state.unapplied()[id(optimizer)] = optimizer
  else:
    state.unapplied().pop(id(optimizer), None)
  return getattr(state.wrapper(optimizer), method)(*args, **kwargs)


def _check_applied(state):
  """After a `model_fn` call: an optimizer with its own `apply_gradients` (BERT's
  AdamWeightDecayOptimizer) whose scaled gradients never reached the base class's would
  apply a step that overflowed instead of skipping it (the loss is NaN within steps)."""
  unapplied = [o for o in state.unapplied().values() if shard_sum.has_own_apply(o)]
  state.unapplied().clear()
  if unapplied:
    raise errors.value_error(
        "TPUConfig(precision='mixed_float16') skips the updates whose gradients overflow "
        'in tf.compat.v1.train.Optimizer.apply_gradients, which %s never reaches: its own '
        'apply_gradients would apply them.' % type(unapplied[0]).__name__,
        "Use precision='mixed_bfloat16' (no loss scaling), or an optimizer that applies "
        'through the base class.', optimizer=unapplied[0])


interceptor.register(_STATE, ('compute_gradients', 'apply_gradients'), _intercept)


def _getter(dtype):
  def getter(getter, *args, **kwargs):  # pylint: disable=redefined-outer-name
    asked = kwargs.get('dtype')
    if asked is not None and tf.as_dtype(asked) == dtype:
      kwargs['dtype'] = tf.float32
    variable = getter(*args, **kwargs)
    if kwargs.get('trainable', True) is not False and \
        variable.dtype.base_dtype == tf.float32:
      return tf.cast(variable, dtype)
    return variable
  return getter


def cast_features(features, dtype):
  """Floating float32 tensors of `features` in `dtype`; everything else as it was."""
  def cast(value):
    if isinstance(value, tf.Tensor) and value.dtype == tf.float32:
      return tf.cast(value, dtype)
    return value
  return tf.nest.map_structure(cast, features)


@contextlib.contextmanager
def _keras_policy(name):
  try:
    import keras  # pylint: disable=import-outside-toplevel
    saved = keras.config.dtype_policy()
  except (ImportError, AttributeError):
    yield
    return
  keras.config.set_dtype_policy(name)
  try:
    yield
  finally:
    keras.config.set_dtype_policy(saved)


@contextlib.contextmanager
def scope(config):
  """Around a `model_fn` call: the policy of `config` (nothing when it has none)."""
  policy = policy_of(config)
  if policy is None:
    yield None
    return
  dtype = POLICIES[policy]
  root = _tf_internals.root_graph()
  if policy == 'mixed_float16':
    interceptor.install()
    # Kept for the graph's life: every graph is built for one call under one config.
    if _tf_internals.graph_state(root, _STATE) is None:
      _tf_internals.set_graph_state(root, _STATE, _Float16State())
  with _v1.variable_scope(_v1.get_variable_scope(), custom_getter=_getter(dtype),
                          auxiliary_name_scope=False), _keras_policy(policy):
    yield dtype
  if policy == 'mixed_float16':
    _check_applied(_tf_internals.graph_state(root, _STATE))
