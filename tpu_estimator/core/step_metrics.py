"""`metric_fn` of a sharded evaluation updated once per step, as the original's TPU host did.

A collecting device loop (core/steps.py) brings up to `iterations_per_loop` steps' host
tensors out in one `session.run`, concatenated.  The original dequeued one step's tensors at a
time from the TPU's outfeed and ran `metric_fn`'s update on each: `metric_fn` saw one global
batch, with its static size.  Called once over all the steps' rows instead, a metric that is
not a plain sum over rows came out different, silently: a per-batch statistic averaged per
`session.run` (tensorflow/tpu's UNet 3D reshapes to `params['eval_batch_size']` and averages a
per-batch dice score), and a step that ran out of input updated the metrics with no rows.

Here `metric_fn` is called twice in the graph, once for its values and once in a host
`while_loop` over the run's steps that had rows, each iteration giving it one step's slice of
every tensor.  The second call gets the variables the first created (by creation order), so
the loop's updates accumulate in the variables the values read; the first call's updates never
run.
"""
import functools

import tensorflow as tf

from tpu_estimator import errors
from tpu_estimator import specs


def step_sizes(tensors):
  """[1, n] int32: the first-axis length of each of the step's `n` tensors (collected by the
  loop into [steps, n])."""
  flat = tf.nest.flatten(tensors)
  if not flat:
    return tf.zeros([1, 0], tf.int32)
  return tf.reshape(tf.stack([tf.shape(t, out_type=tf.int32)[0] for t in flat]), [1, -1])


class StaticSizes:
  """What the shapes say of each tensor's first-axis length in a step that had rows.

  `whole`: when every such step is whole (`HostInput.whole_static_steps`), each tensor's
  length, the replicas' static lengths summed; else None.  `share`: where every replica's
  length is the same static one, that length, else None (a step's length is then a multiple
  of it: one element a replica, one pipeline a replica, some replicas without rows at the end
  of the input)."""

  def __init__(self, replica_tensors, whole_steps):
    self.replicas = len(replica_tensors)
    self.share, self.whole = [], []
    for parts in zip(*[tf.nest.flatten(r) for r in replica_tensors]):
      shapes = [tf.convert_to_tensor(p).shape for p in parts]
      dims = [tf.compat.dimension_value(shape[0]) if shape.rank else None for shape in shapes]
      self.whole.append(None if None in dims or not whole_steps else sum(dims))
      self.share.append(dims[0] if None not in dims and len(set(dims)) == 1 else None)

  def shares_known(self):
    """Whether each step's length is a count of replicas' equal static shares (and which
    tensor to count with: the first with rows), else None."""
    if self.replicas < 2 or None in self.share or None not in self.whole:
      return None
    return next((j for j, share in enumerate(self.share) if share), None)


def per_step(metric_fn, tensors, sizes, rows, static):
  """{name: (value, update)} of `metric_fn` over the collected `tensors` ([steps, n] `sizes`,
  [steps] `rows`), its update applied once per step that had rows, in order.  `static`
  (`StaticSizes`): the shapes `metric_fn` is given, as on a TPU, where they are known; where
  a step's length is a count of replicas' static shares, `metric_fn` is called once per count
  and each step runs the call of its count."""
  flat = tf.nest.flatten(tensors)
  offsets = tf.cumsum(sizes, axis=0, exclusive=True)
  steps = tf.cast(tf.reshape(tf.where(rows > 0), [-1]), tf.int32)

  def step_tensors(step, lengths):
    parts = []
    for j, tensor in enumerate(flat):
      part = tensor[offsets[step, j]:offsets[step, j] + sizes[step, j]]
      if lengths[j] is not None:
        part.set_shape(tf.TensorShape([lengths[j]]).concatenate(tensor.shape[1:]))
      parts.append(part)
    return tf.nest.pack_sequence_as(tensors, parts)

  counted = static.shares_known()
  whole = static.whole if counted is None else [s * static.replicas for s in static.share]
  created = []

  def creating(next_creator, **kwargs):
    variable = next_creator(**kwargs)
    created.append(variable)
    return variable

  with tf.compat.v1.variable_creator_scope(creating):  # the values' call: its updates never run
    first = tf.gather(tf.concat([steps, [0]], 0), 0)
    metrics = specs.call_metric_fn(metric_fn, step_tensors(first, whole))

  def update(step, lengths):
    with tf.compat.v1.variable_creator_scope(_reusing(list(created))):
      updates = specs.call_metric_fn(metric_fn, step_tensors(step, lengths))
    with tf.control_dependencies([op for _, op in updates.values()]):
      return tf.constant(0)

  def body(index):
    step = tf.gather(steps, index)
    if counted is None:
      done = update(step, whole)
    else:  # the step's count of replicas with rows picks the call made for it
      branches = [functools.partial(update, step, [s * count for s in static.share])
                  for count in range(1, static.replicas + 1)]
      done = tf.switch_case(sizes[step, counted] // static.share[counted] - 1, branches)
    with tf.control_dependencies([done]):
      return index + 1

  done = tf.while_loop(lambda index: index < tf.size(steps), body, [tf.constant(0)],
                       name='metric_fn_per_step')
  return {name: (value, done) for name, (value, _) in metrics.items()}


def _reusing(variables):
  """A variable creator handing out `variables` in order (metric_fn's second call)."""
  remaining = iter(variables)

  def reusing(next_creator, **kwargs):
    del next_creator
    try:
      return next(remaining)
    except StopIteration:
      raise errors.value_error(
          'metric_fn created more variables in a second call than in its first.',
          'Create the same variables at every call of metric_fn.',
          variable=kwargs.get('name')) from None

  return reusing
