"""Per-mode step builders: what one `session.run` computes for train, evaluate and predict.

Each builder is called inside a fresh `tf.Graph` and returns a `Built` of its mode (`TrainStep`,
`EvalStep`, `PredictStep`): the tensors to fetch,
the hooks the graph needs and the scaffold.  On one device the graph is the original
Estimator's (`model_fn` called once on the input batch).  Sharded, `model_fn` runs once per
replica on its shard, its outputs meet on the host as distribute/gather.py says (losses
averaged, `eval_metrics`/`host_call`/predictions concatenated, padding rows dropped), and
training runs inside a device loop.
"""
import dataclasses

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.checkpoints import scaffolds
from tpu_estimator.core import host_calls
from tpu_estimator.core import model_fn as model_fn_lib
from tpu_estimator.core import step_metrics
from tpu_estimator.core import variable_writes
from tpu_estimator.distribute import device_loop
from tpu_estimator.distribute import gather
from tpu_estimator.distribute import replica_collections
from tpu_estimator.distribute import xla
from tpu_estimator import errors
from tpu_estimator.hooks import loop_tensors
from tpu_estimator.hooks import run_control as hooks_lib
from tpu_estimator import specs
from tpu_estimator.specs import ModeKeys
from tpu_estimator.updates import accumulation
from tpu_estimator.updates import cpu_updates

_v1 = tf.compat.v1
LOSS_METRIC_KEY = 'loss'

@dataclasses.dataclass(frozen=True)
class Built:
  """What a step builder returns, in every mode: `hooks` the graph itself needs (loop control,
  evaluation steps), `scaffold`, `spec_hooks` (the spec's training/evaluation/prediction hooks),
  `chief_hooks` (the spec's training chief hooks)."""
  scaffold: object
  hooks: list
  spec_hooks: list
  chief_hooks: list


@dataclasses.dataclass(frozen=True)
class TrainStep(Built):
  """Training: fetch `loss` (and run `train_op`, None in a device loop, whose run does the
  update); `global_step` is read after the step (the loop) ran.  In a device loop,
  `iterations` is the loop length fed per run and `steps_run` the steps it ran.
  `compiles_step`: the session is to compile the step with XLA auto-clustering (the plan asked
  for XLA and every op of the built step has a kernel: `xla.step_compiles`); `compiled_loop`:
  the loop is one XLA computation (compiled at its first run)."""
  loss: object
  train_op: object
  global_step: object
  iterations: object = None
  steps_run: object = None
  compiles_step: bool = False
  compiled_loop: bool = False


@dataclasses.dataclass(frozen=True)
class EvalStep(Built):
  """Evaluation: run `update` until the input ends; `values` are the metric values (name →
  tensor) read at the end.  `compiled_loop`: the loop is one XLA computation (compiled at its
  first run)."""
  update: object
  values: dict
  compiled_loop: bool = False


@dataclasses.dataclass(frozen=True)
class PredictStep(Built):
  """Prediction: fetch `predictions`; `batch_rows` (a device loop's rows per batch, None on
  one device) splits them back into the input's batches.  `compiled_loop`: as `EvalStep`'s."""
  predictions: object
  batch_rows: object = None
  compiled_loop: bool = False


def _call(plan, model_fn, features, labels, mode):
  return model_fn_lib.call_model_fn(model_fn, features, labels, mode, plan.model_params,
                                    plan.config, allow_tpu_spec=plan.allow_tpu_spec)


def _replica_spec(plan, model_fn, features, labels, mode, captured):
  """`model_fn` on one replica, as a checked TPUEstimatorSpec; the first is kept in
  `captured['spec']` for the host side (host functions, hooks, scaffold_fn)."""
  # As one trace on a TPU: its own losses and update ops, and the TPU context's shard count
  # (read by TPU-era programs: SimCLR's cross-replica batch norm and contrastive loss), but
  # not with an embedding_config_spec: its TPU embedding columns then look up as on a CPU.
  shards = plan.replicas.num_replicas if plan.tpu_embedding is None else None
  with replica_collections.own_collections(), _tf_internals.tpu_shard_context(shards):
    spec = model_fn_lib.tpu_spec_parts(_call(plan, model_fn, features, labels, mode))
  model_fn_lib.check_tpu_spec(spec, mode)
  captured.setdefault('spec', spec)
  captured.setdefault('body_graph', _v1.get_default_graph())
  return spec


