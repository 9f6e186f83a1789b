"""Reliability: kills, preemption, NaN/Inf losses, concurrent readers and bad input never lose a
model (DESIGN §8: checkpoints and exports are atomic; a crash or kill at any moment leaves the
last good checkpoint loadable).

Child processes come from a fork server (tests/reliability_programs/forkserver.py) that imports
TensorFlow once, so a SIGKILL/SIGTERM trial costs seconds instead of a TensorFlow start-up.
Every child is killed (by pid) when its test ends; the server when the module ends.
"""
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te
from reliability_programs import forkserver as fs

v1 = tf.compat.v1
KILL_TRIALS = 12
KILL_SEED = 20240601


@pytest.fixture(scope='module', autouse=True)
def server(tmp_path_factory):
  """Started before the first test, so it imports TensorFlow while in-process tests run."""
  log = tmp_path_factory.mktemp('forkserver') / 'server.log'
  with fs.ForkServer(str(log)) as forkserver:
    yield forkserver


def _run_with_timeout(fn, timeout=120):
  """Runs `fn` in a thread; fails (instead of hanging the suite) if it does not finish."""
  box = {}

  def target():
    try:
      box['result'] = fn()
    except BaseException as e:  # pylint: disable=broad-except
      box['error'] = e

  thread = threading.Thread(target=target, daemon=True)
  thread.start()
  thread.join(timeout)
  assert not thread.is_alive(), 'hung: no result or error within %ss' % timeout
  return box


def _estimator(kind, model_dir, model_fn=None, save_steps=1, keep=5, ipl=4):
  if kind == 'estimator':
    return te.Estimator(model_fn or h.make_model_fn(), model_dir=str(model_dir),
                        params={'batch_size': 16},
                        config=te.EstimatorRunConfig(save_checkpoints_steps=save_steps,
                                                     keep_checkpoint_max=keep))
  return te.TPUEstimator(
      model_fn or h.make_model_fn(tpu=True), use_tpu=True, train_batch_size=16,
      eval_batch_size=16, predict_batch_size=16,
      config=h.tpu_config(2, ipl, model_dir=str(model_dir), save_checkpoints_steps=save_steps,
                          keep_checkpoint_max=keep))


class _FirstStep(v1.train.SessionRunHook):
  """Records the global step a train() call starts from."""

  def begin(self):
    self._step = v1.train.get_global_step()

  def after_create_session(self, session, coord):
    self.first = int(session.run(self._step))


# ---------------------------------------------------------------------------------------------
# NaN / Inf loss

def _nan_data(bad_row):
  x, y = h.make_data(96)
  x = x.copy()
  x[bad_row, 0] = np.nan  # NaN loss, and NaN gradients: a step applies NaN to the weights
  return x, y


@pytest.mark.parametrize('kind,bad_row,nan_step,last_good', [
    ('estimator', 50, 4, 3),  # batch 3 (rows 48-63) is the 4th step: one step per run
    ('tpu', 85, 6, 4),  # batch 5 is step 6, in the 2nd device loop of 4 steps (5, 6, ...)
])
def test_nan_loss_stops_with_step_and_never_becomes_latest(tmp_path, kind, bad_row, nan_step,
                                                           last_good):
  x, y = _nan_data(bad_row)
  est = _estimator(kind, tmp_path)
  with pytest.raises(te.NanLossDuringTrainingError) as info:
    est.train(h.dataset_input_fn(x, y), steps=20)
  assert isinstance(info.value, v1.train.NanLossDuringTrainingError)
  assert 'global step %d' % nan_step in str(info.value), str(info.value)
  latest, step = fs.check_model_dir(str(tmp_path))  # loads, every variable finite
  assert step == last_good, (latest, str(info.value))
  # Training continues from the last good checkpoint once the data is fixed.
  good_x, good_y = h.make_data(96)
  first = _FirstStep()
  est.train(h.dataset_input_fn(good_x, good_y), steps=4, hooks=[first])
  assert first.first == last_good
  assert fs.check_model_dir(str(tmp_path))[1] == last_good + 4


def test_inf_loss_is_caught_too(tmp_path):
  x, y = h.make_data(96)

  def model_fn(features, labels, mode, params):
    spec = h.make_model_fn()(features, labels, mode, params)
    step = v1.train.get_global_step()
    with tf.control_dependencies([spec.train_op]):
      loss = tf.where(step.read_value() >= 3, np.inf, spec.loss)
    return spec._replace(loss=loss)

  est = _estimator('estimator', tmp_path, model_fn=model_fn)
  with pytest.raises(te.NanLossDuringTrainingError, match='global step 3'):
    est.train(h.dataset_input_fn(x, y), steps=10)
  assert fs.check_model_dir(str(tmp_path))[1] == 2


