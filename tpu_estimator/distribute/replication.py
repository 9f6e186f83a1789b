"""Replicas: the one wrapper over `tf.distribute`.

`make_replicas` picks the devices: TPU cores (see below), else the local GPUs (`num_shards`
of them; more than the machine has are logical GPUs, see gpus.py), else `num_shards` logical CPU
devices (a session `device_count`), so the sharded path runs on any machine.  With one replica no strategy is built at all (it would only add overhead); with more,
a `MirroredStrategy` in graph mode mirrors the variables, runs the per-replica function once per
device (`call_for_each_replica`) and averages gradients: v1 optimizers see the loss scaled by
1/replicas (the strategy's Estimator loss scaling), so N replicas on a global batch B give the
update one device would on B.

The plain Estimator's `RunConfig(train_distribute=..., eval_distribute=...)` strategies run
through the same `Replicas` (`of_strategy`, checked by `check_strategies`): the user's strategy
instead of ours, a MultiWorkerMirroredStrategy over a TF_CONFIG cluster in
`MultiWorkerReplicas`.

TPU: this build has no access to TPU hardware to test on, so it does not drive TPU cores; when
TPU devices are visible it says so instead of silently using the CPU.
"""
import contextlib
import logging
import threading

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.distribute import gpus as gpus_lib
from tpu_estimator.distribute import replica_names
from tpu_estimator.distribute import xla as xla_lib
from tpu_estimator import errors
from tpu_estimator.keras3 import naming as keras_naming

_v1 = tf.compat.v1
_log = logging.getLogger('tpu_estimator')


