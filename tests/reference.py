"""The original implementation (tensorflow-estimator 2.15 on TF 2.15) for differential tests:
its python, built by this repo's scripts/reference-venv.sh, and the environment both sides run
in.

Where the reference cannot exist (no Python 3.9-3.11 on the machine: the script exits 3) the
tests that need it are skipped, all with one reason (`check`); where it can but building or
running it fails, they fail: the comparison is the point."""
import os
import subprocess

import pytest

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
  if impl == 'ours':
    result['PYTHONPATH'] = REPO
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
