"""How one call is laid out: which replicas, what `params['batch_size']` `input_fn` and
`model_fn` see, how `input_fn` is called and whether training runs in a device loop.

`OneDevice` is the Estimator's layout: one device, or the replicas of the strategy its
RunConfig names for the call's mode (`train_distribute`, `eval_distribute`).  `Sharded` is
TPUEstimator's: with `use_tpu=False` it
is one device with the global batch (the original's CPU/GPU semantics); with `use_tpu=True`
the global batch is split over the replicas.
"""
import copy
import dataclasses
import logging

import tensorflow as tf

from tpu_estimator.config import InputPipelineConfig
from tpu_estimator.config import parse_iterations_per_loop
from tpu_estimator.distribute import host_input as host_input_lib
from tpu_estimator.distribute import input_fn as input_fn_lib
from tpu_estimator.distribute import parameter_servers
from tpu_estimator.distribute import replication
from tpu_estimator.distribute import xla as xla_lib
from tpu_estimator import errors
from tpu_estimator.specs import ModeKeys
from tpu_estimator.updates import accumulation

_log = logging.getLogger('tpu_estimator')
BATCH_SIZE_KEY = 'batch_size'
CONTEXT_KEY = 'context'
RESERVED_PARAMS_KEYS = (BATCH_SIZE_KEY, CONTEXT_KEY)


def is_hparams(params):
  """Whether `params` is an HParams-like object (`tf.contrib.training.HParams`), which the
  original TPUEstimator accepted besides a dict and set its keys in with `set_hparam`."""
  return hasattr(params, 'set_hparam')


def set_param(params, key, value):
  """Sets `key` in `params` (a private copy): a dict's item, or an HParams' hyperparameter."""
  if not is_hparams(params):
    params[key] = value
  elif key in params:
    params.set_hparam(key, value)
  else:
    params.add_hparam(key, value)


@dataclasses.dataclass(frozen=True)
class Plan:
  """Everything fixed about one `train`/`evaluate`/`predict` call, decided once by the layout
  (`layout.plan(mode, config)`) before anything is built; the rest of the call reads it.

  `replicas`: the devices (replication.Replicas).  `sharded`: per-replica `model_fn` calls and
  host-side functions (TPUEstimator with use_tpu=True).  `loop`/`ipl`: training in a device loop
  of `ipl` (parsed iterations_per_loop).  `input_batch`/`model_batch`: `params['batch_size']` of
  `input_fn` and of `model_fn` (None when not set).  `input_mode`: how `input_fn` is called.
  `model_params`: the params `model_fn` gets (a private copy).  `config`: the estimator's
  RunConfig (model_dir filled in), `model_dir` its model_dir.  `xla`: what XLA is to compile
  (`xla.intent`): 'loop', the training loop as one computation, its input read a loop at a time
  (`TPUConfig(xla=True)` on one replica); 'auto', the same where it can be, else nothing
  (`xla=None`); 'step', the training step alone; 'off'.  Whether the
  step compiles is known once it is built (`xla.step_compiles`).  `distribute`: the Estimator
  with a strategy from its RunConfig (`train_distribute`/`eval_distribute`): `model_fn` runs
  once per replica on consecutive elements of the one dataset `input_fn` returns, one step per
  `session.run` (core/strategy_steps.py).  `tpu_embedding`: TPUEstimator's
  `embedding_config_spec` (its columns look up as on a CPU: distribute/tpu_embedding.py)."""
  mode: str
  replicas: object
  sharded: bool
  loop: bool
  ipl: object
  input_batch: object
  model_batch: object
  input_mode: object
  model_params: dict
  allow_tpu_spec: bool
  host_call_every_n: int
  config: object
  xla: str = xla_lib.OFF
  distribute: bool = False
  tpu_embedding: object = None

  @property
  def model_dir(self):
    return self.config.model_dir


def strategy_for(mode, config):
  """The strategy the Estimator's RunConfig names for `mode`, or None: `train_distribute` for
  training, `eval_distribute` for evaluation; prediction and export run on one device, as in
  the original."""
  name = {ModeKeys.TRAIN: 'train_distribute', ModeKeys.EVAL: 'eval_distribute'}.get(mode)
  return getattr(config, name, None) if name else None


