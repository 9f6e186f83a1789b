"""XLA executables cached across processes (tpu_estimator/distribute/compile_cache.py).

A second fresh process training the same model with the same cache loads the compiled training
loop instead of compiling it (no entry is written again) and trains to the same weights; a
damaged entry is replaced, training goes on; `TPU_ESTIMATOR_XLA_CACHE` moves the cache or turns
it off; a cache the user's own `TF_XLA_FLAGS` sets wins; a directory that cannot be used means
no cache, never an error.  The suite runs with the cache off (conftest.py); here it is in
tmp_path, never the user's home.
"""
import json
import logging
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import tpu_estimator as te
from tpu_estimator.distribute import compile_cache
from helpers import dataset_input_fn, make_data, make_model_fn

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS)
STEPS, IPL, BATCH = 100, 50, 16

# Trains the tests' linear model with the whole loop compiled, in a fresh process.
_PROGRAM = r"""
import json, sys
import tpu_estimator as te
from tpu_estimator.distribute import compile_cache
from helpers import dataset_input_fn, make_data, make_model_fn
x, y = make_data()
config = te.RunConfig(model_dir=sys.argv[1], tpu_config=te.TPUConfig(
    xla=True, iterations_per_loop=int(sys.argv[3])))
est = te.TPUEstimator(make_model_fn(tpu=True), config=config, use_tpu=True,
                      train_batch_size=int(sys.argv[4]))
est.train(dataset_input_fn(x, y, drop_remainder=True), max_steps=int(sys.argv[2]))
print('RESULT ' + json.dumps({
    'directory': compile_cache.directory(),
    'step': int(est.get_variable_value('global_step')),
    'weights': {n: est.get_variable_value(n).tolist() for n in ('dense/kernel', 'dense/bias')}}))
"""


def _train_in_fresh_process(model_dir, cache):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONPATH=os.pathsep.join([REPO, TESTS]))
  env[compile_cache.ENV] = str(cache)
  env.pop('TF_XLA_FLAGS', None)
  proc = subprocess.run([sys.executable, '-c', _PROGRAM, str(model_dir), str(STEPS), str(IPL),
                         str(BATCH)], env=env, capture_output=True, text=True, timeout=300,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith('RESULT ')][-1]
  return dict(json.loads(line[len('RESULT '):]), stderr=proc.stderr)


def _entries(directory):
  """{name: (inode, mtime_ns, size)}: a file written again (a compilation persisted anew,
  through a temporary file and a rename) gets a new inode or modification time."""
  return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size)
          for p in sorted(directory.iterdir()) if p.name.startswith('xla_compile_cache')}


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
  """Three fresh processes sharing one cache: cold, warm, and warm with every entry truncated;
  and the same training in this process, where the cache is off (conftest.py)."""
  tmp = tmp_path_factory.mktemp('compile_cache')
  cache = tmp / 'cache'
  found = {'cache': cache}
  for name in ('cold', 'warm', 'damaged'):
    if name == 'damaged':
      for entry in found['after_warm']:
        path = cache / found['cold']['tag'] / entry
        path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    found[name] = _train_in_fresh_process(tmp / name, cache)
    found[name]['tag'] = os.path.basename(found[name]['directory'])
    found['after_' + name] = _entries(cache / found[name]['tag'])
  x, y = make_data()
  config = te.RunConfig(model_dir=str(tmp / 'uncached'), tpu_config=te.TPUConfig(
      xla=True, iterations_per_loop=IPL))
  est = te.TPUEstimator(make_model_fn(tpu=True), config=config, use_tpu=True,
                        train_batch_size=BATCH)
  est.train(dataset_input_fn(x, y, drop_remainder=True), max_steps=STEPS)
  found['uncached'] = {n: est.get_variable_value(n) for n in ('dense/kernel', 'dense/bias')}
  return found


def test_a_fresh_process_loads_the_loop_an_earlier_one_compiled(runs):
  assert compile_cache.directory() is None  # off in this process (conftest.py)
  directory = runs['cold']['directory']
  assert os.path.dirname(directory) == str(runs['cache'])
  assert runs['cold']['tag'] == compile_cache.build_tag()
  assert len(runs['after_cold']) == 1  # the compiled training loop
  # The second process compiled nothing new: no entry added, none written again.
  assert runs['warm']['directory'] == directory
  assert runs['after_warm'] == runs['after_cold']


def test_loaded_loop_trains_to_the_weights_of_a_compiled_one(runs):
  for name in ('cold', 'warm', 'damaged'):
    assert runs[name]['step'] == STEPS, name
    for variable, want in runs['uncached'].items():
      np.testing.assert_allclose(runs[name]['weights'][variable], want, rtol=1e-6, atol=1e-7,
                                 err_msg='%s %s' % (name, variable))


def test_a_damaged_entry_is_replaced_and_training_goes_on(runs):
  # Without the check, TensorFlow fails to parse the truncated entry with an OutOfRangeError,
  # which ends training at step 0 as if the input had ended.
  assert 'removed 1 damaged entries' in runs['damaged']['stderr']
  assert runs['damaged']['step'] == STEPS
  (name, (_, _, size)), = runs['after_damaged'].items()
  assert name in runs['after_cold'] and size == runs['after_cold'][name][2]  # written anew
  assert compile_cache.is_whole(os.path.join(runs['damaged']['directory'], name))


