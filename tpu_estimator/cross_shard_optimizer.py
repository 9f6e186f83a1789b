"""`CrossShardOptimizer`: averages (or sums) gradients over shards under every replication.

TensorFlow core's version calls a TPU-only op.  Here the replicas' strategy already aggregates
v1-optimizer gradients to the mean over shards (the loss is scaled by 1/replicas, also where
model_fn's last `tf.compat.v1.losses` call summed, which would make TensorFlow skip the
scaling), so with `reduction=MEAN` this wrapper only delegates; with `reduction=SUM` it scales the loss back up so
the update uses the sum of the shards' gradients, as the original did.  An inner optimizer
with its own `apply_gradients` (BERT's AdamWeightDecayOptimizer, SimCLR's LARS) gets the
shards' summed gradients and updates once for all of them (updates/shard_sum.py), as every
core of a TPU made the same update.
"""
import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import errors
from tpu_estimator.distribute import replication
from tpu_estimator.updates import shard_sum
from tpu_estimator.updates import wrapping

_v1 = tf.compat.v1
_MEAN = _v1.losses.Reduction.MEAN
_SUM = _v1.losses.Reduction.SUM


def _num_replicas():
  context = tf.distribute.get_replica_context()
  return context.num_replicas_in_sync if context is not None else 1


class CrossShardOptimizer(wrapping.Wrapping):
  """Wraps a `tf.compat.v1.train.Optimizer` so its update aggregates all shards' gradients."""

  def __init__(self, opt, reduction=_MEAN, name='CrossShardOptimizer', group_assignment=None):
    if not isinstance(opt, _v1.train.Optimizer):
      raise errors.type_error('CrossShardOptimizer wraps a tf.compat.v1.train.Optimizer.',
                              'Pass e.g. tf.compat.v1.train.AdamOptimizer(1e-3).', opt=opt)
    if reduction not in (_MEAN, _SUM):
      raise errors.value_error('`reduction` must be tf.compat.v1.losses.Reduction.MEAN or SUM.',
                               reduction=reduction)
    if group_assignment is not None:
      raise errors.value_error(
          '`group_assignment` (gradient aggregation within sub-groups of TPU cores) is not '
          'supported: gradients are aggregated over all shards.', 'Leave it None.',
          group_assignment=group_assignment)
    super().__init__(opt, name)
    self._reduction = reduction

  def compute_gradients(self, loss, var_list=None, **kwargs):
    if self._reduction == _SUM:
      scale = float(_num_replicas())
      loss = loss * scale if not callable(loss) else (lambda: loss() * scale)
    # The shards' mean as the original's, whatever model_fn's tf.compat.v1.losses calls
    # reduced by (TensorFlow's own scaling reads the last one's).
    with _tf_internals.loss_taken_as_mean():
      return self._opt.compute_gradients(loss, var_list=var_list, **kwargs)

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    if replication.in_one_of_several_replicas() and shard_sum.has_own_apply(self._opt):
      return shard_sum.apply(self._opt, grads_and_vars, global_step, name)
    return self._opt.apply_gradients(grads_and_vars, global_step, name)
