"""Parameter-server training over a TF_CONFIG cluster with `ps` tasks, as the original did it.

In one process (fast): a chief and its ps tasks' servers, to check where the variables go, what
the checkpoint holds and what is refused.  Across processes on loopback
(tests/multiworker/ps_program.py, each run bounded in time): chief, workers, ps tasks and an
evaluator through `train_and_evaluate`, the same program on the original (TF 2.15) for the
variable placement and checkpoint layout, and the faults users relied on.
"""
import json
import os
import subprocess
import sys
import time

import pytest
import tensorflow as tf

import helpers as h
import reference
import tpu_estimator as te
import zygote
from tpu_estimator import keras_models
from tpu_estimator.tools import launcher

v1 = tf.compat.v1


def _cluster(monkeypatch, task_type='chief', task_id=0, num_ps=2, num_workers=1,
             chief='chief'):
  """Sets TF_CONFIG for a loopback cluster (its first task in the job `chief`) and starts its
  ps tasks' servers in this process; returns the cluster dict."""
  ports = launcher.free_ports(num_workers + num_ps)
  addresses = ['127.0.0.1:%d' % p for p in ports]
  cluster = {chief: addresses[:1], 'ps': addresses[num_workers:]}
  if num_workers > 1:
    cluster['worker'] = addresses[1:num_workers]
  monkeypatch.setenv('TF_CONFIG', json.dumps({'cluster': cluster,
                                              'task': {'type': task_type, 'index': task_id}}))
  monkeypatch.setenv('GRPC_FAIL_FAST', 'true')  # what training sets; restored after the test
  for index in range(num_ps):
    tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name='ps', task_index=index,
                         start=True)
  return cluster


class _Devices(v1.train.SessionRunHook):
  """Records each global variable's device (the task part) when the session starts."""

  def __init__(self):
    self.devices = {}

  def begin(self):
    for variable in v1.global_variables():
      spec = tf.DeviceSpec.from_string(variable.device)
      self.devices[variable.op.name] = '/job:%s/task:%s' % (spec.job, spec.task)


def _partitioned_model_fn(features, labels, mode):
  embedding = v1.get_variable('embedding', [10, 4], partitioner=v1.fixed_size_partitioner(2),
                              initializer=v1.ones_initializer())
  ids = tf.cast(tf.abs(features['x'][:, 0]) * 3, tf.int64) % 10
  hidden = tf.concat([tf.nn.embedding_lookup(embedding, ids), features['x']], axis=1)
  kernel = v1.get_variable('kernel', [4 + h.NUM_FEATURES, h.NUM_CLASSES],
                           initializer=v1.zeros_initializer())
  logits = tf.matmul(hidden, kernel)
  if mode == te.ModeKeys.PREDICT:
    return te.EstimatorSpec(mode, predictions={'classes': tf.argmax(logits, 1)})
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits))
  train_op = v1.train.AdagradOptimizer(0.1).minimize(loss, v1.train.get_global_step())
  return te.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops={
      'accuracy': v1.metrics.accuracy(labels, tf.argmax(logits, 1))})


@pytest.mark.parametrize('strategy', [False, True])
def test_variables_live_on_the_ps_tasks_round_robin_and_the_checkpoint_is_whole(
    tmp_path, monkeypatch, strategy):
  """Without a strategy, and with the v1 ParameterServerStrategy TF 2.0-2.3 programs gave
  `train_distribute` (the same placement, checked on the original by hand)."""
  _cluster(monkeypatch, num_ps=2)
  x, y = h.make_data(64)
  distribute = v1.distribute.experimental.ParameterServerStrategy() if strategy else None
  est = te.Estimator(_partitioned_model_fn, config=te.EstimatorRunConfig(
      model_dir=str(tmp_path), save_checkpoints_steps=5, train_distribute=distribute))
  record = _Devices()
  est.train(h.dataset_input_fn(x, y, batch_size=16), steps=6, hooks=[record])
  # The original's order (tests/test_parameter_servers.py's differential run checks it on
  # TF 2.15): round-robin in creation order, each partition and each slot where it is made.
  assert record.devices == {
      'global_step': '/job:ps/task:0',
      'embedding/part_0': '/job:ps/task:1', 'embedding/part_1': '/job:ps/task:0',
      'kernel': '/job:ps/task:1',
      'embedding/part_0/Adagrad': '/job:ps/task:1', 'embedding/part_1/Adagrad': '/job:ps/task:0',
      'kernel/Adagrad': '/job:ps/task:1'}
  checkpoint = dict(tf.train.list_variables(str(tmp_path)))
  assert checkpoint['embedding'] == [10, 4] and checkpoint['global_step'] == []
  assert est.get_variable_value('global_step') == 6
  # Evaluation and prediction run on this machine from the checkpoint, as the original's did.
  result = est.evaluate(h.dataset_input_fn(x, y, batch_size=16, repeat=False))
  assert result['global_step'] == 6 and 0 <= result['accuracy'] <= 1
  predictions = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices(
      {'x': x[:5]}).batch(5)))
  assert len(predictions) == 5


