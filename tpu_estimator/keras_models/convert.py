"""`model_to_estimator`: a compiled Keras model (tf_keras or Keras 3) as an Estimator.

One device (`Estimator`, the original's behaviour) unless `config` is a `tpu_estimator.
RunConfig` (the TPU one): then a `TPUEstimator(use_tpu=True)` sharding each global batch over
`config.tpu_config.num_shards` replicas, with the batch sizes given here.
"""
import tempfile

import tensorflow as tf

from tpu_estimator import config as config_lib
from tpu_estimator import errors
from tpu_estimator import estimator as estimator_lib
from tpu_estimator.keras_models import backends
from tpu_estimator.keras_models import checkpoints
from tpu_estimator.keras_models import model_fn as model_fn_lib
from tpu_estimator.keras_models import optimizers

CHECKPOINT_FORMATS = ('saver', 'checkpoint')
_log = tf.get_logger()


def _load(keras_model, keras_model_path, custom_objects):
  if (keras_model is None) == (keras_model_path is None):
    raise errors.value_error(
        'Pass exactly one of `keras_model` and `keras_model_path`.',
        'Give the compiled model, or the path of one saved with model.save().',
        keras_model=type(keras_model).__name__ if keras_model is not None else None,
        keras_model_path=keras_model_path)
  if keras_model is not None:
    return keras_model
  if str(keras_model_path).startswith('gs://'):
    raise errors.value_error('Loading a Keras model from Google Cloud Storage is not supported.',
                             'Copy it to a local path first.',
                             keras_model_path=keras_model_path)
  path = str(keras_model_path)
  if path.endswith('.keras'):  # the Keras 3 format
    import keras  # pylint: disable=import-outside-toplevel
    return keras.models.load_model(path, custom_objects=custom_objects)
  try:  # HDF5 or a SavedModel directory, as tf.keras (Keras 2) saved them
    import tf_keras  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise errors.value_error(
        'Loading a Keras 2 model file needs tf_keras.', 'pip install tf_keras, or save the '
        'model as a Keras 3 `.keras` file.', keras_model_path=path) from e
  return tf_keras.models.load_model(path, custom_objects=custom_objects)


def _check_subclassed(backend, model, custom_objects):
  try:
    with backend.custom_scope(custom_objects):
      type(model).from_config(model.get_config())
  except NotImplementedError as e:
    raise errors.value_error(
        'A subclassed Keras model must implement get_config and from_config to become an '
        'estimator (the estimator re-creates it in every graph).',
        'Implement both.', keras_model=type(model).__name__) from e


def _checkpoint_format(value, graph_network):
  if value not in CHECKPOINT_FORMATS:
    raise errors.value_error('`checkpoint_format` must be one of %s.' % (CHECKPOINT_FORMATS,),
                             checkpoint_format=value)
  if value == 'checkpoint' and not graph_network:
    raise errors.value_error(
        "checkpoint_format='checkpoint' (object-based names) needs a Sequential or "
        'functional model.', "Pass checkpoint_format='saver' for a subclassed model.",
        checkpoint_format=value)
  return value == 'checkpoint'


def _check_export_outputs(export_outputs, names):
  if export_outputs is None:
    return None
  if not isinstance(export_outputs, dict):
    raise errors.type_error('`export_outputs` must be a dict {output name: ExportOutput class}.',
                            export_outputs=export_outputs)
  unknown = sorted(set(export_outputs) - set(names))
  if unknown:
    raise errors.value_error(
        '`export_outputs` keys must be output names of the Keras model: %s are not.' % unknown,
        'Key it by %s.' % list(names), export_outputs=sorted(export_outputs))
  return dict(export_outputs)


def source_of(model, custom_objects=None, checkpoint_format='saver', metric_names_map=None,
              export_outputs=None, sharded=False):
  """The `model_fn.Source` of a compiled Keras model (its arguments checked)."""
  backend = backends.backend_of(model)
  graph_network = backends.is_graph_network(backend, model)
  if not graph_network:
    _check_subclassed(backend, model, custom_objects)
  optimizer = getattr(model, 'optimizer', None)
  if optimizer is None or sharded or not backend.is_tf_keras:
    optimizers.check(optimizer)  # tf_keras on one device: its own optimizer, as the original
  compile_config = backends.compile_args(model)
  names = backends.output_names(backend, model)
  object_checkpoint = _checkpoint_format(checkpoint_format, graph_network)
  if sharded and object_checkpoint:
    raise errors.value_error("Sharded Keras estimators save name-based checkpoints.",
                             "Pass checkpoint_format='saver'.",
                             checkpoint_format=checkpoint_format)
  return model_fn_lib.Source(
      backend=backend, model=model, custom_objects=custom_objects, graph_network=graph_network,
      input_names=backends.input_names(backend, model), output_names=names,
      loss=model.loss, loss_weights=compile_config.get('loss_weights'),
      metrics=compile_config.get('metrics'),
      weighted_metrics=compile_config.get('weighted_metrics'),
      optimizer=optimizers.plan(backend, optimizer, sharded),
      object_checkpoint=object_checkpoint, metric_names_map=metric_names_map,
      export_outputs=_check_export_outputs(export_outputs, names), sharded=sharded)


