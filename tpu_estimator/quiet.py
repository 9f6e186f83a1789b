"""Keeping TensorFlow's notes about the library's own internals off the user's screen.

`quiet_startup()` runs first thing when the package is imported, before TensorFlow is: the
`tpu-estimator` command hides TensorFlow's C++ start-up lines.  This module imports nothing of
TensorFlow at import time for that reason.

The library drives TensorFlow's TF1 machinery on purpose (Saver, MonitoredSession, SavedModel
signature utilities), and TensorFlow answers with deprecation notices the user cannot act on,
and, when it serialises a graph whose collections hold distributed variables, with "Issue
encountered when serializing global_step ... probably safe to ignore".  `internal_calls()` hides
exactly those, only around the library's own calls into TensorFlow: the user's code (model_fn,
input_fn) runs outside it and warns as usual.
"""
import contextlib
import logging
import os
import sys
import threading


def _is_this_command():
  """Whether this process is the `tpu-estimator` command (its console script, or
  `python -m tpu_estimator`), as opposed to a program importing the library."""
  if os.path.basename(sys.argv[0]) == 'tpu-estimator':
    return True
  argv = list(getattr(sys, 'orig_argv', None) or sys.argv)  # orig_argv: Python 3.10+
  if '-m' in argv:
    return argv[argv.index('-m') + 1:][:1] in (['tpu_estimator'], ['tpu_estimator.tools.cli'])
  return False


def quiet_startup():
  """Called by the package before it imports TensorFlow: the command hides TensorFlow's C++
  start-up lines (absl, cpu_feature_guard, MLIR notes) unless the user set
  TF_CPP_MIN_LOG_LEVEL.  A program importing the library keeps TensorFlow's default."""
  if _is_this_command():
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')


# Messages TensorFlow logs about collections it cannot serialise into a MetaGraphDef (the
# replicas' MirroredVariables in `global_step`, `variables`, ...).  They change nothing: the
# checkpoint holds every variable.
_INTERNAL_MESSAGES = ('Issue encountered when serializing',)

_lock = threading.Lock()
_depth = 0
_printing_before = True


class _DropInternalMessages(logging.Filter):

  def filter(self, record):
    return not str(record.msg).startswith(_INTERNAL_MESSAGES)


_filter = _DropInternalMessages()


def dropped(record):
  """Whether `internal_calls()` keeps `record` off the screen now (the progress bar, which
  clears its line for every log record, need not clear it for this one)."""
  return _depth > 0 and not _filter.filter(record)


@contextlib.contextmanager
def internal_calls():
  """Around a call the library makes into TensorFlow's TF1 APIs: no deprecation notices, no
  collection-serialisation notes.  Re-entrant and usable from several threads at once."""
  # Not `deprecation.silence()`: it does not restore the switch when the body raises, and two
  # threads inside it at once could leave it off.
  global _depth, _printing_before
  # Not at the top: this module is imported before TensorFlow (see `quiet_startup`).
  from tpu_estimator import _tf_internals  # pylint: disable=import-outside-toplevel
  logger = logging.getLogger('tensorflow')
  with _lock:
    _depth += 1
    if _depth == 1:
      logger.addFilter(_filter)
      _printing_before = _tf_internals.deprecation_notices_enabled()
      _tf_internals.set_deprecation_notices_enabled(False)
  try:
    yield
  finally:
    with _lock:
      _depth -= 1
      if _depth == 0:
        logger.removeFilter(_filter)
        _tf_internals.set_deprecation_notices_enabled(_printing_before)
