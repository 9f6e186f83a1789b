"""Parameter-server training: a `TF_CONFIG` cluster with `ps` tasks, as the original trained it.

Between-graph replication on TensorFlow's own engine: each worker (the chief, `master` and
`worker` tasks) builds its own training graph in which `tf.compat.v1.train.replica_device_setter`
puts every variable on a `ps` task (round-robin in creation order, each partition of a
partitioned variable on its own task) and the compute on the worker; sessions run on the task's
gRPC server (`tf.distribute.Server`), so updates go to the ps tasks asynchronously, step by
step (`SyncReplicasOptimizer` in the model_fn makes them synchronous).  The chief initializes or
restores the variables and alone writes checkpoints and summaries; the other workers wait until
the variables are ready.

Faults: a session that loses a ps task or a worker (`UnavailableError`/`AbortedError`) is
created again by the `MonitoredSession` — the chief restores the newest checkpoint into the
ps tasks, the others wait for it — but not for ever: a task still unreachable after
`RunConfig.session_creation_timeout_secs` (and a worker that found the variables not ready in
that time) ends training with a `DeadlineExceededError` naming the wait.  One session run
times out after `replication.DEFAULT_OPERATION_TIMEOUT_MS` unless the session config sets
`operation_timeout_in_ms`.
"""
import logging
import os
import time

import tensorflow as tf

from tpu_estimator.config import TaskType
from tpu_estimator.distribute import replication
from tpu_estimator import errors

_v1 = tf.compat.v1
_log = logging.getLogger('tpu_estimator')

_RETRY_SECS = 1.0  # between attempts to create a session, and between readiness checks
_LOG_EVERY_SECS = 30.0  # while a task stays unreachable
STOP_GRACE_SECS = 5
_LOST = (tf.errors.UnavailableError, tf.errors.AbortedError)
_TRAINING_TASKS = (TaskType.CHIEF, TaskType.MASTER, TaskType.WORKER)


def worker_device(config):
  """This task's device prefix, e.g. '/job:worker/task:1'."""
  return '/job:%s/task:%d' % (config.task_type, config.task_id)


def device_setter(config):
  """The device function of a training graph: variables on the ps tasks, round-robin."""
  return _v1.train.replica_device_setter(
      ps_tasks=config.num_ps_replicas, worker_device=worker_device(config), merge_devices=True,
      cluster=config.cluster_spec)


class ParameterServerReplicas(replication.Replicas):
  """One replica on this worker, its variables on the cluster's ps tasks (`device_fn`); with
  the user's `tf.compat.v1.distribute.experimental.ParameterServerStrategy`
  (`RunConfig(train_distribute=...)`), that strategy's replicas on this worker's devices
  instead, the strategy placing the variables.

  `master` is this task's gRPC server, started on first use (once per process)."""

  def __init__(self, config, strategy=None):
    if config.task_type not in _TRAINING_TASKS:
      raise errors.value_error(
          'This %s task of a parameter-server cluster cannot train: only chief, master and '
          'worker tasks do.' % config.task_type,
          'Run tf.estimator.train_and_evaluate on every task (a ps task then serves the '
          'variables until the job ends, an evaluator evaluates the checkpoints).',
          task_type=config.task_type, task_id=config.task_id)
    devices = strategy.extended.worker_devices if strategy else [worker_device(config)]
    super().__init__(devices, 'parameter_servers', strategy=strategy)
    self.cluster = config
    self.num_workers = config.num_worker_replicas
    self.worker_index = config.global_id_in_cluster
    self.device_fn = None if strategy else device_setter(config)

  @property
  def num_replicas(self):
    # Each worker steps on its own: the replicas in sync are this worker's.
    return self.strategy.num_replicas_in_sync if self.strategy else 1

  @property
  def master(self):
    return task_server(self.cluster).target

  def session_config(self, base=None, xla=False, rewrites=True):
    """`base`: the RunConfig's (its default in a cluster with ps tasks: device filters)."""
    config = super().session_config(base, xla, rewrites)
    if not config.operation_timeout_in_ms:
      config.operation_timeout_in_ms = replication.DEFAULT_OPERATION_TIMEOUT_MS
    return config

  def monitored_session(self, scaffold, hooks, session_config, **kwargs):
    """The training session: created again after a lost task (see the module), by the chief's
    creator (initializes or restores the variables; `kwargs` say from where) or a worker's
    (waits until they are ready).

    Its threads get `STOP_GRACE_SECS` to stop when training ends (TensorFlow's default is 120):
    a `SyncReplicasOptimizer`'s chief queue runner waits for gradients that no worker will
    send any more and only stops when the session closes, after that grace (the original's
    chief stalled there for two minutes at the end of every synchronous run)."""
    timeout = self.cluster.session_creation_timeout_secs
    if self.cluster.is_chief:
      creator = _v1.train.ChiefSessionCreator(scaffold=scaffold, master=self.master,
                                              config=session_config, **kwargs)
    else:
      creator = _WorkerSessions(scaffold, self.master, session_config, timeout)
    return _v1.train.MonitoredSession(session_creator=_Bounded(creator, timeout), hooks=hooks,
                                      stop_grace_period_secs=STOP_GRACE_SECS)