def scaffold_of(spec):
  """The Scaffold of either spec type; `scaffold_fn` is called here, on the host."""
  if isinstance(spec, specs.TPUEstimatorSpec):
    with scaffolds.whole_variables():
      scaffold = spec.scaffold_fn() if spec.scaffold_fn else None
    if scaffold is not None and not isinstance(scaffold, _v1.train.Scaffold):
      raise errors.type_error('`scaffold_fn` must return a tf.compat.v1.train.Scaffold.',
                              returned=scaffold)
    return scaffold or _v1.train.Scaffold()
  return spec.scaffold


def _loop_scaffold(captured):
  """The Scaffold of a model_fn that ran in a loop body, its Saver usable by the session."""
  return scaffolds.for_session(scaffold_of(captured['spec']), captured.get('body_graph'))


def _writer(plan):
  return host_calls.SummaryWriter(plan.model_dir)


def _drop_loop_summaries():
  """Summaries model_fn made inside a device loop cannot be fetched from outside it: they are
  dropped, as the original TPUEstimator dropped model_fn summaries on TPU (host_call writes
  summaries from a sharded model_fn)."""
  graph = _v1.get_default_graph()
  summaries = graph.get_collection_ref(_v1.GraphKeys.SUMMARIES)
  summaries[:] = [s for s in summaries if getattr(s, 'graph', graph) is graph]


def get_or_create_eval_step():
  existing = _v1.get_collection(_v1.GraphKeys.EVAL_STEP)
  if existing:
    return existing[0]
  return _v1.get_variable(
      'eval_step', shape=[], dtype=tf.int64, initializer=tf.zeros_initializer(),
      trainable=False,
      collections=[_v1.GraphKeys.LOCAL_VARIABLES, _v1.GraphKeys.EVAL_STEP])


# ---------------------------------------------------------------------------------------------
# Training

def build_train(plan, model_fn, host_input, global_step):
  if plan.loop:
    return _build_train_loop(plan, model_fn, host_input, global_step)
  if accumulation.steps_of(plan.config) > 1:
    raise errors.value_error(
        'TPUConfig.gradient_accumulation_steps > 1 needs the device loop of use_tpu=True.',
        'Pass TPUEstimator(use_tpu=True) (TPUConfig(num_shards=1) for one device), or '
        'gradient_accumulation_steps=1.',
        gradient_accumulation_steps=accumulation.steps_of(plan.config), use_tpu=False)
  features, labels = host_input.next_batch()
  start = len(_v1.get_default_graph().get_operations())
  spec = _call(plan, model_fn, features, labels, ModeKeys.TRAIN)
  # The global-step read TensorFlow's hooks fetch as "the step before this run" must happen
  # before the step's update (unordered, a loaded machine sometimes ran it after, and hooks
  # acted one step late); so must model_fn's own reads, as in the device loop.
  global_step_reads_first(_v1.get_default_graph().get_operations()[start:], global_step,
                           _v1.get_collection(_tf_internals.GLOBAL_STEP_READ_KEY))
  spec_hooks, own_hooks = list(spec.training_hooks), []
  if isinstance(spec, specs.TPUEstimatorSpec):
    model_fn_lib.check_tpu_spec(spec, ModeKeys.TRAIN)
    loss = specs.check_loss(spec.loss, ModeKeys.TRAIN)
    if spec.host_call is not None and plan.config.is_chief:
      writer = _writer(plan)
      op = host_calls.host_call_op(spec.host_call, writer, global_step.read_value(),
                                   plan.host_call_every_n)
      own_hooks = [host_calls.HostCallHook(op)]
    train_op, chief_hooks = spec.train_op, []
  else:
    loss, train_op, chief_hooks = spec.loss, spec.train_op, list(spec.training_chief_hooks)
  scaffold = scaffold_of(spec)
  with tf.control_dependencies([train_op]):  # the step this run ended at
    step_after = tf.identity(global_step.read_value())
  return TrainStep(scaffold=scaffold, hooks=own_hooks, spec_hooks=spec_hooks,
                   chief_hooks=chief_hooks,
                   loss=loss, train_op=train_op, global_step=step_after)


