"""`tf.contrib.lookup`: TF 1.15's lookup tables.

The tables and initializers live on in TensorFlow as its TF1 (graph-mode) classes: a table
built in a graph puts its initializer in the `TABLE_INITIALIZERS` collection, so
`tf.compat.v1.tables_initializer()` runs it; the Estimator's default `Scaffold` does, so tables
built in a model_fn or input_fn are ready when training, evaluation or prediction starts.

What contrib spelled differently is written here: `index_table_from_tensor` and
`index_to_string_table_from_tensor` take the vocabulary as `mapping`, the one-shot
`string_to_index` / `index_to_string` build a table and look the tensor up in it, and the
deprecated `string_to_index_table_from_*` names are the `index_table_from_*` ones without a key
dtype (strings).
"""
import tensorflow as tf
from tensorflow.python.ops import lookup_ops as _lookup_ops

# TensorFlow's own: the TF1 classes (graph-mode initialisation through TABLE_INITIALIZERS).
FastHashSpec = _lookup_ops.FastHashSpec
HashTable = _lookup_ops.HashTable
HasherSpec = _lookup_ops.HasherSpec
IdTableWithHashBuckets = _lookup_ops.IdTableWithHashBuckets
InitializableLookupTableBase = _lookup_ops.InitializableLookupTableBaseV1
KeyValueTensorInitializer = _lookup_ops.KeyValueTensorInitializer
LookupInterface = _lookup_ops.LookupInterface
MutableDenseHashTable = _lookup_ops.DenseHashTable
MutableHashTable = _lookup_ops.MutableHashTable
StaticHashTable = _lookup_ops.StaticHashTableV1
StaticVocabularyTable = _lookup_ops.StaticVocabularyTableV1
StrongHashSpec = _lookup_ops.StrongHashSpec
TableInitializerBase = _lookup_ops.TableInitializerBase
TextFileIdTableInitializer = _lookup_ops.TextFileIdTableInitializer
TextFileIndex = _lookup_ops.TextFileIndex
TextFileInitializer = _lookup_ops.TextFileInitializer
TextFileStringTableInitializer = _lookup_ops.TextFileStringTableInitializer
index_table_from_file = _lookup_ops.index_table_from_file
index_to_string_table_from_file = _lookup_ops.index_to_string_table_from_file

__all__ = [
    'FastHashSpec', 'HashTable', 'HasherSpec', 'IdTableWithHashBuckets',
    'InitializableLookupTableBase', 'KeyValueTensorInitializer', 'LookupInterface',
    'MutableDenseHashTable', 'MutableHashTable', 'StaticHashTable', 'StaticVocabularyTable',
    'StrongHashSpec', 'TableInitializerBase', 'TextFileIdTableInitializer', 'TextFileIndex',
    'TextFileInitializer', 'TextFileStringTableInitializer', 'index_table_from_file',
    'index_table_from_tensor', 'index_to_string', 'index_to_string_table_from_file',
    'index_to_string_table_from_tensor', 'string_to_index', 'string_to_index_table_from_file',
    'string_to_index_table_from_tensor', 'tables_initializer']

tables_initializer = tf.compat.v1.tables_initializer


def index_table_from_tensor(mapping, num_oov_buckets=0, default_value=-1,
                            hasher_spec=FastHashSpec, dtype=tf.string, name=None):
  """A table mapping the keys of the 1-D `mapping` to their positions (int64).

  A key not in `mapping` gets `default_value` or, with `num_oov_buckets` > 0, a hash bucket id
  in `[len(mapping), len(mapping) + num_oov_buckets - 1]` (hashed with `hasher_spec`).  `dtype`
  is the key type (strings or integers).  Initialised by `tf.compat.v1.tables_initializer()`
  (or `table.initializer` when there are no buckets)."""
  if mapping is None:
    raise ValueError('mapping must be specified.')
  return _lookup_ops.index_table_from_tensor(
      vocabulary_list=mapping, num_oov_buckets=num_oov_buckets, default_value=default_value,
      hasher_spec=hasher_spec, dtype=dtype, name=name)


def index_to_string_table_from_tensor(mapping, default_value='UNK', name=None):
  """A table mapping int64 ids to the strings of the 1-D `mapping` (id i -> mapping[i]); an id
  out of range gets `default_value`."""
  if mapping is None:
    raise ValueError('mapping must be specified.')
  return _lookup_ops.index_to_string_table_from_tensor(
      vocabulary_list=mapping, default_value=default_value, name=name)


def string_to_index_table_from_tensor(mapping, num_oov_buckets=0, default_value=-1,
                                      hasher_spec=FastHashSpec, name=None):
  """Deprecated in TF 1.x: `index_table_from_tensor` with string keys."""
  return index_table_from_tensor(mapping, num_oov_buckets=num_oov_buckets,
                                 default_value=default_value, hasher_spec=hasher_spec,
                                 name=name)


def string_to_index_table_from_file(vocabulary_file=None, num_oov_buckets=0, vocab_size=None,
                                    default_value=-1, hasher_spec=FastHashSpec, name=None):
  """Deprecated in TF 1.x: `index_table_from_file` with string keys (one per line)."""
  return index_table_from_file(vocabulary_file, num_oov_buckets=num_oov_buckets,
                               vocab_size=vocab_size, default_value=default_value,
                               hasher_spec=hasher_spec, name=name)


def string_to_index(tensor, mapping, default_value=-1, name=None):
  """The position of each string of `tensor` in `mapping` (int64, `default_value` when absent),
  through a table whose initializer joins `TABLE_INITIALIZERS`."""
  with tf.compat.v1.name_scope(name, 'string_to_index'):
    table = index_table_from_tensor(mapping, default_value=default_value)
    return table.lookup(tensor)


def index_to_string(tensor, mapping, default_value='UNK', name=None):
  """The string of `mapping` at each int64 id of `tensor` (`default_value` out of range),
  through a table whose initializer joins `TABLE_INITIALIZERS`."""
  with tf.compat.v1.name_scope(name, 'index_to_string'):
    table = index_to_string_table_from_tensor(mapping, default_value=default_value)
    return table.lookup(tensor)
