"""SIGTERM during `train`: finish the current `session.run` (device loop), save a checkpoint at
the current step, then deliver the signal as if it had just arrived.

While `train` runs in the main thread, SIGTERM only sets a flag (`checkpoints.sigterm`, the
process's one SIGTERM handler, defers it); `PreemptionHook` asks the session to stop at the next
loop boundary, and `MonitoredSession`'s shutdown saves the final checkpoint.  Afterwards the
signal goes on to the previous handler, so a process with the default handler exits with status
143 (128 + SIGTERM) after its checkpoint, and a program with its own handler gets it called.  A
later `train` resumes from that exact step.
"""
import tensorflow as tf

from tpu_estimator.checkpoints import sigterm

_v1 = tf.compat.v1

_RECEIVED = 'SIGTERM received: stopping after the current loop and saving a checkpoint.'


def deferred_sigterm():
  """Defers SIGTERM for the duration of the block (main thread only); yields the flag
  `PreemptionHook` watches."""
  return sigterm.deferred(_RECEIVED)


class PreemptionHook(_v1.train.SessionRunHook):
  """Requests a stop once SIGTERM was received."""

  def __init__(self, flag):
    self._flag = flag

  def after_run(self, run_context, run_values):
    del run_values
    if self._flag.received:
      run_context.request_stop()
