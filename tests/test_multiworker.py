"""Multi-worker training over TF_CONFIG on loopback: TensorFlow's multi-worker strategy."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tpu_estimator.tools import launcher

import zygote

PROGRAM = os.path.join(os.path.dirname(__file__), 'multiworker', 'program.py')


@pytest.fixture(autouse=True)
def _forked_tasks(monkeypatch):
  """The tasks `launcher.launch` starts here are forked (tests/zygote.py); the `tpu-estimator
  launch` command's tests start real processes."""
  zygote.fork_launched_tasks(monkeypatch, launcher)


def _env(**extra):
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', **extra)


def _results(out_dir):
  return {name[:-len('.json')]: json.load(open(os.path.join(out_dir, name)))
          for name in os.listdir(out_dir)}


def _latest_step(model_dir):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  latest = tf.train.latest_checkpoint(str(model_dir))
  try:
    return int(tf.train.load_variable(latest, 'global_step')) if latest else -1
  except (tf.errors.NotFoundError, tf.errors.DataLossError, ValueError):
    return -1  # rotated away between reading the state file and the checkpoint


def test_two_workers_train_like_one_process_with_the_same_shards(tmp_path):
  cluster_out, single_out = tmp_path / 'cluster_out', tmp_path / 'single_out'
  cluster_out.mkdir()
  single_out.mkdir()
  single = zygote.Popen([sys.executable, PROGRAM, str(tmp_path / 'single'), '20',
                         str(single_out), '2'], env=_env())
  codes = launcher.launch([PROGRAM, str(tmp_path / 'cluster'), '20', str(cluster_out)], 2,
                          env=_env(), timeout=240)
  assert single.wait(240) == 0
  assert codes == [0, 0]
  cluster = _results(str(cluster_out))
  reference = _results(str(single_out))['worker0']  # no TF_CONFIG: the local default task
  assert set(cluster) == {'chief0', 'worker0'}
  for task in cluster.values():
    assert task['global_step'] == 20
    np.testing.assert_allclose(task['kernel'], reference['kernel'], atol=1e-4)
    assert task['batch_size'] == 8 and task['num_pipelines'] == 2  # per-host batch
  assert sorted(t['pipeline_id'] for t in cluster.values()) == [0, 1]  # each its own data
  # a worker is a host: programs that shard by (num_hosts, current_host) read their own part
  assert sorted(t['hosts'] for t in cluster.values()) == [[0, 2], [1, 2]]
  assert reference['hosts'] == [0, 1]
  assert reference['batch_size'] == 16
  # only the chief writes checkpoints
  assert os.path.exists(tmp_path / 'cluster' / 'model.ckpt-20.index')


def test_dead_worker_stops_the_chief_and_a_restart_resumes(tmp_path):
  out = tmp_path / 'out'
  out.mkdir()
  model_dir = tmp_path / 'model'
  timeout_ms = 15000
  configs = launcher.tf_configs(2)
  processes = [zygote.Popen(
      [sys.executable, PROGRAM, str(model_dir), '100000', str(out)],
      env=_env(TF_CONFIG=json.dumps(c), OPERATION_TIMEOUT_MS=str(timeout_ms)))
               for c in configs]
  try:
    deadline = time.time() + 180
    while _latest_step(model_dir) < 10:  # (old checkpoints are rotated away quickly)
      assert time.time() < deadline, 'training did not reach step 10'
      assert all(p.poll() is None for p in processes)
      time.sleep(0.2)
    processes[1].send_signal(signal.SIGKILL)
    killed = time.time()
    code = processes[0].wait(timeout_ms / 1000 + 60)  # the documented timeout, plus slack
    assert code != 0
    assert time.time() - killed < timeout_ms / 1000 + 60
  finally:
    for p in processes:
      if p.poll() is None:
        p.kill()
      p.wait()
  saved = _latest_step(model_dir)
  assert saved >= 10
  codes = launcher.launch([PROGRAM, str(model_dir), str(saved + 10), str(out)], 2, env=_env(),
                          timeout=240)
  assert codes == [0, 0]
  for task in _results(str(out)).values():
    assert task['start_step'] == saved
    assert task['global_step'] == saved + 10


_TASK_SCRIPT = '''
import json, os, sys, time
task = json.loads(os.environ['TF_CONFIG'])['task']
with open(os.path.join(sys.argv[1], '%s%d' % (task['type'], task['index'])), 'w') as f:
  json.dump(json.loads(os.environ['TF_CONFIG']), f)
if sys.argv[2] == 'fail' and task['type'] == 'worker':
  sys.exit(3)
if sys.argv[2] == 'fail':
  time.sleep(600)  # the chief would wait forever: the launcher must stop it
'''


def test_launch_command_gives_each_task_a_loopback_tf_config(tmp_path):
  script = tmp_path / 'task.py'
  script.write_text(_TASK_SCRIPT)
  result = subprocess.run([sys.executable, '-m', 'tpu_estimator', 'launch', '--workers', '3',
                           str(script), str(tmp_path), 'ok'], env=_env(), timeout=120)
  assert result.returncode == 0
  configs = {name: json.load(open(tmp_path / name)) for name in ('chief0', 'worker0', 'worker1')}
  cluster = configs['chief0']['cluster']
  assert all(c['cluster'] == cluster for c in configs.values())
  addresses = cluster['chief'] + cluster['worker']
  assert len(set(addresses)) == 3 and all(a.startswith('127.0.0.1:') for a in addresses)


def test_launch_stops_the_other_tasks_when_one_fails(tmp_path):
  script = tmp_path / 'task.py'
  script.write_text(_TASK_SCRIPT)
  started = time.time()
  result = subprocess.run([sys.executable, '-m', 'tpu_estimator', 'launch', '--workers', '2',
                           str(script), str(tmp_path), 'fail'], env=_env(), timeout=120,
                          capture_output=True, text=True)
  assert result.returncode == 3
  assert time.time() - started < 60
  assert 'task exit codes' in result.stderr


STRATEGY_PROGRAM = os.path.join(os.path.dirname(__file__), 'multiworker', 'strategy_program.py')


def test_estimator_train_distribute_multi_worker_equals_local_replicas(tmp_path):
  """RunConfig(train_distribute=MultiWorkerMirroredStrategy()) made eagerly at the top of the
  program (its task server already started), a chief and a worker: each reads its shard through
  input_fn(input_context) and they train as two local replicas on the same rows."""
  cluster_out, local_out = tmp_path / 'cluster_out', tmp_path / 'local_out'
  cluster_out.mkdir()
  local_out.mkdir()
  local = zygote.Popen([sys.executable, STRATEGY_PROGRAM, 'local', str(tmp_path / 'local'),
                        '10', str(local_out)], env=_env())
  codes = launcher.launch([STRATEGY_PROGRAM, 'cluster', str(tmp_path / 'cluster'), '10',
                           str(cluster_out)], 2, env=_env(), timeout=240)
  assert local.wait(240) == 0
  assert codes == [0, 0]
  cluster, (reference,) = _results(str(cluster_out)), _results(str(local_out)).values()
  assert set(cluster) == {'chief0', 'worker0'}
  assert sorted((t['pipelines'], t['pipeline_id']) for t in cluster.values()) == [(2, 0), (2, 1)]
  for task in cluster.values():
    assert task['global_step'] == 10
    np.testing.assert_allclose(task['kernel'], reference['kernel'], atol=1e-5)
  assert os.path.exists(tmp_path / 'cluster' / 'model.ckpt-10.index')
