"""`RunConfig` (the Estimator's) and the TPU additions: `TPUConfig`, `InputPipelineConfig` and
the TPU `RunConfig`.  The cluster is read from `TF_CONFIG` by `parse_tf_config`."""
import collections
import copy
import inspect
import json
import os
import re

import tensorflow as tf

from tpu_estimator import errors

_v1 = tf.compat.v1

_DEFAULT_SAVE_CHECKPOINTS_SECS = 600
_UNSET = object()

_REPLACEABLE = frozenset([
    'model_dir', 'tf_random_seed', 'save_summary_steps', 'save_checkpoints_steps',
    'save_checkpoints_secs', 'session_config', 'keep_checkpoint_max',
    'keep_checkpoint_every_n_hours', 'log_step_count_steps', 'train_distribute', 'device_fn',
    'protocol', 'eval_distribute', 'experimental_distribute',
    'experimental_max_worker_delay_secs', 'session_creation_timeout_secs',
    'checkpoint_save_graph_def', 'progress_bar', 'reuse_eval_graphs', 'reuse_train_graphs'
])


class TaskType:
  MASTER = 'master'
  PS = 'ps'
  WORKER = 'worker'
  CHIEF = 'chief'
  EVALUATOR = 'evaluator'


ClusterInfo = collections.namedtuple('ClusterInfo', [
    'cluster_spec', 'task_type', 'task_id', 'master', 'evaluation_master', 'is_chief',
    'num_ps_replicas', 'num_worker_replicas', 'global_id_in_cluster', 'model_dir'
])


def parse_tf_config(tf_config=None):
  """Reads the cluster from `TF_CONFIG` (a JSON string or dict); local defaults without one."""
  if tf_config is None:
    tf_config = os.environ.get('TF_CONFIG', '')
  if isinstance(tf_config, str):
    try:
      tf_config = json.loads(tf_config) if tf_config.strip() else {}
    except json.JSONDecodeError as e:
      raise errors.value_error('TF_CONFIG is not valid JSON (%s).' % e,
                               'Set it to {"cluster": {...}, "task": {...}}.',
                               TF_CONFIG=tf_config) from None
  cluster = tf_config.get('cluster') or {}
  task = tf_config.get('task') or {}
  model_dir = tf_config.get('model_dir')
  if not cluster:
    return ClusterInfo(tf.train.ClusterSpec({}), TaskType.WORKER, 0, '', '', True, 0, 1, 0,
                       model_dir)
  task_type = task.get('type')
  task_id = int(task.get('index', 0))
  if task_type is None:
    raise errors.value_error('TF_CONFIG has a cluster but no task type.',
                             'Add "task": {"type": "worker", "index": 0}.', task=task)
  spec = tf.train.ClusterSpec(cluster)
  if task_type != TaskType.EVALUATOR:
    if task_type not in spec.jobs or task_id >= spec.num_tasks(task_type):
      raise errors.value_error('The TF_CONFIG task is not in its cluster.', task=task,
                               cluster_jobs=spec.jobs)
  master = ''
  if task_type in spec.jobs:
    master = 'grpc://' + spec.task_address(task_type, task_id)
  # The chief: the `chief` task, else the `master` (Cloud ML Engine's clusters), else worker 0.
  if TaskType.CHIEF in spec.jobs:
    is_chief = task_type == TaskType.CHIEF
  elif TaskType.MASTER in spec.jobs:
    is_chief = task_type == TaskType.MASTER and task_id == 0
  else:
    is_chief = task_type == TaskType.WORKER and task_id == 0
  num_workers = sum(len(spec.job_tasks(j)) for j in (TaskType.CHIEF, TaskType.WORKER,
                                                     TaskType.MASTER) if j in spec.jobs)
  num_ps = len(spec.job_tasks(TaskType.PS)) if TaskType.PS in spec.jobs else 0
  order = [j for j in (TaskType.CHIEF, TaskType.MASTER, TaskType.WORKER) if j in spec.jobs]
  global_id = 0
  for job in order:
    if job == task_type:
      global_id += task_id
      break
    global_id += len(spec.job_tasks(job))
  if task_type == TaskType.PS:
    global_id = sum(len(spec.job_tasks(j)) for j in order) + task_id
  if task_type == TaskType.EVALUATOR:
    return ClusterInfo(tf.train.ClusterSpec({}), task_type, task_id, '', '', False, 0, 0, None,
                       model_dir)
  return ClusterInfo(spec, task_type, task_id, master, '', is_chief, num_ps, num_workers,
                     global_id, model_dir)


