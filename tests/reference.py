"""The original implementation (tensorflow-estimator 2.15 on TF 2.15) for differential tests:
its python, built by ../shared/tools/reference-venv.sh, and the environment both sides run in."""
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE_SCRIPT = os.path.join(REPO, '..', 'shared', 'tools', 'reference-venv.sh')


class Unavailable(Exception):
  """The reference cannot be built or run: the tests that need it fail with this message."""


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
  """The reference venv's python (built on first use); `who` names the tests in messages."""
  if not os.path.isfile(REFERENCE_SCRIPT):
    raise Unavailable('%s need the reference venv script %s (the original TPUEstimator on '
                      'TF 2.15), which is missing.' % (who, os.path.normpath(REFERENCE_SCRIPT)))
  try:
    proc = subprocess.run(['bash', REFERENCE_SCRIPT], capture_output=True, text=True,
                          timeout=1800, env=env('orig'))
  except subprocess.TimeoutExpired:
    raise Unavailable('%s did not finish within 30 minutes.' % REFERENCE_SCRIPT) from None
  lines = proc.stdout.strip().splitlines()
  if proc.returncode != 0 or not lines or not os.path.isfile(lines[-1]):
    raise Unavailable('%s failed (exit %d), so the original implementation is not available '
                      'for %s.\nstdout:\n%s\nstderr:\n%s' %
                      (REFERENCE_SCRIPT, proc.returncode, who, proc.stdout[-2000:],
                       proc.stderr[-4000:]))
  return lines[-1]