class Replicas:
  """The devices one call runs on and how to run a function once per device.

  `num_replicas` counts every replica in sync (all workers); `devices` are this process's.
  """
  num_workers = 1
  worker_index = 0
  master = ''
  given_strategy = False
  logical_gpus = None  # logical GPUs per card, when the cards are split (gpus.py)
  central = False  # the variables on the first device only (`centralized`)

  def __init__(self, devices, kind, logical_gpus=None, strategy=None, central=False):
    self.devices = tuple(devices)
    self.kind = kind  # 'single', 'cpu', 'gpu' or 'multi_worker'
    self.logical_gpus = logical_gpus
    self.strategy = strategy  # the user's (of_strategy), else ours for several devices
    self.given_strategy = strategy is not None
    self.central = central
    self.read_per_replica = []  # names of variables made ON_READ in `run` (`centralized`)
    if central:  # the variables in one place, for one computation over every replica
      self.strategy = _v1.distribute.experimental.CentralStorageStrategy(
          compute_devices=list(self.devices), parameter_device=self.devices[0])
    elif strategy is None and len(self.devices) > 1:
      # NCCL does not reduce between logical GPUs of one card: reduce on one device there.
      reduce = tf.distribute.ReductionToOneDevice() if logical_gpus else None
      self.strategy = tf.distribute.MirroredStrategy(devices=list(self.devices),
                                                     cross_device_ops=reduce)
    if self.strategy is not None and not self.given_strategy:  # names as on one device
      _tf_internals.merge_in_callers_name_scope(self.strategy)

  @property
  def one_computation(self):
    """Whether one XLA computation can run every replica: logical CPU devices of this
    process (ours, not a user's strategy), whose variables can then all live on the first
    (`centralized`): XLA's CPU backend has no collectives, and a computation reaches only
    its own device's variables."""
    return self.kind == 'cpu' and not self.given_strategy and len(self.devices) > 1

  def centralized(self):
    """These replicas with their variables on the first device only (a CentralStorageStrategy
    instead of mirrored copies), for a loop compiled as one computation: each replica still
    runs model_fn on its share of the batch, and in training the optimizer still averages
    their gradients into one update.  Variables synchronized on read (a copy per replica, such as
    batch normalization's moving statistics or gradient accumulators) would be one variable
    shared by every replica here: `read_per_replica` names those `run` made, and the call
    is then built again on the usual replicas (`xla.central_build`)."""
    return Replicas(self.devices, self.kind, central=True) if self.one_computation else self

  @property
  def num_replicas(self):
    return self.strategy.num_replicas_in_sync if self.strategy else len(self.devices)

  @property
  def on_cpu(self):
    return all('cpu' in device.lower() for device in self.devices)

  @property
  def on_gpu(self):
    return all('gpu' in device.lower() for device in self.devices)

  @property
  def local_replicas(self):
    return len(self.devices)

  def scope(self):
    """Variables created here (global step, model variables) are mirrored on every replica."""
    return self.strategy.scope() if self.strategy else contextlib.nullcontext()

  def session_config(self, base=None, xla=False, rewrites=True):
    """`base` (the user's ConfigProto) plus what these replicas need; `xla`: with XLA
    auto-clustering, for a training step that compiles (`xla.step_compiles`).
    `rewrites=False` (an evaluation's or prediction's device loop): on this process's CPUs
    and without a `base`, no Grappler rewrites.  They made that loop at most ~5% faster and
    cost 0.04-0.07 s of every new graph's first call (design-decisions, "Speed of the device
    loop")."""
    config = _v1.ConfigProto()
    if base is not None:
      config.CopyFrom(base)
    else:
      config.allow_soft_placement = True
      if not rewrites and self.on_cpu and not self.master:
        config.graph_options.rewrite_options.disable_meta_optimizer = True
    if self.kind == 'cpu' and self.local_replicas > 1:  # logical CPU devices /cpu:0..N-1
      config.device_count['CPU'] = max(config.device_count.get('CPU', 1), _cpus_named(
          self.devices))
    if self.logical_gpus:
      gpus_lib.add_logical_gpus(config, self.logical_gpus)
    if xla:
      xla_lib.session_config(config)
    if self.given_strategy:  # as the user's strategy wants it (e.g. collective ops settings)
      config = self.strategy.update_config_proto(config)
    return config

  def run(self, fn, per_replica_args):
    """Calls `fn(*per_replica_args[i])` once per replica; returns the list of its results.

    With one replica this is a plain call.  With several, the calls run under the strategy's
    scope and replica contexts, so optimizers aggregate gradients and every variable created
    (model variables, optimizer slots, in any mode) is mirrored and shared.  The replicas run
    on threads of their own: the caller's Keras settings go with them, and each names its
    tf_keras objects as the first does (replica_names.py).
    """
    if self.strategy is None:
      return [fn(*per_replica_args[0])]
    values = _tf_internals.regroup([tuple(args) for args in per_replica_args])
    settings = keras_naming.thread_settings()
    numbering = replica_names.Numbering()

    def call(args):
      numbering.replica()
      with keras_naming.apply_settings(settings), self._watching_variables(), \
          _creators_in_init_scope():
        return fn(*args)

    try:
      with self.strategy.scope(), \
          _tf_internals.estimator_loss_scaling(self.strategy):
        # Not through autograph: model_fn runs as written, and its errors keep their messages.
        out = self.strategy.extended.call_for_each_replica(
            tf.autograph.experimental.do_not_convert(call), args=(values,))
    finally:
      numbering.close()
    return [_tf_internals.select_replica(i, out) for i in range(self.local_replicas)]

  def _watching_variables(self):
    """Where the replicas' variables are central: a scope noting those made ON_READ."""
    if not self.central:
      return contextlib.nullcontext()

    def creator(next_creator, **kwargs):
      if kwargs.get('synchronization') == tf.VariableSynchronization.ON_READ:
        self.read_per_replica.append(kwargs.get('name'))
      return next_creator(**kwargs)

    return tf.variable_creator_scope(creator)

  def primary(self, variable):
    """The first replica's copy of a (possibly mirrored) variable."""
    if self.strategy is None or not hasattr(variable, 'values'):
      return variable
    return variable.values[0]


def in_one_of_several_replicas():
  """Whether the code being built runs in one of several replicas of a strategy (inside
  `Replicas.run`)."""
  return (tf.distribute.has_strategy() and not tf.distribute.in_cross_replica_context() and
          tf.distribute.get_strategy().num_replicas_in_sync > 1)


def replica_share(loss):
  """`loss` divided by the replicas in sync when built in one of several: an optimizer that
  sums the replicas' gradients (Keras's) then makes the update of one device on all their
  rows, as tensorflow-estimator scaled the loss for Keras optimizers."""
  if not in_one_of_several_replicas():
    return loss
  return loss * (1.0 / tf.distribute.get_strategy().num_replicas_in_sync)


def _cpus_named(devices):
  """How many CPU devices a session needs for `devices` ('/cpu:3' needs 4)."""
  return 1 + max(int(tf.DeviceSpec.from_string(d).device_index or 0) for d in devices)


