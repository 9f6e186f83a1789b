"""Keras 3 layers inside `model_fn`: the variable names Keras 2 gave, in every call.

Keras 2 numbered auto-named layers per graph (`dense`, `dense_1` in every fresh graph) and
re-entered a layer's own name scope on each call, so the variables of
`Dense(16)(x)` were `dense/kernel` in every Estimator call.  Keras 3 differs in two ways
that break checkpoints made in one call and restored in the next:

1. It numbers names with a process-wide (thread-local) counter: the second `evaluate()` of a
   process names the same layer `dense_2`.  While a `model_fn` runs, `names()` points Keras
   at a counter owned by the graph being built (fresh per graph, as Keras 2's), and puts the
   caller's own counter back afterwards: no global `clear_session`, the user's Keras state
   outside our calls is left alone.
2. It opens a fresh TensorFlow name scope for the build and again for the call of a layer,
   which a graph uniquifies (`dense_1` becomes `dense_1_1`).  In graphs that `names()` has
   marked, a layer re-enters the scope it got first in that graph, as Keras 2 did.  The patch
   is installed once on Keras' name-scope class and does nothing for any other graph.

Keras 3 optimizers cannot build a train_op in such a graph (their `apply_gradients` returns
a Keras variable and leaves the updates unrun; `minimize` is missing): in marked graphs they
raise `optimizer_error`, which names the supported pattern.

Replicas run `model_fn` on threads of their own, where Keras' thread-local settings (the
global dtype policy) would be missing: `thread_settings()` / `apply_settings()` carry them.
Keras is never imported here: without it loaded there is nothing to do.
"""
import contextlib
import sys

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import errors

_STATE = 'keras_names'  # our state on a graph that model_fn builds
_CARRIED = ('dtype_policy',)  # Keras' thread-local settings a replica thread must also see
_patched = []


class _GraphNames:
  """The Keras naming state of one graph built by tpu_estimator."""

  def __init__(self):
    import collections  # pylint: disable=import-outside-toplevel
    self.uids = collections.defaultdict(int)
    self.scopes = {}  # (graph id, layer id) -> the absolute scope it first got
    self.paths = {}  # (graph id, Keras path) -> the TensorFlow scope that path opened there
    self.keep = []  # the graphs and layers keyed above, alive as long as this state
    self.seed_generator = None  # Keras' global SeedGenerator for this graph (in_graph.py)


def _global_state():
  return sys.modules.get('keras.src.backend.common.global_state')


def _state_of(graph, create=False):
  root = _tf_internals.root_graph(graph)
  state = _tf_internals.graph_state(root, _STATE)
  if state is None and create:
    state = _GraphNames()
    _tf_internals.set_graph_state(root, _STATE, state)
  return state


def graph_state():
  """The Keras state of the current graph when `names()` marked it, else None."""
  return _state_of(tf.compat.v1.get_default_graph())


def in_marked_graph():
  """Whether the current graph (or the one it is a body of) is being built by model_fn."""
  return graph_state() is not None


def optimizer_error(optimizer, detail=None):
  """The TypeError for a Keras optimizer used inside `model_fn`."""
  return errors.type_error(
      'A Keras optimizer (tf.keras.optimizers.*) was used inside model_fn: Keras 3 optimizers '
      'update variables eagerly or in a tf.function and cannot build a train_op in the graph '
      'an Estimator runs%s.' % (' (%s)' % detail if detail else ''),
      'Use a tf.compat.v1.train optimizer: train_op = tf.compat.v1.train.AdamOptimizer('
      'learning_rate).minimize(loss, tf.compat.v1.train.get_global_step()) (in a '
      'CrossShardOptimizer when sharded); Keras layers, models and losses work as they are.',
      optimizer=optimizer)


def _install_optimizer_guard():
  """Keras 3 optimizers' update methods raise `optimizer_error` in marked graphs."""
  try:
    from keras.src.optimizers import base_optimizer  # pylint: disable=import-outside-toplevel
  except ImportError:
    return
  base = getattr(base_optimizer, 'BaseOptimizer', None)
  for name in ('apply_gradients', 'apply'):
    original = getattr(base, name, None)
    if original is None or getattr(original, '_tpu_estimator_guard', False):
      continue

    def guarded(self, *args, _original=original, **kwargs):
      if not tf.executing_eagerly() and _state_of(tf.compat.v1.get_default_graph()) is not None:
        raise optimizer_error(self)
      return _original(self, *args, **kwargs)

    guarded._tpu_estimator_guard = True  # pylint: disable=protected-access
    setattr(base, name, guarded)


def keras_loaded():
  """Whether Keras 3 is loaded in this process (nothing to adapt before)."""
  return _global_state() is not None


