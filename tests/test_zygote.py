"""tests/zygote.py: a program forked from a zygote starts and ends as `python PROGRAM ARGS`
would (the differential and cluster tests rely on it).  The same assertions hold for the
subprocesses `TESTS_FORK=0` starts instead."""
import json
import os
import signal
import subprocess
import sys

import pytest

import reference
import zygote

PROGRAM = r'''
import atexit, json, os, sys, threading, time
mode = sys.argv[1]
with open(sys.argv[2], 'w') as f:
  json.dump({'argv': sys.argv, 'cwd': os.getcwd(), 'path0': sys.path[0], 'name': __name__,
             'file': __file__, 'config': os.environ.get('TF_CONFIG'),
             'pythonpath': os.environ.get('PYTHONPATH'), 'extra': os.environ.get('EXTRA')}, f)
print('to stdout')
print('to stderr', file=sys.stderr)
if mode == 'sleep':
  time.sleep(600)
if mode == 'raise':
  raise ValueError('raised by the program')
def later():  # a non-daemon thread: the program ends when it does, then atexit runs
  time.sleep(0.5)
  with open(sys.argv[2] + '.thread', 'w') as f:
    f.write('thread')
threading.Thread(target=later).start()
atexit.register(lambda: open(sys.argv[2] + '.atexit', 'w').write(
    str(os.path.exists(sys.argv[2] + '.thread'))))
sys.exit(int(mode))
'''


def test_argv_environment_streams_exit_codes_and_kill(tmp_path):
  program = tmp_path / 'program.py'
  program.write_text(PROGRAM)
  env = reference.env('ours')
  runs = {}
  for mode in ('3', 'raise', 'sleep'):
    log = open(tmp_path / (mode + '.log'), 'w')
    runs[mode] = (zygote.Popen(
        [sys.executable, str(program), mode, str(tmp_path / (mode + '.json'))], cwd=tmp_path,
        env=dict(env, TF_CONFIG=mode, EXTRA='x' if mode == '3' else 'y'), stdout=log,
        stderr=subprocess.STDOUT), log)
  forked = os.environ.get('TESTS_FORK') != '0'
  assert all(isinstance(proc, zygote.Process) == forked for proc, _ in runs.values())
  assert runs['3'][0].wait(120) == 3
  assert runs['raise'][0].wait(120) == 1
  with pytest.raises(subprocess.TimeoutExpired):
    runs['sleep'][0].wait(0.5)
  runs['sleep'][0].kill()
  assert runs['sleep'][0].wait(30) == -signal.SIGKILL
  assert runs['sleep'][0].poll() == -signal.SIGKILL
  for mode, (_, log) in runs.items():
    log.close()
    seen = json.loads((tmp_path / (mode + '.json')).read_text())
    assert seen['argv'] == [str(program), mode, str(tmp_path / (mode + '.json'))]
    assert seen['cwd'] == str(tmp_path) and seen['path0'] == str(tmp_path)
    assert seen['name'] == '__main__' and seen['file'] == str(program)
    assert seen['config'] == mode and seen['pythonpath'] == env['PYTHONPATH']
    output = (tmp_path / (mode + '.log')).read_text()
    assert 'to stdout' in output and 'to stderr' in output
  assert seen['extra'] == 'y'  # each child its own environment, from one zygote
  assert 'ValueError: raised by the program' in (tmp_path / 'raise.log').read_text()
  assert (tmp_path / '3.json.atexit').read_text() == 'True'


def test_what_cannot_be_forked_runs_as_a_subprocess(tmp_path):
  proc = zygote.Popen([sys.executable, '-c', 'import sys; sys.exit(4)'], cwd=tmp_path)
  assert isinstance(proc, subprocess.Popen) and proc.wait(60) == 4
  proc = zygote.Popen([sys.executable, os.devnull + '.py'], stdout=subprocess.PIPE)
  assert isinstance(proc, subprocess.Popen)
  proc.communicate()
