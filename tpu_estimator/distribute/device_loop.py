"""`iterations_per_loop`: many training steps per `session.run`, on any device.

`train_loop` builds a graph while-loop (control flow v2, so variable names stay those of a
plain call) that reads the next per-replica inputs and runs one step per iteration until it has
run `iterations` steps (a tensor, fed per call so loops can be clipped to land on the step
target), the input ends, or the loss is no longer finite.  There is deliberately no `tf.cond`
in the body: a conditional step cannot place replicas' resources on several devices.
The loops are control flow v2 even where `tf.compat.v1.disable_v2_behavior()` turned it off.
"""
import functools

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.distribute import packed
from tpu_estimator.distribute import xla


def _control_flow_v2(fn):
  """Builds `fn`'s loops (and TensorArrays) with control flow v2 whatever the global toggle:
  v1 loops would prefix the names of variables created in the body (`while/beta1_power`)."""

  @functools.wraps(fn)
  def wrapper(*args, **kwargs):
    with _tf_internals.control_flow_v2():
      return fn(*args, **kwargs)

  return wrapper


@_control_flow_v2
def train_loop(next_inputs, run_step, iterations):
  """Returns (steps_run, loss) tensors.

  `next_inputs(index)` → the per-replica inputs of step `index` (from 0), read with
  `get_next()`: at the end of the input the loop's `session.run` fails with OutOfRangeError
  after the steps already run (their updates are kept and counted by the global step), which
  ends training cleanly.
  `run_step(values)` → the step's scalar loss, with the update as a control dependency.
  `loss` is the last step's loss, or the first non-finite one: the loop stops there, so NaN
  checks name the right step.
  """
  iterations = tf.cast(iterations, tf.int64)

  def cond(steps, loss):
    return tf.logical_and(steps < iterations, tf.math.is_finite(loss))

  def body(steps, loss):
    del loss
    return steps + 1, tf.cast(run_step(next_inputs(steps)), tf.float32)

  init = (tf.constant(0, tf.int64), tf.constant(0.0))
  return tf.while_loop(cond, body, init, parallel_iterations=1)


@_control_flow_v2
def compiled_train_loop(group, inputs_at, run_step, iterations, device, micro_batches=1):
  """`train_loop` compiled as one XLA computation on `device`: the loop, every step's
  forward pass, gradients and update, and the global step, with no TensorFlow op per step.

  `group`: the flat input tensors of up to `iterations` steps, read before the loop (each of
  shape [steps, ...]: `inputs.HostInput.next_group`); `inputs_at(tensors)` → the per-replica
  inputs of one step from those tensors' slices at the step's index.  Runs `iterations`
  steps, fewer when the group is shorter (the end of the input: the loop control hook then
  stops training) or when the loss stops being finite.  `run_step(inputs)` → the step's loss,
  or (loss, host tensors): a nest of numeric tensors for the host to use after the loop (a
  host_call's, as the original's outfeed carried them), which leave the computation packed
  (packed.py).  Returns (steps_run, loss, host): `host` is None, or the host tensors of every
  step run, each stacked along a new first axis ([steps_run, ...]).
  `micro_batches` > 1 (gradient accumulation): each step's slice holds that many batches
  ([steps, micro_batches, ...]), and `run_step` gets `micro(i)` → the inputs of batch i."""
  layouts = []

  def computation(iterations, *stacked):
    available = tf.shape(stacked[0], out_type=tf.int64)[0]
    count = tf.minimum(tf.cast(iterations, tf.int64), available)
    at = _step_inputs(inputs_at, stacked) if micro_batches == 1 else \
        lambda step: _step_inputs(inputs_at, [tf.gather(t, step) for t in stacked])

    def cond(steps, loss, rows):
      del rows
      return tf.logical_and(steps < count, tf.math.is_finite(loss))

    def body(steps, loss, rows):
      del loss
      loss, host = _loss_and_host(run_step(at(steps)))
      row, layout = packed.pack(host) if host is not None else (tf.zeros([0], tf.uint8), None)
      layouts.append(layout)
      return (steps + 1, tf.cast(loss, tf.float32),
              rows.write(tf.cast(steps, tf.int32), row))

    rows = tf.TensorArray(tf.uint8, size=tf.cast(available, tf.int32),
                          element_shape=tf.TensorShape([None]))
    steps_run, loss, rows = tf.while_loop(
        cond, body, (tf.constant(0, tf.int64), tf.constant(0.0), rows), parallel_iterations=1)
    return steps_run, loss, rows.stack()

  steps_run, loss, rows = _compiled(computation, iterations, list(group), device)
  host = None if layouts[0] is None else packed.unpack_steps(rows, steps_run, layouts[0])
  return steps_run, loss, host