def one_device(mode, config):
  """The replicas of a call without sharding or a strategy: one device, whose training
  variables live on the ps tasks when `config` is a task of a parameter-server cluster."""
  if mode == ModeKeys.TRAIN and replication.with_parameter_servers(config):
    return parameter_servers.ParameterServerReplicas(config)
  if mode == ModeKeys.TRAIN and replication.is_multi_worker(config):
    # Each worker would train a copy of its own that nobody saves (the original's workers
    # waited for ever for the chief to initialize variables it never shared).
    raise errors.value_error(
        'This TF_CONFIG cluster has several training tasks but no ps tasks and no strategy '
        'to share the variables.', 'Add ps tasks (parameter-server training), or pass '
        'RunConfig(train_distribute=tf.distribute.MultiWorkerMirroredStrategy()) (or use '
        'TPUEstimator(use_tpu=True)) for all-reduce training.',
        num_worker_replicas=config.num_worker_replicas, task_type=config.task_type)
  return replication.single_device()


def replicas_for(strategy, mode, config):
  """The replicas of a call that is not sharded: `strategy`'s (the RunConfig's for `mode`),
  or one device."""
  if strategy is None:
    return one_device(mode, config)
  if replication.is_parameter_server_strategy(strategy) and \
      replication.with_parameter_servers(config):
    return parameter_servers.ParameterServerReplicas(config, strategy)
  return replication.of_strategy(strategy, config)


class OneDevice:
  """The plain Estimator: one device (or a RunConfig strategy's replicas), `params` passed as
  given, one step per `session.run`."""
  allow_tpu_spec = False
  resource_global_step = False  # the global step's kind follows the variable scope
  host_call_every_n = 1

  def __init__(self, params):
    self.params = params

  def plan(self, mode, config, compile_loop=True):
    """The `Plan` of one call in `mode` with the estimator's `config` (`compile_loop=False`:
    never compile a training loop as a whole)."""
    del compile_loop
    strategy = strategy_for(mode, config)
    replicas = replicas_for(strategy, mode, config)
    return Plan(mode=mode, replicas=replicas, sharded=False, loop=False,
                ipl=None, input_batch=None, model_batch=None,
                input_mode=InputPipelineConfig.PER_HOST_V1,
                model_params=copy.deepcopy(self.params), allow_tpu_spec=self.allow_tpu_spec,
                host_call_every_n=self.host_call_every_n, config=config,
                distribute=strategy is not None)

  def host_input(self, input_fn, plan):
    if plan.distribute:
      return _strategy_input(input_fn, plan, copy.deepcopy(self.params))
    result = input_fn_lib.call_input_fn(input_fn, plan.mode, copy.deepcopy(self.params),
                                        plan.config)
    return host_input_lib.HostInput([result], InputPipelineConfig.PER_HOST_V1, 1)

  def examples_per_step(self):
    """The global training batch, when known (for `examples/sec`)."""
    return None

  def export_targets(self):
    """(tags, params) of each MetaGraph `export_saved_model` writes."""
    return [([tf.saved_model.SERVING], copy.deepcopy(self.params))]

  def supervised_export_params(self):
    """`model_fn`'s params in the TRAIN or EVAL graph of an export (one, for the CPU)."""
    return copy.deepcopy(self.params)


class InputFnContext:
  """`params['context']` for a TPUEstimator `input_fn`: where this call's input goes.  A
  worker of a cluster is a host (TPU programs shard their files by `num_hosts` and
  `current_host`)."""

  def __init__(self, replicas, invocation_index, num_invocations, input_context,
               replicas_fed=1):
    self.num_replicas = replicas.num_replicas
    self.num_hosts = replicas.num_workers
    self.current_host = replicas.worker_index
    self.num_of_replicas_per_host = replicas.local_replicas
    self.input_context = input_context
    self._invocation = (invocation_index, num_invocations, replicas_fed)

  def current_input_fn_deployment(self):
    """(host device, invocation index, number of invocations, replicas this invocation's
    input feeds), as the original (tensorflow/tpu's embedding sample unpacks all four)."""
    return ('/cpu:0',) + self._invocation


