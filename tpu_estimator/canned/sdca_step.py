"""One training step of a `LinearSDCA` linear model, on TensorFlow's SDCA kernels.

The solver is TensorFlow's (`tf.raw_ops.SdcaOptimizerV2`); this module only feeds it and applies
what it returns, with the layout tensorflow-estimator 2.15 kept in checkpoints:

* each model weight `W` (`linear/linear_model/<column>/weights`, `.../bias_weights`) has an
  unregularized copy `W_unshrunk` the solver updates; the model weight is then that copy after
  the L1 shrink `sign(w) * max(|w| - l1 / l2, 0)` (a plain copy when l1 is 0);
* the solver's per-example dual state (4 floats per example) lives in `num_table_shards` dense
  hash tables keyed by the example id's `tf.raw_ops.SdcaFprint` (two int64s), saved as
  `ShardedMutableHashTable-<i>-of-<n>-keys` / `-values`; an id goes to shard
  `|first int64| mod n`.

The model weights are written after the step's loss was computed, so the loss a step reports is
the one of the weights it started from, as the original's.
"""
import collections
import re

import tensorflow as tf

from tpu_estimator import _tf_internals

_v1 = tf.compat.v1
_STATE_WIDTH = 4  # the kernel's per-example state: dual, primal loss, dual loss, weight
_TABLE_NAME = 'ShardedMutableHashTable-%d-of-%d'

# One column's share of the kernel's inputs and where its updates go: `model`/`unshrunk` are
# lists of variable parts (one part unless a partitioner split the weight); for a sparse
# column `rows`, `ids`, `values` are its (example, bucket, value) triples, for a dense one
# `dense` is its [batch, d] input.
Group = collections.namedtuple('Group', ['model', 'unshrunk', 'rows', 'ids', 'values', 'dense'])


def model_parts(name):
  """The parts of the model variable `name` (`[variable]`, or its partitions in order)."""
  found = {}
  for variable in _v1.global_variables():
    op_name = variable.op.name
    if op_name == name:
      found[-1] = variable
    match = re.match(re.escape(name) + r'/part_(\d+)$', op_name)
    if match:
      found[int(match.group(1))] = variable
  if not found:
    raise ValueError('No variable %s in the graph: the linear model did not make it.' % name)
  return [found[key] for key in sorted(found)]


def unshrunk_parts(parts, prefix):
  """The solver's copies of `parts`, named `<prefix><part's name>_unshrunk` (the original's
  names; its v1 estimators' parts had an extra `linear/` in front)."""
  copies = []
  for part in parts:
    with _v1.get_default_graph().name_scope(None), _v1.device(part.device):
      copies.append(_v1.Variable(tf.zeros(part.shape, tf.float32),
                                 name='%s%s_unshrunk' % (prefix, part.op.name)))
  return copies


def sparse_triples(id_weight_pair, num_buckets):
  """(example rows, bucket ids, values) of one categorical column: out-of-vocabulary ids (< 0)
  dropped, an id repeated within one example counted once with its values summed."""
  id_tensor = id_weight_pair.id_tensor
  rows = id_tensor.indices[:, 0]
  ids = tf.cast(id_tensor.values, tf.int64)
  if id_weight_pair.weight_tensor is not None:
    values = tf.cast(id_weight_pair.weight_tensor.values, tf.float32)
  else:
    values = tf.ones_like(ids, tf.float32)
  keep = ids >= 0
  rows, ids, values = (tf.boolean_mask(t, keep) for t in (rows, ids, values))
  keys, position = tf.unique(rows * num_buckets + ids)  # in order of first appearance
  summed = tf.math.unsorted_segment_sum(values, position, tf.size(keys))
  return keys // num_buckets, keys % num_buckets, summed


class StateTable(object):
  """The per-example solver state: `num_shards` `tf.lookup.experimental.DenseHashTable`s."""

  def __init__(self, num_shards):
    self._shards = [
        tf.lookup.experimental.DenseHashTable(
            key_dtype=tf.int64, value_dtype=tf.float32, default_value=[0.] * _STATE_WIDTH,
            empty_key=[0, 0], deleted_key=[1, 1], name=_TABLE_NAME % (i + 1, num_shards))
        for i in range(num_shards)]

  def _split(self, keys):
    n = len(self._shards)
    shard = tf.cast(tf.math.floormod(tf.abs(keys[:, 0]), n), tf.int32)
    return shard, tf.dynamic_partition(tf.range(tf.shape(keys)[0]), shard, n)

  def lookup(self, keys):
    if len(self._shards) == 1:
      return self._shards[0].lookup(keys)
    shard, positions = self._split(keys)
    found = [table.lookup(tf.gather(keys, p)) for table, p in zip(self._shards, positions)]
    return tf.dynamic_stitch(positions, found)

  def insert(self, keys, values):
    if len(self._shards) == 1:
      return self._shards[0].insert(keys, values)
    _, positions = self._split(keys)
    return tf.group(*[table.insert(tf.gather(keys, p), tf.gather(values, p))
                      for table, p in zip(self._shards, positions)])

  def size(self):
    return tf.add_n([table.size() for table in self._shards])

  def totals(self):
    """The sums over all examples seen of the 4 state values (float64)."""
    return tf.add_n([tf.reduce_sum(tf.cast(table.export()[1], tf.float64), 0)
                     for table in self._shards])


