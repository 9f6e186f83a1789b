"""`tf.contrib.estimator`: TF 1.15's estimator extensions, on tpu_estimator.

- `add_metrics(estimator, metric_fn)`: tpu_estimator's `add_metrics` (`tf.estimator.add_metrics`).
- `forward_features(estimator, keys=None, sparse_default_values=None)`: a new Estimator whose
  predictions (and default serving signature, when it is a PredictOutput) also hold the named
  features.
- `clip_gradients_by_norm(optimizer, clip_norm)`: the optimizer, with gradients clipped to a
  global norm of `clip_norm` before they are applied.
- `export_all_saved_models` / `export_saved_model_for_mode`: the Estimator's
  `experimental_export_all_saved_models` / `export_saved_model` (TRAIN, EVAL and PREDICT).
- the head factories (`binary_classification_head`, `multi_class_head`, ...:
  `tpu_estimator.canned.heads`), the early-stopping hooks, `InMemoryEvaluatorHook`,
  `make_stop_at_checkpoint_step_hook`, `read_eval_metrics` (`tpu_estimator.experimental`).

`replicate_model_fn` / `TowerOptimizer` (TF 1.x in-graph multi-GPU) raise an error naming the
replacements: `RunConfig(train_distribute=tf.distribute.MirroredStrategy())`, or
`TPUEstimator(use_tpu=True)` with `TPUConfig(num_shards=N)`.  Any other name raises an AttributeError naming what to use.
"""
import tensorflow as tf

import tpu_estimator as _te
from tpu_estimator.canned import heads as _heads
from tpu_estimator import estimator as _estimator_lib
from tpu_estimator import experimental as _experimental
from tpu_estimator.updates import wrapping as _wrapping

_v1 = tf.compat.v1
_ModeKeys = _te.ModeKeys

binary_classification_head = _heads.binary_classification_head
logistic_regression_head = _heads.logistic_regression_head
multi_class_head = _heads.multi_class_head
multi_head = _heads.multi_head
multi_label_head = _heads.multi_label_head
poisson_regression_head = _heads.poisson_regression_head
regression_head = _heads.regression_head

InMemoryEvaluatorHook = _experimental.InMemoryEvaluatorHook
make_early_stopping_hook = _experimental.make_early_stopping_hook
make_stop_at_checkpoint_step_hook = _experimental.make_stop_at_checkpoint_step_hook
read_eval_metrics = _experimental.read_eval_metrics
stop_if_higher_hook = _experimental.stop_if_higher_hook
stop_if_lower_hook = _experimental.stop_if_lower_hook
stop_if_no_decrease_hook = _experimental.stop_if_no_decrease_hook
stop_if_no_increase_hook = _experimental.stop_if_no_increase_hook

__all__ = [
    'InMemoryEvaluatorHook', 'TowerOptimizer', 'add_metrics', 'binary_classification_head',
    'clip_gradients_by_norm', 'export_all_saved_models', 'export_saved_model_for_mode',
    'forward_features', 'logistic_regression_head', 'make_early_stopping_hook',
    'make_stop_at_checkpoint_step_hook', 'multi_class_head', 'multi_head', 'multi_label_head',
    'poisson_regression_head', 'read_eval_metrics', 'regression_head', 'replicate_model_fn',
    'stop_if_higher_hook', 'stop_if_lower_hook', 'stop_if_no_decrease_hook',
    'stop_if_no_increase_hook']

add_metrics = _te.add_metrics  # TF 1.15's tf.contrib.estimator.add_metrics is tf.estimator's


def _forwarded(features, keys, sparse_default_values):
  """{key: the dense feature tensor} for the keys to forward."""
  if not isinstance(features, dict):
    raise ValueError('forward_features needs the features to be a dict, got %r.' % (features,))
  out = {}
  for key in (sorted(features) if keys is None else keys):
    if key not in features:
      raise ValueError('Feature %r to forward is not among the features (%s).' % (
          key, ', '.join(sorted(features))))
    value = features[key]
    if isinstance(value, tf.SparseTensor):
      if key not in sparse_default_values:
        raise ValueError('Feature %r is a SparseTensor: give its default value in '
                         'sparse_default_values, or leave it out of keys.' % key)
      value = tf.sparse.to_dense(value, default_value=sparse_default_values[key])
    out[key] = value
  return out


