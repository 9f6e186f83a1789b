"""`Wrapping`: the base of the v1 optimizers that stand in front of the user's own
(`CrossShardOptimizer`, precision's inner optimizer, tf.contrib.estimator's gradient clipping):
slots and variables are the wrapped optimizer's, so slot names, `get_slot` and checkpoints are
as without the wrapper.  Subclasses say what they change in `compute_gradients` /
`apply_gradients`."""
import tensorflow as tf


class Wrapping(tf.compat.v1.train.Optimizer):
  """A v1 optimizer over `opt` (kept as `self._opt`), named `name`."""
  WRAPS_INNER = True  # its apply_gradients ends in `opt`'s (updates/shard_sum.py)

  def __init__(self, opt, name):
    super().__init__(use_locking=False, name=name)
    self._opt = opt

  def get_slot(self, *args, **kwargs):
    return self._opt.get_slot(*args, **kwargs)

  def get_slot_names(self, *args, **kwargs):
    return self._opt.get_slot_names(*args, **kwargs)

  def variables(self):
    return self._opt.variables()
