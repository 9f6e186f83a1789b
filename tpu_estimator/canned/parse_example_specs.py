"""`classifier_parse_example_spec` / `regressor_parse_example_spec`: the
`tf.io.parse_example` spec for the feature columns plus the label (and weight) of a canned
estimator's `tf.train.Example`s, as tensorflow-estimator 2.15 made it."""
import tensorflow as tf

from tpu_estimator.canned import head_base
from tpu_estimator import errors


def _spec(feature_columns, label_key, label_feature, weight_column):
  spec = tf.feature_column.make_parse_example_spec(feature_columns)
  if not isinstance(label_key, str):
    raise errors.type_error('label_key must be a string.', label_key=label_key)
  if label_key in spec:
    raise errors.value_error('label_key is already a feature column key.',
                             'Give the label another key.', label_key=label_key)
  spec[label_key] = label_feature
  weight = head_base.weight_key(weight_column)
  if weight is not None:
    if weight in (label_key,):
      raise errors.value_error('weight_column must differ from label_key.',
                               weight_column=weight)
    if isinstance(weight_column, str):
      spec[weight] = tf.io.FixedLenFeature([1], tf.float32)
    else:
      spec.update(weight_column.parse_example_spec)
  return spec


def classifier_parse_example_spec(feature_columns, label_key, label_dtype=tf.int64,
                                  label_default=None, weight_column=None):
  """The parse spec for a classifier: features, a [1] label of `label_dtype`, the weight."""
  return _spec(feature_columns, label_key,
               tf.io.FixedLenFeature([1], label_dtype, default_value=label_default),
               weight_column)


def regressor_parse_example_spec(feature_columns, label_key, label_dtype=tf.float32,
                                 label_default=None, label_dimension=1, weight_column=None):
  """The parse spec for a regressor: features, a [label_dimension] label, the weight."""
  return _spec(feature_columns, label_key,
               tf.io.FixedLenFeature([label_dimension], label_dtype,
                                     default_value=label_default), weight_column)