def _build_train_loop(plan, model_fn, host_input, global_step):
  captured = {}

  def replica_step(features, labels):
    spec = _replica_spec(plan, model_fn, features, labels, ModeKeys.TRAIN, captured)
    loss = specs.check_loss(spec.loss, ModeKeys.TRAIN)
    with tf.control_dependencies([spec.train_op]):
      loss = tf.identity(loss)
    host_tensors = spec.host_call[1] if spec.host_call is not None else ()
    return loss, host_tensors

  whole = xla.whole_loop(plan.xla, host_input.ungrouped)

  def run_step(values):
    outs, ops = _recording(captured,
                           lambda: gather.per_replica(plan.replicas, replica_step, values))
    global_step_reads_first(ops, global_step)
    if whole:
      _check_no_stray_writes(ops, outs, _TRAIN_UNUSED)
    loss = gather.mean_loss([o[0] for o in outs])
    host_call = captured['spec'].host_call
    if host_call is not None and plan.config.is_chief:  # only the chief writes summaries
      if plan.sharded:
        gather.check_batch_major('host_call', outs[0][1])
      tensors = gather.concat_replicas([o[1] for o in outs])
      with tf.control_dependencies([loss]):
        # The step this update was computed at (what model_fn read as the global step).
        step = plan.replicas.primary(global_step).read_value() - 1
      if whole:  # leaves the computation, for the host to run host_call on after the loop
        xla.check_outputs((step, tensors))
        return loss, (step, tensors)
      if 'writer' not in captured:
        captured['writer'] = _writer(plan)
      op = host_calls.host_call_op((host_call[0], tensors), captured['writer'], step,
                                   plan.host_call_every_n)
      with tf.control_dependencies([op]):
        loss = tf.identity(loss)
    return loss

  iterations, steps_run, loss, host = _loop(plan, host_input, run_step, replica_step,
                                            captured, whole)
  if host is not None:  # a compiled loop's host_call, run for each of its steps after it
    captured['writer'] = _writer(plan)
    loss = host_calls.after_loop(captured['spec'].host_call[0], host, steps_run,
                                 captured['writer'], plan.host_call_every_n, loss)
  _drop_loop_summaries()
  compiles_step = xla.step_compiles(plan.xla, whole, _v1.get_default_graph(),
                                    captured['step_ops'], plan.replicas)
  spec = captured['spec']
  scaffold = _loop_scaffold(captured)
  with tf.control_dependencies([steps_run, loss]):
    step_after = tf.identity(plan.replicas.primary(global_step).read_value())
  return TrainStep(scaffold=scaffold, hooks=[],
                   spec_hooks=loop_tensors.checked(spec.training_hooks, 'training_hooks'),
                   chief_hooks=[],
                   loss=loss, train_op=None, global_step=step_after, iterations=iterations,
                   steps_run=steps_run, compiles_step=compiles_step, compiled_loop=whole)


def _loop(plan, host_input, run_step, replica_step, captured, whole):
  """(iterations placeholder, steps_run, loss, host) of the training loop: compiled as a whole
  (`whole`; `host`: its steps' host_call tensors, see `device_loop.compiled_train_loop`), of
  accumulating steps, or of plain steps (`host` None)."""
  next_inputs = lambda _: host_input.next_replica_inputs()
  micro_batches = accumulation.steps_of(plan.config)
  if micro_batches > 1:  # each step reads its micro-batches itself (uncompiled: in order)
    run_step = _accumulating_step(plan, replica_step, micro_batches, captured, whole)
    next_inputs = lambda _: lambda i: host_input.next_replica_inputs()
  iterations = _v1.placeholder_with_default(tf.constant(1, tf.int64), [], name='iterations')
  # TensorFlow's hooks fetch the cached global-step read as "the step before this run": the
  # loop must not start before it was read.
  step_read = _v1.get_collection(_tf_internals.GLOBAL_STEP_READ_KEY)
  with plan.replicas.scope(), tf.control_dependencies(step_read), \
      cpu_updates.elementwise_adam(active=plan.replicas.on_cpu and not whole):
    if whole:
      steps_run, loss, host = device_loop.compiled_train_loop(
          host_input.next_group(), host_input.inputs_at, run_step, iterations,
          plan.replicas.devices[0], micro_batches)
    else:
      (steps_run, loss), host = device_loop.train_loop(next_inputs, run_step, iterations), None
  return iterations, steps_run, loss, host


_STEP_READS = frozenset(['ReadVariableOp', 'Identity'])  # resource and TF1 reference variables
_STEP_UPDATES = frozenset(['AssignAddVariableOp', 'AssignSubVariableOp', 'AssignVariableOp',
                           'AssignAdd', 'AssignSub', 'Assign'])


