"""Faster Adam updates for small variables on CPU replicas, inside device loops.

`tf.compat.v1.train.AdamOptimizer` updates each variable with one fused `ResourceApplyAdam`
kernel.  On CPU that kernel hands every update of more than a few hundred elements to the
intra-op thread pool, and waiting for those threads costs far more than the arithmetic: in the
small-MLP benchmark (64-256-10) the two kernel updates took ~0.2 ms of a ~0.4 ms step, and a
model_fn using them trained ~25% slower than the same Adam written as element-wise ops (as
`keras.optimizers.Adam` updates).  Very small and large variables are faster fused.  Measured
per update in a graph loop on 2 cores, fused vs element-wise: 256 elements 3 vs 6 us; 512: 47 vs
8 us; 2,048: 25 vs 10 us; 32,768: 73 vs 36 us; 40,000: 69 vs 45 us; 65,536: 78 vs 130 us;
1M: 453 vs 1,376 us.

That only pays where the step is short.  In a compute-bound model (784-1024-1024-10, 1.9M
parameters) the few mid-size updates (biases) cost nothing either way, yet element-wise they
slowed the step ~6% (median of 7 interleaved rounds, 78 vs 83 steps/s): the extra small ops
interleave with the large matmuls.  So models with more than `MAX_MODEL_ELEMENTS` trainable
elements keep the fused kernel throughout.

Inside `elementwise_adam()` (what steps.py wraps around the training device loop on CPU
replicas), in models of at most `MAX_MODEL_ELEMENTS` trainable elements, dense Adam updates of
resource variables with more than `MIN_ELEMENTS` and at most `MAX_ELEMENTS` elements are built
as element-wise ops instead: the same formula, on the same slot variables (`.../Adam`,
`.../Adam_1`, `beta1_power`, `beta2_power`), so checkpoints are unchanged and results agree
with the fused kernel to float rounding.  Everything else (larger or unknown-size variables,
`use_locking=True`, sparse updates, reference variables, GPU replicas, training without a
device loop) keeps the fused kernel.
"""
import contextlib
import threading

import tensorflow as tf

from tpu_estimator import _tf_internals

MIN_ELEMENTS = 256  # between the measured crossover sizes above
MAX_ELEMENTS = 49152
MAX_MODEL_ELEMENTS = 1 << 20

_state = threading.local()


def _graph_cache():
  """A dict kept on the current graph, so it lives and dies with it (a global map from graphs
  to their tensors would keep every graph alive)."""
  graph = tf.compat.v1.get_default_graph()
  cache = _tf_internals.graph_state(graph, 'adam_cache')
  if cache is None:
    cache = {}
    _tf_internals.set_graph_state(graph, 'adam_cache', cache)
  return cache


def _enabled():
  return getattr(_state, 'enabled', False)


def _small_model():
  """Whether the graph's trainable variables hold at most MAX_MODEL_ELEMENTS elements (all
  exist once an optimizer applies gradients)."""
  cache = _graph_cache()
  if 'model_elements' not in cache:
    sizes = [v.shape.num_elements() for v in tf.compat.v1.trainable_variables()]
    cache['model_elements'] = None if None in sizes else sum(sizes)
  total = cache['model_elements']
  return total is not None and total <= MAX_MODEL_ELEMENTS


def _coefficients(device, beta1_power, beta2_power, lr, beta1, beta2):
  """(lr_t, 1 - beta1, 1 - beta2): the scalars every variable's update uses, built once per
  graph and device instead of once per variable."""
  cache = _graph_cache()
  key = (device,) + tuple(t.ref() for t in (beta1_power, beta2_power, lr, beta1, beta2))
  if key not in cache:
    lr_t = lr * tf.sqrt(1 - beta2_power) / (1 - beta1_power)
    cache[key] = (lr_t, 1 - beta1, 1 - beta2)
  return cache[key]


def _elementwise_apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
                            grad):
  """ResourceApplyAdam's update (without nesterov), as element-wise ops."""
  dtype = grad.dtype.base_dtype
  lr_t, one_minus_beta1, one_minus_beta2 = _coefficients(
      var.device, beta1_power, beta2_power, lr, beta1, beta2)
  m_old = tf.raw_ops.ReadVariableOp(resource=m, dtype=dtype)
  v_old = tf.raw_ops.ReadVariableOp(resource=v, dtype=dtype)
  m_t = m_old + (grad - m_old) * one_minus_beta1
  v_t = v_old + (tf.square(grad) - v_old) * one_minus_beta2
  slots = [tf.raw_ops.AssignVariableOp(resource=m, value=m_t),
           tf.raw_ops.AssignVariableOp(resource=v, value=v_t)]
  with tf.control_dependencies(slots):
    return tf.raw_ops.AssignSubVariableOp(resource=var,
                                          value=lr_t * m_t / (tf.sqrt(v_t) + epsilon))


class _TrainingOps:
  """Stands in for the op module of TensorFlow's v1 Adam (`_tf_internals.v1_adam_training_ops`):
  every op is the original's except `resource_apply_adam` for small variables while
  `elementwise_adam()` is active (in this thread)."""

  def __init__(self, original):
    self._original = original

  def __getattr__(self, name):
    return getattr(self._original, name)

  def resource_apply_adam(self, var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
                          grad, use_locking=False, use_nesterov=False, name=None):
    size = grad.shape.num_elements()
    if (_enabled() and not use_locking and not use_nesterov and size is not None and
        MIN_ELEMENTS < size <= MAX_ELEMENTS and _small_model()):
      return _elementwise_apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2,
                                     epsilon, grad)
    return self._original.resource_apply_adam(
        var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
        use_locking=use_locking, use_nesterov=use_nesterov, name=name)


_install_lock = threading.Lock()


def _install():
  with _install_lock:
    current = _tf_internals.v1_adam_training_ops()
    if not isinstance(current, _TrainingOps):
      _tf_internals.set_v1_adam_training_ops(_TrainingOps(current))


@contextlib.contextmanager
def elementwise_adam(active=True):
  """While active, v1 AdamOptimizer updates of small variables built in this thread are
  element-wise ops."""
  if not active:
    yield
    return
  _install()
  saved = _enabled()
  _state.enabled = True
  try:
    yield
  finally:
    _state.enabled = saved