def forward_features(estimator, keys=None, sparse_default_values=None):
  """A new Estimator like `estimator` whose predictions also hold the features `keys` (a
  name, a list of names, or None: every feature); sparse ones named in
  `sparse_default_values` are made dense with that default.  A key already in the predictions
  is a ValueError (no override)."""
  if isinstance(keys, str):
    keys = [keys]
  sparse_default_values = dict(sparse_default_values or {})

  def change_spec(spec, features, labels, mode, config):
    del labels, config
    if mode != _ModeKeys.PREDICT:
      return spec
    if not isinstance(spec.predictions, dict):
      raise ValueError('forward_features needs the predictions to be a dict, got %r.' % (
          spec.predictions,))
    forwarded = _forwarded(features, keys, sparse_default_values)
    clash = sorted(set(forwarded) & set(spec.predictions))
    if clash:
      raise ValueError('Cannot forward features %s: the predictions already hold them.'
                       % clash)
    predictions = dict(spec.predictions, **forwarded)
    outputs = dict(spec.export_outputs or {})
    serving = _v1.saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY
    if isinstance(outputs.get(serving), _te.export.PredictOutput):
      outputs[serving] = _te.export.PredictOutput(dict(outputs[serving].outputs, **forwarded))
    return spec._replace(predictions=predictions, export_outputs=outputs or None)
  return _estimator_lib.respecified(estimator, change_spec)


class _ClippedOptimizer(_wrapping.Wrapping):
  """A TF1 optimizer that clips the gradients of another to a global norm, then applies them
  with it (its slots and variables are the inner optimizer's).  It clips in `apply_gradients`,
  as TF 1.x did: under `CrossShardOptimizer` that is the shards' aggregated gradient (a step
  as long as on one shard), not each shard's."""
  WRAPS_INNER = False  # its apply_gradients changes the gradients (updates/shard_sum.py)

  def __init__(self, optimizer, clip_norm):
    super().__init__(optimizer, 'ClipByNorm' + optimizer.get_name())
    self._clip_norm = clip_norm

  def compute_gradients(self, *args, **kwargs):
    return self._opt.compute_gradients(*args, **kwargs)

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    pairs = list(grads_and_vars)
    grads, variables = zip(*pairs) if pairs else ((), ())
    clipped, _ = tf.clip_by_global_norm(list(grads), self._clip_norm)
    return self._opt.apply_gradients(list(zip(clipped, variables)), global_step, name)


def clip_gradients_by_norm(optimizer, clip_norm):
  """`optimizer` (a tf.compat.v1.train.Optimizer) with its gradients clipped to a global norm
  of `clip_norm` before they are applied."""
  return _ClippedOptimizer(optimizer, clip_norm)


def export_all_saved_models(estimator, export_dir_base, input_receiver_fn_map,
                            assets_extra=None, as_text=False, checkpoint_path=None):
  """`estimator.experimental_export_all_saved_models(...)`: the SavedModel's path."""
  return estimator.experimental_export_all_saved_models(
      export_dir_base, input_receiver_fn_map, assets_extra=assets_extra, as_text=as_text,
      checkpoint_path=checkpoint_path)


def export_saved_model_for_mode(estimator, export_dir_base, input_receiver_fn,
                                assets_extra=None, as_text=False, checkpoint_path=None,
                                mode=_ModeKeys.PREDICT):
  """`estimator.export_saved_model(...)` for `mode` (TRAIN, EVAL or PREDICT)."""
  return estimator.export_saved_model(
      export_dir_base, input_receiver_fn, assets_extra=assets_extra, as_text=as_text,
      checkpoint_path=checkpoint_path, experimental_mode=mode)


_REPLICATE = ('tf.contrib.estimator.%s (TF 1.x in-graph multi-GPU towers) is not provided by '
              'tpu_estimator: pass the unwrapped model_fn and optimizer to an Estimator with '
              'RunConfig(train_distribute=tf.distribute.MirroredStrategy()), which replicates '
              'model_fn over the GPUs (TensorFlow\'s replacement), or use TPUEstimator(model_fn, '
              'use_tpu=True, config=RunConfig(tpu_config=TPUConfig(num_shards=N))) with the '
              'optimizer wrapped in CrossShardOptimizer.')


def replicate_model_fn(model_fn, loss_reduction=None, devices=None):
  del model_fn, loss_reduction, devices
  raise NotImplementedError(_REPLICATE % 'replicate_model_fn')


class TowerOptimizer:
  """Stands for TF 1.x's tower optimizer: constructing it raises the error naming the
  replacement."""

  def __init__(self, optimizer_or_optimizer_fn):
    del optimizer_or_optimizer_fn
    raise NotImplementedError(_REPLICATE % 'TowerOptimizer')