def _restores(op):
  """Whether `op` assigns a value read from a checkpoint (a Saver built in `model_fn`):
  restoring is no step's update, and must not wait on reads of what it restores."""
  value = op.inputs[1].op if len(op.inputs) > 1 else None
  while value is not None and value.type == 'Identity' and value.inputs:
    value = value.inputs[0].op
  return value is not None and value.type in ('RestoreV2', 'Restore', 'RestoreSlice')


def global_step_reads_first(ops, global_step, extra_reads=()):
  """Reads of the global step that `model_fn` made in one training step (e.g.
  `tf.reshape(global_step, [1])` for host_call, written after `minimize`) see the value before
  that step's update, as on a TPU, where a step reads its variables before it writes them.

  A TF1 graph (and a loop body built in one) has no automatic control dependencies, so such a
  read and the optimizer's increment were unordered: host_call summaries sometimes landed one
  step late.  Every read in `ops` that does not itself depend on the update is made a control input
  of it, as are `extra_reads` (tensors made before `ops`)."""
  values = getattr(global_step, 'values', None) or (global_step,)
  graph = ops[0].graph if ops else None
  outer = {v.op.outputs[0].name for v in values}  # the handle, or a TF1 variable's reference
  inner = set(outer)
  for external, internal in getattr(graph, 'captures', ()):
    if external.name in outer:
      inner.add(internal.name)
  on_step = lambda op: op.inputs and op.inputs[0].name in inner
  reads = [op for op in ops if op.type in _STEP_READS and on_step(op)]
  updates = [op for op in ops if op.type in _STEP_UPDATES and on_step(op) and
             not _restores(op)]
  if not (reads or extra_reads) or not updates:
    return
  after, stack = set(), list(updates)  # the ops that run after an update
  while stack:
    op = stack.pop()
    if op.name in after:
      continue
    after.add(op.name)
    stack.extend(c for t in op.outputs for c in t.consumers())
    stack.extend(_tf_internals.control_outputs(op))
  before = [op for op in reads if op.name not in after] + [t.op for t in extra_reads]
  for update in updates:
    _tf_internals.add_control_inputs(update, before)


def _recording(captured, fn):
  """(`fn()`, the ops it built), those ops also kept in `captured['step_ops']`: model_fn's
  step, which the XLA checks look at (not the input reads or host_call around it)."""
  graph = _v1.get_default_graph()
  start = len(graph.get_operations())
  result = fn()
  ops = graph.get_operations()[start:]
  captured.setdefault('step_ops', []).extend(ops)
  return result, ops


def _accumulating_step(plan, replica_step, micro_batches, captured, whole):
  """`run_step(micro)` of a loop whose steps are `micro_batches` micro-batches and one update
  (accumulation.py); `micro(i)` → the per-replica inputs of micro-batch i.  `whole`: the loop
  is compiled as a whole."""
  accumulating = accumulation.Accumulation(micro_batches)
  replicas = plan.replicas.local_replicas

  def micro_step(micro, i):
    inputs = micro(i)
    outs, ops = _recording(captured,
                           lambda: gather.per_replica(plan.replicas, replica_step, inputs))
    if whole:
      _check_no_stray_writes(ops, outs, _TRAIN_UNUSED)
    if captured['spec'].host_call is not None:
      raise errors.value_error(
          'host_call is not supported with TPUConfig.gradient_accumulation_steps > 1.',
          'Drop host_call or set gradient_accumulation_steps=1.',
          gradient_accumulation_steps=micro_batches)
    return gather.mean_loss([o[0] for o in outs])

  def apply_step(fn):
    return plan.replicas.run(lambda _: fn(), [(tf.constant(i),) for i in range(replicas)])

  return lambda micro: accumulating.step(lambda i: micro_step(micro, i), apply_step)


# ---------------------------------------------------------------------------------------------
# Evaluation

def metric_ops_one_device(spec, mode=ModeKeys.EVAL):
  """({name: (value, update_op)}, loss) of either spec type in `mode`, on one device: a
  TPUEstimatorSpec's `metric_fn` called on its tensors."""
  if isinstance(spec, specs.TPUEstimatorSpec):
    model_fn_lib.check_tpu_spec(spec, mode)
    metrics = {}
    if spec.eval_metrics is not None:
      metrics = specs.call_metric_fn(*spec.eval_metrics)
    loss = specs.check_loss(spec.loss, mode)
    return metrics, loss
  return dict(spec.eval_metric_ops), spec.loss