def test_tpu_estimator_off_tpu_trains_on_the_ps_tasks_and_on_tpu_says_why_not(
    tmp_path, monkeypatch):
  _cluster(monkeypatch, num_ps=1)
  x, y = h.make_data(64)
  record = _Devices()
  est = te.TPUEstimator(h.make_model_fn(tpu=True), use_tpu=False, train_batch_size=16,
                        config=h.tpu_config(model_dir=str(tmp_path / 'cpu')))
  est.train(h.dataset_input_fn(x, y), steps=3, hooks=[record])
  assert set(record.devices.values()) == {'/job:ps/task:0'}
  assert est.get_variable_value('global_step') == 3
  sharded = te.TPUEstimator(h.make_model_fn(tpu=True), use_tpu=True, train_batch_size=16,
                            config=h.tpu_config(2, model_dir=str(tmp_path / 'tpu')))
  with pytest.raises(ValueError, match='ps tasks.*num_ps_replicas=1.*use_tpu=False'):
    sharded.train(h.dataset_input_fn(x, y), steps=1)
  assert not os.path.exists(tmp_path / 'tpu' / 'checkpoint')


@pytest.mark.parametrize('backend', ['tf_keras', 'keras3'])
def test_a_keras_model_as_an_estimator_trains_on_the_ps_tasks(tmp_path, monkeypatch, backend):
  """model_to_estimator, then parameter-server training, as Cloud ML Engine users ran Keras
  models: the model's (and a tf_keras optimizer's) variables on the ps tasks."""
  _cluster(monkeypatch, num_ps=2)
  if backend == 'tf_keras':
    import tf_keras as keras  # pylint: disable=import-outside-toplevel
  else:
    keras = tf.keras
  model = keras.Sequential([keras.Input((h.NUM_FEATURES,)), keras.layers.Dense(8, name='hidden'),
                            keras.layers.Dense(h.NUM_CLASSES, name='logits')])
  model.compile('sgd', keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  est = keras_models.model_to_estimator(keras_model=model, config=te.EstimatorRunConfig(
      model_dir=str(tmp_path)))
  x, y = h.make_data(64)
  record = _Devices()
  est.train(lambda: tf.data.Dataset.from_tensor_slices((x, y)).batch(16).repeat(), steps=3,
            hooks=[record])
  assert {'hidden/kernel', 'logits/bias'} <= set(record.devices)
  assert set(record.devices.values()) == {'/job:ps/task:0', '/job:ps/task:1'}
  assert est.get_variable_value('global_step') == 3


def test_strategies_that_would_not_use_the_ps_tasks_are_refused(tmp_path, monkeypatch):
  x, y = h.make_data(32)
  input_fn = h.dataset_input_fn(x, y, batch_size=8)
  # Without ps tasks the v1 strategy keeps the variables on this machine, as the original ran.
  local = v1.distribute.experimental.ParameterServerStrategy()
  alone = te.Estimator(h.make_model_fn(), config=te.EstimatorRunConfig(
      model_dir=str(tmp_path / 'alone'), train_distribute=local, eval_distribute=local))
  alone.train(input_fn, steps=2)
  assert alone.evaluate(h.dataset_input_fn(x, y, batch_size=8, repeat=False))['global_step'] == 2
  _cluster(monkeypatch, num_ps=1)
  with tf.Graph().as_default():  # its eager form would need logical CPUs set before start
    mirrored = tf.distribute.MirroredStrategy(['/cpu:0'])
  with pytest.raises(ValueError, match='MirroredStrategy does not place variables on the ps '
                     'tasks.*ParameterServerStrategy'):
    te.Estimator(h.make_model_fn(), config=te.EstimatorRunConfig(
        model_dir=str(tmp_path / 'mirrored'), train_distribute=mirrored))
  with pytest.raises(ValueError, match='eval_distribute=ParameterServerStrategyV1 evaluates on '
                     'one machine'):
    te.Estimator(h.make_model_fn(), config=te.EstimatorRunConfig(
        model_dir=str(tmp_path / 'eval'),
        eval_distribute=v1.distribute.experimental.ParameterServerStrategy()))
  assert not os.path.exists(tmp_path / 'mirrored')


def test_a_program_that_started_its_own_server_trains_on_it(tmp_path, monkeypatch):
  """TF 1.x programs started `tf.train.Server` for their task, then called `train()`."""
  cluster = _cluster(monkeypatch, num_ps=1)
  v1.train.Server(tf.train.ClusterSpec(cluster), job_name='chief', task_index=0, start=True)
  x, y = h.make_data(32)
  est = te.Estimator(h.make_model_fn(), config=te.EstimatorRunConfig(model_dir=str(tmp_path)))
  est.train(h.dataset_input_fn(x, y, batch_size=8), steps=2)
  assert est.get_variable_value('global_step') == 2


def test_several_workers_without_ps_tasks_or_a_strategy_are_refused(tmp_path, monkeypatch):
  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': {'chief': ['127.0.0.1:1'], 'worker': ['127.0.0.1:2']},
      'task': {'type': 'worker', 'index': 0}}))
  x, y = h.make_data(32)
  est = te.Estimator(h.make_model_fn(), config=te.EstimatorRunConfig(model_dir=str(tmp_path)))
  with pytest.raises(ValueError, match='no ps tasks.*num_worker_replicas=2.*'
                     'MultiWorkerMirroredStrategy'):
    est.train(h.dataset_input_fn(x, y, batch_size=8), steps=1)
  assert not os.listdir(tmp_path)


