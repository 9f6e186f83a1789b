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

A `metric_fn` may keep its state in Python objects it makes at each call (EfficientDet's COCO
metric appends detections to a list through `tf.numpy_function` and computes AP from it):
the second call's Python functions are the first call's too, by creation order, so the loop's
updates reach the objects the values read.
"""
import functools

import tensorflow as tf

from tpu_estimator import _tf_internals
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

  `full`: each tensor's length in a step where every replica had rows, the replicas' static
  lengths summed, where each replica's is static (else None).  `always_full`: every step
  with rows is such a step (`HostInput.whole_static_steps`).  Otherwise (one element a
  replica, one pipeline a replica) the last steps can leave replicas without rows: their
  lengths are dynamic."""

  def __init__(self, replica_tensors, whole_steps):
    self.full = []
    for parts in zip(*[tf.nest.flatten(r) for r in replica_tensors]):
      shapes = [tf.convert_to_tensor(p).shape for p in parts]
      dims = [tf.compat.dimension_value(shape[0]) if shape.rank else None for shape in shapes]
      self.full.append(None if None in dims else sum(dims))
    self.always_full = whole_steps
    # The tensor whose length tells a full step (the first with rows), where there is one.
    self.telling = next((j for j, length in enumerate(self.full) if length), None)

  def lengths(self, full):
    """The static lengths `metric_fn` is given in a step that is `full` or not."""
    return self.full if full else [None] * len(self.full)


def per_step(metric_fn, tensors, sizes, rows, static):
  """{name: (value, update)} of `metric_fn` over the collected `tensors` ([steps, n] `sizes`,
  [steps] `rows`), its update applied once per step that had rows, in order.  `static`
  (`StaticSizes`): a step where every replica had rows gives `metric_fn` its static lengths,
  as on a TPU; a step where the input ran out on some replicas, dynamic ones."""
  flat = tf.nest.flatten(tensors)
  offsets = tf.cumsum(sizes, axis=0, exclusive=True)
  # [steps, n, 1]: where each step's rows of each tensor begin and end, as a slice takes them.
  begins = tf.expand_dims(offsets, -1)
  ends = tf.expand_dims(offsets + sizes, -1)
  steps = tf.cast(tf.reshape(tf.where(rows > 0), [-1]), tf.int32)

  def step_tensors(step, lengths):
    # A step's bounds are one gather each, unstacked, then one slice a tensor (in the loop
    # below at every step): the indexing operator builds several ops an index.
    step_begins = tf.unstack(tf.gather(begins, step), num=len(flat))
    step_ends = tf.unstack(tf.gather(ends, step), num=len(flat))
    parts = []
    for j, tensor in enumerate(flat):
      part = tf.strided_slice(tensor, step_begins[j], step_ends[j], [1])
      if lengths[j] is not None:
        part.set_shape(tf.TensorShape([lengths[j]]).concatenate(tensor.shape[1:]))
      parts.append(part)
    return tf.nest.pack_sequence_as(tensors, parts)

  created = []

  def creating(next_creator, **kwargs):
    variable = next_creator(**kwargs)
    created.append(variable)
    return variable

  with _tf_internals.python_functions() as values_python, \
      tf.compat.v1.variable_creator_scope(creating):  # the values' call: its updates never run
    first = tf.gather(tf.concat([steps, [0]], 0), 0)
    metrics = specs.call_metric_fn(metric_fn, step_tensors(first, static.lengths(True)))

  def update(step, full):
    with _tf_internals.python_functions(reuse=values_python), \
        tf.compat.v1.variable_creator_scope(_reusing(list(created))):
      updates = specs.call_metric_fn(metric_fn, step_tensors(step, static.lengths(full)))
    with tf.control_dependencies([op for _, op in updates.values()]):
      return tf.constant(0)

  def body(index):
    step = tf.gather(steps, index)
    if static.always_full or static.telling is None:
      done = update(step, static.always_full)
    else:
      full = tf.equal(sizes[step, static.telling], static.full[static.telling])
      done = _full_or_short(functools.partial(update, step), full)
    with tf.control_dependencies([done]):
      return index + 1

  done = tf.while_loop(lambda index: index < tf.size(steps), body, [tf.constant(0)],
                       name='metric_fn_per_step')
  return {name: (value, done) for name, (value, _) in metrics.items()}


def _full_or_short(update, full):
  """`update(True)` where the step is `full`, else `update(False)`.  A `metric_fn` that
  cannot be built for a short step (one written for the global batch alone, as the original
  only ever gave it: UNet 3D reshapes to `params['eval_batch_size']`) fails only if such a
  step runs, saying what to change."""
  try:
    return tf.cond(full, lambda: update(True), lambda: update(False))
  except Exception as error:  # pylint: disable=broad-except
    why = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    message = ('metric_fn cannot take a step in which the input ran out on some shards (the '
               'original only ever gave it whole global batches): %s. Give evaluate() whole '
               'steps (a number of batches that the shards divide, or steps=N), or write '
               'metric_fn for any number of rows.' % why)
    return tf.cond(full, lambda: update(True), lambda: _failing(message))


def _failing(message):
  with tf.control_dependencies([tf.debugging.Assert(tf.constant(False), [message])]):
    return tf.constant(0)


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
