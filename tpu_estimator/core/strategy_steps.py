"""Training and evaluation steps of an `Estimator` with a strategy in its RunConfig
(`train_distribute`, `eval_distribute`; also a `TPUEstimator` call that is not sharded,
`use_tpu=False`, whose `TPUEstimatorSpec` becomes its `as_estimator_spec()` in each replica, as
the original's CPU path made it), with the original's semantics.

`input_fn` returns per-replica batches (layout._strategy_input); one `session.run` gives each
replica its own consecutive element and calls `model_fn` once per replica, at the top of the
graph (no device loop: hooks, summaries and `eval_metric_ops` behave as with one device), through
the same `Replicas.run` as TPUEstimator's shards.  Training: v1 optimizers average the replicas'
gradients (the strategy's Estimator loss scaling); the reported loss is the replicas' mean when an
optimizer scaled it, else their sum, as the original.  Evaluation: `eval_metric_ops` are made in
each replica and aggregated by their strategy-aware variables (tf.compat.v1.metrics sum their
replicas' totals); `loss` is the mean of the replicas' batch losses, as on one device.
"""
import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.core import model_fn as model_fn_lib
from tpu_estimator.core import steps
from tpu_estimator.distribute import gather
from tpu_estimator.hooks import run_control as hooks_lib
from tpu_estimator.specs import ModeKeys
from tpu_estimator.specs import TPUEstimatorSpec

_v1 = tf.compat.v1


def _replica_specs(plan, model_fn, inputs, mode, outputs_of):
  """(outputs per replica, the first replica's spec): `model_fn` on every replica's input,
  `outputs_of(spec)` the tensors each replica returns."""
  specs = []

  def replica_fn(features, labels):
    spec = model_fn_lib.call_model_fn(model_fn, features, labels, mode, plan.model_params,
                                      plan.config, allow_tpu_spec=plan.allow_tpu_spec)
    if isinstance(spec, TPUEstimatorSpec):  # TPUEstimator(use_tpu=False), as the original
      spec = spec.as_estimator_spec()
    specs.append(spec)
    return outputs_of(spec)

  outs = gather.per_replica(plan.replicas, replica_fn, inputs)
  return outs, specs[0]


def build_train(plan, model_fn, host_input, global_step):
  inputs = host_input.next_replica_inputs()
  graph = _v1.get_default_graph()
  start = len(graph.get_operations())

  def outputs_of(spec):
    with tf.control_dependencies([spec.train_op]):
      return tf.identity(tf.cast(spec.loss, tf.float32))

  losses, spec = _replica_specs(plan, model_fn, inputs, ModeKeys.TRAIN, outputs_of)
  steps.global_step_reads_first(graph.get_operations()[start:], global_step,
                                _v1.get_collection(_tf_internals.GLOBAL_STEP_READ_KEY))
  if _tf_internals.loss_scaled_by_optimizer(graph):
    loss = gather.mean_loss(losses)
  else:
    loss = tf.add_n(losses)
  with tf.control_dependencies([loss]):
    step_after = tf.identity(plan.replicas.primary(global_step).read_value())
  return steps.TrainStep(scaffold=spec.scaffold, hooks=[],
                         spec_hooks=list(spec.training_hooks),
                         chief_hooks=list(spec.training_chief_hooks), loss=loss,
                         train_op=tf.group(losses), global_step=step_after)


def build_eval(plan, model_fn, host_input, num_steps):
  eval_step = steps.get_or_create_eval_step()
  inputs = host_input.next_replica_inputs_first_required()

  def outputs_of(spec):
    metrics = dict(spec.eval_metric_ops)
    with tf.control_dependencies([m[1] for m in metrics.values()]):
      loss = tf.identity(tf.cast(spec.loss, tf.float32))
    return loss, {name: m[0] for name, m in metrics.items()}

  outs, spec = _replica_specs(plan, model_fn, inputs, ModeKeys.EVAL, outputs_of)
  present = [tf.cast(v[2], tf.int64) > 0 for v in inputs]
  losses = tf.stack([tf.where(here, o[0], 0.0) for o, here in zip(outs, present)])
  loss_metric = _v1.metrics.mean(losses, weights=tf.cast(tf.stack(present), tf.float32))
  updated = tf.group([o[0] for o in outs])
  metrics = {name: (value, updated) for name, value in outs[0][1].items()}
  update, values = steps.finish_metrics(metrics, loss_metric, eval_step, 1)
  return steps.EvalStep(scaffold=spec.scaffold,
                        hooks=[hooks_lib.StopAfterNEvalsHook(num_steps)],
                        spec_hooks=list(spec.evaluation_hooks), chief_hooks=[],
                        update=update, values=values)
