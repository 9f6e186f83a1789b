"""Session hooks: loop control and the built-in run hooks (`run_control`), progress logs
(`progress`), SIGTERM during training (`preemption`), early stopping and in-memory evaluation,
and the one "every N steps or T seconds, loop-aware" trigger they share (`periodic`)."""
import importlib as _importlib

# Loaded on first use (`import tpu_estimator` does not need them), yet reachable as attributes
# (`tpu_estimator.hooks.early_stopping`) as when the package's import loaded them.
_LAZY_MODULES = ('early_stopping', 'in_memory_eval')


def __getattr__(name):
  if name in _LAZY_MODULES:
    return _importlib.import_module('%s.%s' % (__name__, name))
  raise AttributeError('module %r has no attribute %r' % (__name__, name))
