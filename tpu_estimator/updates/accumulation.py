"""Gradient accumulation: N micro-batches per optimizer update, inside the device loop.

With `TPUConfig(gradient_accumulation_steps=N)` one training step of the device loop is an
inner loop over N micro-batches (each of `params['batch_size']` rows per shard) followed by one
optimizer update with the mean of their gradients: the update one step on an N-times larger
batch would make.  `global_step`, `max_steps`, `steps` and `iterations_per_loop` count updates.

`model_fn` runs once per replica, inside the inner loop's body, as written: its
`optimizer.minimize(loss, global_step)` reaches `tf.compat.v1.train.Optimizer.apply_gradients`
(directly, or through wrappers such as `CrossShardOptimizer` that delegate to it).  While the
micro-step is built, that call is intercepted: instead of updating, it adds the gradients to
one accumulator per variable and records the optimizer, its variables and `global_step`.  After
the inner loop the recorded call is made once, with the accumulated sums divided by N; the
strategy then averages over shards as for any update, and the accumulators are zeroed.

The accumulators are local, per-replica variables (`LOCAL_VARIABLES`, not saved): an
accumulation never spans two `session.run` calls, so a checkpoint always falls between
updates and resuming needs nothing from them.  No `tf.cond` anywhere: the update is
unconditional after the inner loop (a conditional update cannot place several replicas'
resources; see docs/design-decisions.md, "The device loop").
"""
import threading

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import errors
from tpu_estimator.updates import interceptor

_v1 = tf.compat.v1
_STATE = 'accumulation'  # our state on the graph being built (updates/interceptor.py)


def steps_of(config):
  """`TPUConfig.gradient_accumulation_steps` of a RunConfig (1 without a TPUConfig)."""
  tpu_config = getattr(config, 'tpu_config', None)
  return getattr(tpu_config, 'gradient_accumulation_steps', 1) or 1


def _intercept(state, method, optimizer, grads_and_vars, global_step=None, name=None):
  """`Optimizer.apply_gradients`, accumulating instead while a micro-step is built."""
  del method
  if not state.building:
    return interceptor.PASS
  return state.accumulate(optimizer, grads_and_vars, global_step, name)


interceptor.register(_STATE, ('apply_gradients',), _intercept)


class _Record:
  """One intercepted `apply_gradients` call: what to apply after the micro-batches."""

  def __init__(self, optimizer, pairs, global_step, name):
    self.optimizer = optimizer
    self.pairs = pairs  # [(accumulator, variable)]
    self.global_step = global_step
    self.name = name


class Accumulation:
  """Builds one accumulating training step for a graph."""

  def __init__(self, steps):
    self.steps = steps
    self.building = False
    self._records = []
    self._accumulators = {}
    self._calls = threading.local()  # per replica thread: (generation, calls so far)
    self._generation = 0
    self._lock = threading.Lock()

  def _accumulator(self, variable):
    """The zero-initialised local accumulator of `variable`, one copy per replica."""
    key = id(variable)
    if key not in self._accumulators:
      with tf.init_scope():
        self._accumulators[key] = _v1.Variable(
            lambda: tf.zeros(variable.shape, variable.dtype.base_dtype), trainable=False,
            collections=[_v1.GraphKeys.LOCAL_VARIABLES],
            synchronization=tf.VariableSynchronization.ON_READ,
            aggregation=tf.VariableAggregation.SUM,
            name=variable.op.name.split('/')[-1] + '_accumulator')
    return self._accumulators[key]

  def accumulate(self, optimizer, grads_and_vars, global_step, name):
    """Adds each gradient to its accumulator; the first replica's call is recorded (every
    replica makes the same calls in the same order)."""
    grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
    if not grads_and_vars:
      raise errors.value_error('No gradients provided for any variable.',
                               'Check that the loss depends on trainable variables.',
                               grads_and_vars=grads_and_vars)
    generation, index = getattr(self._calls, 'count', (None, 0))
    index = index if generation == self._generation else 0
    self._calls.count = (self._generation, index + 1)
    with self._lock:
      if index == len(self._records):
        pairs = [(self._accumulator(v), v) for _, v in grads_and_vars]
        self._records.append(_Record(optimizer, pairs, global_step, name))
      record = self._records[index]
    if len(record.pairs) != len(grads_and_vars):
      raise errors.value_error('Replicas applied gradients to different variables.',
                               variables=len(grads_and_vars), expected=len(record.pairs))
    updates = []
    for (accumulator, _), (grad, _) in zip(record.pairs, grads_and_vars):
      grad = tf.convert_to_tensor(grad)  # IndexedSlices are accumulated densely
      updates.append(accumulator.assign_add(tf.cast(grad, accumulator.dtype)))
    return tf.group(*updates, name=name or 'accumulate_gradients')

  def apply(self, after):
    """Per replica: the recorded updates with the mean gradients, then zeroed accumulators.
    `after`: the inner loop's result (control dependencies are per thread, and replicas run on
    threads of their own, so the order is set here)."""
    if not self._records:
      raise errors.value_error(
          'gradient_accumulation_steps > 1 found no tf.compat.v1.train.Optimizer update in '
          'model_fn: it accumulates what optimizer.minimize/apply_gradients would apply.',
          'Build train_op with a tf.compat.v1.train optimizer (wrappers that delegate to '
          'apply_gradients, e.g. CrossShardOptimizer, work), or set '
          'gradient_accumulation_steps=1.', gradient_accumulation_steps=self.steps)
    updates = []
    for record in self._records:
      with tf.control_dependencies([after]):
        grads_and_vars = [(accumulator.read_value() * (1.0 / self.steps), variable)
                          for accumulator, variable in record.pairs]
      updates.append(interceptor.inner(_STATE, 'apply_gradients', record.optimizer,
                                       grads_and_vars, global_step=record.global_step,
                                       name=record.name))
    with tf.control_dependencies(updates):
      zeroed = [accumulator.assign(tf.zeros_like(accumulator.read_value()))
                for record in self._records for accumulator, _ in record.pairs]
    return tf.group(*zeroed)

  def step(self, micro_step, apply_step):
    """The update's ops: an inner loop of `micro_step(i)` (micro-batch i → mean loss over
    replicas, with the accumulation as a control dependency) run `steps` times, then `apply_step(fn)` running
    `fn` on every replica (→ the list of their results).  Returns the mean of the micro-batch
    losses, after the update."""
    interceptor.install()
    root = _tf_internals.root_graph()
    _tf_internals.set_graph_state(root, _STATE, self)

    def body(i, total):
      self.building = True
      self._generation += 1
      try:
        loss = micro_step(i)
      finally:
        self.building = False
      return i + 1, total + tf.cast(loss, tf.float32)

    try:
      _, total = tf.while_loop(lambda i, _: i < self.steps, body,
                               (tf.constant(0), tf.constant(0.0)), parallel_iterations=1)
    finally:
      _tf_internals.set_graph_state(root, _STATE, None)
    applied = apply_step(lambda: self.apply(total))
    with tf.control_dependencies(applied):
      return tf.identity(total / float(self.steps))