@pytest.mark.parametrize('value', ['off', 'OFF', '0', 'false', 'no'])
def test_environment_variable_turns_it_off(tmp_path, value):
  environ = {compile_cache.ENV: value, 'HOME': str(tmp_path), 'XDG_CACHE_HOME': str(tmp_path)}
  assert compile_cache.settings(environ) == (None, '')
  assert list(tmp_path.iterdir()) == []


def _assert_cache_in(settings, root):
  directory, flags = settings
  assert directory == str(root / compile_cache.build_tag())
  assert os.path.isdir(directory)
  assert flags.split() == ['--tf_xla_persistent_cache_directory=' + directory,
                           '--tf_xla_persistent_cache_device_types=CPU']


def test_off_by_default_on_per_user_and_the_environment_variable_moves_it(tmp_path):
  xdg, home, moved = tmp_path / 'xdg', tmp_path / 'home', tmp_path / 'moved'
  assert compile_cache.settings({'HOME': str(home)}) == (None, '')
  assert list(tmp_path.iterdir()) == []  # nothing written into the home directory
  _assert_cache_in(compile_cache.settings({compile_cache.ENV: 'on', 'XDG_CACHE_HOME': str(xdg),
                                           'HOME': str(home)}),
                   xdg / 'tpu-estimator' / 'xla')
  _assert_cache_in(compile_cache.settings({compile_cache.ENV: 'yes', 'HOME': str(home)}),
                   home / '.cache' / 'tpu-estimator' / 'xla')
  _assert_cache_in(compile_cache.settings({compile_cache.ENV: str(moved), 'HOME': str(home)}),
                   moved)


def test_a_cache_the_user_set_in_tf_xla_flags_wins(tmp_path):
  environ = {compile_cache.ENV: str(tmp_path / 'ours'),
             'TF_XLA_FLAGS': '--tf_xla_persistent_cache_directory=' + str(tmp_path / 'theirs')}
  assert compile_cache.settings(environ) == (None, '')
  assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize('where', ['under_a_file', 'with a space'])
def test_an_unusable_directory_means_no_cache_and_a_debug_log(tmp_path, caplog, where):
  (tmp_path / 'under_a_file').write_text('not a directory')
  with caplog.at_level(logging.DEBUG, logger='tpu_estimator'):
    got = compile_cache.settings({compile_cache.ENV: str(tmp_path / where / 'cache')})
  assert got == (None, '')
  assert [r.levelno for r in caplog.records] == [logging.DEBUG]
  assert 'XLA compilation cache off' in caplog.records[0].getMessage()


def _field(number, payload):
  assert len(payload) < 128  # one-byte length
  return bytes([number << 3 | 2, len(payload)]) + payload


def test_damaged_entries_and_abandoned_writes_are_removed(tmp_path):
  whole = _field(1, b'key') + _field(2, b'hlo') + _field(3, b'executable')
  files = {'xla_compile_cache__1.pb': whole, 'xla_compile_cache__2.pb': whole[:-3],
           'xla_compile_cache__3.pb': whole + b'\x00', 'xla_compile_cache__4.pb': b'',
           'xla_compile_cache__5.pb': _field(1, b'key') + _field(2, b'hlo'),
           'xla_compile_cache__6.pb': b'garbage' * 10, 'xla_compile_cache__7.pb.1.tmp': b'',
           'xla_compile_cache__8.pb.2.tmp': b'', 'notes.txt': b'not ours'}
  for name, data in files.items():
    (tmp_path / name).write_bytes(data)
  hour_ago = time.time() - 2 * 3600
  os.utime(tmp_path / 'xla_compile_cache__7.pb.1.tmp', (hour_ago, hour_ago))
  assert compile_cache.remove_damaged(str(tmp_path)) == 6
  assert sorted(p.name for p in tmp_path.iterdir()) == [
      'notes.txt', 'xla_compile_cache__1.pb', 'xla_compile_cache__8.pb.2.tmp']


def test_prune_removes_the_oldest_entries_first(tmp_path):
  old_build, build = tmp_path / 'tf-2.16.0-aaaa', tmp_path / 'tf-2.21.0-bbbb'
  for age, path in enumerate([build / 'xla_compile_cache__new', build / 'xla_compile_cache__mid',
                              old_build / 'xla_compile_cache__old', build / 'notes.txt']):
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b'x' * 100)
    then = time.time() - 1000 * (age + 1)
    os.utime(path, (then, then))
  (tmp_path / 'other.txt').write_bytes(b'x' * 1000)
  assert compile_cache.prune(str(tmp_path), 250) == 1
  assert not (old_build / 'xla_compile_cache__old').exists()
  assert compile_cache.prune(str(tmp_path), 100) == 1
  assert sorted(p.name for p in build.iterdir()) == ['notes.txt', 'xla_compile_cache__new']
  assert (tmp_path / 'other.txt').exists()  # only entries are ever removed