def default_session_config(config):
  """The session config of a task of a cluster with ps tasks that has none of its own (what
  `RunConfig.session_config` then returns, as the original's did): soft placement, one pass of
  Grappler's meta optimizer, and device filters that let a worker see only the ps tasks and
  itself (workers never wait for each other; a ps task sees everyone)."""
  filters = {
      TaskType.MASTER: ['/job:ps', '/job:master'],
      TaskType.CHIEF: ['/job:ps', '/job:chief'],
      TaskType.WORKER: ['/job:ps', '/job:worker/task:%d' % config.task_id],
      TaskType.PS: ['/job:ps', '/job:worker', '/job:chief', '/job:master'],
  }.get(config.task_type)
  session_config = _v1.ConfigProto(allow_soft_placement=True)
  rewrites = session_config.graph_options.rewrite_options
  rewrites.meta_optimizer_iterations = rewrites.ONE
  if filters:
    session_config.device_filters.extend(filters)
  return session_config


def _checkpoint_schedule(steps, secs):
  """(save_checkpoints_steps, save_checkpoints_secs) as given, with the original's default:
  every 600 seconds when neither is given; both set is an error."""
  steps_given = steps is not _UNSET and steps is not None
  secs_given = secs is not _UNSET and secs is not None
  if steps_given and secs_given:
    raise errors.value_error(
        '`save_checkpoints_steps` and `save_checkpoints_secs` cannot both be set.',
        'Set one of them (or neither: a checkpoint every 600 seconds).',
        save_checkpoints_steps=steps, save_checkpoints_secs=secs)
  if steps is _UNSET:
    steps = None
  if secs is _UNSET:
    secs = None if steps_given else _DEFAULT_SAVE_CHECKPOINTS_SECS
  return steps, secs


def _checked_model_dir(model_dir):
  if model_dir is None:
    return None
  if not isinstance(model_dir, (str, os.PathLike)):
    raise errors.type_error('`model_dir` must be a string or path.', model_dir=model_dir)
  model_dir = os.fspath(model_dir)
  if not model_dir:
    raise errors.value_error('`model_dir` must not be empty.', model_dir=model_dir)
  return model_dir


def _check_device_fn(device_fn):
  if device_fn is None:
    return
  if not callable(device_fn):
    raise errors.type_error('`device_fn` must be callable.', device_fn=device_fn)
  try:
    names = list(inspect.signature(device_fn).parameters)
  except (TypeError, ValueError):
    names = ['op']
  if names != ['op']:
    raise errors.value_error('`device_fn` must take exactly one argument, `op`.',
                             'Define device_fn(op) returning a device string.',
                             device_fn_args=names)


def _check_graph_reuse(reuse_eval_graphs, reuse_train_graphs):
  if not isinstance(reuse_eval_graphs, bool):
    raise errors.type_error('`reuse_eval_graphs` must be a bool.',
                            'Pass False to build a new graph for every evaluate()/predict().',
                            reuse_eval_graphs=reuse_eval_graphs)
  if not isinstance(reuse_train_graphs, bool):
    raise errors.type_error('`reuse_train_graphs` must be a bool.',
                            'Pass False to build a new graph for every train().',
                            reuse_train_graphs=reuse_train_graphs)


