"""Writing SavedModels: the receivers, the signatures, and `write_saved_model`, which builds each
requested MetaGraph in a fresh graph, restores the checkpoint, and writes the SavedModel into
`temp-<timestamp>` next to its final place, renaming it only when complete: an export directory
is either whole or absent.  The signature building is TensorFlow's own
(`tensorflow.python.saved_model.model_utils`)."""
import os
import shutil

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.checkpoints import restoring
from tpu_estimator.checkpoints import saving
from tpu_estimator import errors
from tpu_estimator.export import ServingInputReceiver
from tpu_estimator.export import SupervisedInputReceiver
from tpu_estimator.export import TensorServingInputReceiver
from tpu_estimator import quiet
from tpu_estimator.specs import ModeKeys

_v1 = tf.compat.v1

# The modes an export can hold, in the order their MetaGraphs are written (as the original:
# the variables are saved with the first).
EXPORT_MODES = (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT)


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


def call_supervised_receiver_fn(input_receiver_fn, mode):
  """The receiver of a TRAIN or EVAL export: a SupervisedInputReceiver (features and labels),
  or a serving receiver, whose `model_fn` gets no labels."""
  if not callable(input_receiver_fn):
    raise errors.type_error('The input receiver fn of a %s export must be callable.' % mode,
                            input_receiver_fn=input_receiver_fn)
  receiver = input_receiver_fn()
  if not isinstance(receiver, (SupervisedInputReceiver, ServingInputReceiver,
                               TensorServingInputReceiver)):
    raise errors.type_error(
        'The input receiver fn of a %s export must return a SupervisedInputReceiver.' % mode,
        'Build it with tf.estimator.experimental.build_raw_supervised_input_receiver_fn.',
        returned=receiver)
  return receiver


def supervised_signatures(mode, receiver, predictions, loss, metrics):
  """The one SignatureDef of a TRAIN or EVAL export ('train', 'eval'): the receiver's tensors
  in; the loss, the predictions and each metric's value and update op out."""
  outputs = _tf_internals.export_utils.export_outputs_for_mode(
      mode, predictions=predictions, loss=loss, metrics=metrics)
  with quiet.internal_calls():
    return _tf_internals.export_utils.build_all_signature_defs(
        receiver.receiver_tensors, outputs,
        getattr(receiver, 'receiver_tensors_alternatives', None), serving_only=False)


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
                      as_text=False, session_config=None, reported_checkpoint=None,
                      strip_default_attrs=True):
  """Writes a timestamped SavedModel atomically and returns its path (bytes, as the original).

  `metagraphs`: (tags, build) pairs; `build()` is called in a fresh graph and returns
  (signature_def_map, scaffold).  `reported_checkpoint`: the checkpoint errors name when
  `checkpoint_path` is a pinned snapshot of it.  `strip_default_attrs`: node attributes at
  their default values left out (older TensorFlows can then read the graph).
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
        saver = scaffold.saver or _v1.train.Saver(saving.saveable_variables(),
                                                  sharded=True)
        local_init = scaffold.local_init_op if scaffold.local_init_op is not None else \
            _v1.train.Scaffold.default_local_init_op()
        restoring.check_shapes(checkpoint_path, reported_checkpoint, saver=saver)
        with _v1.Session(config=session_config) as session:
          with restoring.restore_errors(checkpoint_path, reported_checkpoint):
            saver.restore(session, checkpoint_path)
          kwargs = dict(signature_def_map=signatures, main_op=local_init, saver=saver,
                        strip_default_attrs=strip_default_attrs,
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