@contextlib.contextmanager
def _creators_in_init_scope():
  """Inside a loop body (a FuncGraph), variables created under `tf.init_scope` (EMA shadows,
  some slots) are built in the outermost graph, whose variable creators are per thread: a
  replica thread has none there (nor the strategy in scope).  Give it the body's (the
  strategy's, and the one that makes replicas after the first reuse the first's variables)
  while the replica's call runs."""
  graph = _v1.get_default_graph()
  root = _tf_internals.root_graph(graph)
  if root is graph:
    yield
    return
  stacks = ('_variable_creator_stack', '_distribution_strategy_stack')
  saved = {name: getattr(root, name) for name in stacks}
  for name in stacks:
    setattr(root, name, list(getattr(graph, name)))
  try:
    yield
  finally:
    for name, value in saved.items():
      setattr(root, name, value)


# One gRPC server per process and cluster task: a port can be bound only once.
_SERVERS = {}


def task_server(cluster_spec, task_type, task_id, session_config, protocol=None):
  """The started gRPC server of this process's cluster task (`tf.distribute.Server`): made
  on first use, then the same one (with the session config it was made with).

  When the task's port is taken, the program is taken to have started the task's server
  itself (TF 1.x programs did: `tf.train.Server(...)`, then `estimator.train`), and sessions
  go to that address, as the original's went to `RunConfig.master`."""
  key = (str(cluster_spec.as_dict()), task_type, task_id)
  if key not in _SERVERS:
    try:
      _SERVERS[key] = tf.distribute.Server(
          cluster_spec, job_name=task_type, task_index=task_id, protocol=protocol,
          config=session_config, start=True)
    except tf.errors.UnknownError:  # 'Could not start gRPC server': the port is taken
      address = cluster_spec.task_address(task_type, task_id)
      _log.info('The port of %s:%d (%s) is taken, by a server this program started: '
                'sessions run on it.', task_type, task_id, address)
      _SERVERS[key] = _ProgramsServer('grpc://' + address)
  return _SERVERS[key]


class _ProgramsServer:
  """A task server the program started itself: its target; `join()` serves until the job
  ends, as the program's server does."""

  def __init__(self, target):
    self.target = target

  def join(self):
    threading.Event().wait()
DEFAULT_OPERATION_TIMEOUT_MS = 300000


class MultiWorkerReplicas(Replicas):
  """Replicas over every worker of a `TF_CONFIG` cluster: TensorFlow's multi-worker
  collective strategy in graph mode, one gRPC server per process, sessions on that server.

  Each worker holds its own copy of the variables (initial values broadcast from the first
  worker, restored from the chief's checkpoints on resume); gradients are all-reduced every
  step.  Collectives wait for every worker, so a session with a dead peer would block forever:
  unless the user's session config sets `operation_timeout_in_ms`, runs time out after
  `DEFAULT_OPERATION_TIMEOUT_MS` (a `DeadlineExceededError` ends training on the survivors).
  """

  def __init__(self, cluster_spec, task_type, task_id, worker_index, num_workers, strategy=None):
    """`strategy`: the user's MultiWorkerMirroredStrategy (RunConfig.train_distribute), else
    one is made for the cluster."""
    if strategy is None:
      resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
          cluster_spec, task_type=task_type, task_id=task_id, rpc_layer='grpc')
      strategy = _v1.distribute.experimental.MultiWorkerMirroredStrategy(
          cluster_resolver=resolver)
    self.strategy = strategy
    self.devices = tuple(self.strategy.extended.worker_devices)
    self.kind = 'multi_worker'
    self.num_workers = num_workers
    self.worker_index = worker_index
    if _tf_internals.collective_server_started(strategy):
      # A strategy made eagerly started this task's server in TensorFlow's eager context
      # (its port is taken): sessions run on it.
      self.master = 'grpc://' + cluster_spec.task_address(task_type, task_id)
      return
    self.master = task_server(cluster_spec, task_type, task_id,
                              self.strategy.update_config_proto(_v1.ConfigProto())).target

  @property
  def num_replicas(self):
    return self.strategy.num_replicas_in_sync

  def session_config(self, base=None, xla=False, rewrites=True):
    config = super().session_config(base, xla, rewrites)
    config = self.strategy.update_config_proto(config)
    if not config.operation_timeout_in_ms:
      config.operation_timeout_in_ms = DEFAULT_OPERATION_TIMEOUT_MS
    return config