class RunConfig:
  """How an Estimator runs: where it writes, how often it saves and logs, which devices."""

  def __init__(self, model_dir=None, tf_random_seed=None, save_summary_steps=100,
               save_checkpoints_steps=_UNSET, save_checkpoints_secs=_UNSET,
               session_config=None, keep_checkpoint_max=5,
               keep_checkpoint_every_n_hours=10000, log_step_count_steps=100,
               train_distribute=None, device_fn=None, protocol=None, eval_distribute=None,
               experimental_distribute=None, experimental_max_worker_delay_secs=None,
               session_creation_timeout_secs=7200, checkpoint_save_graph_def=True,
               progress_bar=None, reuse_eval_graphs=True, reuse_train_graphs=True):
    save_checkpoints_steps, save_checkpoints_secs = _checkpoint_schedule(
        save_checkpoints_steps, save_checkpoints_secs)
    model_dir = _checked_model_dir(model_dir)
    if tf_random_seed is not None and (isinstance(tf_random_seed, bool) or
                                       not isinstance(tf_random_seed, int)):
      raise errors.type_error('`tf_random_seed` must be an int.', tf_random_seed=tf_random_seed)
    for name, value in (('save_summary_steps', save_summary_steps),
                        ('save_checkpoints_steps', save_checkpoints_steps),
                        ('save_checkpoints_secs', save_checkpoints_secs),
                        ('keep_checkpoint_max', keep_checkpoint_max)):
      errors.check_non_negative(name, value)
    for name, value in (('keep_checkpoint_every_n_hours', keep_checkpoint_every_n_hours),
                        ('session_creation_timeout_secs', session_creation_timeout_secs)):
      errors.check_positive_number(name, value)
    errors.check_positive_int('log_step_count_steps', log_step_count_steps, allow_none=True)
    if session_config is not None and not isinstance(session_config, _v1.ConfigProto):
      raise errors.type_error('`session_config` must be a tf.compat.v1.ConfigProto.',
                              session_config=session_config)
    _check_device_fn(device_fn)
    if protocol not in (None, 'grpc', 'grpc+verbs'):
      raise errors.value_error('`protocol` must be None, "grpc" or "grpc+verbs".',
                               protocol=protocol)
    _check_graph_reuse(reuse_eval_graphs, reuse_train_graphs)
    self._cluster = parse_tf_config()
    if model_dir is None and self._cluster.model_dir:
      model_dir = self._cluster.model_dir
    self._model_dir = model_dir
    self._tf_random_seed = tf_random_seed
    self._save_summary_steps = save_summary_steps
    self._save_checkpoints_steps = save_checkpoints_steps
    self._save_checkpoints_secs = save_checkpoints_secs
    self._session_config = session_config
    self._keep_checkpoint_max = keep_checkpoint_max
    self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
    self._log_step_count_steps = log_step_count_steps
    self._train_distribute = train_distribute
    self._device_fn = device_fn
    self._protocol = protocol
    self._eval_distribute = eval_distribute
    _check_distribute_config(train_distribute, eval_distribute, experimental_distribute)
    self._experimental_distribute = experimental_distribute
    self._experimental_max_worker_delay_secs = experimental_max_worker_delay_secs
    self._session_creation_timeout_secs = session_creation_timeout_secs
    self._checkpoint_save_graph_def = checkpoint_save_graph_def
    self._progress_bar = progress_bar
    # evaluate()/predict() keep their graph and session for the next call (graph_cache.py).
    self._reuse_eval_graphs = reuse_eval_graphs
    self._reuse_train_graphs = reuse_train_graphs

  def _fields(self):
    return {name: getattr(self, '_' + name) for name in _REPLACEABLE}

  def replace(self, **kwargs):
    """A copy with the given properties changed (only the documented ones may change)."""
    for name in kwargs:
      if name not in _REPLACEABLE:
        raise errors.value_error(
            'Replacing %s is not supported.' % name,
            'Allowed properties are %s.' % sorted(_REPLACEABLE), **{name: kwargs[name]})
    fields = self._fields()
    # Setting one of steps/secs clears the other, as a user expects.
    if kwargs.get('save_checkpoints_steps') is not None and 'save_checkpoints_secs' not in kwargs:
      fields['save_checkpoints_secs'] = None
    if kwargs.get('save_checkpoints_secs') is not None and 'save_checkpoints_steps' not in kwargs:
      fields['save_checkpoints_steps'] = None
    fields.update(kwargs)
    new = copy.copy(self)
    RunConfig.__init__(new, **fields)
    return new

  def __repr__(self):
    return 'RunConfig(%s)' % ', '.join('%s=%r' % (k, v) for k, v in sorted(self._fields().items()))

  model_dir = property(lambda self: self._model_dir)
  tf_random_seed = property(lambda self: self._tf_random_seed)
  save_summary_steps = property(lambda self: self._save_summary_steps)
  save_checkpoints_steps = property(lambda self: self._save_checkpoints_steps)
  save_checkpoints_secs = property(lambda self: self._save_checkpoints_secs)
  @property
  def session_config(self):
    """The ConfigProto given, else in a cluster with ps tasks `default_session_config`."""
    if self._session_config is None and self._cluster.num_ps_replicas:
      return default_session_config(self)
    return self._session_config

  keep_checkpoint_max = property(lambda self: self._keep_checkpoint_max)
  keep_checkpoint_every_n_hours = property(lambda self: self._keep_checkpoint_every_n_hours)
  log_step_count_steps = property(lambda self: self._log_step_count_steps)
  train_distribute = property(lambda self: self._strategy('train_distribute'))
  eval_distribute = property(lambda self: self._strategy('eval_distribute'))

  def _strategy(self, name):
    """The strategy given as `name`, else `experimental_distribute`'s, as the original."""
    given = getattr(self, '_' + name)
    return given if given is not None else getattr(self._experimental_distribute, name, None)
  experimental_distribute = property(lambda self: self._experimental_distribute)
  experimental_max_worker_delay_secs = property(
      lambda self: self._experimental_max_worker_delay_secs)
  device_fn = property(lambda self: self._device_fn)
  protocol = property(lambda self: self._protocol)
  session_creation_timeout_secs = property(lambda self: self._session_creation_timeout_secs)
  checkpoint_save_graph_def = property(lambda self: self._checkpoint_save_graph_def)
  progress_bar = property(lambda self: self._progress_bar)
  reuse_eval_graphs = property(lambda self: self._reuse_eval_graphs)
  reuse_train_graphs = property(lambda self: self._reuse_train_graphs)
  cluster_spec = property(lambda self: self._cluster.cluster_spec)
  task_type = property(lambda self: self._cluster.task_type)
  task_id = property(lambda self: self._cluster.task_id)
  master = property(lambda self: self._cluster.master)
  evaluation_master = property(lambda self: self._cluster.evaluation_master)
  is_chief = property(lambda self: self._cluster.is_chief)
  num_ps_replicas = property(lambda self: self._cluster.num_ps_replicas)
  num_worker_replicas = property(lambda self: self._cluster.num_worker_replicas)
  global_id_in_cluster = property(lambda self: self._cluster.global_id_in_cluster)
  service = property(lambda self: None)