def task_server(config):
  """This task's gRPC server (started once per process, see `replication.task_server`) with
  the task's session config.

  Unless the environment says otherwise, TensorFlow's RPCs are made to fail fast
  (`GRPC_FAIL_FAST=true`, which TensorFlow reads when it makes them): a call to a lost task then
  fails with `UnavailableError` at once, instead of waiting for the task to come back, for
  ever, in the middle of closing the session (measured: both the chief and a worker hung there
  after a ps task was killed).  The failed session is then created anew as the module says."""
  os.environ.setdefault('GRPC_FAIL_FAST', 'true')
  return replication.task_server(config.cluster_spec, config.task_type, config.task_id,
                                 config.session_config, config.protocol)


def serve(config):
  """A `ps` task's part in `train_and_evaluate`: serve the variables until the job ends (the
  cluster manager stops the task), as the original's ps tasks did."""
  server = task_server(config)
  _log.info('Parameter server %s serving at %s until the job ends.', worker_device(config),
            server.target)
  server.join()


class _Bounded(_v1.train.SessionCreator):
  """Creates sessions with `creator`; while a cluster task is unreachable the error goes to
  the `MonitoredSession`, which tries again (after `_RETRY_SECS`), until it has been failing
  for `timeout` seconds: then a `DeadlineExceededError` ends training."""

  def __init__(self, creator, timeout):
    self._creator = creator
    self._timeout = timeout
    self._failing_since = None
    self._logged_at = 0.0

  def create_session(self):
    try:
      session = self._creator.create_session()
    except _LOST as error:
      now = time.time()
      self._failing_since = self._failing_since or now
      waited = now - self._failing_since
      if waited >= self._timeout:
        raise tf.errors.DeadlineExceededError(
            None, None, 'A task of the parameter-server cluster has been unreachable for %d s '
            '(RunConfig.session_creation_timeout_secs=%s): %s' % (
                waited, self._timeout, error.message)) from error
      if now - self._logged_at >= _LOG_EVERY_SECS:
        self._logged_at = now
        _log.warning('A task of the parameter-server cluster is unreachable (%s); trying again '
                     'for up to %d s more.', error.message.split('\n')[0],
                     self._timeout - waited)
      time.sleep(_RETRY_SECS)
      raise
    self._failing_since = None
    return session


class _WorkerSessions(_v1.train.SessionCreator):
  """A non-chief worker's sessions: waits until the chief has initialized (or restored) the
  variables on the ps tasks, checking every `_RETRY_SECS` (TensorFlow's worker creator checks
  every 30 s), for at most `timeout` seconds."""

  def __init__(self, scaffold, master, session_config, timeout):
    self._scaffold = scaffold
    self._master = master
    self._config = session_config
    self._timeout = timeout

  def create_session(self):
    self._scaffold.finalize()
    manager = _v1.train.SessionManager(
        local_init_op=self._scaffold.local_init_op,
        local_init_feed_dict=self._scaffold.local_init_feed_dict,
        ready_op=self._scaffold.ready_op,
        ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
        graph=_v1.get_default_graph(), recovery_wait_secs=_RETRY_SECS)
    return manager.wait_for_session(self._master, config=self._config,
                                    max_wait_secs=self._timeout)
