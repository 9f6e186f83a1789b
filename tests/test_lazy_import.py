"""`import tpu_estimator` imports what every Estimator program uses and nothing else: the canned
estimators, Keras model conversion, the train_and_evaluate driver, the experimental hooks, the
legacy-program machinery and the optional third-party packages load on first use (issue 29,
time to the first step).  Each check runs in a fresh interpreter, so an eager import added
anywhere on the way (the package's `__init__` or anything the Estimator core imports) fails it.
"""
import json
import os
import subprocess
import sys

import pytest

from tpu_estimator import gc_freeze

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Ours: loaded only when a program reads a name that needs them.
LAZY_PACKAGE_MODULES = (
    'tpu_estimator.canned', 'tpu_estimator.keras_models', 'tpu_estimator.experimental',
    'tpu_estimator.training', 'tpu_estimator.inputs', 'tpu_estimator.cross_shard_optimizer',
    'tpu_estimator.hooks.early_stopping', 'tpu_estimator.hooks.in_memory_eval',
    'tpu_estimator.compat', 'tpu_estimator.tools')
# Third-party packages TensorFlow's own import does not load (Keras 3 it does, and with it
# pandas/rich where installed): only the functions that need them import them.
LAZY_THIRD_PARTY = ('tf_keras', 'tensorflow_hub', 'tf_slim', 'tensorflow_estimator')


def _fresh(code):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2',
             PYTHONPATH=os.pathsep.join([ROOT] + [p for p in [os.environ.get('PYTHONPATH')]
                                                  if p]))
  proc = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True,
                        check=False, cwd=ROOT, timeout=300)
  assert proc.returncode == 0, proc.stderr[-4000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


def _loaded_after(code):
  return _fresh(code + '\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))')


def _loaded(loaded, names):
  return sorted(m for m in loaded if any(m == n or m.startswith(n + '.') for n in names))


@pytest.fixture(scope='module')
def after_import():
  return _loaded_after('import tpu_estimator')


def test_import_loads_no_rarely_used_part_of_the_package(after_import):
  assert 'tpu_estimator.estimator' in after_import
  assert _loaded(after_import, LAZY_PACKAGE_MODULES) == []


def test_import_loads_no_optional_third_party_package(after_import):
  assert _loaded(after_import, LAZY_THIRD_PARTY) == []


def test_building_a_tpu_estimator_loads_no_rarely_used_part():
  loaded = _loaded_after(
      'import tempfile\nimport tpu_estimator as te\n'
      'te.TPUEstimator(lambda features, labels, mode, params: None, use_tpu=False,'
      ' train_batch_size=8, config=te.RunConfig(model_dir=tempfile.mkdtemp()))')
  assert _loaded(loaded, LAZY_PACKAGE_MODULES + LAZY_THIRD_PARTY) == []


def test_every_public_name_resolves_and_is_listed():
  found = _fresh(
      'import json, tpu_estimator as te\n'
      'missing = [n for n in te.__all__ if getattr(te, n, None) is None]\n'
      'unlisted = sorted(set(te.__all__) - set(dir(te)))\n'
      'star = {}\nexec("from tpu_estimator import *", star)\n'
      'print(json.dumps([missing, unlisted, sorted(set(te.__all__) - set(star)),'
      ' te.canned.DNNClassifier is te.DNNClassifier,'
      ' te.experimental.InMemoryEvaluatorHook.__name__,'
      ' te.model_to_estimator.__module__, hasattr(te, "no_such_name")]))')
  assert found == [[], [], [], True, 'InMemoryEvaluatorHook',
                   'tpu_estimator.keras_models.convert', False]


def test_submodules_the_import_used_to_load_are_still_attributes():
  found = _fresh(
      'import json, tpu_estimator as te\n'
      'print(json.dumps([te.training.train_and_evaluate is te.train_and_evaluate,'
      ' te.cross_shard_optimizer.CrossShardOptimizer is te.CrossShardOptimizer,'
      ' te.inputs.numpy_input_fn is te.numpy_input_fn,'
      ' te.hooks.early_stopping.stop_if_no_decrease_hook'
      ' is te.experimental.stop_if_no_decrease_hook,'
      ' te.hooks.in_memory_eval.InMemoryEvaluatorHook.__name__,'
      ' hasattr(te.hooks, "no_such_module")]))')
  assert found == [True, True, True, True, 'InMemoryEvaluatorHook', False]


def test_import_keeps_what_it_loaded_out_of_full_garbage_collections(monkeypatch):
  """TensorFlow's ~270,000 long-lived objects are frozen at import (gc_freeze.py): a full
  collection during the first train() call walked them all, ~0.15 s of its time to the first
  step.  TPU_ESTIMATOR_GC_FREEZE=0 turns that off."""
  code = 'import gc, json, tpu_estimator\nprint(json.dumps(gc.get_freeze_count()))'
  assert _fresh(code) > 100000
  # What the interpreter froze itself (375 objects on Python 3.12.1, none on 3.11 and 3.13).
  bare = _fresh('import gc, json\nprint(json.dumps(gc.get_freeze_count()))')
  monkeypatch.setenv(gc_freeze.ENV, '0')
  assert _fresh(code) == bare


def test_tensorflows_objects_are_frozen_before_the_package_imports_its_modules():
  """Where TensorFlow's import loaded more (pandas, scikit-learn, scipy, as TF 2.21 does when
  they are installed), a full collection fell inside `import tpu_estimator` itself and walked
  all of TensorFlow's objects: 0.25 s of a 0.27 s import.  They are frozen before the package
  imports its own modules (seen here as `tpu_estimator.estimator` is looked up)."""
  code = ('import gc, json, sys\nimport tensorflow\nseen = []\n'
          'class Spy:\n'
          '  def find_spec(self, name, path=None, target=None):\n'
          '    if name == "tpu_estimator.estimator":\n'
          '      seen.append(gc.get_freeze_count())\n'
          'sys.meta_path.insert(0, Spy())\n'
          'import tpu_estimator\nprint(json.dumps(seen))')
  seen = _fresh(code)
  assert len(seen) == 1 and seen[0] > 100000, seen