def test_a_ps_task_serves_and_does_not_train(tmp_path, monkeypatch):
  _cluster(monkeypatch, task_type='ps', task_id=0, num_ps=1)
  x, y = h.make_data(32)
  est = te.Estimator(h.make_model_fn(), config=te.EstimatorRunConfig(model_dir=str(tmp_path)))
  with pytest.raises(ValueError, match='ps task.*task_type=.ps.*train_and_evaluate'):
    est.train(h.dataset_input_fn(x, y, batch_size=8), steps=1)
  assert not os.listdir(tmp_path)


def test_a_master_trains_and_evaluates_itself_and_refuses_an_evaluator(tmp_path, monkeypatch):
  cluster = _cluster(monkeypatch, task_type='master', num_ps=1, chief='master')
  x, y = h.make_data(64)
  est = te.Estimator(h.make_model_fn(), config=te.EstimatorRunConfig(
      model_dir=str(tmp_path), save_checkpoints_steps=4))
  metrics, exports = te.train_and_evaluate(
      est, te.TrainSpec(h.dataset_input_fn(x, y, batch_size=16), max_steps=8),
      te.EvalSpec(h.dataset_input_fn(x, y, batch_size=16, repeat=False), steps=None,
                  throttle_secs=0))
  assert metrics['global_step'] == 8 and exports == []
  assert os.listdir(tmp_path / 'eval')
  monkeypatch.setenv('TF_CONFIG', json.dumps({'cluster': cluster,
                                              'task': {'type': 'evaluator', 'index': 0}}))
  evaluator = te.Estimator(h.make_model_fn(), config=te.EstimatorRunConfig(
      model_dir=str(tmp_path)))
  with pytest.raises(ValueError, match='master task.*cluster_jobs=.*master'):
    te.train_and_evaluate(evaluator, te.TrainSpec(h.dataset_input_fn(x, y, batch_size=16)),
                          te.EvalSpec(h.dataset_input_fn(x, y, batch_size=16)))


