"""The local launcher (`tpu_estimator.tools.launcher`, `tpu-estimator launch`): the TF_CONFIG
of each task (chief, workers, ps tasks, evaluator), how a run ends (ps tasks stopped once the
others are done, everything stopped when one fails) and the command's flags.  The launched
programs are small scripts that import no TensorFlow."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tpu_estimator.tools import cli
from tpu_estimator.tools import launcher

# argv: OUT_DIR MODE TASK_COUNT.  Every task writes its TF_CONFIG to OUT_DIR/<type><index>.json;
# ps tasks then serve forever.  MODE 'ok': the others wait until every task has written its
# file, then exit 0.  'fail': a worker exits 3, the others hang.  'ps-fails': a ps exits 4,
# the others hang.  'stubborn': as 'ok', but ps tasks ignore SIGTERM.  'hang': every task hangs.
_TASK_SCRIPT = '''
import json, os, signal, sys, time
out, mode, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = json.loads(os.environ['TF_CONFIG'])
kind = config['task']['type']
if kind == 'ps' and mode == 'stubborn':
  signal.signal(signal.SIGTERM, signal.SIG_IGN)
path = os.path.join(out, '%s%d' % (kind, config['task']['index']))
with open(path + '.tmp', 'w') as f:
  json.dump(config, f)
os.replace(path + '.tmp', path + '.json')
if (kind, mode) in (('worker', 'fail'), ('ps', 'ps-fails')):
  sys.exit(3 if kind == 'worker' else 4)
if kind == 'ps' or mode in ('fail', 'ps-fails', 'hang'):
  time.sleep(600)
deadline = time.time() + 30
while (len([n for n in os.listdir(out) if n.endswith('.json')]) < count
       and time.time() < deadline):
  time.sleep(0.02)
'''


@pytest.fixture(name='script')
def _script(tmp_path):
  path = tmp_path / 'task.py'
  path.write_text(_TASK_SCRIPT)
  (tmp_path / 'out').mkdir()
  return str(path)


def _configs(out_dir):
  return {name[:-len('.json')]: json.load(open(os.path.join(out_dir, name)))
          for name in os.listdir(out_dir) if name.endswith('.json')}


def test_tf_configs_list_ps_tasks_and_give_the_evaluator_the_cluster_it_is_not_in():
  configs = launcher.tf_configs(3, num_ps=2, evaluator=True)
  assert [(c['task']['type'], c['task']['index']) for c in configs] == [
      ('chief', 0), ('worker', 0), ('worker', 1), ('ps', 0), ('ps', 1), ('evaluator', 0)]
  cluster = configs[0]['cluster']
  assert all(c['cluster'] == cluster for c in configs)
  assert sorted(cluster) == ['chief', 'ps', 'worker']  # no 'evaluator' job
  assert (len(cluster['chief']), len(cluster['worker']), len(cluster['ps'])) == (1, 2, 2)
  addresses = cluster['chief'] + cluster['worker'] + cluster['ps']
  assert len(set(addresses)) == 5 and all(a.startswith('127.0.0.1:') for a in addresses)
  assert launcher.task_names(3, 2, True) == [
      'chief:0', 'worker:0', 'worker:1', 'ps:0', 'ps:1', 'evaluator:0']


def test_tf_configs_keep_their_positional_ports_and_default_to_chief_and_workers():
  configs = launcher.tf_configs(2, [1111, 2222])
  assert [c['task'] for c in configs] == [{'type': 'chief', 'index': 0},
                                          {'type': 'worker', 'index': 0}]
  assert configs[0]['cluster'] == {'chief': ['127.0.0.1:1111'], 'worker': ['127.0.0.1:2222']}
  assert launcher.tf_configs(1, [1111], num_ps=0)[0]['cluster'] == {'chief': ['127.0.0.1:1111']}
  only_ps = launcher.tf_configs(1, [1111, 2222], num_ps=1)[0]['cluster']
  assert only_ps == {'chief': ['127.0.0.1:1111'], 'ps': ['127.0.0.1:2222']}


def test_a_port_handed_out_in_another_process_is_not_handed_out_again():
  """Two clusters launched at the same time on one machine (two test processes) must not share
  a port: until its task binds it a port looks free, so free_ports claims what it hands out."""
  theirs = json.loads(subprocess.run(
      [sys.executable, '-c', 'import json; from tpu_estimator.tools import launcher; '
       'print(json.dumps(launcher.free_ports(300)))'],
      capture_output=True, text=True, check=True).stdout)
  ours = launcher.free_ports(300)
  assert len(set(theirs)) == len(set(ours)) == 300
  assert not set(theirs) & set(ours)


@pytest.mark.parametrize('kwargs, match', [
    (dict(num_workers=0), r'num_workers must be an integer >= 1\. Received: num_workers=0\. '
                          r'Pass the number of training tasks'),
    (dict(num_workers=2, num_ps=-1), r'num_ps must be an integer >= 0\. Received: num_ps=-1\. '
                                     r'Pass 0 for no parameter servers'),
    (dict(num_workers=1.5), r'Received: num_workers=1\.5'),
    (dict(num_workers=2, ports=[1111]), r'one port per .* \(2\)\. Received: ports=\[1111\]\. '
                                        r'Pass 2 ports'),
])
def test_bad_counts_are_refused_naming_the_argument_and_the_fix(kwargs, match):
  with pytest.raises(ValueError, match=match):
    launcher.tf_configs(**kwargs)
  if 'ports' not in kwargs:
    with pytest.raises(ValueError, match=match):
      launcher.launch(['never_started.py'], **kwargs)


def test_launch_gives_each_task_its_tf_config_and_stops_the_ps_tasks_at_the_end(script, tmp_path):
  out = str(tmp_path / 'out')
  started = time.time()
  codes = launcher.launch([script, out, 'ok', '5'], 2, num_ps=2, evaluator=True, timeout=30)
  assert codes == [0, 0, 0, 0, 0]  # the ps tasks were still serving: stopped, reported 0
  assert time.time() - started < 10
  configs = _configs(out)
  assert sorted(configs) == ['chief0', 'evaluator0', 'ps0', 'ps1', 'worker0']
  cluster = configs['chief0']['cluster']
  assert all(c['cluster'] == cluster for c in configs.values())
  assert sorted(cluster) == ['chief', 'ps', 'worker']
  addresses = cluster['chief'] + cluster['worker'] + cluster['ps']
  assert len(set(addresses)) == 4 and all(a.startswith('127.0.0.1:') for a in addresses)
  assert configs['evaluator0']['task'] == {'type': 'evaluator', 'index': 0}


def test_a_ps_task_ignoring_sigterm_is_killed_after_the_grace_period(script, tmp_path):
  started = time.time()
  codes = launcher.launch([script, str(tmp_path / 'out'), 'stubborn', '2'], 1, num_ps=1,
                          stop_grace_secs=0.5, timeout=30)
  assert codes == [0, 0]
  assert time.time() - started < 10


def test_a_failing_worker_stops_the_chief_ps_and_evaluator(script, tmp_path):
  started = time.time()
  codes = launcher.launch([script, str(tmp_path / 'out'), 'fail', '5'], 3, num_ps=1,
                          evaluator=True, timeout=30)
  assert time.time() - started < 10  # not the timeout, nor the tasks' 600 s sleep
  assert codes[1] == 3 or codes[2] == 3
  stopped = [c for c in codes if c != 3]
  assert stopped and all(c == -signal.SIGTERM for c in stopped)


def test_a_ps_task_exiting_on_its_own_with_an_error_is_a_failure(script, tmp_path):
  codes = launcher.launch([script, str(tmp_path / 'out'), 'ps-fails', '3'], 2, num_ps=1,
                          timeout=30)
  assert codes == [-signal.SIGTERM, -signal.SIGTERM, 4]


def test_cluster_exposes_its_processes_for_fault_injection(script, tmp_path):
  out = str(tmp_path / 'out')
  with launcher.Cluster([script, out, 'hang', '4'], 2, num_ps=1, evaluator=True) as cluster:
    assert cluster.names == ['chief:0', 'worker:0', 'ps:0', 'evaluator:0']
    assert [c['task']['type'] for c in cluster.tf_configs] == ['chief', 'worker', 'ps',
                                                              'evaluator']
    deadline = time.time() + 10
    while len(_configs(out)) < 4:
      assert time.time() < deadline, 'the tasks did not start'
      time.sleep(0.02)
    assert _configs(out)['worker0'] == cluster.tf_configs[1]
    cluster.processes[1].kill()
    codes = cluster.wait(timeout=30)
  assert codes == [-signal.SIGTERM, -signal.SIGKILL, -signal.SIGTERM, -signal.SIGTERM]
  with pytest.raises(RuntimeError, match='before start'):
    launcher.Cluster(['x.py'], 1).wait()


def test_launch_command_parses_ps_and_evaluator():
  parser = cli.build_parser()
  args = parser.parse_args(['launch', '--workers', '2', '--ps', '3', '--evaluator',
                            'train.py', '--ps', '9'])
  assert (args.workers, args.ps, args.evaluator) == (2, 3, True)
  assert (args.script, args.args) == ('train.py', ['--ps', '9'])  # the program's own
  args = parser.parse_args(['launch', '--workers', '1', 'train.py'])
  assert (args.ps, args.evaluator, args.timeout) == (0, False, None)
  for bad in ('-1', 'two'):
    with pytest.raises(SystemExit):
      parser.parse_args(['launch', '--workers', '1', '--ps', bad, 'train.py'])


def test_launch_command_names_each_task_exit_code(script, tmp_path, capsys):
  out = str(tmp_path / 'out')
  assert cli.main(['launch', '--workers', '2', '--ps', '1', '--evaluator', '--timeout', '30',
                   script, out, 'ok', '4']) == 0
  assert 'task exit codes: chief:0=0 worker:0=0 ps:0=0 evaluator:0=0' in capsys.readouterr().err
  for name in os.listdir(out):
    os.remove(os.path.join(out, name))
  assert cli.main(['launch', '--workers', '2', '--ps', '1', script, out, 'fail', '3']) == 3
  assert 'worker:0=3' in capsys.readouterr().err