def _loss_and_host(result):
  """(loss, host tensors or None) of a training step's `run_step` result."""
  return result if isinstance(result, tuple) else (result, None)


def _step_inputs(inputs_at, stacked):
  """`index` → the inputs of the step at `index` of a group read before the loop."""
  return lambda index: inputs_at([tf.gather(t, index) for t in stacked])


def _compiled(computation, iterations, inputs, device):
  """`computation(iterations, *inputs)` as one XLA computation on `device`; its outputs."""
  # Made here, it takes the control dependencies of the caller's scope (the computation's
  # own ops do not), so the loop starts after what the caller orders it after.
  iterations = tf.identity(iterations)
  with tf.device(device):
    return xla.compile_computation(computation, [iterations] + inputs)


@_control_flow_v2
def compiled_collect_loop(run, inputs_at, step, iterations, device):
  """`collect_loop` compiled as one XLA computation on `device` (evaluation, prediction).

  `run`: (flat input tensors, each [group, ...], steps): a group of batches of one shape read
  before the loop, of which the first `steps` are real (`HostInput.next_run`);
  `inputs_at(tensors)` → the per-replica inputs of one batch from its slices.  `step(inputs)`
  → the batch's outputs (a nest of numeric tensors of rank >= 1, rows first).  Runs
  min(`iterations`, steps) batches; the outputs leave the computation packed (packed.py) and
  are unpacked after it.  Returns (outputs, steps_run): every output concatenated along its
  first axis over the batches run, as `collect_loop` gives them."""
  tensors, steps = run
  group = tensors[0].shape[0]
  layouts = []

  def computation(iterations, steps, *stacked):
    count = tf.minimum(tf.cast(iterations, tf.int64), steps)
    at = _step_inputs(inputs_at, stacked)

    def body(i, rows):
      row, layout = packed.pack(step(at(i)))
      layouts.append(layout)
      return i + 1, rows.write(tf.cast(i, tf.int32), row)

    rows = tf.TensorArray(tf.uint8, size=group, element_shape=tf.TensorShape([None]))
    _, rows = tf.while_loop(lambda i, _: i < count, body, (tf.constant(0, tf.int64), rows),
                            parallel_iterations=1)
    return rows.stack(), count

  rows, steps_run = _compiled(computation, iterations, [steps] + list(tensors), device)
  return packed.unpack(rows, steps_run, layouts[0]), steps_run


DRAINED_QUEUES = 'tpu_estimator_drained_queues'  # collect_loop's queues, by op name


@_control_flow_v2
def collect_loop(iterations, step):
  """Runs `step()` up to `iterations` times in one `session.run`, gathering its outputs.

  `step()` → (has_value, outputs): `outputs` a nest of tensors of rank >= 1 whose first axis
  is rows.  The loop stops early once `has_value` is False (that last step's outputs, with no
  rows, are gathered too).  Each step's outputs go to a host queue, and after the loop they
  are taken out at once: every leaf concatenated along axis 0 over the steps run, however many
  rows each step had.  Returns (outputs, steps_run, more_input).

  Where every leaf's shape past its first axis is static, the queue pads (one
  `dequeue_many`, each step's rows recorded for leaves whose first axis is not static, the
  padding then dropped); otherwise a second loop drains it step by step into TensorArrays.
  Without the second loop each step runs ~50 ops fewer (of ~170 in the small MLP's
  evaluation, the model's included).
  """
  iterations = tf.maximum(tf.cast(iterations, tf.int64), 1)
  state = {}

  def cond(i, more):
    return tf.logical_and(i < iterations, more)

  def body(i, more):
    del more
    has_value, outputs = step()
    flat = [tf.convert_to_tensor(t) for t in tf.nest.flatten(outputs)]
    if 'queue' not in state:
      state['structure'] = outputs
      state['specs'] = [(t.dtype, t.shape[1:]) for t in flat]
      state['padded'] = all(t.shape.rank is not None and t.shape[1:].is_fully_defined()
                            for t in flat)
      state['sized'] = [i for i, t in enumerate(flat)  # (a v1 shape's dims are Dimensions)
                        if tf.compat.dimension_value(t.shape[0]) is None]
      with tf.init_scope():
        if state['padded']:
          dtypes = [t.dtype for t in flat] + [tf.int32]
          shapes = [tf.TensorShape([None]).concatenate(_queue_inner(inner))
                    for _, inner in state['specs']]
          shapes.append(tf.TensorShape([len(state['sized'])]))
          state['queue'] = tf.queue.PaddingFIFOQueue(-1, dtypes, shapes)
        else:
          state['queue'] = tf.queue.FIFOQueue(-1, [t.dtype for t in flat])
        # Empty again when the run ends: a graph kept across calls may hold it (graph_cache).
        tf.compat.v1.add_to_collection(DRAINED_QUEUES, state['queue'].queue_ref.op.name)
    if state['padded']:
      sizes = _first_axes([flat[index] for index in state['sized']])
      flat = [_to_queue_rank(t) for t in flat] + [sizes]
    enqueue = state['queue'].enqueue(flat)
    with tf.control_dependencies([enqueue]):
      return i + 1, tf.identity(has_value)

  steps_run, more = tf.while_loop(cond, body, (tf.constant(0, tf.int64), tf.constant(True)),
                                  parallel_iterations=1)
  flat = _dequeue_padded(state, steps_run) if state['padded'] else _drain(state, steps_run)
  return tf.nest.pack_sequence_as(state['structure'], flat), steps_run, more