def _config_and_dir(config, model_dir, default_type):
  """The config with `model_dir` in it (the argument wins over config.model_dir, as in the
  original; a temporary directory when neither is set)."""
  if config is None:
    config = default_type()
  if not isinstance(config, config_lib.RunConfig):
    raise errors.type_error('`config` must be a RunConfig.', config=config)
  model_dir = model_dir or config.model_dir or tempfile.mkdtemp()
  if config.model_dir != model_dir:
    config = config.replace(model_dir=str(model_dir))
  return config


def _warm_start(source, model, config):
  """(checkpoint path, variable names) of the Keras model's current weights, written to
  model_dir/keras/; None for a subclassed model, which the estimator re-creates freshly
  initialized."""
  if not source.graph_network:
    if getattr(model, 'built', False):
      _log.warning('A subclassed Keras model cannot pass its current weights to the '
                   'estimator: it starts from freshly initialized ones.')
    return None
  if not config.is_chief:
    return None
  with backends.eager_classes_kept(source.backend, model):
    return checkpoints.write_keras_weights(
        lambda: model_fn_lib.build_clone(source), model, config.model_dir,
        config.session_config, config.tf_random_seed)


def model_to_estimator(keras_model=None, keras_model_path=None, custom_objects=None,
                       model_dir=None, config=None, checkpoint_format='saver',
                       metric_names_map=None, export_outputs=None, train_batch_size=None,
                       eval_batch_size=None, predict_batch_size=None):
  """An Estimator training, evaluating, predicting and exporting a compiled Keras model
  (tf_keras or Keras 3), starting from its current weights.

  `input_fn` returns `(features, labels)`: features a dict keyed by the model's input names
  (or one tensor for one input; `{'features': ..., 'sample_weights': ...}` adds sample
  weights), labels a tensor or a dict keyed by output names.  `evaluate` reports `loss`, the
  compiled metrics under the names Keras gave them, and `global_step`; predictions are keyed
  by output name.  With `config=tpu_estimator.RunConfig(tpu_config=TPUConfig(num_shards=N))`
  the result is a `TPUEstimator(use_tpu=True)` sharding each global batch (`train_batch_size`
  and the others are then required as for TPUEstimator; `input_fn` takes `params` and reads
  `params['batch_size']`).  The compiled Keras optimizer runs as the `tf.compat.v1.train`
  optimizer with the same hyper-parameters (`optimizers.V1_NAMES`), except for tf_keras on
  one device, which runs its own (the original's checkpoint names).
  `checkpoint_format`: 'saver' (names as `dense/kernel`) or 'checkpoint' (object-based names,
  as `model.save_weights`; Sequential and functional models, one device)."""
  model = _load(keras_model, keras_model_path, custom_objects)
  sharded = isinstance(config, config_lib.TPURunConfig)
  source = source_of(model, custom_objects, checkpoint_format, metric_names_map,
                     export_outputs, sharded)
  config = _config_and_dir(config, model_dir, config_lib.RunConfig)
  _check_strategies(config, checkpoint_format)
  warm_start = _warm_start(source, model, config)
  if warm_start is not None:
    warm_start = checkpoints.warm_start_settings(*warm_start)
  model_fn = model_fn_lib.make_model_fn(source)
  if sharded:
    return estimator_lib.TPUEstimator(
        model_fn=model_fn, config=config, use_tpu=True, train_batch_size=train_batch_size,
        eval_batch_size=eval_batch_size, predict_batch_size=predict_batch_size,
        warm_start_from=warm_start)
  if any(b is not None for b in (train_batch_size, eval_batch_size, predict_batch_size)):
    raise errors.value_error(
        'Batch sizes are for the sharded estimator only; on one device input_fn batches.',
        'Drop them, or pass config=tpu_estimator.RunConfig(tpu_config=...) to shard.',
        train_batch_size=train_batch_size)
  return estimator_lib.Estimator(model_fn, config=config, warm_start_from=warm_start)


def _has_strategy(config):
  return any(getattr(config, name, None) is not None
             for name in ('train_distribute', 'eval_distribute'))


def _check_strategies(config, checkpoint_format):
  """Object-based checkpoints are written by a Saver built in `model_fn`, which a strategy's
  replicas cannot share: with RunConfig strategies the names are the graph's ('saver')."""
  if checkpoint_format == 'checkpoint' and _has_strategy(config):
    raise errors.value_error(
        "checkpoint_format='checkpoint' is not supported with RunConfig(train_distribute=...) "
        "or eval_distribute by this build.",
        "Pass checkpoint_format='saver' (variable names as dense/kernel).",
        checkpoint_format=checkpoint_format)


def legacy_model_to_estimator(keras_model=None, keras_model_path=None, custom_objects=None,
                              model_dir=None, config=None, checkpoint_format=None,
                              use_v2_estimator=False, metric_names_map=None,
                              export_outputs=None):
  """`tensorflow_estimator.python.estimator.keras_lib.model_to_estimator`, which
  `tf.keras.estimator.model_to_estimator` (tf_keras) calls: the same on one device
  (`checkpoint_format=None` means 'checkpoint', as there)."""
  del use_v2_estimator  # one Estimator class serves both
  return model_to_estimator(
      keras_model=keras_model, keras_model_path=keras_model_path,
      custom_objects=custom_objects, model_dir=model_dir, config=config,
      checkpoint_format='checkpoint' if checkpoint_format is None else checkpoint_format,
      metric_names_map=metric_names_map, export_outputs=export_outputs)
