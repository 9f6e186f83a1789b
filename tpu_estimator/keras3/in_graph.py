"""Keras 3 losses and random layers inside the graphs `model_fn` builds, as Keras 2 behaved.

Two Keras 3 behaviours differ from what model_fns written for the original relied on, in
graphs marked by `keras_naming.names()` only (Keras elsewhere is untouched):

1. **Losses under replicas.**  A Keras 3 loss with a mean reduction divides its value by the
   number of replicas whenever a `tf.distribute` strategy is current (for Keras' own
   `fit`).  Sharded, a `tf.keras.losses.*` loss in `model_fn` was therefore 1/N of the shard's
   mean: evaluate reported half the loss on 2 shards, and the update was 1/N of one
   device's (SGD learned N times slower).  On TPU the original ran model_fn with no strategy,
   so Keras 2 losses were the shard's plain mean; so are ours (the v1 optimizer and
   `CrossShardOptimizer` average over shards, as for any other loss).
2. **Random layers** (`Dropout`, `GaussianNoise`, ...) draw seeds from a `SeedGenerator`
   whose state is a variable it advances with an assign that a graph never runs: every step
   got the same dropout mask, and the state variable (`seed_generator/seed_generator_state`)
   went into checkpoints the original's never had, so a model_dir written by the original
   could not be restored.  In marked graphs the seed comes from a stateful random op (a new
   mask per step, reproducible under `tf_random_seed`, as Keras 2's `tf.nn.dropout`), and
   the state variable is a local variable: initialized with the session, never saved.
"""
import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.keras3 import naming as keras_naming

_v1 = tf.compat.v1
_installed = []


def _marked():
  return not tf.executing_eagerly() and keras_naming.in_marked_graph()


def _install_loss_scaling():
  from keras.src.losses import loss as loss_module  # pylint: disable=import-outside-toplevel
  original = getattr(loss_module, 'scale_loss_for_distribution', None)
  if original is None or getattr(original, '_tpu_estimator_guard', False):
    return

  def scale_loss_for_distribution(value):
    if _marked():
      return value
    return original(value)

  scale_loss_for_distribution._tpu_estimator_guard = True  # pylint: disable=protected-access
  loss_module.scale_loss_for_distribution = scale_loss_for_distribution


def _to_local(variable):
  """Moves `variable` (a tf.Variable or mirrored variable) from the global variables (saved,
  restored) to the local ones (initialized with each session)."""
  if variable is None:
    return
  moved = {id(variable)} | {id(part) for part in getattr(variable, 'values', ())
                            if _tf_internals.is_distributed(variable)}
  graphs = {id(g): g for g in (_v1.get_default_graph(),
                               _tf_internals.root_graph())}
  for graph in graphs.values():
    collection = graph.get_collection_ref(_v1.GraphKeys.GLOBAL_VARIABLES)
    found = any(item is variable for item in collection)
    collection[:] = [item for item in collection if id(item) not in moved]
    if found:  # replicas' copies are initialized through the mirrored variable
      graph.add_to_collection(_v1.GraphKeys.LOCAL_VARIABLES, variable)


def _install_seed_generator():
  from keras.src.random import seed_generator  # pylint: disable=import-outside-toplevel
  cls = seed_generator.SeedGenerator
  init, next_seed = cls.__init__, cls.next
  if getattr(next_seed, '_tpu_estimator_guard', False):
    return

  def __init__(self, *args, **kwargs):  # pylint: disable=invalid-name
    init(self, *args, **kwargs)
    if _marked():
      _to_local(getattr(self.state, '_value', None))

  def next(self, ordered=True):  # pylint: disable=redefined-builtin
    if _marked():
      return tf.random.uniform([2], maxval=tf.int64.max, dtype=tf.int64)
    return next_seed(self, ordered=ordered)

  original_global = seed_generator.global_seed_generator

  def global_seed_generator():
    """One per marked graph (Keras keeps one per process, whose variable would belong to the
    first graph that used it)."""
    if _marked():
      state = keras_naming.graph_state()
      if getattr(state, 'seed_generator', None) is None:
        state.seed_generator = cls()
      return state.seed_generator
    return original_global()

  next._tpu_estimator_guard = True  # pylint: disable=protected-access
  cls.__init__, cls.next = __init__, next
  seed_generator.global_seed_generator = global_seed_generator


def install():
  """Installs both behaviours once (when Keras is loaded; they act in marked graphs only)."""
  if _installed:
    return
  _installed.append(True)
  try:
    _install_loss_scaling()
    _install_seed_generator()
  except ImportError:
    pass
