"""The outputs of one compiled evaluation/prediction step (or a compiled training step's
host_call tensors) as one row of bytes, and back.

A compiled loop gathers each step's outputs in an accumulator made before the loop, so of a
type known before `model_fn` runs; the outputs' types and number are known only once it ran
(inside the loop).  So every step packs its outputs, whatever their dtypes, into one uint8
vector: their shapes (int64), then their bytes; the loop stacks one vector a step, and after
the loop `unpack` gives each output back, the steps' rows concatenated along the first axis
(as `device_loop.collect_loop` concatenates them), or `unpack_steps` each step's own.  Every
step of a compiled run has the same shapes, so the first step's shapes hold for all.  The bytes
are the values themselves (bitcast, no rounding): results are those of the uncompiled loop.
"""
import dataclasses

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Layout:
  """What `unpack` needs of the packed outputs: their nest (`structure`) and, per output, its
  dtype and static shape."""
  structure: object
  dtypes: tuple
  shapes: tuple


def packable(tensor):
  """Whether `tensor`'s dtype can be packed (numbers and bools; not strings or variants)."""
  dtype = tensor.dtype
  return dtype.is_bool or ((dtype.is_floating or dtype.is_integer or dtype.is_complex) and
                           not dtype.is_quantized)


def pack(outputs):
  """(uint8 vector, Layout) of `outputs` (a nest of tensors of rank >= 1)."""
  flat = [tf.convert_to_tensor(t) for t in tf.nest.flatten(outputs)]
  shapes = [tf.shape(t, out_type=tf.int64) for t in flat]
  parts = [_bytes(tf.concat(shapes, 0) if shapes else tf.zeros([0], tf.int64))]
  parts += [_bytes(t) for t in flat]
  layout = Layout(outputs, tuple(t.dtype for t in flat), tuple(t.shape for t in flat))
  return tf.concat(parts, 0), layout


def unpack(rows, count, layout):
  """The outputs packed in the first `count` of `rows` ([steps, bytes]): each output's steps
  concatenated along its first axis, in `layout.structure`."""
  def joined(values, shape):
    result = tf.reshape(values, tf.concat([[-1], tf.shape(values)[2:]], 0))
    result.set_shape(tf.TensorShape([None]).concatenate(shape[1:]))
    return result
  return _unpacked(rows, count, layout, joined)


def unpack_steps(rows, count, layout):
  """The outputs packed in the first `count` of `rows`, each output's steps stacked along a
  new first axis ([count, ...], a step's own shape after it, scalars included), in
  `layout.structure`."""
  return _unpacked(rows, count, layout, lambda values, shape: values)


def _unpacked(rows, count, layout, finish):
  """`finish(values, static shape of one step)` of each output, its steps' values stacked
  ([count, ...]), in `layout.structure`."""
  ranks = [shape.rank for shape in layout.shapes]
  header = 8 * sum(ranks)
  dims = tf.bitcast(tf.reshape(rows[0, :header], [-1, 8]), tf.int64)
  start, offset, flat = 0, tf.constant(header, tf.int64), []
  for dtype, shape, rank in zip(layout.dtypes, layout.shapes, ranks):
    dims_here = dims[start:start + rank]
    start += rank
    size = tf.reduce_prod(dims_here) * _item_size(dtype)
    raw = rows[:count, offset:offset + size]
    offset += size
    flat.append(finish(_from_bytes(raw, count, dims_here, dtype, shape), shape))
  return tf.nest.pack_sequence_as(layout.structure, flat)


def _item_size(dtype):
  return 1 if dtype.is_bool else dtype.size


def _bytes(tensor):
  """`tensor`'s values as a flat uint8 vector."""
  if tensor.dtype.is_bool:
    tensor = tf.cast(tensor, tf.uint8)
  elif tensor.dtype != tf.uint8:
    tensor = tf.bitcast(tensor, tf.uint8)
  return tf.reshape(tensor, [-1])


def _from_bytes(raw, count, dims, dtype, shape):
  """The values of `count` steps of `dims` each, from their bytes `raw` ([count, bytes]),
  stacked: [count, *dims]."""
  stored = tf.uint8 if dtype.is_bool else dtype
  size = _item_size(dtype)
  per_step = tf.concat([[count], dims] + ([[size]] if size > 1 else []), 0)
  values = tf.reshape(raw, per_step)
  if stored != tf.uint8:
    values = tf.bitcast(values, stored)
  if dtype.is_bool:
    values = tf.cast(values, tf.bool)
  values.set_shape(tf.TensorShape([None]).concatenate(shape))
  return values
