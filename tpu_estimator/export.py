"""Input receivers and export outputs (`tf.estimator.export`): what a
`serving_input_receiver_fn` returns, the receivers built from a feature spec or from raw tensors,
the supervised receiver of a TRAIN or EVAL export (features and labels), and TensorFlow's own
`PredictOutput`, `ClassificationOutput`, `RegressionOutput` and `EvalOutput`.  The SavedModel
itself is written by `core.savedmodel`."""
import collections

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import errors

_v1 = tf.compat.v1

ExportOutput = _tf_internals.export_output.ExportOutput
PredictOutput = _tf_internals.export_output.PredictOutput
ClassificationOutput = _tf_internals.export_output.ClassificationOutput
RegressionOutput = _tf_internals.export_output.RegressionOutput
EvalOutput = _tf_internals.export_output.EvalOutput

_SINGLE_FEATURE_KEY = 'feature'
_SINGLE_RECEIVER_KEY = 'input'
_SINGLE_LABEL_KEY = 'label'


def _as_tensor_dict(name, value, single_key, allow_sparse=True):
  if value is None:
    raise errors.value_error('`%s` must be set.' % name, **{name: value})
  kinds = (tf.Tensor, tf.SparseTensor) if allow_sparse else (tf.Tensor,)
  if isinstance(value, kinds) or hasattr(value, 'to_tensor'):
    return {single_key: value}
  if not isinstance(value, dict):
    raise errors.type_error('`%s` must be a Tensor or a dict of Tensors.' % name,
                            **{name: value})
  for key, tensor in value.items():
    if not isinstance(key, str):
      raise errors.type_error('`%s` keys must be strings.' % name, key=key)
    if not (isinstance(tensor, kinds) or hasattr(tensor, 'to_tensor')):
      raise errors.type_error('`%s[%r]` must be a Tensor.' % (name, key), value=tensor)
  return dict(value)


def _alternatives(value):
  if value is None:
    return None
  if not isinstance(value, dict):
    raise errors.type_error('`receiver_tensors_alternatives` must be a dict.',
                            receiver_tensors_alternatives=value)
  return {name: _as_tensor_dict('receiver_tensors_alternatives[%r]' % name, tensors,
                                _SINGLE_RECEIVER_KEY)
          for name, tensors in value.items()}


class ServingInputReceiver(
    collections.namedtuple('ServingInputReceiver',
                           ['features', 'receiver_tensors', 'receiver_tensors_alternatives'])):
  """What a serving input receiver fn returns: the features for `model_fn` and the tensors a
  server feeds (`receiver_tensors`), plus optional alternative feeds."""

  def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
    return super().__new__(cls, _as_tensor_dict('features', features, _SINGLE_FEATURE_KEY),
                           _as_tensor_dict('receiver_tensors', receiver_tensors,
                                           _SINGLE_RECEIVER_KEY),
                           _alternatives(receiver_tensors_alternatives))


class TensorServingInputReceiver(
    collections.namedtuple('TensorServingInputReceiver',
                           ['features', 'receiver_tensors', 'receiver_tensors_alternatives'])):
  """Like `ServingInputReceiver`, but `features` is a single Tensor given to `model_fn` as is."""

  def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
    if not isinstance(features, (tf.Tensor, tf.SparseTensor)):
      raise errors.type_error('`features` must be a single Tensor.', features=features)
    return super().__new__(cls, features,
                           _as_tensor_dict('receiver_tensors', receiver_tensors,
                                           _SINGLE_RECEIVER_KEY),
                           _alternatives(receiver_tensors_alternatives))


def build_parsing_serving_input_receiver_fn(feature_spec, default_batch_size=None):
  """A receiver fn that parses serialized `tf.train.Example`s fed as `examples`."""

  def serving_input_receiver_fn():
    serialized = _v1.placeholder(dtype=tf.string, shape=[default_batch_size],
                                 name='input_example_tensor')
    features = tf.io.parse_example(serialized, feature_spec)
    return ServingInputReceiver(features, {'examples': serialized})

  return serving_input_receiver_fn


class SupervisedInputReceiver(
    collections.namedtuple('SupervisedInputReceiver', ['features', 'labels',
                                                       'receiver_tensors'])):
  """What the input receiver fn of a TRAIN or EVAL export returns
  (`Estimator.experimental_export_all_saved_models`): the features and labels `model_fn` gets,
  each a Tensor or a dict of them, kept as given, and the tensors a caller feeds."""

  def __new__(cls, features, labels, receiver_tensors):
    _as_tensor_dict('features', features, _SINGLE_FEATURE_KEY)
    _as_tensor_dict('labels', labels, _SINGLE_LABEL_KEY)
    return super().__new__(cls, features, labels,
                           _as_tensor_dict('receiver_tensors', receiver_tensors,
                                           _SINGLE_RECEIVER_KEY))


# A receiver without labels, as the original's export_lib named it.
UnsupervisedInputReceiver = ServingInputReceiver


def _placeholders(value, default_batch_size, single_key):
  """(what model_fn gets, {receiver key: placeholder}): a placeholder shaped like each tensor
  of `value` (a dict of Tensors, or one, keyed `single_key`), its batch `default_batch_size`.
  The placeholders take TensorFlow's default names, as the original's: one named after its key
  would take that name from a layer of the same name, whose variables would then be made
  under another scope ('cls_1/bias') and not restore from the checkpoint."""
  def placeholder(tensor):
    shape = [default_batch_size] + tensor.shape.as_list()[1:]
    return _v1.placeholder(dtype=tensor.dtype, shape=shape)

  if isinstance(value, dict):
    receivers = {key: placeholder(tensor) for key, tensor in value.items()}
    return dict(receivers), receivers
  tensor = placeholder(value)
  return tensor, {single_key: tensor}


def build_raw_serving_input_receiver_fn(features, default_batch_size=None):
  """A receiver fn feeding raw tensors shaped like `features` (a dict of Tensors, or one)."""

  def serving_input_receiver_fn():
    model_features, receivers = _placeholders(features, default_batch_size,
                                              _SINGLE_FEATURE_KEY)
    if isinstance(features, dict):
      return ServingInputReceiver(model_features, receivers)
    return TensorServingInputReceiver(model_features, receivers)

  return serving_input_receiver_fn


def build_raw_supervised_input_receiver_fn(features, labels, default_batch_size=None):
  """A receiver fn for a TRAIN or EVAL export feeding raw features and labels shaped like
  `features` and `labels` (each a dict of Tensors, or one: fed as 'input' and 'label')."""
  shared = sorted(set(_as_tensor_dict('features', features, _SINGLE_RECEIVER_KEY)) &
                  set(_as_tensor_dict('labels', labels, _SINGLE_LABEL_KEY)))
  if shared:
    raise errors.value_error('Features and labels must have distinct keys: both are fed by '
                             'name.', 'Rename the labels.', overlapping_keys=shared)

  def supervised_input_receiver_fn():
    model_features, feature_receivers = _placeholders(features, default_batch_size,
                                                      _SINGLE_RECEIVER_KEY)
    model_labels, label_receivers = _placeholders(labels, default_batch_size,
                                                  _SINGLE_LABEL_KEY)
    return SupervisedInputReceiver(model_features, model_labels,
                                   dict(feature_receivers, **label_receivers))

  return supervised_input_receiver_fn