class ModelFnContext:
  """`params['context']` for a TPUEstimator `model_fn` whose call is sharded: the replicas it
  runs on.  Where the input goes is `input_fn`'s to ask, as the original said."""

  def __init__(self, replicas):
    self.num_replicas = replicas.num_replicas
    self.num_hosts = replicas.num_workers
    self.num_of_replicas_per_host = replicas.local_replicas

  @property
  def current_host(self):
    raise RuntimeError('params["context"].current_host is for input_fn: model_fn runs on '
                       'every replica. Read it in input_fn.')

  def current_input_fn_deployment(self):
    raise RuntimeError('params["context"].current_input_fn_deployment() is for input_fn. '
                       'Call it in input_fn.')


class Sharded(OneDevice):
  """TPUEstimator's layout over `replication.make_replicas(num_shards)`."""
  allow_tpu_spec = True
  # The original TPUEstimator made its global step a resource variable in every mode, also
  # with use_tpu=False under disable_v2_behavior(), where schedules read it unordered with
  # its increment (google-research/uda, BERT): a reference variable's read came after.
  resource_global_step = True

  def __init__(self, params, use_tpu, batch_sizes, tpu_config, batch_axis, eval_on_tpu,
               export_to_cpu=True, export_to_tpu=True, tpu_embedding=None):
    super().__init__(params)
    self.tpu_embedding = tpu_embedding  # the EmbeddingConfigSpec, or None
    self.export_to_cpu = export_to_cpu
    self.export_to_tpu = export_to_tpu
    self.use_tpu = use_tpu
    self.batch_sizes = batch_sizes  # {mode: global batch size or None}
    self.tpu_config = tpu_config
    self.batch_axis = batch_axis
    self.eval_on_tpu = eval_on_tpu
    self.host_call_every_n = tpu_config.experimental_host_call_every_n_steps
    if use_tpu and (tpu_config.num_cores_per_replica or 1) > 1:
      _log.info('TPUConfig(num_cores_per_replica=%d%s): a replica spanning TPU cores runs whole '
                'on one device here; num_shards counts the replicas, as on a TPU.',
                tpu_config.num_cores_per_replica, ', input_partition_dims=...' if
                tpu_config.input_partition_dims is not None else '')

  def plan(self, mode, config, compile_loop=True):
    sharded = self.use_tpu and (mode != ModeKeys.EVAL or self.eval_on_tpu)
    # Not sharded, a strategy in the RunConfig runs the call (the original's TPUEstimator was
    # an Estimator: use_tpu=False took its train_distribute, as google-research/bigbird does).
    strategy = None if sharded else strategy_for(mode, config)
    if not sharded:
      replicas = replicas_for(strategy, mode, config)
      input_batch = model_batch = self.batch_sizes.get(mode)
      input_mode, ipl = InputPipelineConfig.PER_HOST_V1, None
    else:
      replicas = self._replicas(mode, config)
      input_mode = self.tpu_config.input_mode
      input_batch, model_batch = self._batches(mode, replicas, input_mode)
      ipl = parse_iterations_per_loop(self.tpu_config.iterations_per_loop)
    params = copy.deepcopy(self.params)
    if model_batch is not None:
      set_param(params, BATCH_SIZE_KEY, model_batch)
    set_param(params, 'use_tpu', self.use_tpu)
    if sharded:  # model_fn's TPUContext, as the original gave it where it ran on TPU
      set_param(params, CONTEXT_KEY, ModelFnContext(replicas))
    loop = sharded and mode == ModeKeys.TRAIN
    if sharded and mode != ModeKeys.TRAIN:
      xla = xla_lib.collect_intent(config, mode, replicas, ipl, compile_loop)
    elif strategy is not None:
      xla = xla_lib.OFF  # as the Estimator's strategy path
    else:
      xla = xla_lib.intent(config, replicas, ipl, loop, compile_loop)
    if xla_lib.groups_input(xla) and input_mode in host_input_lib.ONE_ELEMENT_A_STEP:
      replicas = replicas.centralized()  # one computation runs every replica
    return Plan(mode=mode, replicas=replicas, sharded=sharded, loop=loop, ipl=ipl,
                input_batch=input_batch, model_batch=model_batch, input_mode=input_mode,
                model_params=params, allow_tpu_spec=self.allow_tpu_spec,
                host_call_every_n=self.host_call_every_n, config=config, xla=xla,
                distribute=strategy is not None, tpu_embedding=self.tpu_embedding)

  def _replicas(self, mode, config):
    if mode == ModeKeys.TRAIN:  # over every worker of a TF_CONFIG cluster, if there is one
      return replication.make_replicas(self.tpu_config.num_shards, config, multi_worker=True)
    # Evaluation and prediction run on this machine's devices, even in a cluster.
    local_only = replication.is_multi_worker(config)
    return replication.make_replicas(None if local_only else self.tpu_config.num_shards)

  def _global_batch(self, mode, replicas):
    size = self.batch_sizes.get(mode)
    name = {ModeKeys.TRAIN: 'train_batch_size', ModeKeys.EVAL: 'eval_batch_size',
            ModeKeys.PREDICT: 'predict_batch_size'}[mode]
    if size is None:
      raise errors.value_error(
          '`%s` must be set to %s with use_tpu=True: the batch is split over replicas.' %
          (name, {'train': 'train', 'eval': 'evaluate', 'infer': 'predict'}[mode]),
          'Pass TPUEstimator(%s=...).' % name, **{name: size})
    if size % replicas.num_replicas:
      raise errors.value_error(
          '`%s` must be divisible by the number of replicas.' % name,
          'Use a multiple of %d.' % replicas.num_replicas,
          **{name: size, 'num_replicas': replicas.num_replicas})
    return size

  def _batches(self, mode, replicas, input_mode):
    """(input_fn batch, model_fn batch) of a sharded call in `mode`."""
    size = self._global_batch(mode, replicas)
    per_replica = size // replicas.num_replicas
    if input_mode == InputPipelineConfig.BROADCAST:
      return size, size
    if input_mode == InputPipelineConfig.PER_HOST_V1:
      return size // replicas.num_workers, per_replica
    return per_replica, per_replica

  def examples_per_step(self):
    return self.batch_sizes.get(ModeKeys.TRAIN)

  def supervised_export_params(self):
    """As the original: the TRAIN or EVAL graph of an export is the CPU's (params['use_tpu']
    False, no batch size)."""
    params = copy.deepcopy(self.params)
    set_param(params, 'use_tpu', False)
    return params

  def export_targets(self):
    """`[serve]` (params['use_tpu'] False) and `[serve, tpu]` (params['use_tpu'] True: the
    model_fn chooses its TPU serving graph, as with export API V2)."""
    targets = []
    for wanted, tags, use_tpu in (
        (self.export_to_cpu, [tf.saved_model.SERVING], False),
        (self.export_to_tpu, [tf.saved_model.SERVING, tf.saved_model.TPU], True)):
      if wanted:
        params = copy.deepcopy(self.params)
        if self.batch_sizes.get(ModeKeys.PREDICT):
          set_param(params, BATCH_SIZE_KEY, self.batch_sizes[ModeKeys.PREDICT])
        set_param(params, 'use_tpu', use_tpu)
        targets.append((tags, params))
    return targets

  def _input_params(self, plan):
    """A private copy of `params` for one `input_fn` call, with its batch size."""
    params = copy.deepcopy(self.params)
    if plan.input_batch is not None:
      set_param(params, BATCH_SIZE_KEY, plan.input_batch)
    return params

  def host_input(self, input_fn, plan):
    if callable(input_fn) and 'params' not in input_fn_lib.fn_args(input_fn):
      raise errors.value_error(
          'TPUEstimator needs input_fn to take `params` (it passes params["batch_size"]).',
          'Define input_fn(params).', input_fn_args=list(input_fn_lib.fn_args(input_fn)))
    replicas = plan.replicas
    if plan.distribute:  # the RunConfig's strategy: a dataset of its replicas' batches
      return _strategy_input(input_fn, plan, self._input_params(plan))
    per_shard = plan.input_mode == InputPipelineConfig.PER_SHARD_V1
    calls = replicas.local_replicas if per_shard else 1
    pipelines = replicas.num_replicas if per_shard else replicas.num_workers
    fed = 1 if per_shard else replicas.num_replicas \
        if plan.input_mode == InputPipelineConfig.BROADCAST else replicas.local_replicas
    results = []
    for index in range(calls):
      params = self._input_params(plan)
      # Each worker (or each of its shards) reads its own part of the data.
      pipeline_id = replicas.worker_index * calls + index
      input_context = tf.distribute.InputContext(
          num_input_pipelines=pipelines, input_pipeline_id=pipeline_id,
          num_replicas_in_sync=replicas.num_replicas)
      set_param(params, CONTEXT_KEY, InputFnContext(replicas, pipeline_id, pipelines,
                                                    input_context, fed))
      results.append(input_fn_lib.call_input_fn(input_fn, plan.mode, params, plan.config,
                                                input_context=input_context))
    if not plan.sharded:
      return host_input_lib.HostInput(results, InputPipelineConfig.PER_HOST_V1, 1)
    return host_input_lib.HostInput(results, plan.input_mode, replicas.local_replicas,
                                    self.batch_axis, rows=plan.input_batch,
                                    uneven=plan.mode != ModeKeys.TRAIN,
                                    device=_input_device(plan),
                                    group=plan.ipl[1] if xla_lib.groups_input(plan.xla) else None,
                                    micro_batches=accumulation.steps_of(plan.config)
                                    if plan.mode == ModeKeys.TRAIN else 1)


