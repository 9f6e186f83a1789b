import os
import sys

import pytest

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
# On a GPU machine: test processes (and their children) share the card, each growing its memory
# as needed rather than reserving it all (what the library does too, see tpu_estimator/gpus.py;
# some tests open sessions before any estimator exists).
os.environ.setdefault('TF_FORCE_GPU_ALLOW_GROWTH', 'true')
# Tests compare results with numpy formulas and between runs at float32 precision: on Ampere and
# newer GPUs TensorFlow multiplies float32 matrices in TF32 (10-bit mantissa) unless told not to.
os.environ.setdefault('NVIDIA_TF32_OVERRIDE', '0')
# The XLA compilation cache across processes (tpu_estimator/distribute/compile_cache.py) is off in
# tests and their children: they never write the user's ~/.cache, and no test loads an
# executable an earlier run compiled.  tests/test_compile_cache.py turns it on in a tmp_path.
os.environ.setdefault('TPU_ESTIMATOR_XLA_CACHE', 'off')
sys.path.insert(0, os.path.dirname(__file__))

# The programs tests start do not see scikit-learn and pandas (tests/startup/sitecustomize.py
# says why: ~3 s of CPU saved in each of ~160 processes a run); pytest's own processes,
# which may have inherited that folder on their PYTHONPATH, see them.
STARTUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'startup')
if STARTUP not in os.environ.get('PYTHONPATH', '').split(os.pathsep):
  os.environ['PYTHONPATH'] = os.pathsep.join(
      [STARTUP] + [p for p in [os.environ.get('PYTHONPATH')] if p])
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, 'tpu_estimator_tests', False)]


@pytest.fixture
def graph():
  """A new default graph for the test (graph-mode tests of the library's parts)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  with tf.Graph().as_default() as g:
    yield g
