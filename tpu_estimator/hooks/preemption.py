"""SIGTERM during `train`: finish the current `session.run` (device loop), save a checkpoint at
the current step, then deliver the signal as if it had just arrived.

While `train` runs in the main thread, SIGTERM only sets a flag; `PreemptionHook` asks the
session to stop at the next loop boundary, and `MonitoredSession`'s shutdown saves the final
checkpoint.  Afterwards the previous handler is restored and the signal re-raised, so a process
with the default handler exits with status 143 (128 + SIGTERM) after its checkpoint, and a
program with its own handler gets it called.  A later `train` resumes from that exact step.
"""
import contextlib
import os
import signal
import threading

import tensorflow as tf

_v1 = tf.compat.v1
_log = tf.get_logger()


class _Flag:
  received = False


@contextlib.contextmanager
def deferred_sigterm():
  """Defers SIGTERM for the duration of the block (main thread only); yields the flag."""
  flag = _Flag()
  if threading.current_thread() is not threading.main_thread():
    yield flag
    return

  def handler(signum, frame):
    del signum, frame
    flag.received = True
    _log.warning('SIGTERM received: stopping after the current loop and saving a checkpoint.')

  previous = signal.signal(signal.SIGTERM, handler)
  try:
    yield flag
  finally:
    signal.signal(signal.SIGTERM, previous)
  if flag.received:
    os.kill(os.getpid(), signal.SIGTERM)


class PreemptionHook(_v1.train.SessionRunHook):
  """Requests a stop once SIGTERM was received."""

  def __init__(self, flag):
    self._flag = flag

  def after_run(self, run_context, run_values):
    del run_values
    if self._flag.received:
      run_context.request_stop()