# The padding queue's dequeue_many copies elements of rank <= 4 only ("Unhandled rank"):
# deeper leaves (tensor2tensor's logits, [batch, length, 1, 1, vocab]) go in as [rows, -1].
_QUEUE_RANK = 4


def _queue_inner(inner):
  """The shape past the first axis a leaf with static `inner` has in the padding queue
  (`inner` itself where the queue takes it as it is)."""
  return inner if inner.rank + 1 <= _QUEUE_RANK else tf.TensorShape([inner.num_elements()])


def _to_queue_rank(tensor):
  inner = tensor.shape[1:]
  queued = _queue_inner(inner)
  return tensor if queued is inner else tf.reshape(tensor, [-1] + queued.as_list())


def _first_axes(tensors):
  """The first-axis lengths of `tensors` (int32, [len(tensors)]), in few ops: every first
  evaluation and prediction builds this graph."""
  if not tensors:
    return tf.zeros([0], tf.int32)
  shapes = [tf.shape(tensor) for tensor in tensors]  # (ShapeN takes one dtype)
  starts, start = [], 0
  for tensor in tensors:  # the padded queue's leaves all have a static rank
    starts.append(start)
    start += tensor.shape.rank
  return tf.gather(tf.concat(shapes, 0), starts)


def _dequeue_padded(state, steps_run):
  """`steps_run` elements of the padding queue, each leaf's steps concatenated with the
  padding dropped."""
  items = state['queue'].dequeue_many(tf.cast(steps_run, tf.int32))
  items = items if isinstance(items, (list, tuple)) else [items]
  *padded, sizes = items
  sized = state['sized']
  columns = tf.unstack(sizes, num=len(sized), axis=1) if sized else []
  column_of = dict(zip(sized, columns))
  flat = []
  for index, (tensor, (_, inner)) in enumerate(zip(padded, state['specs'])):
    if index not in column_of:  # a static first axis: no step was padded
      flat.append(tf.reshape(tensor, [-1] + inner.as_list()))
      continue
    longest = tf.gather(tf.shape(tensor), 1)
    rows = tf.expand_dims(tf.range(longest), 0) < tf.expand_dims(column_of[index], 1)
    kept = tf.gather_nd(tensor, tf.where(rows))
    flat.append(kept if _queue_inner(inner) is inner else
                tf.reshape(kept, [-1] + inner.as_list()))
  return flat


def _drain(state, steps_run):
  """`steps_run` elements of the queue, one at a time into TensorArrays, concatenated."""
  arrays = tuple(tf.TensorArray(dtype, size=0, dynamic_size=True, infer_shape=False,
                                element_shape=tf.TensorShape([None]).concatenate(inner))
                 for dtype, inner in state['specs'])

  def drain_cond(j, *arrays):
    del arrays
    return tf.cast(j, tf.int64) < steps_run

  def drain_body(j, *arrays):
    items = state['queue'].dequeue()
    items = items if isinstance(items, (list, tuple)) else [items]
    return (j + 1,) + tuple(a.write(j, item) for a, item in zip(arrays, items))

  drained = tf.while_loop(drain_cond, drain_body, (tf.constant(0),) + arrays,
                          parallel_iterations=1)
  return [array.concat() for array in drained[1:]]
