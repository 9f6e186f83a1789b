"""The periodic trigger the hooks share: act every N global steps or T seconds, loop-aware.

With device loops (`iterations_per_loop`) the global step jumps by the loop size between
`session.run` calls, so a trigger fires once "steps since it last fired >= N" (or T seconds
passed), never on an exact step.  `StepTrigger` is that rule (a `SecondOrStepTimer`, public
TensorFlow); `StepAfterRun` gives a hook the global step after each run, reading it from the
session only when the hook could act on it.  This module imports nothing of the package but
`_tf_internals`, so every concern (hooks, checkpoints) can use it.
"""
import tensorflow as tf

from tpu_estimator import _tf_internals

_v1 = tf.compat.v1

# A step far after any step a run can reach: asking a (monotone) trigger about it says whether
# any step after the run could be due, before paying for a read of the exact one.
_FAR_AHEAD = 1000000


class StepTrigger:
  """Fires every `every_steps` steps or every `every_secs` seconds (exactly one of them set).

  `due(step)`: the first ask is always due; later ones are due once the step moved on from the
  one it last fired at by `every_steps` or more, or `every_secs` seconds passed since then.
  The count may be any counter that only grows (global steps, or runs).
  """

  def __init__(self, every_steps=None, every_secs=None):
    self._timer = _v1.train.SecondOrStepTimer(every_secs=every_secs, every_steps=every_steps)

  def reset(self):
    """Forgets when it last fired: the next `due` is True."""
    self._timer.reset()

  def due(self, step):
    """Whether the trigger fires at `step` (it does not mark it fired)."""
    return self._timer.should_trigger_for_step(step)

  def fire(self, step):
    """Marks it fired at `step`; (seconds, steps) since it last fired, (None, None) the first
    time."""
    return self._timer.update_last_triggered_step(step)

  def last_step(self):
    """The step it last fired at, or None."""
    return self._timer.last_triggered_step()

  def due_step(self, step_after_run, run_context, run_values):
    """The global step after this run (from `step_after_run`, a `StepAfterRun`) when the
    trigger is due at it (then marked fired), else None."""
    step = step_after_run.value(run_context, run_values, self.due)
    if not self.due(step):
      return None
    self.fire(step)
    return step


class StepAfterRun:
  """The global step after each `session.run`, for hooks that act on it.

  The fetch (`args()`) is TensorFlow's cached read of the global step, which runs before the
  step.  `value(..., needed)` returns the step after the run, exact whenever `needed` (a
  monotone predicate: true at a step, true at every later one) holds for it; the exact step is
  the same read run again, and it is skipped when the caller could not act.

  With `guess_single_steps` (the early-stopping hooks), `read + 1` stands for the step after
  the run until a run shows it advanced more (a device loop): free, and exact as long as runs
  of one step stay so.  Without it (the checkpoint saver), `needed` is asked about any step the
  run could have reached, so no due step is ever missed, at the cost of a read whenever one may
  be due.  Once runs are loops, both ask `needed` about any step the run could have reached.
  """

  def __init__(self, user='This hook', guess_single_steps=True):
    self._user = user
    self._guess = guess_single_steps
    self._read = self._previous = None
    self._loops = False

  def begin(self):
    """Finds the global step in the graph being built (RuntimeError without one)."""
    self._read = _tf_internals.global_step_read()
    if self._read is None:
      raise RuntimeError('%s needs a global step in the training graph.' % self._user)
    self._previous = None
    self._loops = False

  def args(self):
    """The `SessionRunArgs` a hook's `before_run` returns (the read before the run)."""
    return _v1.train.SessionRunArgs(self._read)

  def value(self, run_context, run_values, needed=None):
    """The global step after this run (`run_values` of the fetch `args()` asked for): exact
    whenever `needed` holds for it; without `needed`, exact once runs are loops."""
    before = int(run_values.results)
    if self._previous is not None and before - self._previous > 1:
      self._loops = True
    self._previous = before
    if needed is None:
      read = self._loops
    elif self._loops or not self._guess:
      read = needed(before + _FAR_AHEAD)
    else:
      read = needed(before + 1)
    if not read:
      return before + 1
    step = int(run_context.session.run(self._read))
    if step > before + 1:
      self._loops = True
    return step