# ---------------------------------------------------------------------------------------------
# Errors from the input pipeline and model_fn reach the user

BAD_RECORD = 70  # the 5th batch of 16: a few steps (and for TPUEstimator a device loop) run first


def _py_function_input_fn(repeat=True):
  x, y = h.make_data(96)

  def check(i):
    if int(i) == BAD_RECORD:
      raise ValueError('bad record %d' % int(i))
    return i

  def input_fn(params):
    ds = tf.data.Dataset.range(96)
    if repeat:
      ds = ds.repeat()
    ds = ds.map(lambda i: tf.reshape(tf.py_function(check, [i], tf.int64), []))
    ds = ds.map(lambda i: ({'x': tf.gather(x, i)}, tf.gather(y, i)))
    return ds.batch(params['batch_size'])

  return input_fn


def _assert_input_fn():
  x, y = h.make_data(96)
  y = y.copy()
  y[BAD_RECORD] = 99

  def input_fn(params):
    def check(features, label):
      with tf.control_dependencies([tf.debugging.assert_less(
          label, tf.constant(3, tf.int64), message='label out of range')]):
        return features, tf.identity(label)
    ds = tf.data.Dataset.from_tensor_slices(({'x': x}, y)).map(check).repeat()
    return ds.batch(params['batch_size'])

  return input_fn


def _exploding_model_fn(kind):
  inner = h.make_model_fn(tpu=kind == 'tpu')

  def model_fn(features, labels, mode, params):
    inner(features, labels, mode, params)
    raise RuntimeError('model_fn exploded: bad layer size 7')

  return model_fn


def _check_in_graph_error(box, text, est_dir):
  error = box.get('error')
  assert error is not None, 'no error raised (result %r)' % (box.get('result'),)
  assert isinstance(error, tf.errors.OpError), repr(error)
  assert text in error.message, error.message
  assert 'cancelled' not in type(error).__name__.lower(), repr(error)
  # Whatever ran before the error, the model_dir keeps a loadable latest checkpoint.
  fs.check_model_dir(est_dir)


@pytest.mark.parametrize('kind', ['estimator', 'tpu'])
def test_py_function_error_in_input_reaches_train(tmp_path, kind):
  est = _estimator(kind, tmp_path)
  box = _run_with_timeout(lambda: est.train(_py_function_input_fn(), steps=20))
  _check_in_graph_error(box, 'bad record %d' % BAD_RECORD, str(tmp_path))
  assert 'ValueError' in box['error'].message


@pytest.mark.parametrize('kind', ['estimator', 'tpu'])
@pytest.mark.parametrize('call', ['evaluate', 'predict'])
def test_py_function_error_in_input_reaches_evaluate_and_predict(tmp_path, kind, call):
  est = _estimator(kind, tmp_path)
  est.train(h.dataset_input_fn(*h.make_data(96)), steps=1)
  if call == 'evaluate':
    run = lambda: est.evaluate(_py_function_input_fn(repeat=False))
  else:
    run = lambda: list(est.predict(_py_function_input_fn(repeat=False)))
  box = _run_with_timeout(run)
  _check_in_graph_error(box, 'bad record %d' % BAD_RECORD, str(tmp_path))


@pytest.mark.parametrize('kind', ['estimator', 'tpu'])
def test_failed_assertion_in_input_reaches_train(tmp_path, kind):
  est = _estimator(kind, tmp_path)
  box = _run_with_timeout(lambda: est.train(_assert_input_fn(), steps=20))
  _check_in_graph_error(box, 'label out of range', str(tmp_path))
  assert isinstance(box['error'], tf.errors.InvalidArgumentError)


@pytest.mark.parametrize('kind', ['estimator', 'tpu'])
@pytest.mark.parametrize('call', ['train', 'evaluate'])
def test_model_fn_exception_reaches_user_unchanged(tmp_path, kind, call):
  good = _estimator(kind, tmp_path)
  good.train(h.dataset_input_fn(*h.make_data(96)), steps=1)
  est = _estimator(kind, tmp_path, model_fn=_exploding_model_fn(kind))
  before = fs.check_model_dir(str(tmp_path))
  if call == 'train':
    run = lambda: est.train(h.dataset_input_fn(*h.make_data(96)), steps=5)
  else:
    run = lambda: est.evaluate(h.dataset_input_fn(*h.make_data(32), repeat=False))
  box = _run_with_timeout(run)
  assert type(box.get('error')) is RuntimeError, repr(box)
  assert str(box['error']) == 'model_fn exploded: bad layer size 7'
  assert fs.check_model_dir(str(tmp_path)) == before