def _offsets(parts):
  sizes = [int(part.shape[0]) for part in parts]
  return [sum(sizes[:i]) for i in range(len(sizes))]


def _gather_rows(parts, ids):
  if len(parts) == 1:
    return tf.gather(parts[0], ids)
  return tf.gather(tf.concat([p.read_value() for p in parts], 0), ids)


def _scatter_rows(parts, ids, updates):
  """Adds `updates` to the rows `ids` of the (possibly partitioned) variable `parts`."""
  if len(parts) == 1:
    return [parts[0].scatter_add(tf.IndexedSlices(updates, ids))]
  offsets = tf.constant(_offsets(parts), tf.int64)
  which = tf.cast(tf.searchsorted(offsets, ids, side='right') - 1, tf.int32)
  local = ids - tf.gather(offsets, which)
  ids_of, updates_of = (tf.dynamic_partition(t, which, len(parts)) for t in (local, updates))
  return [part.scatter_add(tf.IndexedSlices(u, i))
          for part, i, u in zip(parts, ids_of, updates_of)]


def _add_dense(parts, update):
  if len(parts) == 1:
    return [parts[0].assign_add(update)]
  pieces = tf.split(update, [int(part.shape[0]) for part in parts])
  return [part.assign_add(piece) for part, piece in zip(parts, pieces)]


def _solve(sdca, table, loss_type, groups, example_ids, labels, weights):
  """Runs the kernel once over the batch; returns (hashed ids, new states, sparse deltas with
  their ids, dense deltas)."""
  hashed = tf.raw_ops.SdcaFprint(input=tf.reshape(example_ids, [-1]))
  sparse = [g for g in groups if g.dense is None]
  dense = [g for g in groups if g.dense is not None]
  unique_ids = [tf.unique(g.ids)[0] for g in sparse]
  states, sparse_deltas, dense_deltas = tf.raw_ops.SdcaOptimizerV2(
      sparse_example_indices=[g.rows for g in sparse],
      sparse_feature_indices=[g.ids for g in sparse],
      sparse_feature_values=[g.values for g in sparse],
      dense_features=[g.dense for g in dense],
      example_weights=weights, example_labels=labels,
      sparse_indices=unique_ids,
      sparse_weights=[_gather_rows(g.unshrunk, i) for g, i in zip(sparse, unique_ids)],
      dense_weights=[g.unshrunk[0] if len(g.unshrunk) == 1 else
                     tf.concat([p.read_value() for p in g.unshrunk], 0) for g in dense],
      example_state_data=table.lookup(hashed),
      loss_type=loss_type, l1=float(sdca.symmetric_l1_regularization),
      l2=float(sdca.symmetric_l2_regularization),
      num_loss_partitions=int(sdca.num_loss_partitions), num_inner_iterations=1,
      adaptive=bool(sdca.adaptive))
  updates = [table.insert(hashed, states)]
  for group, ids, delta in zip(sparse, unique_ids, sparse_deltas):
    updates.extend(_scatter_rows(group.unshrunk, ids, delta))
  for group, delta in zip(dense, dense_deltas):
    updates.extend(_add_dense(group.unshrunk, delta))
  return updates


def train_op(sdca, table, loss_type, groups, example_ids, labels, weights, loss, global_step):
  """The step: the kernel's updates of the state table and the unshrunk weights, then (after
  `loss` was computed) the model weights from them, then the global step."""
  with tf.name_scope('sdca/minimize'):
    updates = _solve(sdca, table, loss_type, groups, example_ids, labels, weights)
  l1, l2 = float(sdca.symmetric_l1_regularization), float(sdca.symmetric_l2_regularization)
  copies = []
  with tf.control_dependencies(updates + [loss]):
    for group in groups:
      for model, unshrunk in zip(group.model, group.unshrunk):
        value = unshrunk.read_value()
        if l1 > 0:
          value = tf.sign(value) * tf.maximum(tf.abs(value) - l1 / l2, 0.)
        copies.append(model.assign(value))
  with tf.control_dependencies(copies):
    return global_step.assign_add(1).op


def duality_gap(sdca, table, groups):
  """The approximate duality gap over the examples seen (the original's summary)."""
  totals = table.totals()
  weights = [tf.cast(p, tf.float64) for g in groups for p in g.model]
  l1 = sum(tf.reduce_sum(tf.abs(w)) for w in weights) * sdca.symmetric_l1_regularization
  l2 = sum(tf.reduce_sum(tf.square(w)) for w in weights) * sdca.symmetric_l2_regularization
  return (totals[1] + totals[2] + l1 + l2) / totals[3]
