"""tf.contrib.lookup: TF 1.15's documented lookups (vocabulary positions, OOV buckets, default
values, id -> string), initialised in graph mode through TABLE_INITIALIZERS, and inside an
Estimator's model_fn and input_fn (whose Scaffold runs tf.compat.v1.tables_initializer())."""
import tempfile

import numpy as np
import tensorflow as tf

import tpu_estimator as te
from tpu_estimator.compat.contrib import lookup

_v1 = tf.compat.v1


def _run(build):
  """Builds in a fresh graph, runs tables_initializer() alone, then fetches build()'s result."""
  with tf.Graph().as_default():
    fetches = build()
    with _v1.Session() as sess:
      sess.run(_v1.tables_initializer())
      return sess.run(fetches)


def test_index_table_from_tensor_documented_example_and_default_value():
  def build():
    mapping = tf.constant(['emerson', 'lake', 'palmer'])
    features = tf.constant(['emerson', 'lake', 'and', 'palmer'])
    buckets = lookup.index_table_from_tensor(mapping=mapping, num_oov_buckets=1,
                                             default_value=-1)
    plain = lookup.index_table_from_tensor(mapping, default_value=-7)
    return buckets.lookup(features), plain.lookup(features)
  buckets, plain = _run(build)
  assert buckets.tolist() == [0, 1, 3, 2]
  assert plain.tolist() == [0, 1, -7, 2]


def test_oov_buckets_stay_in_range_and_integer_keys():
  def build():
    table = lookup.index_table_from_tensor(['a', 'b'], num_oov_buckets=3,
                                           hasher_spec=lookup.StrongHashSpec((1, 2)))
    ints = lookup.index_table_from_tensor(tf.constant([10, 20, 30], tf.int64),
                                          dtype=tf.int64)
    words = tf.constant(['a', 'x', 'y', 'z', 'b', 'x'])
    return table.lookup(words), ints.lookup(tf.constant([30, 10, 99], tf.int64))
  ids, ints = _run(build)
  assert ids[0] == 0 and ids[4] == 1 and all(2 <= i <= 4 for i in ids[1:4])
  assert ids[1] == ids[5]  # the same OOV word hashes to the same bucket
  assert ints.tolist() == [2, 0, -1]


def test_one_shot_functions_and_string_tables(tmp_path):
  vocab = tmp_path / 'vocab.txt'
  vocab.write_text('zero\none\ntwo\n')

  def build():
    to_index = lookup.string_to_index(tf.constant(['two', 'nine', 'zero']),
                                      mapping=['zero', 'one', 'two'])
    to_string = lookup.index_to_string(tf.constant([1, 5], tf.int64),
                                       mapping=['zero', 'one'], default_value='?')
    from_file = lookup.index_table_from_file(str(vocab), num_oov_buckets=1)
    back = lookup.index_to_string_table_from_file(str(vocab))
    return (to_index, to_string, from_file.lookup(tf.constant(['one', 'ten'])),
            back.lookup(tf.constant([2, 3], tf.int64)))
  to_index, to_string, from_file, back = _run(build)
  assert to_index.tolist() == [2, -1, 0]
  assert to_string.tolist() == [b'one', b'?']
  assert from_file.tolist() == [1, 3]
  assert back.tolist() == [b'two', b'UNK']


def test_hash_table_and_mutable_tables():
  def build():
    table = lookup.HashTable(lookup.KeyValueTensorInitializer(['a', 'b'], [5, 6],
                                                              value_dtype=tf.int64), -1)
    mutable = lookup.MutableHashTable(tf.string, tf.int64, default_value=-1)
    dense = lookup.MutableDenseHashTable(tf.int64, tf.int64, default_value=0,
                                         empty_key=-1, deleted_key=-2)
    keys = tf.constant(['b', 'z'])
    with tf.control_dependencies([mutable.insert(['k'], tf.constant([42], tf.int64)),
                                  dense.insert(tf.constant([3], tf.int64),
                                               tf.constant([9], tf.int64))]):
      return (table.lookup(keys), mutable.lookup(tf.constant(['k', 'q'])),
              dense.lookup(tf.constant([3, 4], tf.int64)))
  fixed, mutable, dense = _run(build)
  assert fixed.tolist() == [6, -1] and mutable.tolist() == [42, -1]
  assert dense.tolist() == [9, 0]


def test_tables_in_estimator_input_fn_and_model_fn():
  """A table in input_fn (words -> ids) and one in model_fn (ids -> weights) are initialised by
  the Estimator's session: predictions are the looked-up values."""
  def input_fn():
    words = tf.data.Dataset.from_tensor_slices(['b', 'a', 'nope', 'c'])
    table = lookup.index_table_from_tensor(['a', 'b', 'c'])
    return words.map(lambda w: {'id': table.lookup(w)}).batch(4)

  def model_fn(features, labels, mode):
    del labels
    weights = lookup.HashTable(lookup.KeyValueTensorInitializer(
        tf.constant([0, 1, 2], tf.int64), tf.constant([10., 20., 30.])), default_value=-1.)
    return te.EstimatorSpec(mode, predictions={'id': features['id'],
                                               'value': weights.lookup(features['id'])})

  est = te.Estimator(model_fn, model_dir=tempfile.mkdtemp(prefix='contrib_lookup_'))
  got = list(est.predict(input_fn))
  assert [int(p['id']) for p in got] == [1, 0, -1, 2]
  np.testing.assert_allclose([p['value'] for p in got], [20., 10., -1., 30.])


def test_table_in_tpu_estimator_input_fn_on_two_shards():
  """TPUEstimator's input_fn (one pipeline per shard here) builds its table in the host graph;
  the session initialises it: the looked-up ids feed the model on both shards."""
  def input_fn(params):
    words = tf.data.Dataset.from_tensor_slices(['b', 'a', 'nope', 'c'])
    table = lookup.index_table_from_tensor(['a', 'b', 'c'], num_oov_buckets=1)
    ids = words.map(table.lookup)
    return ids.map(lambda i: {'id': i}).repeat().batch(params['batch_size'],
                                                        drop_remainder=True)

  def model_fn(features, labels, mode, params):
    del labels, params
    value = tf.cast(features['id'], tf.float32)
    loss = tf.reduce_mean(value) * _v1.get_variable('w', initializer=0.)
    optimizer = te.CrossShardOptimizer(_v1.train.GradientDescentOptimizer(0.))
    return te.TPUEstimatorSpec(
        mode, loss=loss, train_op=optimizer.minimize(loss, _v1.train.get_global_step()),
        eval_metrics=(lambda v: {'mean_id': _v1.metrics.mean(v)}, [value]))

  config = te.RunConfig(model_dir=tempfile.mkdtemp(prefix='contrib_lookup_tpu_'),
                        tpu_config=te.TPUConfig(iterations_per_loop=1, num_shards=2))
  est = te.TPUEstimator(model_fn, use_tpu=True, config=config, train_batch_size=4,
                        eval_batch_size=4)
  est.train(input_fn, max_steps=1)
  # ids b, a, nope (the OOV bucket, 3), c: 1, 0, 3, 2
  np.testing.assert_allclose(est.evaluate(input_fn, steps=1)['mean_id'], 1.5)