@pytest.mark.parametrize('task_type,task_id,filters', [
    ('chief', 0, ['/job:ps', '/job:chief']),
    ('master', 0, ['/job:ps', '/job:master']),
    ('worker', 1, ['/job:ps', '/job:worker/task:1']),
    ('ps', 0, ['/job:ps', '/job:worker', '/job:chief', '/job:master'])])
def test_workers_see_only_the_ps_tasks_and_themselves(monkeypatch, task_type, task_id, filters):
  cluster = {'ps': ['127.0.0.1:1'], 'worker': ['127.0.0.1:2', '127.0.0.1:3'],
             task_type: ['127.0.0.1:4']} if task_type in ('chief', 'master') else {
                 'ps': ['127.0.0.1:1'], 'chief': ['127.0.0.1:4'],
                 'worker': ['127.0.0.1:2', '127.0.0.1:3']}
  monkeypatch.setenv('TF_CONFIG', json.dumps({'cluster': cluster, 'task': {
      'type': task_type, 'index': task_id}}))
  config = te.EstimatorRunConfig().session_config  # the default, as the original's RunConfig
  assert list(config.device_filters) == filters and config.allow_soft_placement
  rewrites = config.graph_options.rewrite_options
  assert rewrites.meta_optimizer_iterations == rewrites.ONE  # the original's, too
  given = v1.ConfigProto(log_device_placement=True)
  assert te.EstimatorRunConfig(session_config=given).session_config is given
  assert te.EstimatorRunConfig().replace(save_summary_steps=5).session_config == config


# ---------------------------------------------------------------------------------------------
# Across processes on loopback

PROGRAM = os.path.join(os.path.dirname(__file__), 'multiworker', 'ps_program.py')