def test_input_batch_not_matching_train_batch_size_fails_instead_of_hanging(server, tmp_path):
  """TPUEstimator(train_batch_size=16, 2 shards) with an input_fn batching 10 rows, repeated:
  an error naming both sizes, in a child process so a hang cannot stall the suite."""
  child = server.start('wrong_batch_trainer', model_dir=str(tmp_path / 'model'))
  try:
    child.wait_word('STARTED', 60)
    try:
      code = child.wait_exit(30)
    except AssertionError:
      pytest.fail('train() hung for 30 s (no step, no error) on input batches of 10 rows with '
                  'train_batch_size=16')
  finally:
    if not child.exited:
      child.kill()
  errors = [t for _, _, t in child.lines('ERROR')]
  assert code == 1 and errors, (code, child.lines())
  assert errors[0].split(':')[0] in ('ValueError', 'InvalidArgumentError'), errors
  assert '16' in errors[0] and '10' in errors[0], errors


# ---------------------------------------------------------------------------------------------
# SIGKILL at random moments

def test_sigkill_at_random_moments_never_loses_the_model(server, tmp_path):
  """KILL_TRIALS kills (Estimator and TPUEstimator alternating; a random delay after start, a
  random moment in a checkpoint write, or in an export): each leaves a loadable latest
  checkpoint at a step >= the last one reported saved, only complete exports, and the next
  train resumes from exactly that checkpoint."""
  lines = []
  summary = fs.run_kill_trials(server, str(tmp_path), KILL_TRIALS, seed=KILL_SEED,
                               log=lines.append)
  report = '\n'.join(lines)
  assert summary['runs'] == KILL_TRIALS
  assert summary['lost'] == 0, report
  assert summary['resumed'] == KILL_TRIALS, report
  # The kills did land in checkpoint writes and exports.
  assert summary['phases'].get('checkpoint-write', 0) >= 1, report
  assert summary['phases'].get('export-write', 0) >= 1, report


def _wait_traced(pid, timeout=20):
  """Until every thread of `pid` has a tracer."""
  deadline = time.time() + timeout
  while time.time() < deadline:
    try:
      tasks = os.listdir('/proc/%d/task' % pid)
      traced = []
      for task in tasks:
        with open('/proc/%d/task/%s/status' % (pid, task)) as f:
          tracer = [l for l in f if l.startswith('TracerPid:')][0].split()[1]
        traced.append(tracer != '0')
      if traced and all(traced):
        return True
    except (OSError, IndexError):
      pass
    time.sleep(0.05)
  return False


@pytest.mark.skipif(not shutil.which('strace') or not os.path.isdir('/proc'),
                    reason='needs strace (fault injection) and /proc')
