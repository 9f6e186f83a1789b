"""`tf.SparseTensor` features (`VarLenFeature`s, sparse ids for embedding columns) through the
sharded input, which splits, spreads and stands in dense tensors only.

On the host each SparseTensor becomes two dense tensors of its dense shape: its values (0, '' or
False elsewhere) and where it has one; each replica's `model_fn` gets a SparseTensor again,
rebuilt from its share of both (`rebuild`), with the values of its rows in row-major order and
the host batch's width as its second dimension.  A stand-in row (an evaluation's missing final
rows) holds no value.
"""
import tensorflow as tf

_VALUES = '__sparse_values__'
_PRESENT = '__sparse_present__'


def has_sparse(spec):
  """Whether a dataset's `element_spec` holds a SparseTensor."""
  return any(isinstance(s, tf.SparseTensorSpec) for s in tf.nest.flatten(spec))


def _zero(dtype):
  if dtype == tf.string:
    return ''
  return False if dtype == tf.bool else tf.zeros([], dtype)


def _dense_pair(sparse):
  values = tf.sparse.to_dense(sparse, default_value=_zero(sparse.dtype), validate_indices=False)
  present = tf.sparse.to_dense(
      tf.SparseTensor(sparse.indices, tf.ones_like(sparse.values, tf.bool), sparse.dense_shape),
      default_value=False, validate_indices=False)
  values.set_shape(sparse.shape)  # the static batch size (drop_remainder) the shards split
  present.set_shape(sparse.shape)
  return {_VALUES: values, _PRESENT: present}


def densify(dataset):
  """`dataset` with each SparseTensor of its elements as a dense (values, present) pair."""
  def convert(*element):
    element = element if len(element) > 1 else element[0]
    return tf.nest.map_structure(
        lambda t: _dense_pair(t) if isinstance(t, tf.SparseTensor) else t, element)
  return dataset.map(convert)


def _is_pair(structure):
  return isinstance(structure, dict) and set(structure) == {_VALUES, _PRESENT}


def rebuild(structure):
  """`structure` (a replica's features or labels) with each dense pair a SparseTensor again."""
  if _is_pair(structure):
    present = structure[_PRESENT]
    indices = tf.where(present)
    return tf.SparseTensor(indices, tf.gather_nd(structure[_VALUES], indices),
                           tf.shape(present, out_type=tf.int64))
  if isinstance(structure, dict):
    return type(structure)((key, rebuild(value)) for key, value in structure.items())
  if isinstance(structure, tuple) and hasattr(structure, '_fields'):  # a namedtuple
    return type(structure)(*[rebuild(value) for value in structure])
  if isinstance(structure, (tuple, list)):
    return type(structure)(rebuild(value) for value in structure)
  return structure
