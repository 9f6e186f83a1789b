"""`tf.contrib.data`: the TF 1.x dataset transformations, on today's `tf.data`.

Each name keeps TF 1.15's signature and returns what it returned: a transformation function
for `Dataset.apply` (`map_and_batch`, `parallel_interleave`, ...) or a dataset class.  The
work is done by `tf.data` (fused or parallel where TensorFlow chooses to), so results equal
the plain `tf.data` pipelines they stand for:
- `map_and_batch(f, b)` is `.map(f).batch(b)`;
- `batch_and_drop_remainder(b)` is `.batch(b, drop_remainder=True)`;
- `parallel_interleave(f, cycle_length, sloppy=False)` is `.interleave(f, cycle_length,
  num_parallel_calls=cycle_length, deterministic=not sloppy)`;
- `shuffle_and_repeat(buffer, count)` is `.shuffle(buffer).repeat(count)`.
"""
import tensorflow as tf

from tpu_estimator import errors

__all__ = [
    'Counter', 'CsvDataset', 'Reducer', 'SqlDataset', 'TFRecordDataset',
    'TFRecordWriter', 'assert_element_shape', 'batch_and_drop_remainder',
    'bucket_by_sequence_length', 'choose_from_datasets', 'dense_to_sparse_batch',
    'enumerate_dataset', 'get_single_element', 'group_by_reducer', 'group_by_window',
    'ignore_errors', 'make_batched_features_dataset', 'make_csv_dataset',
    'make_saveable_from_iterator', 'map_and_batch', 'padded_batch_and_drop_remainder',
    'parallel_interleave', 'prefetch_to_device', 'rejection_resample', 'sample_from_datasets',
    'scan', 'shuffle_and_repeat', 'sliding_window_batch', 'sloppy_interleave', 'unbatch',
    'unique', 'copy_to_device', 'AUTOTUNE',
]

_exp = tf.data.experimental

Counter = _exp.Counter
CsvDataset = _exp.CsvDataset
Reducer = _exp.Reducer
SqlDataset = _exp.SqlDataset
TFRecordDataset = tf.data.TFRecordDataset
TFRecordWriter = _exp.TFRecordWriter
AUTOTUNE = tf.data.AUTOTUNE
bucket_by_sequence_length = _exp.bucket_by_sequence_length
choose_from_datasets = _exp.choose_from_datasets
copy_to_device = _exp.copy_to_device
dense_to_sparse_batch = _exp.dense_to_sparse_batch
enumerate_dataset = _exp.enumerate_dataset
get_single_element = _exp.get_single_element
group_by_reducer = _exp.group_by_reducer
group_by_window = _exp.group_by_window
ignore_errors = _exp.ignore_errors
make_batched_features_dataset = _exp.make_batched_features_dataset
make_csv_dataset = _exp.make_csv_dataset
make_saveable_from_iterator = _exp.make_saveable_from_iterator
prefetch_to_device = _exp.prefetch_to_device
rejection_resample = _exp.rejection_resample
sample_from_datasets = _exp.sample_from_datasets
scan = _exp.scan
unbatch = _exp.unbatch
unique = _exp.unique


def map_and_batch(map_func, batch_size, num_parallel_batches=None, drop_remainder=False,
                  num_parallel_calls=None):
  """`dataset.map(map_func).batch(batch_size, drop_remainder)` as a transformation.  At most
  one of `num_parallel_batches` (batches computed at once) and `num_parallel_calls`
  (elements computed at once) may be given."""
  if num_parallel_batches is not None and num_parallel_calls is not None:
    raise errors.value_error(
        'map_and_batch takes at most one of `num_parallel_batches` and `num_parallel_calls`.',
        'Pass only one of them.', num_parallel_batches=num_parallel_batches,
        num_parallel_calls=num_parallel_calls)
  if num_parallel_calls is None and num_parallel_batches is not None:
    num_parallel_calls = batch_size * num_parallel_batches

  def _apply(dataset):
    return dataset.map(map_func, num_parallel_calls=num_parallel_calls).batch(
        batch_size, drop_remainder=drop_remainder)
  return _apply


def parallel_interleave(map_func, cycle_length, block_length=1, sloppy=False,
                        buffer_output_elements=None, prefetch_input_elements=None):
  """`dataset.interleave(map_func, cycle_length, block_length)` with `cycle_length` inputs
  read in parallel; `sloppy=True` lets elements come in any order.  The two buffer sizes are
  tuning hints `tf.data` now chooses itself."""
  del buffer_output_elements, prefetch_input_elements

  def _apply(dataset):
    return dataset.interleave(map_func, cycle_length=cycle_length, block_length=block_length,
                              num_parallel_calls=cycle_length, deterministic=not sloppy)
  return _apply


def sloppy_interleave(map_func, cycle_length, block_length=1):
  """`parallel_interleave(..., sloppy=True)`."""
  return parallel_interleave(map_func, cycle_length, block_length, sloppy=True)


def shuffle_and_repeat(buffer_size, count=None, seed=None):
  """`dataset.shuffle(buffer_size, seed).repeat(count)` (count None or -1: forever)."""

  def _apply(dataset):
    return dataset.shuffle(buffer_size, seed=seed).repeat(count)
  return _apply


def batch_and_drop_remainder(batch_size):
  """`dataset.batch(batch_size, drop_remainder=True)`: only full batches, of static size."""

  def _apply(dataset):
    return dataset.batch(batch_size, drop_remainder=True)
  return _apply


def padded_batch_and_drop_remainder(batch_size, padded_shapes, padding_values=None):
  """`dataset.padded_batch(batch_size, padded_shapes, padding_values,
  drop_remainder=True)`."""

  def _apply(dataset):
    return dataset.padded_batch(batch_size, padded_shapes, padding_values,
                                drop_remainder=True)
  return _apply


def sliding_window_batch(window_size, stride=1, window_shift=None, window_stride=1):
  """Batches of `window_size` consecutive elements, each window `stride` (or `window_shift`)
  elements after the previous one; only full windows."""
  shift = window_shift if window_shift is not None else stride

  def _apply(dataset):
    windows = dataset.window(window_size, shift=shift, stride=window_stride,
                             drop_remainder=True)
    return windows.flat_map(
        lambda *w: tf.data.Dataset.zip(w if len(w) > 1 else w[0]).batch(window_size))
  return _apply


def assert_element_shape(expected_shapes):
  """Checks (statically, and at run time where unknown) that elements have
  `expected_shapes`, and sets those shapes on them."""

  def _check(*elements):
    flat = tf.nest.flatten(elements if len(elements) > 1 else elements[0])
    shapes = tf.nest.flatten(expected_shapes)
    checked = []
    for tensor, shape in zip(flat, shapes):
      shape = tf.TensorShape(shape)
      tensor = tf.ensure_shape(tensor, shape)
      checked.append(tensor)
    return tf.nest.pack_sequence_as(elements if len(elements) > 1 else elements[0], checked)

  def _apply(dataset):
    return dataset.map(_check)
  return _apply
