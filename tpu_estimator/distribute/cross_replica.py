"""`tf.compat.v1.tpu.cross_replica_sum` (`tf.contrib.tpu.cross_replica_sum`) and XLA's
`replica_id()` on any replicas.

TensorFlow's is the TPU-only `CrossReplicaSum` op (no CPU or GPU kernel).  Inside a TPUEstimator
`model_fn` on a TPU it summed a tensor over the shards (TPU batch normalization, metrics summed
over cores); here the replicas are a `tf.distribute` strategy's, and the sum is their
all-reduce (with one replica, the tensor itself), or the sum within each group of replicas
that `group_assignment` names (TPU batch normalization over groups of cores: one all-reduce of
a stack holding each group's row).  XLA's `replica_id()`
(`tensorflow.compiler.tf2xla.python.xla`, read by SimCLR's contrastive loss) is the
`XlaReplicaId` op, compiled into a TPU's replicated computation; uncompiled on a CPU TensorFlow
crashes the process on it, and compiled per replica it would be 0 in each.  Here it is the
strategy's replica index.  `compat.install()` puts these functions in place of TensorFlow's.

The sum's gradient is, as the TPU op's, the sum of the replicas' gradients.  It is an op's
registered gradient (an `IdentityN` passing the sum on, whose gradient goes to the replica's
own input only): `ReplicaContext.all_reduce` gives the same gradient by `tf.custom_gradient`,
which at each call walks the graph back from the sum through every replica's ops, so that a
model with a hundred sums (cross-replica batch normalization) took minutes to build.
"""
import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import errors

_GRADIENT = 'TpuEstimatorCrossReplicaSum'


def cross_replica_sum(x, group_assignment=None, name=None):
  """The sum of `x` over the replicas, given to each replica, as on a TPU; with
  `group_assignment` (lists of replica indices, all of one size, each replica in one), the sum
  over the replicas of the caller's group."""
  context = _replica_context(
      'cross_replica_sum sums over the replicas, so it is called by each replica (inside '
      'model_fn), not in a cross-replica context.', x=x)
  count = context.num_replicas_in_sync
  groups = _groups(group_assignment, count)
  with tf.name_scope(name or 'CrossReplicaSum'):
    if count == 1:
      return tf.identity(x)
    x = tf.convert_to_tensor(x)
    if groups is None:
      return _sum(context, x)
    # Each replica puts `x` in its group's row of a stack, zeros in the others: the stack
    # summed over all replicas holds every group's sum.
    group_of = [0] * count
    for index, members in enumerate(groups):
      for replica in members:
        group_of[replica] = index
    replica = tf.cast(context.replica_id_in_sync_group, tf.int32)
    group = tf.gather(tf.constant(group_of, tf.int32), replica)
    rows = tf.equal(tf.range(len(groups)), group)
    rows = tf.reshape(rows, tf.concat([[len(groups)], tf.ones_like(tf.shape(x))], 0))
    stacked = tf.where(rows, x[tf.newaxis], tf.zeros_like(x)[tf.newaxis])
    return tf.gather(_sum(context, stacked), group)


def _sum(context, x):
  """The sum over all replicas; its gradient (registered below) the replicas' gradients'."""
  if not _tf_internals.uses_merge_call(context.strategy):  # compiled on GPUs: TensorFlow's
    return context.all_reduce(tf.distribute.ReduceOp.SUM, x)
  summed, = all_summed(context, [x])
  with tf.compat.v1.get_default_graph().gradient_override_map({'IdentityN': _GRADIENT}):
    return tf.raw_ops.IdentityN(input=[summed, x])[0]


def all_summed(context, values):
  """Each of `values` (tensors or IndexedSlices) summed over the replicas, in every replica,
  with no gradient of its own: `ReplicaContext.all_reduce` without its `tf.custom_gradient`,
  which walks the graph back from the sums through every replica's ops."""
  if not _tf_internals.uses_merge_call(context.strategy):  # compiled on GPUs: TensorFlow's
    return context.all_reduce(tf.distribute.ReduceOp.SUM, list(values))
  return list(context.merge_call(_reduce, args=tuple(values)))


def _reduce(strategy, *values):
  return strategy.extended.batch_reduce_to(
      tf.distribute.ReduceOp.SUM, [(value, value) for value in values])


def _sum_gradient(op, grad, _):
  """The gradient of `op` (the sum's IdentityN): the replicas' `grad`s summed, to the replica's
  own input."""
  del op
  return [None, _sum(tf.distribute.get_replica_context(), tf.convert_to_tensor(grad))]


try:
  tf.RegisterGradient(_GRADIENT)(_sum_gradient)
except KeyError:  # registered by an earlier import of this module (a reload)
  pass


def replica_id():
  """This replica's index (int32, 0 outside a sharded `model_fn`), as XLA's `replica_id()`
  gave each TPU core."""
  context = _replica_context(
      'replica_id() is the index of the replica calling it (inside model_fn), not defined '
      'in a cross-replica context.', context='cross-replica')
  return tf.cast(context.replica_id_in_sync_group, tf.int32)


def _replica_context(what, **received):
  """The calling replica's context; `what` is the error where there is none (a
  cross-replica context)."""
  context = tf.distribute.get_replica_context()
  if context is None:
    raise errors.value_error(what, 'Call it inside model_fn.', **received)
  return context


def _groups(group_assignment, count):
  """`group_assignment` as lists of replica indices, checked as the TPU op checked it; None
  where it is one group of all `count` replicas (or not given)."""
  if group_assignment is None:
    return None
  try:
    groups = [[int(r) for r in members] for members in group_assignment]
  except (TypeError, ValueError):
    groups = None
  members = sorted(r for g in groups or () for r in g)
  if not groups or members != list(range(count)) or len({len(g) for g in groups}) != 1:
    raise errors.value_error(
        '`group_assignment` must list every replica (0..%d) exactly once, in groups of one '
        'size.' % (count - 1),
        'Pass lists of replica indices, e.g. [[0, 1], [2, 3]] for 4 replicas, or None to sum '
        'over all of them.', group_assignment=group_assignment)
  return None if len(groups) == 1 else groups
