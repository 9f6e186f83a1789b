"""The update of an optimizer with its own `apply_gradients`, under `CrossShardOptimizer` on
several shards: made once, with the shards' gradients summed.

A `tf.compat.v1.train.Optimizer` that keeps the base class's `apply_gradients` is synchronous
on several replicas by itself: the strategy sums the replicas' gradients (each from the loss
divided by their number) and updates every copy of the variables alike.  Many TPU-era
optimizers override `apply_gradients` instead (BERT's AdamWeightDecayOptimizer, SimCLR's
LARS): on a TPU, `CrossShardOptimizer` summed the gradients over the cores and each core then
ran that code on the same sums.  Run per replica here, the code would update each replica's
copy with that replica's gradients only (the copies drift apart, silently), and variables it
names after `param.op.name` would be looked up under a replica's copy name ('w/replica_1').

So `apply` leaves the replicas (a merge call, as the base class does), sums the gradients
there and calls the optimizer's `apply_gradients` once, in the cross-replica context: its
reads see the first copy's values, its assignments update every copy, and `param.op.name` is
the variable's own name on every shard, as on a TPU.

The optimizer may still reach the base class's `apply_gradients` (a subclass that changes the
gradients and calls `super()`), which cannot run in the cross-replica context and would sum
the sums again.  That call is intercepted (updates/interceptor.py, layer `shard_sum`) and made
as the base class makes it there, each replica giving 1/replicas of the sums.

Mixed precision and gradient accumulation act on the base class's call in a replica's context,
and TensorFlow's own loss-scale optimizer wants one: with either on, or under that optimizer,
the optimizer's `apply_gradients` runs in every replica on the sums, as on a TPU, and a
variable it names after `param.op.name` is looked up under the variable's own name.
"""
import contextlib

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.distribute import cross_replica
from tpu_estimator.updates import interceptor

_v1 = tf.compat.v1
_STATE = 'shard_sum'  # our state on the graph being built (updates/interceptor.py)
_SUM = tf.distribute.ReduceOp.SUM
_INNER_LAYERS = ('precision', 'accumulation')  # the interceptor's layers inside this one


def _own_apply_class(optimizer):
  """The class whose `apply_gradients` makes `optimizer`'s update, where it is not
  `tf.compat.v1.train.Optimizer`'s (else None), past the wrappers that only pass the call on
  (`APPLIES_THROUGH_BASE`, or `wrapping.Wrapping`'s inner optimizer, followed through
  `_opt`).  TensorFlow's own wrappers (its mixed precision loss-scale optimizer, over
  `_optimizer`) are written for a strategy: around a base-class update they are left to it."""
  while getattr(type(optimizer), 'WRAPS_INNER', False):
    optimizer = optimizer._opt  # pylint: disable=protected-access
  cls = next((c for c in type(optimizer).__mro__ if 'apply_gradients' in vars(c) and
              not vars(c).get('APPLIES_THROUGH_BASE', False)), _v1.train.Optimizer)
  inner = getattr(optimizer, '_optimizer', None)
  if cls is _v1.train.Optimizer or (
      _is_tensorflows(cls) and isinstance(inner, _v1.train.Optimizer) and
      _own_apply_class(inner) is None):
    return None
  return cls


def _is_tensorflows(cls):
  return cls.__module__.split('.')[0] == 'tensorflow'


def has_own_apply(optimizer):
  """Whether `optimizer`'s update is not the base class's."""
  return _own_apply_class(optimizer) is not None


def _per_replica(optimizer, root):
  """Whether `optimizer`'s own update runs in each replica (on the sums) rather than once:
  where another interceptor layer acts on the update, or where the update is TensorFlow's
  own (its mixed precision loss-scale optimizer), written for a strategy's replica context."""
  return _layered(root) or _is_tensorflows(_own_apply_class(optimizer))


class _Applying:
  """Per graph: how many of the replicas are building an optimizer's own update on summed
  gradients.  Kept on the graph, not the thread: TensorFlow's loss-scale optimizer builds its
  inner update on replica threads of its own.  (Replica threads run one at a time.)"""

  def __init__(self):
    self.depth = 0

  @contextlib.contextmanager
  def entered(self):
    self.depth += 1
    try:
      yield
    finally:
      self.depth -= 1