def _training_workers(config):
  """(worker index, count) of this task among the cluster's training tasks, or None."""
  if config is None or config.num_worker_replicas <= 1 or config.task_type in (None, 'evaluator'):
    return None
  return config.global_id_in_cluster, config.num_worker_replicas


def with_parameter_servers(config):
  """Whether `config` (a RunConfig) is a training-side task of a `TF_CONFIG` cluster with `ps`
  tasks (parameter_servers.py)."""
  return config is not None and bool(config.num_ps_replicas) and \
      config.task_type != 'evaluator'


def is_multi_worker(config):
  return _training_workers(config) is not None


def _tpu_devices():
  try:
    return tf.config.list_logical_devices('TPU')
  except (RuntimeError, ValueError):
    return []


def make_replicas(num_shards, config=None, multi_worker=False):
  """Replicas for `use_tpu=True`: `num_shards=None` means every local accelerator (1 on a
  CPU-only machine).  With `multi_worker` and a `TF_CONFIG` cluster of several training tasks,
  the replicas span every worker and `num_shards` (if set) must be their total."""
  workers = _training_workers(config) if multi_worker else None
  if multi_worker and with_parameter_servers(config):
      raise errors.value_error(
          'TPUEstimator(use_tpu=True) shards each step over every worker with all-reduce; a '
          'TF_CONFIG cluster with ps tasks trains with parameter servers instead.',
          'Use TPUEstimator(use_tpu=False) (or an Estimator) for parameter-server training, or '
          'a cluster of chief and worker tasks without ps for sharded training.',
          num_ps_replicas=config.num_ps_replicas)
  if workers is not None:
    replicas = MultiWorkerReplicas(config.cluster_spec, config.task_type, config.task_id,
                                   *workers)
    if num_shards is not None and num_shards != replicas.num_replicas:
      raise errors.value_error(
          'TPUConfig.num_shards must equal the replicas of all workers (%d: %d workers x %d '
          'local devices).' % (replicas.num_replicas, workers[1], replicas.local_replicas),
          'Set num_shards=None or %d.' % replicas.num_replicas, num_shards=num_shards)
    return replicas
  if _tpu_devices():
    raise errors.value_error(
        'TPU devices are visible, but this build of tpu_estimator does not drive TPU cores.',
        'Run with use_tpu=False, or on a machine with GPUs or CPUs only.',
        tpu_devices=[d.name for d in _tpu_devices()])
  gpus = physical_gpus()
  if gpus:
    count = len(gpus) if num_shards is None else num_shards
    logical = None
    if count > len(gpus):
      logical = gpus_lib.split(count, len(gpus))
      if (count, len(gpus)) not in _SPLITS_LOGGED:
        _SPLITS_LOGGED.add((count, len(gpus)))
        _log.warning('TPUConfig(num_shards=%d) on %d GPU(s): splitting them into %d logical GPUs '
                     '(%s per card). Replicas share a card: this is for testing sharded code, '
                     'not faster than num_shards=%d.', count, len(gpus), count,
                     '/'.join(map(str, logical)), len(gpus))
    return Replicas(['/gpu:%d' % i for i in range(count)], 'gpu', logical)
  count = num_shards or 1
  if count == 1:
    return Replicas(['/cpu:0'], 'single')
  return Replicas(['/cpu:%d' % i for i in range(count)], 'cpu')


_SPLITS_LOGGED = set()


def physical_gpus():
  """This machine's GPUs ([] where TensorFlow cannot list them)."""
  try:
    return tf.config.list_physical_devices('GPU')
  except (RuntimeError, ValueError):
    return []


def single_device():
  """One replica, no strategy: `use_tpu=False` and the plain Estimator.  Nothing is pinned to
  it: TensorFlow places the ops (on the first GPU, where there is one)."""
  return Replicas(['/gpu:0' if physical_gpus() else '/cpu:0'], 'single')


