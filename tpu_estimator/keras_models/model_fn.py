"""The `model_fn` of a Keras estimator: the compiled Keras model re-created in each call's
graph, its outputs the predictions, its compiled loss and metrics the loss and eval metrics,
its compiled optimizer the update (`optimizers`).

One device: an `EstimatorSpec`, as the original.  Sharded (`TPUEstimator`): a
`TPUEstimatorSpec` whose update is a `CrossShardOptimizer` and whose metrics are computed on
the host over every shard's rows (`eval_metrics`).
"""
import collections

import tensorflow as tf

from tpu_estimator import errors
from tpu_estimator import export as export_lib
from tpu_estimator import specs
from tpu_estimator.keras_models import backends
from tpu_estimator.keras_models import checkpoints
from tpu_estimator.keras_models import compiled
from tpu_estimator.keras_models import io
from tpu_estimator.keras_models import optimizers

_v1 = tf.compat.v1
ModeKeys = specs.ModeKeys
DEFAULT_SERVING_KEY = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY


class Source(collections.namedtuple('Source', [
    'backend', 'model', 'custom_objects', 'graph_network', 'input_names', 'output_names',
    'loss', 'loss_weights', 'metrics', 'weighted_metrics', 'optimizer', 'object_checkpoint',
    'metric_names_map', 'export_outputs', 'sharded'])):
  """What the model_fn needs of the compiled Keras model, read once at conversion."""


def build_clone(source):
  """A new copy of the Keras model (fresh variables) in the current graph."""
  model, backend = source.model, source.backend
  with backend.custom_scope(source.custom_objects):
    if backend.is_tf_keras and source.graph_network:
      return backend.keras.models.clone_model(model)
    return type(model).from_config(model.get_config())


def _new_updates(graph, before, first_variable):
  """State updates (BatchNormalization statistics, ...) the forward pass added, without the
  initializers of the variables it created (a subclassed model builds on its first call)."""
  initializers = set()
  for variable in _v1.global_variables()[first_variable:]:
    for part in getattr(variable, 'values', None) or (variable,):  # a mirrored one's copies
      initializers.add(part.initializer)
  kinds = ('AssignVariableOp', 'AssignAddVariableOp', 'AssignSubVariableOp')
  return [op for op in graph.get_operations()[before:]
          if op.type in kinds and op not in initializers]


def _forward(source, features, mode):
  """(clone, outputs list, predictions dict, state updates) of one call."""
  clone = build_clone(source)
  names = source.input_names if source.graph_network else None
  inputs = io.model_inputs(getattr(source.model, 'inputs', None) if source.graph_network
                           else None, names, features)
  graph = _v1.get_default_graph()
  before, first_variable = len(graph.get_operations()), len(_v1.global_variables())
  outputs = clone(inputs, training=(mode == ModeKeys.TRAIN))
  updates = _new_updates(graph, before, first_variable) if mode == ModeKeys.TRAIN else []
  if isinstance(outputs, dict):
    outputs = [outputs[n] for n in source.output_names]
  elif not isinstance(outputs, (list, tuple)):
    outputs = [outputs]
  return clone, list(outputs), dict(zip(source.output_names, outputs)), updates


def _export_outputs(source, predictions):
  outputs = {DEFAULT_SERVING_KEY: export_lib.PredictOutput(predictions)}
  for name, output_cls in (source.export_outputs or {}).items():
    outputs[name] = output_cls(predictions[name])
  return outputs


def _loss(source, clone, labels, outputs, weights):
  names = source.output_names
  targets = io.ordered(labels, names, 'output', 'labels')
  if targets is None:
    raise errors.value_error('The Keras estimator needs labels to train and evaluate.',
                             'Return (features, labels) from input_fn.', labels=None)
  losses = compiled.output_losses(source.backend, source.loss, names)
  loss_weights = compiled.per_output(source.loss_weights, names, 'loss_weights')
  loss = compiled.total_loss(losses, loss_weights, targets, outputs, weights, clone.losses)
  return loss, losses, targets


