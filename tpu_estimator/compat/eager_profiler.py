"""`from tensorflow.python.eager import profiler` where TensorFlow no longer has that module.

TensorFlow 2.0-2.16 kept the TF 2.0 eager profiler API there (`start()`, `stop()` returning the
trace, `save(logdir, trace)`, `Profiler(logdir)`, `start_profiler_server(port)`), deprecated
for `tf.profiler.experimental`; TensorFlow 2.21 dropped the module.  tensorflow/models'
`official/utils/misc/keras_utils.py` imports it at module level, so every program importing
that file (`ncf_estimator_main.py` among them) stops at the import, profiling or not.

After `install()`, where TensorFlow has no such module, importing it gives this one: the same
names on `tf.profiler.experimental`.  The new API wants the log directory when the trace
starts, the old one when it is saved: `start()` traces into a directory of its own, which
`stop()` returns as the "trace" and `save(logdir, trace)` moves under `logdir`.  Where
TensorFlow still has the module, nothing changes.
"""
import importlib.util
import os
import shutil
import sys
import tempfile

import tensorflow as tf

from tpu_estimator.compat import namespaces

NAME = 'tensorflow.python.eager.profiler'
_state = {'dir': None}


class ProfilerAlreadyRunningError(Exception):
  pass


class ProfilerNotRunningError(Exception):
  pass


def start(options=None):
  """Starts tracing (`tf.profiler.experimental.start` into a directory of its own)."""
  if _state['dir'] is not None:
    raise ProfilerAlreadyRunningError('Another profiler is running.')
  _state['dir'] = tempfile.mkdtemp(prefix='eager_profiler_')
  tf.profiler.experimental.start(_state['dir'], options=options)


def stop():
  """Stops tracing; returns the trace, for `save`."""
  if _state['dir'] is None:
    raise ProfilerNotRunningError('Cannot stop profiling: no profiler is running.')
  trace, _state['dir'] = _state['dir'], None
  tf.profiler.experimental.stop()
  return trace


def save(logdir, result):
  """Puts the trace `stop()` returned under `logdir` (TensorBoard's profile plugin reads it)."""
  for root, _, files in os.walk(result):
    target = os.path.join(logdir, os.path.relpath(root, result))
    tf.io.gfile.makedirs(target)
    for name in files:
      tf.io.gfile.copy(os.path.join(root, name), os.path.join(target, name), overwrite=True)
  shutil.rmtree(result, ignore_errors=True)


def maybe_create_event_file(logdir):
  """An empty event file in `logdir`, so TensorBoard lists the run (there is one already where
  a summary writer wrote there)."""
  tf.io.gfile.makedirs(logdir)
  if not tf.io.gfile.glob(os.path.join(logdir, 'events.out.tfevents.*')):
    writer = tf.summary.create_file_writer(logdir)
    writer.close()


def start_profiler_server(port):
  tf.profiler.experimental.server.start(port)


class Profiler(object):
  """`with Profiler(logdir):` traces the block into `logdir`."""

  def __init__(self, logdir):
    self._logdir = logdir

  def __enter__(self):
    start()

  def __exit__(self, *exc):
    save(self._logdir, stop())


def install():
  """Makes `tensorflow.python.eager.profiler` this module where TensorFlow lacks one."""
  try:
    present = importlib.util.find_spec(NAME) is not None
  except (ImportError, ValueError):
    present = False
  if present:
    return
  this = sys.modules[__name__]
  namespaces.finder().makers[NAME] = lambda fullname: this if fullname == NAME else None
