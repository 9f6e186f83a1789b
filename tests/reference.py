"""The original implementation (tensorflow-estimator 2.15 on TF 2.15) for differential tests:
its python, built by this repo's scripts/reference-venv.sh, and the environment both sides run
in.

Where the reference cannot exist (no Python 3.9-3.11 on the machine: the script exits 3) the
tests that need it are skipped, all with one reason (`check`); where it can but building or
running it fails, they fail: the comparison is the point."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

import zygote

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE_SCRIPT = os.path.join(REPO, 'scripts', 'reference-venv.sh')
NO_INTERPRETER = 3  # the script's exit status when no Python 3.9-3.11 is found
SKIP_REASON = ('the original implementation (TF 2.15) needs Python 3.9-3.11, and this machine '
               'has none (scripts/reference-venv.sh; set REFERENCE_BASE_PYTHON to one)')


class Unavailable(Exception):
  """The reference cannot be built or run: the tests that need it fail with this message."""


class NotHere(Unavailable):
  """The machine has no Python 3.9-3.11, so it cannot have the reference: tests are skipped."""


def check(runs):
  """`runs` (what a session fixture got from the reference), or the test's outcome when it got
  none: skipped when the reference cannot exist here, failed when it broke.  Raised here, not in
  the fixture, so `pytest -ra` folds every skip into one line."""
  if isinstance(runs, NotHere):
    pytest.skip(SKIP_REASON)
  if isinstance(runs, Unavailable):
    pytest.fail(str(runs), pytrace=False)
  return runs


def env(impl):
  """The environment of a program run on 'orig' or 'ours': no TF_CONFIG, no legacy-Keras
  switch, and only ours sees this repo on PYTHONPATH."""
  result = dict(os.environ)
  result['TF_CPP_MIN_LOG_LEVEL'] = '2'
  for name in ('TF_CONFIG', 'PYTHONPATH', 'TF_USE_LEGACY_KERAS'):
    result.pop(name, None)
  if impl == 'ours':  # this repo first, then whatever the test run itself had on its path
    result['PYTHONPATH'] = os.pathsep.join(p for p in (REPO, os.environ.get('PYTHONPATH')) if p)
  return result


def python(who):
  """The reference venv's python (built on first use); `who` names the tests in messages.
  Raises NotHere when the machine cannot have the reference at all, Unavailable when it
  could but building or running it failed."""
  try:
    proc = subprocess.run(['bash', REFERENCE_SCRIPT], capture_output=True, text=True,
                          timeout=1800, env=env('orig'))
  except subprocess.TimeoutExpired:
    raise Unavailable('%s did not finish within 30 minutes.' % REFERENCE_SCRIPT) from None
  if proc.returncode == NO_INTERPRETER:
    raise NotHere(SKIP_REASON)
  lines = proc.stdout.strip().splitlines()
  if proc.returncode != 0 or not lines or not os.path.isfile(lines[-1]):
    raise Unavailable('%s failed (exit %d), so the original implementation is not available '
                      'for %s.\nstdout:\n%s\nstderr:\n%s' %
                      (REFERENCE_SCRIPT, proc.returncode, who, proc.stdout[-2000:],
                       proc.stderr[-4000:]))
  return lines[-1]


IMPLS = ('orig', 'ours')


def outcome(prefix, run):
  """What a module's fixture hands its tests: `run(workdir)` in a fresh temporary directory
  (removed after), or the `Unavailable` it raised (`check` turns it into a skip or a
  failure)."""
  workdir = tempfile.mkdtemp(prefix=prefix)
  try:
    return run(workdir)
  except Unavailable as exc:
    return exc
  finally:
    shutil.rmtree(workdir, ignore_errors=True)


def run_both(pythons, program, tasks, workdir, tag, timeout):
  """`python program IMPL SPEC OUT` for both implementations at once, each on its own list of
  tasks (`tasks[impl]`, written to SPEC as JSON); returns {impl: what it wrote to OUT}.  Raises
  Unavailable with the log tail of every run that failed or ran past `timeout` seconds."""
  return run_rounds(pythons, program, [tasks], workdir, tag, timeout)[0]


def run_rounds(pythons, program, rounds, workdir, tag, timeout):
  """`run_both` for several rounds, each implementation in one process for all of them
  (`python program IMPL SPEC1 OUT1 SPEC2 OUT2 ...`, program_results.rounds): a later round's
  tasks (`rounds[i]`, or what it returns when it is a function) are made and written once both
  have finished the round before, which it may build on (resume the model_dir the other side
  wrote).  One process instead of one a round saves each round TensorFlow's import, seconds of
  CPU that the suite's two cores share.  Returns [{impl: what it wrote to OUT}] a round;
  `timeout`: seconds for each round."""
  files = {impl: [tuple(os.path.join(workdir, '%s%d_%s.%s' % (tag, i + 1, impl, ext))
                        for ext in ('spec.json', 'out.json')) for i in range(len(rounds))]
           for impl in IMPLS}
  running, outputs = {}, []
  try:
    for i, tasks in enumerate(rounds):
      tasks = tasks() if callable(tasks) else tasks
      for impl in IMPLS:
        _write_atomically(files[impl][i][0], tasks[impl])
      if not running:
        running = _start(pythons, program, files, workdir, tag)
      outputs.append(_await_round(running, files, i, time.time() + timeout, program, tag))
    _await_exits(running, time.time() + timeout, program, tag)
  finally:
    for proc, log_file, _ in running.values():
      if proc.poll() is None:
        proc.kill()
        proc.wait()
      log_file.close()
  return outputs


def _write_atomically(path, value):
  with open(path + '.partial', 'w') as f:
    json.dump(value, f)
  os.replace(path + '.partial', path)


def _start(pythons, program, files, workdir, tag):
  """{impl: (process, its open log file, the log's path)}, both programs started."""
  running = {}
  for impl in IMPLS:
    log = os.path.join(workdir, '%s_%s.log' % (tag, impl))
    log_file = open(log, 'w')
    argv = [pythons[impl], program, impl] + [path for pair in files[impl] for path in pair]
    running[impl] = (zygote.Popen(argv, cwd=REPO, env=env(impl), stdout=log_file,
                                  stderr=subprocess.STDOUT), log_file, log)
  return running


def _failure(program, impl, tag, code, log):
  with open(log) as f:
    return '%s %s (%s) failed (%s):\n%s' % (os.path.basename(program), impl, tag, code,
                                           f.read()[-6000:])


def _await_round(running, files, i, deadline, program, tag):
  """{impl: the output of round `i`} once both wrote it; Unavailable, with the log of each that
  exited without it or was still at it at `deadline`."""
  outs = {impl: files[impl][i][1] for impl in IMPLS}
  while not all(os.path.exists(out) for out in outs.values()):
    codes = {impl: running[impl][0].poll() for impl in IMPLS}  # before looking for its output
    late = time.time() > deadline
    failed = [impl for impl in IMPLS
              if (codes[impl] is not None or late) and not os.path.exists(outs[impl])]
    if failed:
      raise Unavailable('\n\n'.join(
          _failure(program, impl, '%s%d' % (tag, i + 1),
                   'timeout' if codes[impl] is None else codes[impl], running[impl][2])
          for impl in failed))
    time.sleep(0.1)
  outputs = {}
  for impl, out in outs.items():
    with open(out) as f:
      outputs[impl] = json.load(f)
  return outputs


def _await_exits(running, deadline, program, tag):
  """Both programs exited 0 after their last round (Unavailable otherwise)."""
  failures = []
  for impl, (proc, _, log) in running.items():
    try:
      code = proc.wait(timeout=max(1, deadline - time.time()))
    except subprocess.TimeoutExpired:
      code = 'timeout'
    if code != 0:
      failures.append(_failure(program, impl, tag, code, log))
  if failures:
    raise Unavailable('\n\n'.join(failures))


def resume_tasks(workdir, written, models, steps):
  """{impl: ['resume' tasks]}: each implementation trains `steps` more in a copy of the
  model_dir the other wrote for each model (`written[impl][model]`; an exported SavedModel is
  no part of what is resumed and is left out), so each resumes the other's checkpoints."""
  tasks = {}
  for impl in IMPLS:
    other = 'ours' if impl == 'orig' else 'orig'
    tasks[impl] = []
    for model in models:
      target = os.path.join(workdir, impl, 'from_%s_%s' % (other, model))
      shutil.copytree(written[other][model], target, ignore=shutil.ignore_patterns('export'))
      tasks[impl].append({'task': 'resume', 'model': model, 'dir': target, 'steps': steps})
  return tasks


def write_and_resume(who, program, workdir, models, write, resumed, steps, timeout):
  """The usual two rounds of a differential program, both implementations at once: each writes
  a model_dir per model (task `{'task': 'write', 'model': M, 'dir': D, 'resumed': whether M is
  in `resumed`, **write}`), then resumes, for each model in `resumed`, a copy of the other's
  with `steps` more (`resume_tasks`).
  `who` names the tests in messages.  Returns {impl: {'tf_version', 'write': {model: result},
  'resume': {model: result}}}."""
  pythons = {'orig': python(who), 'ours': sys.executable}
  dirs = {impl: {m: os.path.join(workdir, impl, m) for m in models} for impl in IMPLS}
  first, second = run_rounds(pythons, program, [
      {impl: [dict(write, task='write', model=m, dir=dirs[impl][m], resumed=m in resumed)
              for m in models] for impl in IMPLS},
      lambda: resume_tasks(workdir, dirs, resumed, steps)], workdir, 'round', timeout)
  return {impl: {'tf_version': first[impl]['tf_version'],
                 'write': dict(zip(models, first[impl]['results'])),
                 'resume': dict(zip(resumed, second[impl]['results']))} for impl in IMPLS}


def assert_is_the_original(results):
  """The 'orig' side ran TensorFlow 2.15 (tensorflow-estimator's last), 'ours' a newer one."""
  assert results['orig']['tf_version'].startswith('2.15'), results['orig']['tf_version']
  assert not results['ours']['tf_version'].startswith('2.15'), results['ours']['tf_version']


def assert_close(expected, actual, what, rtol, atol):
  """Recursively compares JSON results: same structure and keys; strings, bools and ints
  exactly, other numbers to tolerance."""
  if isinstance(expected, dict):
    assert isinstance(actual, dict), '%s: expected a dict, got %r' % (what, actual)
    assert sorted(expected) == sorted(actual), '%s: keys differ: expected %s, got %s' % (
        what, sorted(expected), sorted(actual))
    for key in expected:
      assert_close(expected[key], actual[key], '%s[%r]' % (what, key), rtol, atol)
  elif isinstance(expected, list):
    assert isinstance(actual, list) and len(expected) == len(actual), (
        '%s: expected %d items, got %r' % (what, len(expected), actual))
    for i, (e, a) in enumerate(zip(expected, actual)):
      assert_close(e, a, '%s[%d]' % (what, i), rtol, atol)
  elif isinstance(expected, (bool, str)) or expected is None:
    assert expected == actual, '%s: expected %r, got %r' % (what, expected, actual)
  elif isinstance(expected, int) and isinstance(actual, int):
    assert expected == actual, '%s: expected %r, got %r' % (what, expected, actual)
  else:
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)