def metric_ops(source, losses, targets, outputs, weights):
  """{name: (value, update_op)} of the compiled metrics, renamed by `metric_names_map`."""
  names = source.output_names
  ops = compiled.metric_ops(source.backend, source.metrics, losses, names, targets, outputs,
                            [None] * len(names))
  weighted = compiled.metric_ops(source.backend, source.weighted_metrics, losses, names,
                                 targets, outputs, weights)
  ops.update({'weighted_' + k: v for k, v in weighted.items()})
  rename = source.metric_names_map
  if not rename:
    return ops
  if set(rename) != set(ops):
    raise errors.value_error(
        '`metric_names_map` must map every metric name of the Keras model, and only those.',
        'Key it by %s.' % sorted(ops), metric_names_map=rename)
  return {rename[k]: v for k, v in ops.items()}


def _train_op(source, clone, loss, updates):
  global_step = _v1.train.get_or_create_global_step()
  op, keras_optimizer = optimizers.train_op(source.optimizer, loss,
                                            backends.graph_variables(clone.trainable_weights),
                                            global_step, source.sharded)
  return tf.group(op, *updates), keras_optimizer


def make_model_fn(source):
  """The model_fn for `source` (see module doc)."""

  def model_fn(features, labels, mode, params=None):
    del params
    with backends.eager_classes_kept(source.backend, source.model):
      return _model_spec(source, features, labels, mode)

  return model_fn


def _model_spec(source, features, labels, mode):
  """The spec of one model_fn call."""
  features, weights = io.split_sample_weights(features)
  clone, outputs, predictions, updates = _forward(source, features, mode)
  export_outputs = _export_outputs(source, predictions)
  if mode == ModeKeys.PREDICT:
    return _spec(source, clone, mode, predictions=predictions,
                 export_outputs=export_outputs)
  weights = io.sample_weights_for(weights, source.output_names)
  loss, losses, targets = _loss(source, clone, labels, outputs, weights)
  train_op = keras_optimizer = None
  if mode == ModeKeys.TRAIN:
    train_op, keras_optimizer = _train_op(source, clone, loss, updates)
  metrics = _metrics(source, mode, losses, targets, outputs, weights)
  return _spec(source, clone, mode, predictions=predictions, loss=loss, train_op=train_op,
               metrics=metrics, export_outputs=export_outputs, optimizer=keras_optimizer)


def _metrics(source, mode, losses, targets, outputs, weights):
  """One device: the metric ops; sharded: an `eval_metrics` pair over every shard's rows.  In
  TRAIN mode too, as the original (training never runs them; a TRAIN export's signature holds
  them)."""
  if mode == ModeKeys.PREDICT:
    return None
  if not source.sharded:
    return metric_ops(source, losses, targets, outputs, weights)
  tensors = {}
  for i in range(len(source.output_names)):
    tensors['target_%d' % i], tensors['output_%d' % i] = targets[i], outputs[i]
    if weights[i] is not None:
      tensors['weight_%d' % i] = weights[i]

  def metric_fn(**rows):
    count = len(source.output_names)
    return metric_ops(source, losses, [rows['target_%d' % i] for i in range(count)],
                      [rows['output_%d' % i] for i in range(count)],
                      [rows.get('weight_%d' % i) for i in range(count)])

  return (metric_fn, tensors)


def _spec(source, clone, mode, predictions, export_outputs, loss=None, train_op=None,
          metrics=None, optimizer=None):
  if source.sharded:
    return specs.TPUEstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op,
                                  eval_metrics=metrics, export_outputs=export_outputs)
  scaffold = None
  if source.object_checkpoint:
    scaffold = checkpoints.object_scaffold(clone, _v1.train.get_or_create_global_step(),
                                           optimizer)
  return specs.EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op,
                             eval_metric_ops=metrics, export_outputs=export_outputs,
                             scaffold=scaffold)
