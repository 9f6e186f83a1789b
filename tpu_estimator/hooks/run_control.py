"""Built-in hooks.  Hooks trigger on "steps since last >= N" (`periodic.StepTrigger`), since with
device loops the global step jumps by the loop size between `session.run` calls."""
import time

import numpy as np
import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import errors
from tpu_estimator.hooks import periodic

_v1 = tf.compat.v1
_log = tf.get_logger()


class LoopControlHook(_v1.train.SessionRunHook):
  """Feeds each device loop the number of steps to run and stops training at the target.

  Loops are clipped to land exactly on `last_step` (steps=10, ipl=4: 4, 8, 10).  With a
  time-based `iterations_per_loop` the count is re-estimated from the last loop's speed.
  Training also stops when a loop ran fewer steps than asked: the input ended.  `clock`
  (distribute/loop_clock.py) is told how long each run took and how many steps it ran.
  """

  def __init__(self, iterations_placeholder, steps_run, step_after, global_step, ipl,
               num_steps=None, last_step=None, clock=None):
    """`step_after`: the global step read after the loop; `global_step`: the variable."""
    self._clock = clock
    self._placeholder = iterations_placeholder
    self._steps_run = steps_run
    self._step_after = step_after
    self._global_step = global_step
    self._num_steps = num_steps
    self._last_step = last_step
    self._kind, self._amount = ipl
    self._per_loop = self._amount if self._kind == 'count' else 1
    self._asked = 0
    self._current = 0
    self._started = 0.0

  def after_create_session(self, session, coord):
    del coord
    self._current = int(session.run(self._global_step))
    if self._num_steps is not None:
      self._last_step = self._current + self._num_steps

  def before_run(self, run_context):
    count = self._per_loop
    if self._last_step is not None:
      count = min(count, max(self._last_step - self._current, 0))
    if count == 0:
      run_context.request_stop()
      count = 0
    self._asked = count
    self._started = time.perf_counter()
    return _v1.train.SessionRunArgs([self._steps_run, self._step_after],
                                    feed_dict={self._placeholder: count})

  def after_run(self, run_context, run_values):
    steps_run, self._current = (int(v) for v in run_values.results)
    seconds = time.perf_counter() - self._started
    if self._clock is not None:
      self._clock.ran(seconds, steps_run)
    if self._kind == 'seconds' and steps_run > 0:
      per_step = max(seconds, 1e-6) / steps_run
      self._per_loop = max(1, int(self._amount / per_step))
    if steps_run < self._asked:
      run_context.request_stop()  # the loss stopped being finite
    if self._last_step is not None and self._current >= self._last_step:
      run_context.request_stop()


class NanLossHook(_v1.train.SessionRunHook):
  """Stops training with `NanLossDuringTrainingError` naming the step when the loss is NaN or
  infinite.  Raised from `after_run`, before any checkpoint of that step is saved."""

  def __init__(self, loss, step):
    self._loss = loss
    self._step = step

  def before_run(self, run_context):
    del run_context
    return _v1.train.SessionRunArgs((self._loss, self._step))

  def after_run(self, run_context, run_values):
    loss, step = run_values.results
    if not np.isfinite(loss):
      raise errors.NanLossDuringTrainingError(step=int(step), loss=float(loss))


class StepLoggingHook(_v1.train.SessionRunHook):
  """Logs `loss = ..., step = ... (x sec)` whenever `every_n_steps` steps have passed."""

  def __init__(self, tensors, global_step, every_n_steps):
    """`global_step`: the global step read after the run (or device loop)."""
    self._tensors = dict(tensors)
    self._global_step = global_step
    self._trigger = periodic.StepTrigger(every_steps=every_n_steps)

  def before_run(self, run_context):
    del run_context
    return _v1.train.SessionRunArgs((self._tensors, self._global_step))

  def after_run(self, run_context, run_values):
    del run_context
    values, step = run_values.results
    if not self._trigger.due(step):
      return
    seconds, _ = self._trigger.fire(step)
    text = ', '.join('%s = %s' % (k, values[k]) for k in self._tensors)
    if seconds is not None:
      _log.info('%s (%.3f sec)', text, seconds)
    else:
      _log.info('%s', text)


class StopAfterNEvalsHook(_v1.train.SessionRunHook):
  """Stops evaluation after `num_evals` batches; the run's fetch is the batch count after it."""

  def __init__(self, num_evals):
    self._num_evals = num_evals
    self._done = 0

  def after_run(self, run_context, run_values):
    del run_values
    self._done += 1
    if self._num_evals is not None and self._done >= self._num_evals:
      run_context.request_stop()


class CollectLoopHook(_v1.train.SessionRunHook):
  """Feeds evaluation/prediction loops their batch count and stops at the end of the input
  or after `num_steps` batches (`progress`: batches done after the run)."""

  def __init__(self, iterations_placeholder, progress, more_input, ipl, num_steps=None):
    self._placeholder = iterations_placeholder
    self._progress = progress
    self._more = more_input
    self._kind, self._amount = ipl
    self._per_loop = self._amount if self._kind == 'count' else 1
    self._num_steps = num_steps
    self._done = 0
    self._started = 0.0

  def before_run(self, run_context):
    count = self._per_loop
    if self._num_steps is not None:
      count = max(1, min(count, self._num_steps - self._done))
    self._asked = count
    self._started = time.time()
    return _v1.train.SessionRunArgs([self._progress, self._more],
                                    feed_dict={self._placeholder: count})

  def after_run(self, run_context, run_values):
    progress, more = run_values.results
    self._done = int(progress)
    if self._kind == 'seconds':
      per_step = max(time.time() - self._started, 1e-6) / self._asked
      self._per_loop = max(1, int(self._amount / per_step))
    if not more or (self._num_steps is not None and self._done >= self._num_steps):
      run_context.request_stop()


class LoopSummarySaverHook(_v1.train.SummarySaverHook):
  """TensorFlow's SummarySaverHook for device loops: it fetches the summaries on every loop and
  writes them only when they are due.

  The stock hook adds the summary op to the fetches only on runs that save, so the fetch list
  changes after the first loop, and the session builds and optimizes a second executor for the
  whole loop graph in every `train()` call.  Summaries outside the loop body are a few scalars
  read once per loop, so fetching them every time costs less than that second build.
  """

  def before_run(self, run_context):
    args = super().before_run(run_context)
    summary_op = _tf_internals.summary_op_of(self)
    if summary_op is not None and 'summary' not in args.fetches:
      args.fetches['summary'] = summary_op
    return args