def _check_distribute_config(train_distribute, eval_distribute, experimental_distribute):
  """`experimental_distribute` (`tf.contrib.distribute.DistributeConfig`) as the original
  took it: its strategies are used where `train_distribute`/`eval_distribute` are not given,
  and given both ways they are refused."""
  if experimental_distribute is None:
    return
  for name, given in (('train_distribute', train_distribute),
                      ('eval_distribute', eval_distribute)):
    if given is not None and getattr(experimental_distribute, name, None) is not None:
      raise errors.value_error(
          'Either `%s` or `experimental_distribute.%s` can be set.' % (name, name),
          'Pass the strategy once.', **{name: given,
                                        'experimental_distribute': experimental_distribute})
  if getattr(experimental_distribute, 'remote_cluster', None):
    raise errors.value_error(
        '`experimental_distribute.remote_cluster` (a standalone client driving a remote '
        'cluster) is not provided.', 'Run the program on each task of the cluster with its '
        'TF_CONFIG (`tpu-estimator launch` does it on one machine).',
        remote_cluster=experimental_distribute.remote_cluster)


class InputPipelineConfig:
  """How `input_fn` is called when sharding (`TPUConfig.per_host_input_for_training`).

  PER_SHARD_V1: once per shard, per-shard batch.  PER_HOST_V1: once per host, per-host batch,
  split over the host's shards.  PER_HOST_V2: once per host, per-shard batch, one batch
  dequeued per shard.  BROADCAST: once, per-shard batch, the same batch given to every shard.
  """
  PER_SHARD_V1 = 1
  PER_HOST_V1 = 2
  PER_HOST_V2 = 3
  BROADCAST = 4
  SLICED = 5


