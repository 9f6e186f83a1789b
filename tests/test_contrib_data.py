"""tf.contrib.data: each transformation yields what its tf.data equivalent yields."""
import pytest
import tensorflow as tf

from tpu_estimator.compat.contrib import data


def _items(dataset):
  return [tf.nest.map_structure(lambda t: t.numpy().tolist(), x) for x in dataset]


def _range(n=10):
  return tf.data.Dataset.range(n)


def test_map_and_batch_is_map_then_batch():
  f = lambda x: {'x': x * 2, 'y': x + 1}  # noqa: E731
  for kwargs in ({}, {'num_parallel_batches': 2}, {'num_parallel_calls': 3},
                 {'drop_remainder': True}):
    got = _items(_range().apply(data.map_and_batch(f, 4, **kwargs)))
    want = _items(_range().map(f).batch(4, drop_remainder=kwargs.get('drop_remainder', False)))
    assert got == want
  with pytest.raises(ValueError, match='num_parallel_batches'):
    data.map_and_batch(f, 4, num_parallel_batches=1, num_parallel_calls=1)


def test_batch_and_padded_batch_drop_remainder():
  assert _items(_range(7).apply(data.batch_and_drop_remainder(3))) == [[0, 1, 2], [3, 4, 5]]
  ragged = _range(5).map(lambda x: tf.fill([x], x))
  got = _items(ragged.apply(data.padded_batch_and_drop_remainder(2, [None])))
  assert got == _items(ragged.padded_batch(2, [None], drop_remainder=True))
  assert len(got) == 2


def test_parallel_interleave_matches_interleave_and_sloppy_keeps_the_elements():
  f = lambda x: tf.data.Dataset.from_tensors(x).repeat(3)  # noqa: E731
  got = _items(_range(4).apply(data.parallel_interleave(f, cycle_length=2, block_length=2)))
  assert got == _items(_range(4).interleave(f, cycle_length=2, block_length=2))
  sloppy = _items(_range(4).apply(data.sloppy_interleave(f, cycle_length=2)))
  assert sorted(sloppy) == sorted(got)


def test_shuffle_and_repeat():
  got = _items(_range(5).apply(data.shuffle_and_repeat(5, count=2, seed=1)))
  assert sorted(got) == sorted(list(range(5)) * 2)
  assert sorted(got[:5]) == list(range(5))  # each epoch is a permutation


def test_sliding_window_and_reexported_names():
  got = _items(_range(6).apply(data.sliding_window_batch(3, stride=2)))
  assert got == [[0, 1, 2], [2, 3, 4]]
  assert _items(_range(4).batch(2).apply(data.unbatch())) == [0, 1, 2, 3]
  assert data.TFRecordDataset is tf.data.TFRecordDataset
  assert _items(data.Counter().take(3)) == [0, 1, 2]
  buckets = _items(_range(6).map(lambda x: tf.fill([x % 3 + 1], x)).apply(
      data.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [2], [2, 2])))
  assert sum(len(b) for b in buckets) == 6
