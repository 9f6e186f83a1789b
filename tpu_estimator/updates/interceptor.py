"""The one patch of `tf.compat.v1.train.Optimizer`: what stands between the user's optimizer
and its update, in one order.

`model_fn` calls `optimizer.minimize(loss)` (or `compute_gradients`/`apply_gradients`) on a
`tf.compat.v1.train.Optimizer` it made itself, so the library can only act on those calls by
intercepting the class's methods.  This module patches them once, for every optimizer, and
dispatches each call through the layers that registered here, outermost first:

1. `shard_sum` (`apply_gradients`): an optimizer with its own `apply_gradients` under
   `CrossShardOptimizer` on several shards updates once, in the cross-replica context
   (shard_sum.py); a base-class call from there is made as the base class makes it there;
2. `precision` (`compute_gradients`, `apply_gradients`): with `mixed_float16`, the call goes
   to a loss-scale optimizer wrapped around the user's (loss scaled up before
   differentiation, gradients unscaled and checked before the update);
3. `accumulation` (`apply_gradients`): while a micro-step is built, the gradients are added
   to accumulators instead of applied.

Precision is outside accumulation because an accumulated gradient must be unscaled first.
(`TPUConfig` refuses the two together for now; the order is what any later combination needs.)

A layer acts only where its state is set on the graph being built (the root graph of the
current one: a loop body or function builds into its outer graph's call); otherwise the call
goes to the next layer inward, and finally to the original method.  Other graphs and threads
see the original behaviour.  A layer calling the user's optimizer from inside (the loss-scale
optimizer's inner one) goes on with `inner(layer, method, ...)`, never back through itself.
"""
import threading

import tensorflow as tf

from tpu_estimator import _tf_internals

_Optimizer = tf.compat.v1.train.Optimizer
ORDER = ('shard_sum', 'precision', 'accumulation')  # outermost first
METHODS = ('compute_gradients', 'apply_gradients')
_ORIGINAL = {method: getattr(_Optimizer, method) for method in METHODS}
_layers = {}  # name -> (methods, handler)
_lock = threading.Lock()
PASS = object()  # a handler's answer when it does not act on this call


def register(name, methods, handler):
  """Registers layer `name` (one of `ORDER`): `handler(state, method, optimizer, *args,
  **kwargs)` is called for `methods` where the graph being built has state `name` (see
  `_tf_internals.graph_state`), and returns the method's result or `PASS`."""
  if name not in ORDER or not set(methods) <= set(METHODS):
    raise ValueError('Unknown layer %r or methods %r: layers are %s, methods %s.' % (
        name, methods, ORDER, METHODS))
  with _lock:
    _layers[name] = (tuple(methods), handler)


def install():
  """Patches the optimizer methods (once; idempotent and thread-safe)."""
  with _lock:
    for method in METHODS:
      if getattr(_Optimizer, method) is _ORIGINAL[method]:
        setattr(_Optimizer, method, _dispatcher(method))


def _dispatch(layers, method, optimizer, args, kwargs):
  root = _tf_internals.root_graph()
  for name in layers:
    methods, handler = _layers.get(name, ((), None))
    state = _tf_internals.graph_state(root, name) if method in methods else None
    if state is not None:
      result = handler(state, method, optimizer, *args, **kwargs)
      if result is not PASS:
        return result
  return _ORIGINAL[method](optimizer, *args, **kwargs)


def _dispatcher(method):
  def call(self, *args, **kwargs):
    return _dispatch(ORDER, method, self, args, kwargs)
  call.__name__ = method
  call.__doc__ = _ORIGINAL[method].__doc__
  return call


def inner(layer, method, optimizer, *args, **kwargs):
  """`optimizer.method(*args, **kwargs)` through the layers inside `layer` only."""
  return _dispatch(ORDER[ORDER.index(layer) + 1:], method, optimizer, args, kwargs)
