"""Bits the benchmark scripts share: import path, header, table printing."""
import datetime
import os
import platform
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
# numpy's OpenBLAS (models.make_data's `x @ w`, before numpy is imported) in one thread: its
# worker threads otherwise spin for ~0.1 s after each product, on one of this machine's two
# cores, during whatever is timed next (measured: evaluate() again 19-34 ms right after making
# its input, 10-11 ms without the spin).  TensorFlow does not use OpenBLAS.
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
  if path not in sys.path:
    sys.path.insert(0, path)


def quiet_tf():
  import logging  # pylint: disable=import-outside-toplevel
  import warnings  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tf.get_logger().setLevel(logging.ERROR)
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
  warnings.filterwarnings('ignore')


def git_state():
  """'<commit> (+ uncommitted changes)' of the repo measured, or '?'."""
  import subprocess  # pylint: disable=import-outside-toplevel
  try:
    commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run(['git', 'status', '--porcelain', '--untracked-files=no', '--',
                            'tpu_estimator'], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return '?'
  return commit + (' + uncommitted tpu_estimator changes' if dirty else '')


def header(title):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import models  # pylint: disable=import-outside-toplevel
  print('=' * 78)
  print(title)
  print('%s | Python %s | TF %s | %s' % (
      datetime.datetime.now().strftime('%Y-%m-%d %H:%M'), platform.python_version(),
      tf.__version__, models.load_note()))
  print('tpu_estimator at %s' % git_state())
  print('=' * 78, flush=True)


def fmt(value, digits=0):
  if value is None:
    return '-'
  return ('%%.%df' % digits) % value


def spread(values, digits=0):
  values = [v for v in values if v is not None]
  if len(values) < 2:
    return ''
  return '[%s..%s]' % (fmt(min(values), digits), fmt(max(values), digits))


def verdict(value, target, higher=True):
  if value is None:
    return '?'
  ok = value >= target if higher else value <= target
  return 'MET' if ok else 'MISSED'