_INPUT_MODES = (InputPipelineConfig.PER_SHARD_V1, InputPipelineConfig.PER_HOST_V1,
                InputPipelineConfig.PER_HOST_V2, InputPipelineConfig.BROADCAST)
_IPL_PATTERN = re.compile(r'^(\d+)([smh])$')
_VALID_CORES_PER_REPLICA = (1, 2, 4, 8, 16, 32, 64, 128)  # the original's


def parse_iterations_per_loop(value):
  """`100` → ('count', 100); `'30s'`/`'5m'`/`'1h'` → ('seconds', 30/300/3600)."""
  if isinstance(value, bool):
    raise errors.type_error('`iterations_per_loop` must be an int or a string like "30s".',
                            iterations_per_loop=value)
  if isinstance(value, int):
    if value <= 0:
      raise errors.value_error('`iterations_per_loop` must be positive.',
                               'Pass an int > 0 or a duration such as "30s", "5m", "1h".',
                               iterations_per_loop=value)
    return ('count', value)
  if isinstance(value, str):
    match = _IPL_PATTERN.match(value.strip())
    if match and int(match.group(1)) > 0:
      unit = {'s': 1, 'm': 60, 'h': 3600}[match.group(2)]
      return ('seconds', int(match.group(1)) * unit)
    if value.strip().isdigit() and int(value) > 0:
      return ('count', int(value))
  raise errors.value_error('`iterations_per_loop` must be an int > 0 or "<N>s", "<N>m", "<N>h".',
                           'E.g. iterations_per_loop=100 or "30s".', iterations_per_loop=value)


def _check_xla(value):
  if not isinstance(value, (bool, type(None))):
    raise errors.type_error('`xla` must be None, True or False.',
                            'Pass True to compile training with XLA, False not to, None (the '
                            'default) to compile where it applies and pays.', xla=value)


def _check_update_settings(gradient_accumulation_steps, precision):
  errors.check_positive_int('gradient_accumulation_steps', gradient_accumulation_steps)
  if precision not in (None, 'mixed_bfloat16', 'mixed_float16'):
    raise errors.value_error('`precision` must be None, "mixed_bfloat16" or "mixed_float16".',
                             'Pass one of those (None: float32).', precision=precision)
  if precision == 'mixed_float16' and gradient_accumulation_steps > 1:
    raise errors.value_error(
        'precision="mixed_float16" (dynamic loss scaling) cannot be combined with '
        'gradient_accumulation_steps > 1 yet.', 'Use "mixed_bfloat16" (no loss scaling) or '
        'gradient_accumulation_steps=1.', precision=precision,
        gradient_accumulation_steps=gradient_accumulation_steps)