def _layered(root):
  """Whether another layer of the interceptor acts on the updates of graph `root`."""
  return any(_tf_internals.graph_state(root, layer) is not None for layer in _INNER_LAYERS)


def _summed_pairs(pairs, sums):
  sums = iter(sums)
  return [(None if g is None else next(sums), v) for g, v in pairs]


def _own_names(pairs):
  """A variable scope in which `get_variable` names under a replica's copy of one of the
  `pairs`' variables ('w/replica_1/Momentum', from `param.op.name` in that replica) are the
  names under the variable's own ('w/Momentum'), which the first replica made."""
  copies = {}
  for _, variable in pairs:
    values = getattr(variable, 'values', ())
    copies.update((copy.op.name + '/', values[0].op.name + '/') for copy in values[1:])

  def getter(next_getter, name, *args, **kwargs):
    prefix = next((p for p in copies if name.startswith(p)), None)
    if prefix is not None:
      name = copies[prefix] + name[len(prefix):]
    return next_getter(name, *args, **kwargs)

  return _v1.variable_scope(_v1.get_variable_scope(), custom_getter=getter,
                            auxiliary_name_scope=False)


def apply(optimizer, grads_and_vars, global_step=None, name=None):
  """From one of several replicas: `optimizer.apply_gradients` with the sums of their
  gradients, once for all of them, or once per replica, in its context, as on a TPU
  (`_per_replica`)."""
  interceptor.install()
  root = _tf_internals.root_graph()
  if _tf_internals.graph_state(root, _STATE) is None:
    _tf_internals.set_graph_state(root, _STATE, _Applying())
  applying = _tf_internals.graph_state(root, _STATE)
  pairs = list(grads_and_vars)
  present = [g for g, _ in pairs if g is not None]
  if not present:  # nothing to sum: the optimizer's own answer, as on one shard
    return optimizer.apply_gradients(pairs, global_step=global_step, name=name)
  context = tf.distribute.get_replica_context()
  if _per_replica(optimizer, root):
    pairs = _summed_pairs(pairs, cross_replica.all_summed(context, present))
    with applying.entered(), _own_names(pairs):
      return optimizer.apply_gradients(pairs, global_step=global_step, name=name)

  def once(strategy, pairs, global_step, name):
    sums = strategy.extended.batch_reduce_to(_SUM, [(g, v) for g, v in pairs if g is not None])
    pairs = _summed_pairs(pairs, [strategy.experimental_local_results(s)[0] for s in sums])
    with applying.entered():
      return optimizer.apply_gradients(pairs, global_step=global_step, name=name)

  return context.merge_call(once, args=(pairs, global_step, name))


def _scaled(gradient, factor):
  if gradient is None:
    return None
  if isinstance(gradient, tf.IndexedSlices):
    return tf.IndexedSlices(gradient.values * factor, gradient.indices, gradient.dense_shape)
  return gradient * factor


def _intercept(state, method, optimizer, grads_and_vars, global_step=None, name=None):
  """The base class's `apply_gradients` reached from an optimizer's own in `apply`, with
  gradients already summed over the replicas, which the base class sums again: each replica
  gives 1/replicas of the sums.  In the cross-replica context the update is made as the base
  class makes it there; in a replica's, the call goes on through the layers inside (which
  never come back through this one)."""
  del method
  if not state.depth:
    return interceptor.PASS
  strategy = tf.distribute.get_strategy()
  factor = 1.0 / strategy.num_replicas_in_sync
  if not tf.distribute.in_cross_replica_context():
    shares = [(_scaled(g, factor), v) for g, v in grads_and_vars]
    return interceptor.inner(_STATE, 'apply_gradients', optimizer, shares,
                             global_step=global_step, name=name)
  shares = [(None if g is None else strategy.experimental_distribute_values_from_function(
      lambda _, g=g: _scaled(g, factor)), v) for g, v in grads_and_vars]
  return optimizer._distributed_apply(  # pylint: disable=protected-access
      strategy, shares, global_step=global_step, name=name)


interceptor.register(_STATE, ('apply_gradients',), _intercept)