def finish_metrics(metrics, loss_metric, eval_step, counted):
  if LOSS_METRIC_KEY in metrics:
    raise errors.value_error(
        'Metric with name "loss" is not allowed, because Estimator already defines a default '
        'metric with the same name.', 'Rename your metric.', metrics=sorted(metrics))
  metrics[LOSS_METRIC_KEY] = loss_metric
  update = tf.group(*[m[1] for m in metrics.values()] + [eval_step.assign_add(counted)])
  # Sorted by name, as the original's results were (the estimator adds global_step last).
  values = {name: metrics[name][0] for name in sorted(metrics)}
  with tf.control_dependencies([update]):
    update = tf.identity(eval_step.read_value())  # batches evaluated so far, after this one
  return update, values


def build_eval(plan, model_fn, host_input, num_steps):
  """Evaluation: one batch per `session.run` on one device (the original's graph); sharded,
  up to `iterations_per_loop` global batches per `session.run` in a collecting device loop,
  `metric_fn`'s update run on the host once per step over that step's rows."""
  eval_step = get_or_create_eval_step()
  if not plan.sharded:
    features, labels = host_input.next_batch()
    spec = _call(plan, model_fn, features, labels, ModeKeys.EVAL)
    metrics, loss = metric_ops_one_device(spec)
    update, values = finish_metrics(metrics, _v1.metrics.mean(loss), eval_step, 1)
    return EvalStep(scaffold=scaffold_of(spec), hooks=[hooks_lib.StopAfterNEvalsHook(num_steps)],
                    spec_hooks=list(spec.evaluation_hooks), chief_hooks=[], update=update,
                    values=values)
  captured = {}

  def replica_step(features, labels):
    spec = _replica_spec(plan, model_fn, features, labels, ModeKeys.EVAL, captured)
    loss = specs.check_loss(spec.loss, ModeKeys.EVAL)
    return loss, (spec.eval_metrics[1] if spec.eval_metrics is not None else ())

  def outputs(inputs):
    outs = gather.per_replica(plan.replicas, replica_step, inputs)
    loss, rows = gather.weighted_loss([o[0] for o in outs], [v[2] for v in inputs])
    if captured['spec'].eval_metrics is not None:
      gather.check_batch_major('eval_metrics', outs[0][1])
    captured['static_sizes'] = step_metrics.StaticSizes([o[1] for o in outs],
                                                        host_input.whole_static_steps)
    tensors = gather.concat_replicas(gather.real_replicas([o[1] for o in outs],
                                                          [v[2] for v in inputs]))
    return (tensors, tf.reshape(loss, [1]), tf.reshape(rows, [1]),
            step_metrics.step_sizes(tensors))

  iterations = _v1.placeholder_with_default(tf.constant(1, tf.int64), [], name='iterations')
  (tensors, losses, rows, sizes), _, more = _collect(plan, host_input, outputs, iterations,
                                                     captured)
  spec = captured['spec']
  metrics = {}
  if spec.eval_metrics is not None:  # once per step, as the original's host (step_metrics)
    metrics = step_metrics.per_step(spec.eval_metrics[0], tensors, sizes, rows,
                                    captured['static_sizes'])
  # The mean over the batches that had rows.  (Weights of dynamic shape would make
  # metrics.mean build a conditional shape assertion: functions to trace and instantiate.)
  batch_losses = tf.gather_nd(losses, tf.where(rows > 0))
  counted = tf.size(batch_losses, out_type=tf.int64)
  loss_metric = _v1.metrics.mean(batch_losses)
  update, values = finish_metrics(metrics, loss_metric, eval_step, counted)
  loop_hook = hooks_lib.CollectLoopHook(iterations, update, more, plan.ipl, num_steps)
  return EvalStep(scaffold=_loop_scaffold(captured), hooks=[loop_hook],
                  spec_hooks=loop_tensors.checked(spec.evaluation_hooks, 'evaluation_hooks'),
                  chief_hooks=[], update=update,
                  values=values, compiled_loop=captured['compiled'])