def test_kill_while_train_start_resaves_the_latest_checkpoint(server, tmp_path):
  """A train() that resumes must never rewrite the latest checkpoint in place.

  TensorFlow's CheckpointSaverHook saves again at session creation, at the step just restored:
  the same prefix as the latest checkpoint, whose `.index` MergeV2Checkpoints truncates
  (O_TRUNC) and rewrites.  A kill in that window leaves the only latest checkpoint with an
  empty index.  strace kills the child exactly at its first write to that file (if the
  library never writes it, the child simply finishes)."""
  model_dir = os.path.realpath(str(tmp_path / 'model'))
  est = _estimator('estimator', model_dir, save_steps=1, keep=2)
  est.train(h.dataset_input_fn(*h.make_data(96)), steps=2)
  latest_index = os.path.join(model_dir, 'model.ckpt-2.index')
  assert os.path.exists(latest_index)
  go = str(tmp_path / 'go')
  child = server.start('resume_when_told', model_dir=model_dir, go_file=go)
  tracer = None
  try:
    child.wait_word('WAITING', 60)
    tracer = subprocess.Popen(
        ['strace', '-f', '-qq', '-p', str(child.pid), '-P', latest_index, '-e', 'trace=write',
         '-e', 'inject=write:signal=KILL', '-o', str(tmp_path / 'strace.txt')],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if not _wait_traced(child.pid):
      tracer.kill()
      pytest.skip('cannot attach strace: %s' % tracer.communicate()[1].decode()[-300:])
    with open(go, 'w'):
      pass
    code = child.wait_exit(90)
  finally:
    if not child.exited:
      child.kill()
    if tracer is not None and tracer.poll() is None:
      tracer.kill()
      tracer.wait()
  assert code in (0, -signal.SIGKILL), code
  size = os.path.getsize(latest_index) if os.path.exists(latest_index) else None
  try:
    fs.check_model_dir(model_dir)
  except Exception as e:  # pylint: disable=broad-except
    pytest.fail('killed while train() rewrote %s (now %s bytes): the latest checkpoint no '
                'longer loads: %s: %s' % (os.path.basename(latest_index), size,
                                          type(e).__name__, e))
  first = _FirstStep()
  est.train(h.dataset_input_fn(*h.make_data(96)), steps=1, hooks=[first])
  assert first.first >= 2


def test_resumed_train_does_not_rewrite_latest_checkpoint_in_place(tmp_path):
  """The cheap, deterministic form of the test above: after a resumed train(), the previous
  latest checkpoint's index is either untouched or was replaced by a new file (rename), never
  truncated and rewritten in place."""
  est = _estimator('estimator', tmp_path, save_steps=1, keep=5)
  data = h.make_data(96)
  est.train(h.dataset_input_fn(*data), steps=2)
  index = str(tmp_path / 'model.ckpt-2.index')
  before = os.stat(index)
  time.sleep(0.01)
  est.train(h.dataset_input_fn(*data), steps=1)
  after = os.stat(index)
  rewritten_in_place = (after.st_ino == before.st_ino and
                        after.st_mtime_ns != before.st_mtime_ns)
  assert not rewritten_in_place, 'model.ckpt-2.index was truncated and rewritten in place'


# ---------------------------------------------------------------------------------------------
# SIGTERM (preemption)

def _sigterm_after_step(child, step):
  """SIGTERM once the trainer reported `step`; (exit code, the steps it reported)."""
  try:
    child.wait_for(lambda w, t: w == 'STEP' and int(t) >= step, 90, 'step %d' % step)
    assert child.signal(signal.SIGTERM)
    code = child.wait_exit(60)
  finally:
    if not child.exited:
      child.kill()
  return code, [int(t) for _, _, t in child.lines('STEP')]


@pytest.mark.parametrize('kind', ['estimator', 'tpu'])
def test_sigterm_saves_at_current_step_then_exits_with_sigterm(server, tmp_path, kind):
  model_dir = str(tmp_path / 'model')
  ipl = 5
  child = server.start('sigterm_trainer', model_dir=model_dir, kind=kind, ipl=ipl)
  code, steps = _sigterm_after_step(child, 20)
  assert code == -signal.SIGTERM, (code, child.lines()[-5:])
  assert not child.lines('RETURNED')
  if kind == 'tpu':
    assert all(s % ipl == 0 for s in steps), steps  # whole device loops
  latest, step = fs.check_model_dir(model_dir)
  assert step == steps[-1], (latest, steps[-5:])
  # Only the session-start and the preemption checkpoints: the save came from SIGTERM.
  assert sorted(fs.step_of(p) for p in v1.train.get_checkpoint_state(
      model_dir).all_model_checkpoint_paths) == [0, steps[-1]]
  est = fs.make_estimator(kind, model_dir, save_secs=3600, keep=5, ipl=ipl)[0]
  first = _FirstStep()
  est.train(h.dataset_input_fn(*h.make_data(96)), steps=3, hooks=[first])
  assert first.first == steps[-1]
  assert fs.check_model_dir(model_dir)[1] == steps[-1] + 3


def test_sigterm_calls_the_programs_own_handler_after_the_checkpoint(server, tmp_path):
  model_dir = str(tmp_path / 'model')
  child = server.start('sigterm_trainer', model_dir=model_dir, kind='estimator',
                       own_handler=True)
  code, steps = _sigterm_after_step(child, 10)
  handler = child.lines('HANDLER')
  assert code == 0, (code, child.lines()[-5:])
  assert len(handler) == 1, child.lines()[-5:]
  signum, step_seen = handler[0][2].split()
  assert int(signum) == signal.SIGTERM
  assert int(step_seen) == steps[-1]  # the handler ran after the checkpoint at the last step
  returned = child.lines('RETURNED')
  assert returned and int(returned[0][2]) == steps[-1]
  assert fs.check_model_dir(model_dir)[1] == steps[-1]


# ---------------------------------------------------------------------------------------------
# Concurrent readers

def test_evaluate_uses_the_new_latest_when_its_checkpoint_vanishes(tmp_path):
  """Deterministic: between choosing the latest checkpoint and restoring it (input_fn runs in
  between), a trainer with keep_checkpoint_max=1 writes a new one and deletes the chosen one."""
  data = h.make_data(96)
  _estimator('estimator', tmp_path, keep=1).train(h.dataset_input_fn(*data), steps=2)
  calls = []

  def input_fn(params):
    calls.append(1)
    if len(calls) == 1:
      _estimator('estimator', tmp_path, keep=1).train(h.dataset_input_fn(*data), steps=1)
      assert not os.path.exists(str(tmp_path / 'model.ckpt-2.index'))
    return h.dataset_input_fn(*h.make_data(32), repeat=False)(params)

  est = _estimator('estimator', tmp_path, keep=1)
  result = est.evaluate(input_fn)
  # The checkpoint chosen first was gone before the restore: the new latest one was restored
  # (without building the graph, and calling input_fn, again).
  assert (result['global_step'], len(calls)) == (3, 1), (result, len(calls))


@pytest.mark.parametrize('call,count', [('evaluate', 15), ('predict', 8), ('export', 8)])
def test_concurrent_evaluator_never_fails_while_trainer_rotates_checkpoints(server, tmp_path,
                                                                            call, count):
  """An evaluator process calls evaluate() (predict, export_saved_model) on the latest
  checkpoint `count` times while a trainer process saves a checkpoint every step and keeps
  only one.  Predict and export failed 7-16 times of 8-16 before they pinned their checkpoint;
  evaluate failed 1 of 15 with NoCheckpointError (the state file read between a save and the
  deletion of the checkpoint it named)."""
  model_dir = str(tmp_path / 'model')
  evaluations = count
  trainer = server.start('train_forever', model_dir=model_dir)
  evaluator = None
  try:
    trainer.wait_word('SAVED', 60)
    evaluator = server.start('evaluator', model_dir=model_dir, count=evaluations, call=call)
    started = evaluator.wait_word('STARTED', 60)[0]
    done = evaluator.wait_word('EVALDONE', 150)
    assert not trainer.exited, 'the trainer stopped before the evaluations ended'
    saves_during = [t for t, w, _ in trainer.lines('SAVED') if started <= t <= done[0]]
  finally:
    for child in (trainer, evaluator):
      if child is not None and not child.exited:
        child.kill()
  results = [json.loads(t) for _, _, t in evaluator.lines('EVAL')]
  failures = [r for r in results if not r['ok']]
  assert len(results) == evaluations
  assert not failures, '%d of %d evaluations failed (retries: %s); first: %s' % (
      len(failures), evaluations, done[2], failures[0]['error'])
  assert len(saves_during) >= evaluations, 'the trainer barely ran: %d saves' % len(saves_during)
  assert not [d for d in os.listdir(model_dir) if d.startswith('.pinned-')]
  if call == 'evaluate':
    steps = [r['global_step'] for r in results]
    assert steps == sorted(steps), steps
    assert steps[-1] > steps[0]


def test_second_trainer_process_is_refused_while_the_first_trains(server, tmp_path):
  """Two trainers on one model_dir interleaved their checkpoints (the state went 60 -> 45)."""
  model_dir = str(tmp_path / 'model')
  trainer = server.start('train_forever', model_dir=model_dir)
  try:
    trainer.wait_for(lambda w, t: w == 'SAVED' and int(t) >= 3, 90, 'a save at step 3')
    est = _estimator('estimator', model_dir, keep=1)
    with pytest.raises(te.ModelDirLockedError, match='pid %d' % trainer.pid):
      est.train(h.dataset_input_fn(*h.make_data(96)), steps=1)
    assert not trainer.exited
  finally:
    if not trainer.exited:
      trainer.kill()
  trainer.wait_exit(30)
  # The killed trainer's lock does not outlive it.
  first = _FirstStep()
  est.train(h.dataset_input_fn(*h.make_data(96)), steps=1, hooks=[first])
  assert first.first >= 1


def test_sigterm_while_restoring_removes_the_pinned_snapshot(server, tmp_path):
  """SIGTERM while evaluate restores from its `.pinned-*` snapshot: the snapshot is removed
  and the process still ends by SIGTERM (it was left behind, and never swept)."""
  model_dir = str(tmp_path / 'model')
  _estimator('estimator', model_dir).train(h.dataset_input_fn(*h.make_data(96)), steps=2)
  child = server.start('pinned_evaluator', model_dir=model_dir)
  try:
    child.wait_word('PINNED', 60)
    assert [d for d in os.listdir(model_dir) if d.startswith('.pinned-')]
    assert child.signal(signal.SIGTERM)
    code = child.wait_exit(30)
  finally:
    if not child.exited:
      child.kill()
  assert code == -signal.SIGTERM, (code, child.lines()[-5:])
  assert not [d for d in os.listdir(model_dir) if d.startswith('.pinned-')]
