"""Serving input receivers, export outputs and SavedModel writing.

`write_saved_model` builds each requested MetaGraph in a fresh graph, restores the checkpoint,
and writes the SavedModel into `temp-<timestamp>` next to its final place, renaming it only
when complete: an export directory is either whole or absent.  Export outputs
(`PredictOutput`, `ClassificationOutput`, `RegressionOutput`) and the signature building are
TensorFlow's own (`tensorflow.python.saved_model.model_utils`).
"""
import collections
import os
import shutil

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import checkpoints
from tpu_estimator import errors
from tpu_estimator import quiet

_v1 = tf.compat.v1

ExportOutput = _tf_internals.export_output.ExportOutput
PredictOutput = _tf_internals.export_output.PredictOutput
ClassificationOutput = _tf_internals.export_output.ClassificationOutput
RegressionOutput = _tf_internals.export_output.RegressionOutput

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


def build_raw_serving_input_receiver_fn(features, default_batch_size=None):
  """A receiver fn feeding raw tensors shaped like `features` (a dict of Tensors, or one)."""

  def serving_input_receiver_fn():
    def placeholder(name, tensor):
      shape = [default_batch_size] + tensor.shape.as_list()[1:]
      return _v1.placeholder(dtype=tensor.dtype, shape=shape, name=name)

    if isinstance(features, dict):
      receivers = {k: placeholder(k, t) for k, t in features.items()}
      return ServingInputReceiver(receivers, dict(receivers))
    tensor = placeholder(_SINGLE_FEATURE_KEY, features)
    return TensorServingInputReceiver(tensor, {_SINGLE_FEATURE_KEY: tensor})

  return serving_input_receiver_fn


def call_receiver_fn(serving_input_receiver_fn):
  if serving_input_receiver_fn is None:
    raise ValueError('serving_input_receiver_fn must be defined. Received: None; pass e.g. '
                     'build_raw_serving_input_receiver_fn({...}).')
  if not callable(serving_input_receiver_fn):
    raise errors.type_error('`serving_input_receiver_fn` must be callable.',
                            serving_input_receiver_fn=serving_input_receiver_fn)
  receiver = serving_input_receiver_fn()
  if not isinstance(receiver, (ServingInputReceiver, TensorServingInputReceiver)):
    raise errors.type_error('serving_input_receiver_fn must return a ServingInputReceiver or '
                            'TensorServingInputReceiver.', returned=receiver)
  return receiver


def export_outputs_of(spec):
  """The spec's export outputs, `serving_default` from its predictions when none are given."""
  return _tf_internals.export_utils.get_export_outputs(spec.export_outputs, spec.predictions)


def signature_defs(receiver, export_outputs):
  """SignatureDefs for every export output (and receiver alternative).  A classification or
  regression `serving_default` needs one string input (serialized Examples); with other
  receivers it is left out, with a warning, as the original did (a canned classifier
  exported with a raw receiver keeps its `predict` signature).  No signature at all is an
  error."""
  with quiet.internal_calls():  # TF1 signature utilities, deprecated inside TensorFlow
    signatures = _tf_internals.export_utils.build_all_signature_defs(
        receiver.receiver_tensors, export_outputs, receiver.receiver_tensors_alternatives,
        serving_only=True)
  if not signatures:
    raise errors.value_error('The export has no valid serving_default signature.',
                             'Return export_outputs with a PredictOutput, or predictions.',
                             signatures=sorted(signatures))
  if tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY not in signatures:
    tf.get_logger().warning(
        'Export includes no default signature (serving_default): a classification/regression '
        'signature needs a single string input. Signatures: %s', sorted(signatures))
  return signatures


def write_saved_model(export_dir_base, checkpoint_path, metagraphs, assets_extra=None,
                      as_text=False, session_config=None, reported_checkpoint=None):
  """Writes a timestamped SavedModel atomically and returns its path (bytes, as the original).

  `metagraphs`: (tags, build) pairs; `build()` is called in a fresh graph and returns
  (signature_def_map, scaffold).  `reported_checkpoint`: the checkpoint errors name when
  `checkpoint_path` is a pinned snapshot of it.
  """
  if not metagraphs:
    raise ValueError('Nothing to export: one of export_to_cpu and export_to_tpu must be true.')
  if assets_extra is not None and not isinstance(assets_extra, dict):
    raise errors.type_error('`assets_extra` must be a dict {destination: source path}.',
                            assets_extra=assets_extra)
  base_existed = tf.io.gfile.exists(export_dir_base)
  export_dir = _tf_internals.export_utils.get_timestamped_export_dir(export_dir_base)
  temp_dir = _tf_internals.export_utils.get_temp_export_dir(export_dir)
  try:
    builder = _v1.saved_model.Builder(temp_dir)
    for index, (tags, build) in enumerate(metagraphs):
      with tf.Graph().as_default():
        signatures, scaffold = build()
        saver = scaffold.saver or _v1.train.Saver(checkpoints.saveable_variables(),
                                                  sharded=True)
        local_init = scaffold.local_init_op if scaffold.local_init_op is not None else \
            _v1.train.Scaffold.default_local_init_op()
        checkpoints.check_shapes(checkpoint_path, reported_checkpoint, saver=saver)
        with _v1.Session(config=session_config) as session:
          with checkpoints.restore_errors(checkpoint_path, reported_checkpoint):
            saver.restore(session, checkpoint_path)
          kwargs = dict(signature_def_map=signatures, main_op=local_init, saver=saver,
                        strip_default_attrs=True,
                        assets_collection=_v1.get_collection(_v1.GraphKeys.ASSET_FILEPATHS))
          if index == 0:
            builder.add_meta_graph_and_variables(session, tags, **kwargs)
          else:
            builder.add_meta_graph(tags, **kwargs)
    builder.save(as_text)
    for destination, source in (assets_extra or {}).items():
      target = os.path.join(os.fsdecode(temp_dir), 'assets.extra', destination)
      tf.io.gfile.makedirs(os.path.dirname(target))
      tf.io.gfile.copy(source, target, overwrite=True)
    tf.io.gfile.rename(temp_dir, export_dir)
  except BaseException:
    if tf.io.gfile.exists(temp_dir):
      shutil.rmtree(os.fsdecode(temp_dir), ignore_errors=True)
    if not base_existed and tf.io.gfile.isdir(export_dir_base) and \
        not tf.io.gfile.listdir(export_dir_base):
      tf.io.gfile.rmtree(export_dir_base)  # leave no trace of a failed first export
    raise
  return export_dir
