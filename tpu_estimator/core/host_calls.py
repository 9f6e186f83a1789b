"""Functions that run on the host over all shards: `eval_metrics` and `host_call`.

Their tensors come from every replica; here they are concatenated along their first axis
(the batch axis for batch-major tensors; any first axis is concatenated whole, as the original
did) and passed to the user's function positionally (list/tuple) or
by name (dict).  `host_call` summaries, TF1 (`tf.compat.v1.summary.*`, returned or collected)
or TF2 (`tf.summary.*`), are written to the model_dir by a TF2 summary writer.
"""
import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import errors

_v1 = tf.compat.v1


def call_host_fn(fn, tensors):
  """`fn(*tensors)` for a list/tuple, `fn(**tensors)` for a dict."""
  if isinstance(tensors, dict):
    return fn(**tensors)
  return fn(*tensors)


def check_batch_major(name, tensors):
  for tensor in tf.nest.flatten(tensors):
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.rank == 0:
      raise errors.value_error(
          'The tensors of `%s` are concatenated over shards along their first axis, so they '
          'must have rank >= 1.' % name,
          'Reshape scalars, e.g. tf.reshape(loss, [1]).', tensor=tensor)


def checked_predictions(predictions, rows):
  """`predictions` of one shard, checked to be batch-major: `rows` (the rows this shard was
  fed) along the first axis of every tensor.  The host cuts each shard's predictions to its
  rows and concatenates them, so a scalar or a `[-1]`-reshaped tensor would give wrong rows;
  one device refuses both when it splits the batch into examples, and so does this."""
  fix = ('Return predictions with the batch as first dimension, e.g. '
         'tf.reshape(x, [tf.shape(x)[0], -1]) rather than tf.reshape(x, [-1]).')
  named = predictions if isinstance(predictions, dict) else {None: predictions}
  checks = []
  for key, tensor in named.items():
    what = 'predictions' if key is None else 'predictions[%r]' % (key,)
    if tensor.shape.rank == 0:
      raise errors.value_error(
          'Batch length of predictions should be the same for every key: `%s` is a scalar, '
          'but with use_tpu=True each shard\'s predictions are split into examples along the '
          'first axis.' % what, fix, **{what: tensor})
    if tensor.shape.rank is None:
      continue
    rows_known = tf.get_static_value(rows)
    if rows_known is not None and tensor.shape[0] is not None and tensor.shape[0] != rows_known:
      raise errors.value_error(
          'Batch length of predictions should be the same for every key: `%s` has %d rows '
          'but the shard was fed %d.' % (what, tensor.shape[0], rows_known), fix,
          **{what: tensor})
    checks.append(tf.debugging.Assert(
        tf.equal(tf.cast(tf.shape(tensor)[0], tf.int64), tf.cast(rows, tf.int64)),
        ['Batch length of predictions should be the same for every key: `%s` has' % what,
         tf.shape(tensor)[0], 'rows but the shard was fed', rows, 'rows (with use_tpu=True '
         'each shard\'s predictions are split into examples along the first axis). ' + fix],
        summarize=3))
  with tf.control_dependencies(checks):
    return tf.nest.map_structure(tf.identity, predictions)


def concat_replicas(per_replica):
  """One nest from a list of per-replica nests, leaves concatenated along axis 0."""
  if len(per_replica) == 1:
    return per_replica[0]
  flat = [tf.nest.flatten(p) for p in per_replica]
  joined = [tf.concat(list(leaves), axis=0) for leaves in zip(*flat)]
  return tf.nest.pack_sequence_as(per_replica[0], joined)


def weighted_loss(losses, rows):
  """(loss, total rows): the mean of per-replica losses weighted by their numbers of examples.

  Equals the one-device loss of the whole batch when the loss is a per-example mean; a replica
  that got no examples (end of an uneven final batch) counts for nothing."""
  rows = [tf.cast(r, tf.float32) for r in rows]
  total = tf.add_n(rows)
  weighted = [tf.where(r > 0, tf.cast(l, tf.float32) * r, 0.0) for l, r in zip(losses, rows)]
  return tf.math.divide_no_nan(tf.add_n(weighted), total), total


class SummaryWriter:
  """A TF2 summary writer for `logdir` in the graph being built, initialised and flushed by
  its hook."""

  def __init__(self, logdir):
    with tf.init_scope():
      self.writer = tf.summary.create_file_writer(logdir)
      self._init = self.writer.init()
      self._flush = self.writer.flush()

  def hook(self):
    return _WriterHook(self._init, self._flush)


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


class HostCallHook(_v1.train.SessionRunHook):
  """Runs host-call ops with every training step (one-device `as_estimator_spec`)."""

  def __init__(self, ops):
    self._ops = ops

  def before_run(self, run_context):
    return _v1.train.SessionRunArgs(self._ops)