class _Job:
  """The tasks of one loopback cluster running ps_program.py, each started (and restarted)
  on its own; every wait is bounded, and `stop()` kills whatever still runs."""

  def __init__(self, python, impl, kind, workdir, max_steps, num_workers, num_ps,
               evaluator=False, step_sleep=0.0, chief='chief', **env):
    self.configs = launcher.tf_configs(num_workers, num_ps=num_ps, evaluator=evaluator)
    # The first task's job: 'chief', or 'master' (Cloud ML Engine).  One cluster dict is
    # shared by every task's TF_CONFIG.
    self.configs[0]['cluster'][chief] = self.configs[0]['cluster'].pop('chief')
    self.configs[0]['task']['type'] = chief
    self.names = ['%s%d' % (c['task']['type'], c['task']['index']) for c in self.configs]
    self.model_dir = os.path.join(workdir, 'model')
    self.workdir = workdir
    os.makedirs(workdir, exist_ok=True)
    self._argv = [python, PROGRAM, impl, kind, self.model_dir]
    self._tail = [str(max_steps), str(step_sleep)]
    self._env = dict(reference.env(impl), **env)
    self.processes = {}
    self.logs = {}

  def out(self, incarnation=0):
    path = os.path.join(self.workdir, 'out%d' % incarnation)
    os.makedirs(path, exist_ok=True)
    return path

  def start(self, name, incarnation=0):
    config = self.configs[self.names.index(name)]
    log_path = os.path.join(self.workdir, '%s.%d.log' % (name, incarnation))
    self.logs[name] = log_path
    with open(log_path, 'w') as log:
      self.processes[name] = zygote.Popen(
          self._argv + [self.out(incarnation)] + self._tail, stdout=log,
          stderr=subprocess.STDOUT, env=dict(self._env, TF_CONFIG=json.dumps(config)))

  def start_all(self):
    for name in self.names:
      self.start(name)

  def kill(self, name):
    self.processes[name].kill()
    self.processes[name].wait()

  def log(self, name):
    with open(self.logs[name]) as f:
      return f.read()

  def wait(self, names, timeout):
    """Exit codes of `names` (None for a task still running after `timeout` seconds)."""
    deadline = time.time() + timeout
    for name in names:
      try:
        self.processes[name].wait(max(0.1, deadline - time.time()))
      except subprocess.TimeoutExpired:
        pass
    return {name: self.processes[name].poll() for name in names}

  def wait_for_checkpoint(self, step, timeout):
    """The newest checkpoint's step once it is at least `step` (fails after `timeout`)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
      latest = _latest_step(self.model_dir)
      if latest >= step:
        return latest
      time.sleep(0.2)
    pytest.fail('no checkpoint of step %d within %d s; logs:\n%s' % (
        step, timeout, '\n'.join(self.log(n)[-2000:] for n in self.logs)))

  def training(self):
    return [n for n in self.names if not n.startswith(('ps', 'evaluator'))]

  def stop(self):
    for process in self.processes.values():
      if process.poll() is None:
        process.kill()
        process.wait()


def _latest_step(model_dir):
  state = tf.train.get_checkpoint_state(model_dir)
  if state is None or not state.model_checkpoint_path:
    return -1
  return int(state.model_checkpoint_path.rsplit('-', 1)[1])


def _read(path):
  with open(path) as f:
    return json.load(f)


def _summary(job, codes):
  """What a finished job left: exit codes, each task's JSON, the model_dir's files, logs."""
  outputs = {}
  for incarnation in range(3):
    out = os.path.join(job.workdir, 'out%d' % incarnation)
    for name in sorted(os.listdir(out)) if os.path.isdir(out) else ():
      outputs['%s.%d' % (name[:-len('.json')], incarnation)] = _read(os.path.join(out, name))
  files = sorted(os.listdir(job.model_dir)) if os.path.isdir(job.model_dir) else []
  evals = os.path.join(job.model_dir, 'eval')
  return {'codes': codes, 'outputs': outputs, 'files': files,
          'eval': sorted(os.listdir(evals)) if os.path.isdir(evals) else [],
          'logs': '\n'.join('--- %s\n%s' % (n, job.log(n)[-3000:]) for n in job.logs)}


@pytest.fixture(scope='module')
def wide_deep(tmp_path_factory):
  """The same wide-and-deep program (v1 canned, partitioned embeddings) as a chief, 2 workers,
  2 ps tasks (and, ours, an evaluator) through train_and_evaluate, 30 steps, on both
  implementations at once: {'orig': summary (or the reference's Unavailable), 'ours': summary,
  'single': ours in one process without a cluster, 'predict': ours predicting in one process
  from the cluster's model_dir}."""
  workdir = str(tmp_path_factory.mktemp('wide_deep'))
  try:
    orig_python = reference.python('The parameter-server differential test')
  except reference.Unavailable as unavailable:
    orig_python = unavailable
  jobs = {'ours': _Job(sys.executable, 'ours', 'wide_deep', os.path.join(workdir, 'ours'), 30,
                       3, 2, evaluator=True),
          'single': _Job(sys.executable, 'ours', 'wide_deep', os.path.join(workdir, 'single'),
                         30, 1, 0)}
  jobs['single'].configs = [{}]  # no TF_CONFIG: one local process
  # The TF 2 canned class (no partitioner argument) on a chief and 2 ps tasks.
  jobs['ours_v2'] = _Job(sys.executable, 'ours', 'wide_deep_v2',
                         os.path.join(workdir, 'ours_v2'), 10, 1, 2)
  if not isinstance(orig_python, Exception):
    # Without the evaluator: nothing of the original's is compared but what the training tasks
    # placed and saved (an evaluator is no part of the cluster the others see).
    jobs['orig'] = _Job(orig_python, 'orig', 'wide_deep', os.path.join(workdir, 'orig'), 30, 3,
                        2)
    jobs['orig_v2'] = _Job(orig_python, 'orig', 'wide_deep_v2', os.path.join(workdir, 'orig_v2'),
                           10, 1, 2)
  results = {} if 'orig' in jobs else {'orig': orig_python, 'orig_v2': orig_python}
  try:
    for name, job in jobs.items():
      job.start('chief0') if name == 'single' else job.start_all()
    for name, job in jobs.items():
      waited = job.training() + (['evaluator0'] if 'evaluator0' in job.names else [])
      results[name] = _summary(job, job.wait(waited, 300))
    cluster = jobs['ours']
    cluster._tail[0] = 'predict'  # pylint: disable=protected-access
    cluster.start('chief0', incarnation=1)
    results['predict'] = _summary(cluster, cluster.wait(['chief0'], 120))
  finally:
    for job in jobs.values():
      job.stop()
  return results


def _finished(summary):
  assert set(summary['codes'].values()) == {0}, summary['logs']
  return summary


def test_a_cluster_trains_evaluates_and_its_checkpoint_restores_in_one_process(wide_deep):
  ours = _finished(wide_deep['ours'])
  chief = ours['outputs']['chief0.0']
  workers = [ours['outputs']['worker%d.0' % i] for i in range(2)]
  assert chief['config'] == {'is_chief': True, 'num_ps_replicas': 2, 'num_worker_replicas': 3,
                             'global_id_in_cluster': 0}
  assert [w['config']['global_id_in_cluster'] for w in workers] == [1, 2]
  assert chief['global_step'] >= 30 and all(w['global_step'] >= 30 for w in workers)
  devices = {v['device'] for v in chief['variables'].values()}
  assert devices == {'/job:ps/task:0', '/job:ps/task:1'}  # no variable on a worker
  assert all(w['variables'] == chief['variables'] for w in workers)  # the same graph
  # Only the chief writes checkpoints (one shard per ps task) and summaries; the evaluator
  # writes eval/.
  assert any(f.endswith('.data-00001-of-00002') for f in ours['files'])
  assert any(f.startswith('events.out.tfevents') for f in ours['eval'])
  single = _finished(wide_deep['single'])
  assert single['outputs']['local0.0']['checkpoint'] == chief['checkpoint']
  predicted = _finished(wide_deep['predict'])['outputs']['predict.1']
  assert predicted['rows'] == 8 and 'probabilities' in predicted['keys']


@pytest.mark.parametrize('run', ['', '_v2'], ids=['v1_partitioned', 'v2'])
def test_variable_placement_and_checkpoint_layout_match_the_original(wide_deep, run):
  """Every variable, partition and slot on the same ps task as the original put it, the same
  checkpoint keys, shapes and shards: the v1 canned wide-and-deep with partitioned embeddings
  on a chief, a worker and 2 ps tasks, and the TF 2 class on a chief and 2 ps tasks."""
  orig = wide_deep['orig' + run]
  if isinstance(orig, Exception):
    reference.check(orig)
  orig, ours = _finished(orig), _finished(wide_deep['ours' + run])
  tasks = [t for t in ('chief0.0', 'worker0.0', 'worker1.0') if t in orig['outputs']]
  for task in tasks:
    assert ours['outputs'][task]['variables'] == orig['outputs'][task]['variables'], task
    assert ours['outputs'][task]['config'] == orig['outputs'][task]['config'], task
  assert ours['outputs']['chief0.0']['checkpoint'] == orig['outputs']['chief0.0']['checkpoint']
  shards = lambda files: sorted(f.split('.', 2)[2] for f in files if f.startswith('model.ckpt-0.'))
  assert shards(ours['files']) == shards(orig['files']) and len(shards(orig['files'])) == 4


def test_killed_tasks_rejoin_and_nothing_saved_is_lost(tmp_path):
  """A worker, then the ps task, then the chief killed (-9) and restarted with the same
  TF_CONFIG: the worker rejoins where training is, the sessions lost with the ps are created
  again and the chief restores the newest checkpoint into it, the restarted chief resumes from
  its last checkpoint, and training reaches max_steps."""
  job = _Job(sys.executable, 'ours', 'custom', str(tmp_path), 400, 2, 1, step_sleep=0.1)
  try:
    job.start_all()
    job.wait_for_checkpoint(40, 120)
    job.kill('worker0')
    job.start('worker0', incarnation=1)
    before_ps = job.wait_for_checkpoint(_latest_step(job.model_dir) + 30, 120)
    job.kill('ps0')
    time.sleep(1)
    job.start('ps0', incarnation=1)
    before_chief = job.wait_for_checkpoint(_latest_step(job.model_dir) + 30, 120)
    job.kill('chief0')
    job.start('chief0', incarnation=2)
    codes = job.wait(['chief0', 'worker0'], 180)
  finally:
    job.stop()
  summary = _summary(job, codes)
  _finished(summary)
  outputs = summary['outputs']
  assert outputs['worker0.1']['session_steps'][0] >= 40  # rejoined, not from 0
  first_chief = outputs['chief0.0']['session_steps']
  assert len(first_chief) == 2 and first_chief[1] >= before_ps  # restored, nothing lost
  assert outputs['chief0.2']['session_steps'][0] >= before_chief
  assert outputs['chief0.2']['global_step'] >= 400 and _latest_step(job.model_dir) >= 400


def test_a_ps_task_that_never_comes_back_ends_training_with_a_clear_error(tmp_path):
  job = _Job(sys.executable, 'ours', 'custom', str(tmp_path), 100000, 1, 1, step_sleep=0.05,
             SESSION_TIMEOUT_SECS='5')
  try:
    job.start_all()
    saved = job.wait_for_checkpoint(10, 120)
    job.kill('ps0')
    codes = job.wait(['chief0'], 90)
  finally:
    job.stop()
  assert codes['chief0'] not in (None, 0), 'the chief did not stop within 90 s'
  log = job.log('chief0')
  assert 'DeadlineExceededError' in log and 'unreachable for' in log, log[-3000:]
  assert 'session_creation_timeout_secs=5' in log
  assert _latest_step(job.model_dir) >= saved  # the checkpoints stay


def _trained(job, timeout=180):
  """Runs `job` until its training tasks end; each task's output (all must succeed)."""
  try:
    job.start_all()
    codes = job.wait(job.training(), timeout)
  finally:
    job.stop()
  return _finished(_summary(job, codes))['outputs']


def test_sync_replicas_optimizer_aggregates_the_workers_updates(tmp_path):
  """Each global step takes one gradient from each of the 2 workers (asynchronous training
  would count one per worker step), and the chief stops without waiting for gradients that
  will not come."""
  started = time.time()
  outputs = _trained(_Job(sys.executable, 'ours', 'sync', str(tmp_path), 20, 2, 1))
  chief, worker = outputs['chief0.0'], outputs['worker0.0']
  assert chief['global_step'] == 20 and worker['global_step'] == 20
  assert 38 <= chief['local_steps'] + worker['local_steps'] <= 42
  assert time.time() - started < 90  # not the 120 s stop grace of TensorFlow's sessions


def test_a_parameter_server_strategy_program_trains_on_every_worker(tmp_path):
  """`RunConfig(train_distribute=ParameterServerStrategy())` on a cluster: each worker's
  replicas on its own devices, the variables on the ps tasks."""
  outputs = _trained(_Job(sys.executable, 'ours', 'strategy', str(tmp_path), 20, 2, 1))
  for task in ('chief0.0', 'worker0.0'):
    assert outputs[task]['global_step'] >= 20
    assert {v['device'] for v in outputs[task]['variables'].values()} == {'/job:ps/task:0'}


def test_a_master_cluster_has_one_chief_which_evaluates(tmp_path):
  """A Cloud ML Engine cluster (master, worker, ps): the master is the one chief (worker 0 is
  not: two chiefs initialized and saved twice) and evaluates in its own process."""
  job = _Job(sys.executable, 'ours', 'custom', str(tmp_path), 20, 2, 1, chief='master')
  outputs = _trained(job)
  assert outputs['master0.0']['config']['is_chief'] is True
  assert outputs['worker0.0']['config']['is_chief'] is False
  assert outputs['master0.0']['global_step'] >= 20
  assert os.listdir(os.path.join(job.model_dir, 'eval'))
