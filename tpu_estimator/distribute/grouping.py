"""The input of a compiled evaluation or prediction loop, read a group of batches at a time.

A compiled computation runs on inputs of one shape, but evaluation and prediction must see
every batch as `input_fn` made it, the short final batch included: padding it would change
what `model_fn` computes over the batch (its loss is a mean over the batch's rows).  So a
group holds consecutive batches *of one shape*: up to `group` batches, a new group starting
where the shapes change (the short final batch is a group of its own, compiled for its own
shape, once).  Each group is padded to `group` steps along its new first axis (every full
group and the last, shorter one then have one shape: one compilation) and comes with its
count of real steps; the padding steps are never run.  The batches keep their order.
"""
import tensorflow as tf


def equal_shape_runs(dataset, group):
  """`dataset` (batches whose tensors may vary along their first axis only) as a dataset of
  `(element, steps)`: `element` the batches of a run of consecutive batches of equal shapes
  stacked along a new first axis padded to `group`, `steps` (int64) the run's length."""

  # Plain functions, not converted by AutoGraph (its conversion took ~0.1 s each).
  @tf.autograph.experimental.do_not_convert
  def with_sizes(*element):
    element = element[0] if len(element) == 1 else element
    sizes = [tf.shape(t, out_type=tf.int64)[0] for t in tf.nest.flatten(element)]
    return element, tf.stack(sizes)

  @tf.autograph.experimental.do_not_convert
  def runs(element, sizes):  # up to `group` batches padded to the largest, their sizes
    count = tf.shape(sizes, out_type=tf.int64)[0]
    changes = tf.reduce_any(tf.not_equal(sizes[1:], sizes[:-1]), axis=1)
    starts = tf.where(tf.concat([[True], changes], 0))[:, 0]
    ends = tf.concat([starts[1:], [count]], 0)
    # No function in here: one would be instantiated for every group (~0.1 s on CPU).
    whole = tf.data.Dataset.from_tensors((element, sizes)).repeat(
        tf.size(starts, out_type=tf.int64))
    return tf.data.Dataset.zip((whole, tf.data.Dataset.from_tensor_slices((starts, ends))))

  @tf.autograph.experimental.do_not_convert
  def run(padded, bounds):
    (element, sizes), (start, end) = padded, bounds
    flat = [_steps_padded(t[start:end, :sizes[start, i]], group)
            for i, t in enumerate(tf.nest.flatten(element))]
    return tf.nest.pack_sequence_as(element, flat), end - start

  return dataset.map(with_sizes).padded_batch(group).flat_map(runs).map(run)


def _steps_padded(tensor, group):
  """`tensor` ([steps, ...]) padded with zeros to `group` steps, that dimension static."""
  padding = [[0, group - tf.shape(tensor, out_type=tf.int64)[0]]] + \
      [[0, 0]] * (tensor.shape.rank - 1)
  padded = tf.pad(tensor, padding)
  return tf.ensure_shape(padded, [group] + tensor.shape.as_list()[1:])