def _collect(plan, host_input, outputs, iterations, captured):
  """(outputs, steps_run, more_input) of an evaluation/prediction loop running
  `outputs(inputs)` on each batch's per-replica inputs, up to `iterations` batches per run:
  compiled as one XLA computation where the plan asks for it and the input and model allow it
  (`xla.NotCompilable` otherwise, raised once model_fn ran), else `device_loop.collect_loop`.
  `captured['compiled']` says which.  The compiled loop reads its input a group at a time,
  and the end of the input ends the call (OutOfRangeError, as one device's loop)."""
  whole = xla.whole_collect_loop(plan, host_input.ungrouped)
  captured['compiled'] = whole
  with plan.replicas.scope():  # variables model_fn creates in any mode (slots too) mirrored
    if whole:
      result, steps_run = device_loop.compiled_collect_loop(
          host_input.next_run(), host_input.inputs_at,
          lambda inputs: _compilable_outputs(captured, lambda: outputs(inputs)), iterations,
          plan.replicas.devices[0])
      more = tf.constant(True)
      xla.check_compilable(plan.xla, _v1.get_default_graph(), captured['step_ops'],
                           plan.replicas)
    else:
      def step():
        has_value, inputs = host_input.next_replica_inputs_or_empty()
        return has_value, outputs(inputs)
      result, steps_run, more = device_loop.collect_loop(iterations, step)
  _drop_loop_summaries()
  return result, steps_run, more


def _compilable_outputs(captured, fn):
  """`fn()`'s outputs, its ops recorded (`_recording`); `xla.NotCompilable` where an output
  cannot leave a compiled computation (a string)."""
  result, ops = _recording(captured, fn)
  xla.check_outputs(result)
  _check_no_stray_writes(ops, result, 'no output of its step needs')
  return result


_TRAIN_UNUSED = 'neither its loss nor its train_op needs'


def _check_no_stray_writes(operations, outputs, unused):
  """Raises `xla.NotCompilable` where `operations` (model_fn's step) update variables that
  `outputs` do not need (`unused` says so in the reason): uncompiled, TensorFlow never runs
  them, nor did the original (an optimizer built in every mode, say); a compiled loop would
  run them at every step (core/variable_writes.py)."""
  stray = variable_writes.stray(operations, outputs)
  if stray:
    raise xla.NotCompilable(
        'model_fn builds variable updates (%s) that %s: compiled, they would run at every '
        'step' % (', '.join(stray), unused), model=True)


# ---------------------------------------------------------------------------------------------
# Prediction

def build_predict(plan, model_fn, host_input):
  """Prediction: one batch per `session.run` on one device; sharded, up to
  `iterations_per_loop` global batches per `session.run`, their rows gathered on the host."""
  # model_fn gets labels=None in PREDICT even when input_fn returns labels, as the original
  # gave (a model_fn without a labels argument predicts from a training input_fn).
  if not plan.sharded:
    features, _ = host_input.next_batch()
    spec = _call(plan, model_fn, features, None, ModeKeys.PREDICT)
    if isinstance(spec, specs.TPUEstimatorSpec):
      model_fn_lib.check_tpu_spec(spec, ModeKeys.PREDICT)
    return PredictStep(scaffold=scaffold_of(spec), hooks=[],
                       spec_hooks=list(spec.prediction_hooks), chief_hooks=[],
                       predictions=spec.predictions)
  captured = {}

  def replica_step(features, labels):
    del labels
    spec = _replica_spec(plan, model_fn, features, None, ModeKeys.PREDICT, captured)
    return gather.checked_predictions(spec.predictions, host_input.fed_rows(features))

  def outputs(inputs):
    outs = gather.per_replica(plan.replicas, replica_step, inputs)
    rows = gather.total_rows([v[2] for v in inputs])
    predictions = gather.concat_replicas(gather.real_rows(outs, [v[2] for v in inputs]))
    return predictions, tf.reshape(rows, [1])

  iterations = _v1.placeholder_with_default(tf.constant(1, tf.int64), [], name='iterations')
  (predictions, rows), steps_run, more = _collect(plan, host_input, outputs, iterations,
                                                  captured)
  spec = captured['spec']
  loop_hook = hooks_lib.CollectLoopHook(iterations, steps_run, more, plan.ipl)
  return PredictStep(scaffold=_loop_scaffold(captured), hooks=[loop_hook],
                     spec_hooks=loop_tensors.checked(spec.prediction_hooks,
                                                     'prediction_hooks'),
                     chief_hooks=[],
                     predictions=predictions, batch_rows=rows,
                     compiled_loop=captured['compiled'])
