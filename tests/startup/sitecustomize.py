"""Run at start-up by every Python process the tests start (tests/conftest.py puts this folder
first on their PYTHONPATH): makes scikit-learn and pandas unimportable there.

`import tensorflow` imports Keras, and Keras imports scikit-learn (with scipy) and pandas
wherever they are installed: ~3 s of CPU added to every fresh process on a 2-core machine
(11 s instead of 8 for `import tensorflow, tpu_estimator`), and the suite starts ~160 of them
(program runs, differential sides, cluster tasks).  The `test` extra installs both for the
few tests that use them in the pytest processes (the demo's digits data, pandas_input_fn, an
AUC oracle); no program a test starts needs them.  pytest's own processes remove this again
(tests/conftest.py), and a test whose program needs them leaves this folder off its
PYTHONPATH (tests/test_demo.py).
"""
import importlib.abc
import sys

HIDDEN = ('sklearn', 'pandas')


class HideOptionalPackages(importlib.abc.MetaPathFinder):
  """`import sklearn` / `import pandas` fail as where they are not installed."""

  tpu_estimator_tests = True

  def find_spec(self, fullname, path, target=None):
    del path, target
    if fullname.partition('.')[0] in HIDDEN:
      raise ModuleNotFoundError('No module named %r (hidden from the programs tests start: '
                                'tests/startup/sitecustomize.py)' % fullname, name=fullname)
    return None


sys.meta_path.insert(0, HideOptionalPackages())