def install():
  """Makes Keras' TensorFlow name scope re-enter a layer's first scope in marked graphs, and
  guards Keras optimizers there (once; call when Keras is loaded)."""
  if _patched:
    return
  _install_optimizer_guard()
  try:
    from keras.src.backend.tensorflow import core  # pylint: disable=import-outside-toplevel
  except ImportError:
    _patched.append(None)
    return
  scope_class = getattr(core, 'name_scope', None)
  original = getattr(scope_class, '__enter__', None)
  if original is None or not hasattr(scope_class, '__init__'):
    _patched.append(None)
    return

  def __enter__(self):  # pylint: disable=invalid-name
    caller = getattr(self, 'caller', None)
    if caller is None or tf.executing_eagerly():
      return original(self)
    graph = tf.compat.v1.get_default_graph()
    state = _state_of(graph)
    if state is None:
      return original(self)
    key = (id(graph), id(caller))
    first = state.scopes.get(key)
    if first is not None:
      self._tf_name_scope = tf.name_scope(first)  # pylint: disable=protected-access
    result = original(self)
    if getattr(self, '_pop_on_exit', False):
      if first is None:
        state.scopes[key] = graph.get_name_scope() + '/'
        state.keep.append((graph, caller))
      path = _keras_path()
      if path:
        state.paths.setdefault((id(graph), path), graph.get_name_scope())
    return result

  scope_class.__enter__ = __enter__
  _patched.append(scope_class)
  _install_deferred_variable_scope()


def _keras_path():
  try:
    from keras.src.backend.common import name_scope  # pylint: disable=import-outside-toplevel
  except ImportError:
    return ''
  return name_scope.current_path()


def _deferred_scope(state, graph, path):
  """The TensorFlow scope for a variable at Keras `path` created after its layers' scopes
  closed: the scope its nearest enclosing Keras scope opened in `graph`, plus the rest of
  the path (`net` opened `net`, so `net/dense/kernel` goes to `net/dense/`)."""
  parts = path.split('/')[:-1]
  for end in range(len(parts), 0, -1):
    opened = state.paths.get((id(graph), '/'.join(parts[:end])))
    if opened is not None:
      return '/'.join([opened] * bool(opened) + parts[end:]) + '/'
  return None


def _install_deferred_variable_scope():
  """A subclassed model or Sequential without an input shape builds its layers in a scratch
  graph (Keras 3's symbolic build), and their variables are created afterwards, in the
  model's scope only (`net/kernel`, `net/kernel_1`): in marked graphs they are created in
  the scope of their own Keras path instead (`net/dense/kernel`), as Keras 2 named them."""
  try:
    from keras.src.backend.common import variables  # pylint: disable=import-outside-toplevel
    from keras.src.backend.tensorflow import core  # pylint: disable=import-outside-toplevel
  except ImportError:
    return
  # The backend-independent base is `Variable` from Keras 3.7, `KerasVariable` before.
  base = getattr(variables, 'Variable', None) or getattr(variables, 'KerasVariable')
  for cls in (base, core.Variable):  # the TensorFlow backend overrides it
    original = cls.__dict__.get('_deferred_initialize')
    if original is None or getattr(original, '_tpu_estimator_guard', False):
      continue

    def _deferred_initialize(self, _original=original):
      if tf.executing_eagerly():
        return _original(self)
      graph = tf.compat.v1.get_default_graph()
      state = _state_of(graph)
      scope = _deferred_scope(state, graph, getattr(self, 'path', '')) if state else None
      if scope is None:
        return _original(self)
      with tf.name_scope(scope):
        return _original(self)

    _deferred_initialize._tpu_estimator_guard = True  # pylint: disable=protected-access
    cls._deferred_initialize = _deferred_initialize


@contextlib.contextmanager
def names(graph=None):
  """Keras object names numbered per graph (`graph`, default the current one) while this
  runs; the calling thread's own numbering is restored on exit."""
  global_state = _global_state()
  if global_state is None or tf.executing_eagerly():
    yield
    return
  state = _state_of(graph or tf.compat.v1.get_default_graph(), create=True)
  tracker = global_state.GLOBAL_STATE_TRACKER
  missing = object()
  saved = getattr(tracker, 'object_name_uids', missing)
  tracker.object_name_uids = state.uids
  try:
    yield
  finally:
    if saved is missing:
      if getattr(tracker, 'object_name_uids', None) is state.uids:
        del tracker.object_name_uids
    else:
      tracker.object_name_uids = saved


def thread_settings():
  """The calling thread's Keras settings that replica threads should see too."""
  global_state = _global_state()
  if global_state is None:
    return {}
  tracker = global_state.GLOBAL_STATE_TRACKER
  return {name: getattr(tracker, name) for name in _CARRIED
          if getattr(tracker, name, None) is not None}


@contextlib.contextmanager
def apply_settings(settings):
  """Sets `settings` (from `thread_settings`) on this thread while the block runs."""
  global_state = _global_state()
  if global_state is None or not settings:
    yield
    return
  tracker = global_state.GLOBAL_STATE_TRACKER
  missing = object()
  saved = {name: getattr(tracker, name, missing) for name in settings}
  for name, value in settings.items():
    setattr(tracker, name, value)
  try:
    yield
  finally:
    for name, value in saved.items():
      if value is missing:
        if hasattr(tracker, name):
          delattr(tracker, name)
      else:
        setattr(tracker, name, value)