def _check_model_parallelism(num_cores_per_replica, input_partition_dims, input_mode):
  """Model parallelism's settings, checked as the original checked them.  Off a TPU each
  replica runs whole on one device, so they change no result (layout.py says so once)."""
  if num_cores_per_replica is not None and \
      num_cores_per_replica not in _VALID_CORES_PER_REPLICA:
    raise errors.value_error(
        '`num_cores_per_replica` must be one of %s.' % (_VALID_CORES_PER_REPLICA,),
        num_cores_per_replica=num_cores_per_replica)
  if input_partition_dims is None:
    return
  if not hasattr(input_partition_dims, '__len__') or len(input_partition_dims) not in (1, 2):
    raise errors.value_error(
        '`input_partition_dims` must be a list of one or two elements: the partition dims of '
        'the features, and of the labels.', input_partition_dims=input_partition_dims)
  if input_mode != InputPipelineConfig.PER_HOST_V2:
    raise errors.value_error(
        '`input_partition_dims` is only supported with PER_HOST_V2 input.',
        'Pass per_host_input_for_training=InputPipelineConfig.PER_HOST_V2.',
        per_host_input_for_training=input_mode)
  if num_cores_per_replica is None:
    raise errors.value_error('`input_partition_dims` requires `num_cores_per_replica`.',
                             'Set num_cores_per_replica to the cores one replica spans.',
                             input_partition_dims=input_partition_dims)


class TPUConfig(
    collections.namedtuple('TPUConfig', [
        'iterations_per_loop', 'num_shards', 'num_cores_per_replica',
        'per_host_input_for_training', 'tpu_job_name', 'initial_infeed_sleep_secs',
        'input_partition_dims', 'eval_training_input_configuration',
        'experimental_host_call_every_n_steps', 'experimental_allow_per_host_v2_parallel_get_next',
        'experimental_feed_hook', 'gradient_accumulation_steps', 'precision', 'xla'
    ])):
  """Sharding and device-loop settings: `iterations_per_loop` steps per host round trip,
  `num_shards` replicas (TPU cores, GPUs, or logical CPU devices when there is no accelerator).
  `gradient_accumulation_steps=N` (use_tpu=True) makes each training step N micro-batches of
  `params['batch_size']` and one optimizer update with their mean gradient; the global step,
  `max_steps` and `iterations_per_loop` count updates.  `precision='mixed_bfloat16'` or
  `'mixed_float16'` builds model_fn's computation in that dtype with float32 variables
  (precision.py).  `xla=True` compiles use_tpu=True training with XLA (the whole device
  loop on one replica or logical CPU replicas with static input shapes, else the step) and
  the evaluation and prediction loops there, `False` does not, `None` (default) compiles the whole
  training loop, or an evaluation of at least `xla.AUTO_MIN_BATCHES` steps, where it applies
  and pays, and falls back to uncompiled loops where XLA cannot compile the model (see
  distribute/xla.py).
  """

  def __new__(cls, iterations_per_loop=2, num_shards=None, num_cores_per_replica=None,
              per_host_input_for_training=True, tpu_job_name=None,
              initial_infeed_sleep_secs=None, input_partition_dims=None,
              eval_training_input_configuration=InputPipelineConfig.PER_HOST_V1,
              experimental_host_call_every_n_steps=1,
              experimental_allow_per_host_v2_parallel_get_next=False,
              experimental_feed_hook=None, gradient_accumulation_steps=1, precision=None,
              xla=None):
    parse_iterations_per_loop(iterations_per_loop)
    _check_xla(xla)
    _check_update_settings(gradient_accumulation_steps, precision)
    errors.check_positive_int('num_shards', num_shards, allow_none=True)
    if not isinstance(per_host_input_for_training, bool) and \
        per_host_input_for_training not in _INPUT_MODES:
      raise errors.value_error(
          '`per_host_input_for_training` must be a bool or one of InputPipelineConfig.'
          'PER_SHARD_V1/PER_HOST_V1/PER_HOST_V2/BROADCAST.',
          per_host_input_for_training=per_host_input_for_training)
    if eval_training_input_configuration not in (InputPipelineConfig.PER_HOST_V1,
                                                 InputPipelineConfig.SLICED):
      raise errors.value_error(
          '`eval_training_input_configuration` must be PER_HOST_V1 or SLICED.',
          eval_training_input_configuration=eval_training_input_configuration)
    errors.check_positive_int('experimental_host_call_every_n_steps',
                              experimental_host_call_every_n_steps)
    errors.check_non_negative('initial_infeed_sleep_secs', initial_infeed_sleep_secs)
    if per_host_input_for_training is True:
      per_host_input_for_training = InputPipelineConfig.PER_HOST_V1
    elif per_host_input_for_training is False:
      per_host_input_for_training = InputPipelineConfig.PER_SHARD_V1
    _check_model_parallelism(num_cores_per_replica, input_partition_dims,
                             per_host_input_for_training)
    if tpu_job_name is not None and not isinstance(tpu_job_name, str):
      raise errors.type_error('`tpu_job_name` must be a string.', tpu_job_name=tpu_job_name)
    return super().__new__(
        cls, iterations_per_loop, num_shards, num_cores_per_replica, per_host_input_for_training,
        tpu_job_name, initial_infeed_sleep_secs, input_partition_dims,
        eval_training_input_configuration, experimental_host_call_every_n_steps,
        experimental_allow_per_host_v2_parallel_get_next, experimental_feed_hook,
        gradient_accumulation_steps, precision, xla)

  @property
  def input_mode(self):
    """The `InputPipelineConfig` value (True/False were normalised at construction)."""
    return self.per_host_input_for_training


