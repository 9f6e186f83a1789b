"""How the replicas' outputs meet on the host: losses, `eval_metrics`, `host_call` tensors and
predictions.

`per_replica` runs a function once per replica on its input and returns one output per
replica.  Losses are averaged (`mean_loss`; in evaluation weighted by each replica's real rows,
`weighted_loss`).  Every other tensor is concatenated along its first axis (`concat_replicas`):
the batch axis of batch-major tensors; any first axis is concatenated whole, as the original
did.  Before that, rows a replica ran on as padding are dropped: cut to each replica's real
rows (`real_rows`, predictions) or, for tensors whose first axis need not be the batch, a
replica's outputs whole or not at all (`real_replicas`, `eval_metrics`).  `check_batch_major`
and `checked_predictions` refuse tensors that cannot be concatenated so.
"""
import tensorflow as tf

from tpu_estimator import errors


def per_replica(replicas, fn, inputs):
  """`fn(features, labels)` on every replica of `replicas`, each on its entry of `inputs`
  ((features, labels, rows)); the row counts stay on the host.  A list, one output a replica."""
  return replicas.run(fn, [(v[0], v[1]) for v in inputs])


def mean_loss(losses):
  """The mean of the replicas' losses (training: every replica had a full batch)."""
  return tf.add_n([tf.cast(l, tf.float32) for l in losses]) / float(len(losses))


def weighted_loss(losses, rows):
  """(loss, total rows): the mean of per-replica losses weighted by their numbers of examples.

  Equals the one-device loss of the whole batch when the loss is a per-example mean; a replica
  that got no examples (end of an uneven final batch) counts for nothing."""
  rows = [tf.cast(r, tf.float32) for r in rows]
  total = tf.add_n(rows)
  weighted = [tf.where(r > 0, tf.cast(l, tf.float32) * r, 0.0) for l, r in zip(losses, rows)]
  return tf.math.divide_no_nan(tf.add_n(weighted), total), total


def total_rows(rows):
  """The real rows of all replicas together (int64)."""
  return tf.add_n([tf.cast(r, tf.int64) for r in rows])


def real_rows(outputs, rows):
  """Each replica's outputs cut to its real rows (stand-in rows dropped)."""
  return _first_rows(outputs, [tf.reshape(tf.cast(r, tf.int32), [1]) for r in rows])


def real_replicas(outputs, rows):
  """Each replica's outputs whole, or nothing (0 along the first axis) from a replica that got
  no rows and ran on a stand-in batch.  A replica gets either real rows only or none
  (host_input.py), so for batch-major tensors this equals `real_rows`; tensors whose first axis
  is not the batch (BERT's masked-LM tensors, [batch * max_predictions_per_seq]) are kept
  whole, as the original concatenated each `eval_metrics` tensor over shards along axis 0."""
  # A slice's end past the first axis is clamped to its length.
  return _first_rows(outputs, [tf.where(tf.reshape(r, [1]) > 0, [_WHOLE], [0]) for r in rows])


_WHOLE = 2 ** 31 - 1


def _first_rows(outputs, ends):
  """Each replica's outputs (a list of nests) cut to their first `ends[i]` rows (a [1] int32
  tensor per replica).  One op a tensor, where `tensor[:n]` builds seven: these graphs are
  built at every first call, and their build time is most of a short evaluation's."""
  begin, strides = tf.constant([0]), tf.constant([1])
  return [tf.nest.map_structure(lambda t, end=end: tf.strided_slice(t, begin, end, strides), out)
          for out, end in zip(outputs, ends)]


def concat_replicas(outputs):
  """One nest from a list of per-replica nests, leaves concatenated along axis 0."""
  if len(outputs) == 1:
    return outputs[0]
  flat = [tf.nest.flatten(p) for p in outputs]
  joined = [tf.concat(list(leaves), axis=0) for leaves in zip(*flat)]
  return tf.nest.pack_sequence_as(outputs[0], joined)


def check_batch_major(name, tensors):
  """Refuses a scalar among the tensors `name` (`eval_metrics`, `host_call`) concatenates."""
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
  fed = tf.cast(rows, tf.int32)  # int32 data only: one Assert op, no conditional around it
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
    size = tf.compat.dimension_value(tensor.shape[0])
    if rows_known is not None and size is not None and size != rows_known:
      raise errors.value_error(
          'Batch length of predictions should be the same for every key: `%s` has %d rows '
          'but the shard was fed %d.' % (what, size, rows_known), fix,
          **{what: tensor})
    length = tf.gather(tf.shape(tensor), 0)
    checks.append(tf.debugging.Assert(
        tf.equal(length, fed),
        ['Batch length of predictions should be the same for every key: `%s` has' % what,
         length, 'rows but the shard was fed', fed,
         'rows (with use_tpu=True each shard\'s predictions are split into examples along the '
         'first axis). ' + fix],
        summarize=3))
  with tf.control_dependencies(checks):
    return tf.nest.map_structure(tf.identity, predictions)