def of_strategy(strategy, config):
  """The replicas of a `tf.distribute` strategy the user gave the Estimator
  (`RunConfig(train_distribute=..., eval_distribute=...)`, checked by `check_strategies`): its
  own devices and strategy, run by the same `Replicas.run` as TPUEstimator's (the strategy is
  kept even for one replica: it places the variables, e.g. `OneDeviceStrategy('/gpu:1')`)."""
  workers = _training_workers(config)
  if _is_multi_worker(strategy) and workers is not None:
    return MultiWorkerReplicas(config.cluster_spec, config.task_type, config.task_id, *workers,
                               strategy=strategy)
  devices = tuple(strategy.extended.worker_devices)
  if len(devices) == 1:
    kind = 'single'
  else:
    kind = 'cpu' if all('cpu' in d.lower() for d in devices) else 'gpu'
  return Replicas(devices, kind, strategy=strategy)


def check_strategies(config):
  """The Estimator's `train_distribute`/`eval_distribute`: tf.distribute strategies this build
  drives, or None."""
  for name in ('train_distribute', 'eval_distribute'):
    strategy = getattr(config, name, None)
    if strategy is None:
      continue
    if not isinstance(strategy, (tf.distribute.Strategy, _v1.distribute.Strategy)):
      raise errors.type_error('RunConfig.%s must be a tf.distribute strategy.' % name,
                              'Pass e.g. tf.distribute.MirroredStrategy().',
                              **{name: strategy})
    refusal = _refusal(name, strategy, config)
    if refusal:
      raise errors.value_error('RunConfig.%s=%s %s.' % (name, type(strategy).__name__,
                                                        refusal[0]), refusal[1],
                               **{name: strategy})


_SUPPORTED = ('Train with MirroredStrategy, CentralStorageStrategy, OneDeviceStrategy, '
              'MultiWorkerMirroredStrategy (TF_CONFIG clusters of chief and workers) or '
              'tf.compat.v1.distribute.experimental.ParameterServerStrategy (TF_CONFIG '
              'clusters with ps tasks); evaluate on one machine (an evaluator task, '
              'eval_distribute=None or a local strategy).')


def _refusal(name, strategy, config):
  """(what, fix) when the strategy cannot do `name`'s job with `config`, else None."""
  with_ps = with_parameter_servers(config)
  if _is_parameter_server(strategy) and not is_parameter_server_strategy(strategy):
    return ('is the coordinator-based strategy of Keras and custom training loops, which '
            'Estimators never ran', 'Use tf.compat.v1.distribute.experimental.'
            'ParameterServerStrategy(), or no strategy: a TF_CONFIG cluster with ps tasks '
            'trains with parameter servers by itself.')
  if is_parameter_server_strategy(strategy):
    # Without ps tasks it keeps the variables on this machine's CPU (as the original ran it).
    if name == 'eval_distribute' and with_ps:
      return 'evaluates on one machine, not on the ps tasks', _SUPPORTED
    return None
  if with_ps and name == 'train_distribute':
    return ('does not place variables on the ps tasks of this TF_CONFIG cluster',
            'Use tf.compat.v1.distribute.experimental.ParameterServerStrategy(), or no '
            'strategy (variables then go to the ps tasks round-robin).')
  if _is_multi_worker(strategy) and name == 'eval_distribute' and is_multi_worker(config):
    return 'over a TF_CONFIG cluster is not supported by this build', _SUPPORTED
  return None


def _is_multi_worker(strategy):
  return type(strategy).__name__.startswith(('MultiWorker', 'CollectiveAllReduce'))


def _is_parameter_server(strategy):
  return 'ParameterServer' in type(strategy).__name__


def is_parameter_server_strategy(strategy):
  """Whether `strategy` is the v1 parameter-server strategy the original's Estimator ran
  (`tf.compat.v1.distribute.experimental.ParameterServerStrategy`, TF 2.0-2.3's
  `tf.distribute.experimental.ParameterServerStrategy`)."""
  return _is_parameter_server(strategy) and not type(strategy).__name__.endswith('V2')


def reject_distribute_config(config):
  """TPUEstimator(use_tpu=True) shards by its own `TPUConfig`: a `train_distribute`/
  `eval_distribute` in its RunConfig would be ignored, so it is refused (with use_tpu=False
  they run its calls, as the plain Estimator's)."""
  for name in ('train_distribute', 'eval_distribute'):
    value = getattr(config, name, None)
    if value is not None:
      raise errors.value_error(
          'RunConfig.%s is not used by TPUEstimator(use_tpu=True), which shards by its '
          'TPUConfig.' % name,
          'Use TPUConfig(num_shards=N), or TPUEstimator(use_tpu=False) (or a plain Estimator) '
          'with RunConfig(%s=...).' % name, **{name: value})
