"""The RNN estimators' input: `tf.feature_column` sequence columns (and context columns) as a
dense `[batch, time, depth]` tensor and the sequence lengths, in graph variables named as
tensorflow-estimator 2.15's Keras 2 feature layers named them.

The original read its columns with `tf.keras.experimental.SequenceFeatures` and
`tf.compat.v1.keras.layers.DenseFeatures` (Keras 2, gone from Keras 3).  Their work is the
columns' own (`get_sequence_dense_tensor`, `get_dense_tensor`); the layers only sorted the
columns by name, flattened each to `[batch, (time,) elements]`, concatenated them and made the
columns' variables as `sequence_features/<column>/<variable>` and
`dense_features/<column>/<variable>`.  This module does that with `tf.compat.v1` variables,
so it needs neither Keras.
"""
import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import errors

_v1 = tf.compat.v1


class _StateManager(_tf_internals.feature_column_v2().StateManager):
  """Makes the columns' variables (`embedding_weights`, ...) in the variable scope
  `<scope>/<column name>` of the current graph, reused on a second call, and keeps the
  resources columns add."""

  def __init__(self, scope):
    self._scope = scope
    self._variables = {}

  def create_variable(self, feature_column, name, shape, dtype=None, trainable=True,
                      use_resource=True, initializer=None):
    with _v1.variable_scope(self._scope, reuse=_v1.AUTO_REUSE):
      with _v1.variable_scope(feature_column.name):
        variable = _v1.get_variable(name, shape=shape, dtype=dtype or tf.float32,
                                    initializer=initializer, trainable=trainable,
                                    use_resource=use_resource)
    self._variables[(feature_column.name, name)] = variable
    return variable

  def get_variable(self, feature_column, name):
    return self._variables[(feature_column.name, name)]

  # Resources (a vocabulary column's lookup table): none made in advance; a column that
  # finds none makes its own in the graph, as Keras 2's feature layers let it.
  def add_resource(self, feature_column, name, resource):
    self._variables[(feature_column.name, 'resource:' + name)] = resource

  def has_resource(self, feature_column, name):
    return (feature_column.name, 'resource:' + name) in self._variables

  def get_resource(self, feature_column, name):
    return self._variables[(feature_column.name, 'resource:' + name)]


def check_sequence_columns(columns):
  """The sequence columns (a non-empty list of `SequenceDenseColumn`s: sequence_numeric_column,
  or embedding/indicator columns over sequence_categorical_column_with_*)."""
  dense = _tf_internals.feature_column_v2().SequenceDenseColumn
  if isinstance(columns, dict):
    columns = list(columns.values())
  if columns is None or isinstance(columns, (str, bytes)) or not hasattr(columns, '__iter__'):
    raise errors.type_error('sequence_feature_columns must be a list of sequence feature '
                            'columns.', sequence_feature_columns=columns)
  columns = list(columns)
  if not columns:
    raise errors.value_error('sequence_feature_columns must not be empty.',
                             sequence_feature_columns=columns)
  for column in columns:
    if not isinstance(column, dense):
      raise errors.value_error(
          'All sequence_feature_columns must be sequence dense columns.',
          'Use tf.feature_column.sequence_numeric_column, or an embedding_column/'
          'indicator_column of a tf.feature_column.sequence_categorical_column_with_*.',
          column=column)
  return columns


def check_context_columns(columns):
  """The context columns: None, or a list of dense columns that are not sequence columns."""
  if columns is None:
    return None
  fc_v2 = _tf_internals.feature_column_v2()
  if isinstance(columns, dict):
    columns = list(columns.values())
  if isinstance(columns, (str, bytes)) or not hasattr(columns, '__iter__'):
    raise errors.type_error('context_feature_columns must be None or a list of dense feature '
                            'columns.', context_feature_columns=columns)
  columns = list(columns)
  for column in columns:
    if not isinstance(column, fc_v2.DenseColumn) or \
        type(column).__name__ == 'SequenceNumericColumn':
      raise errors.value_error(
          'All context_feature_columns must be dense, non-sequence columns.',
          'Use e.g. tf.feature_column.numeric_column, or an embedding_column/indicator_column '
          'of a categorical column.', column=column)
  return columns or None


def _by_name(columns):
  return sorted(columns, key=lambda column: column.name)


def sequence_input(features, columns):
  """`(inputs [batch, time, depth], sequence_length [batch])` of the sequence columns."""
  fc_v2 = _tf_internals.feature_column_v2()
  cache = fc_v2.FeatureTransformationCache(features)
  state = _StateManager('sequence_features')
  outputs, lengths = [], []
  for column in _by_name(columns):
    column.create_state(state)
    dense, length = column.get_sequence_dense_tensor(cache, state)
    depth = column.variable_shape.num_elements()
    shape = tf.shape(dense)
    output = tf.reshape(dense, tf.stack([shape[0], shape[1], depth]))
    output.set_shape([None, None, depth])
    outputs.append(output)
    lengths.append(tf.cast(length, tf.int64))
  checks = [_v1.debugging.assert_equal(lengths[0], other, message=(
      'The sequence feature columns have different sequence lengths for the same example.'))
            for other in lengths[1:]]
  with tf.control_dependencies(checks):
    length = tf.identity(lengths[0])
  return tf.concat(outputs, axis=-1), length


def context_input(features, columns):
  """`[batch, depth]` of the context columns."""
  fc_v2 = _tf_internals.feature_column_v2()
  cache = fc_v2.FeatureTransformationCache(features)
  state = _StateManager('dense_features')
  outputs = []
  for column in _by_name(columns):
    column.create_state(state)
    dense = column.get_dense_tensor(cache, state)
    depth = column.variable_shape.num_elements()
    output = tf.reshape(dense, tf.stack([tf.shape(dense)[0], depth]))
    output.set_shape([None, depth])
    outputs.append(output)
  return tf.concat(outputs, axis=-1)


def with_context(sequence, context):
  """`sequence` [batch, time, d1] with `context` [batch, d2] repeated at every step after its
  own features: [batch, time, d1 + d2]."""
  steps = tf.shape(sequence)[1]
  context = tf.cast(context, sequence.dtype)
  repeated = tf.tile(tf.expand_dims(context, 1), tf.stack([1, steps, 1]))
  return tf.concat([sequence, repeated], axis=2)