def for_input(plan, host_input):
  """`plan` for what `input_fn` returned.  Tensors rather than a Dataset take one step a
  `session.run`: a device loop reads them once per run, so every step of a loop of
  `iterations_per_loop` would get the same batch (the original's infeed ran their enqueue op at
  every step: a new batch each)."""
  if plan.ipl is None or plan.ipl == ('count', 1) or not host_input.tensors_only:
    return plan
  tf.get_logger().info(
      'input_fn returned tensors, not a tf.data.Dataset: one step per session.run (a device '
      'loop of iterations_per_loop=%s steps would read them once). Return the Dataset for '
      'device loops.', plan.ipl[1])
  return dataclasses.replace(plan, ipl=('count', 1))


def _strategy_input(input_fn, plan, params):
  """The input of an Estimator call with a strategy, as the original read it: `input_fn` is
  called once per worker (with an `input_context` if it takes one) and returns a dataset of
  per-replica batches; each step gives consecutive elements to the replicas in order.  In
  evaluation the final elements are spread in order and a replica left without one gets an
  empty batch (the original stopped there, dropping them)."""
  replicas = plan.replicas
  context = tf.distribute.InputContext(
      num_input_pipelines=replicas.num_workers, input_pipeline_id=replicas.worker_index,
      num_replicas_in_sync=replicas.num_replicas)
  result = input_fn_lib.call_input_fn(input_fn, plan.mode, params, plan.config,
                                      input_context=context)
  if not isinstance(result, tf.data.Dataset):
    raise errors.type_error(
        'With RunConfig(%s=...) `input_fn` must return a tf.data.Dataset: its elements are '
        'the replicas\' batches.' % ('train_distribute' if plan.mode == ModeKeys.TRAIN else
                                    'eval_distribute'),
        'Return e.g. tf.data.Dataset.from_tensor_slices((x, y)).batch(per_replica_batch).',
        input_fn_returned=result)
  return host_input_lib.HostInput([result], InputPipelineConfig.PER_HOST_V2,
                                  replicas.local_replicas, uneven=plan.mode != ModeKeys.TRAIN,
                                  empty_stand_in=True)


def _input_device(plan):
  """Where a training device loop's input is prefetched to: its one GPU, if it has exactly
  one (with several, the host batch is split first; evaluation and prediction read optionals,
  which stay on the host)."""
  if plan.loop and plan.replicas.num_replicas == 1 and plan.replicas.on_gpu:
    return plan.replicas.devices[0]
  return None