class TPURunConfig(RunConfig):
  """`RunConfig` with `tpu_config`, `master`, `evaluation_master` and `cluster` (a
  `tf.distribute.cluster_resolver.ClusterResolver`)."""

  def __init__(self, tpu_config=None, evaluation_master=None, master=None, cluster=None,
               **kwargs):
    super().__init__(**kwargs)
    tpu_config = tpu_config or TPUConfig()
    if not isinstance(tpu_config, TPUConfig):
      raise errors.type_error('`tpu_config` must be a TPUConfig.', tpu_config=tpu_config)
    if cluster is not None and master is not None:
      raise errors.value_error('Pass either `cluster` or `master`, not both.',
                               'The master comes from the cluster resolver.', master=master)
    for name, value in (('master', master), ('evaluation_master', evaluation_master)):
      if value is not None and not isinstance(value, str):
        raise errors.type_error('`%s` must be a string.' % name, **{name: value})
    self._tpu_config = tpu_config
    self._tpu_master = master
    self._tpu_evaluation_master = evaluation_master
    self._tpu_cluster = cluster

  tpu_config = property(lambda self: self._tpu_config)
  cluster = property(lambda self: self._tpu_cluster)

  @property
  def master(self):
    if self._tpu_master is not None:
      return self._tpu_master
    if self._tpu_cluster is not None:
      return self._tpu_cluster.master()
    return self._cluster.master

  @property
  def cluster_spec(self):
    if self._tpu_cluster is not None:
      return self._tpu_cluster.cluster_spec()
    return self._cluster.cluster_spec

  @property
  def evaluation_master(self):
    if self._tpu_evaluation_master is not None:
      return self._tpu_evaluation_master
    return self.master  # the TPU RunConfig's documented default

  def replace(self, **kwargs):
    tpu_kwargs = {}
    for name in ('tpu_config', 'master', 'evaluation_master', 'cluster'):
      if name in kwargs:
        tpu_kwargs[name] = kwargs.pop(name)
    new = super().replace(**kwargs)
    if 'tpu_config' in tpu_kwargs:
      new._tpu_config = tpu_kwargs['tpu_config']
      if not isinstance(new._tpu_config, TPUConfig):
        raise errors.type_error('`tpu_config` must be a TPUConfig.', tpu_config=new._tpu_config)
    new._tpu_master = tpu_kwargs.get('master', self._tpu_master)
    new._tpu_evaluation_master = tpu_kwargs.get('evaluation_master',
                                                self._tpu_evaluation_master)
    new._tpu_cluster = tpu_kwargs.get('cluster', self._tpu_cluster)
    return new
