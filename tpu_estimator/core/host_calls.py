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
  """A TF2 summary writer for `logdir` in the graph being built, initialised and flushed by
  its hook."""

  def __init__(self, logdir):
    with tf.init_scope():
      self.writer = tf.summary.create_file_writer(logdir)
      self._init = self.writer.init()
      self._flush = self.writer.flush()

  def hook(self):
    """The hook initialising and flushing this writer and every other one the graph has by
    now (a host_call's own, `tf.summary.create_file_writer` inside it, as TPU programs did):
    the session of a graph kept for the next call stays open, so they are not flushed by
    closing it, as they were when every call closed its session."""
    others = [op for op in _tf_internals.summary_writer_initializers() if op is not self._init]
    with tf.init_scope():
      flush = tf.group(self._flush, *[tf.raw_ops.FlushSummaryWriter(writer=op.inputs[0])
                                      for op in others])
    return _WriterHook(self._init, flush)


class _WriterHook(_v1.train.SessionRunHook):

  def __init__(self, init_op, flush_op):
    self._init = [init_op]
    self._flush = flush_op

  def begin(self):
    # Also the writers a host_call created itself (`tf.summary.create_file_writer` inside it,
    # as TPU programs did): the original's host-call hook initialised every writer too.
    own = self._init[0]
    self._init = [own] + [op for op in _tf_internals.summary_writer_initializers()
                          if op is not own]

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
