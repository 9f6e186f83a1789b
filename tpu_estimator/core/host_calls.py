"""Functions that run on the host over all shards: `eval_metrics` and `host_call`.

Their tensors come from every replica, gathered on the host by distribute/gather.py
(concatenated along their first axis, an evaluation's padding rows dropped), and are passed to
the user's function positionally (list/tuple) or by name (dict) (`call_host_fn`).  `host_call`
summaries, TF1 (`tf.compat.v1.summary.*`, returned or collected) or TF2 (`tf.summary.*`), are
written to the model_dir by a TF2 summary writer (`SummaryWriter`, `host_call_op`,
`HostCallHook`).
"""
import tensorflow as tf

from tpu_estimator import _tf_internals

_v1 = tf.compat.v1


def call_host_fn(fn, tensors):
  """`fn(*tensors)` for a list/tuple, `fn(**tensors)` for a dict."""
  if isinstance(tensors, dict):
    return fn(**tensors)
  return fn(*tensors)


class SummaryWriter:
  """A TF2 summary writer for `logdir` in the graph being built (initialised and flushed with
  the graph's other writers by `writers_hooks`)."""

  def __init__(self, logdir):
    with tf.init_scope():
      self.writer = tf.summary.create_file_writer(logdir)


def writers_hooks():
  """[a hook initialising every TF2 summary writer of the graph being built when a call's
  session starts, and flushing them all when the call ends], or [] where it has none.

  Built once the step is (a host_call's writer, ours; one `model_fn` or a host_call created
  itself with `tf.summary.create_file_writer`, as tensorflow/tpu's MnasNet and EfficientNet did
  with `--add_summaries`): the original's TPU session hook initialised and flushed every
  writer of the graph, host_call or not.  A kept graph's session stays open across calls, so
  flushing at each call's end is what closing the session did before."""
  inits = list(_tf_internals.summary_writer_initializers())
  if not inits:
    return []
  with tf.init_scope():
    flush = tf.group(*[tf.raw_ops.FlushSummaryWriter(writer=op.inputs[0]) for op in inits])
  return [_WriterHook(inits, flush)]


class _WriterHook(_v1.train.SessionRunHook):

  def __init__(self, init_ops, flush_op):
    self._init = init_ops
    self._flush = flush_op

  def after_create_session(self, session, coord):
    del coord
    session.run(self._init)

  def end(self, session):
    session.run(self._flush)


def host_call_op(host_call, writer, step, every_n_steps=1):
  """Builds the op that runs `host_call` once and writes what it summarises at `step`."""
  fn, tensors = host_call
  graph = _v1.get_default_graph()
  before = list(graph.get_collection(_v1.GraphKeys.SUMMARIES))
  before_v2 = list(_v1.summary.all_v2_summary_ops() or [])
  should_record = tf.equal(tf.math.floormod(step, every_n_steps), 0)
  with writer.writer.as_default(step=step), tf.summary.record_if(should_record):
    result = call_host_fn(fn, tensors)
    v1_summaries = [s for s in graph.get_collection(_v1.GraphKeys.SUMMARIES) if s not in before]
    ops = []
    for item in tf.nest.flatten(result):
      if isinstance(item, tf.Tensor) and item.dtype == tf.string and item.shape.rank == 0:
        if item not in v1_summaries:
          v1_summaries.append(item)
      elif isinstance(item, (tf.Tensor, tf.Operation)):
        ops.append(item)
    for summary in v1_summaries:
      ops.append(tf.summary.experimental.write_raw_pb(summary, step=step))
    # Leave no v1 summary behind for merge_all: it was written here.
    collection = graph.get_collection_ref(_v1.GraphKeys.SUMMARIES)
    collection[:] = before
    ops.extend(_v1.summary.all_v2_summary_ops()[len(before_v2):])
  return tf.group(*ops)


def after_loop(fn, host, steps_run, writer, every_n_steps, loss):
  """`loss`, after `fn` (a host_call's function) ran once for each of the `steps_run` steps of
  a compiled training loop, in order, on that step's tensors and at the step model_fn read:
  `host` is (steps [n], the tensors, each [n, ...]), what the loop carried out
  (`device_loop.compiled_train_loop`), as the original's host ran host_call on what each
  step's outfeed carried."""
  steps, tensors = host

  def body(i):
    at_step = tf.nest.map_structure(lambda t: t[i], tensors)
    with tf.control_dependencies([host_call_op((fn, at_step), writer, steps[i],
                                               every_n_steps)]):
      return i + 1

  with _tf_internals.control_flow_v2():
    done = tf.while_loop(lambda i: i < steps_run, body, (tf.constant(0, tf.int64),),
                         parallel_iterations=1)[0]
  with tf.control_dependencies([done]):
    return tf.identity(loss)


class HostCallHook(_v1.train.SessionRunHook):
  """Runs host-call ops with every training step (one-device `as_estimator_spec`)."""

  def __init__(self, ops):
    self._ops = ops

  def before_run(self, run_context):
    return _v1.train.SessionRunArgs(self._ops)
