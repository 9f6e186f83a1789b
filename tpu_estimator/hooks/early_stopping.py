"""Early-stopping hooks: stop training when the eval metrics say so.

`make_early_stopping_hook(estimator, should_stop_fn)` calls `should_stop_fn()` every
`run_every_secs` seconds or `run_every_steps` global steps (with device loops: at the first loop
boundary where that many steps have passed) and stops training when it returns True.  The
`stop_if_*` helpers build `should_stop_fn` from the metrics in the eval directory's event files
(`<model_dir>/eval`, or `eval_dir`), where `evaluate` and `train_and_evaluate` write them.

Stopping ends the session the normal way: the checkpoint hook saves the step training stopped
at, and `train_and_evaluate` runs its final evaluation and exports on it.  The trainer that
decides (the chief) also writes `<model_dir>/early_stopping.json` ({"step": ...}): other
training tasks stop on it (`_FollowStopHook`), and the `evaluator` task of
`train_and_evaluate` stops once it evaluated that step, instead of waiting forever for
checkpoints that will not come (the original's evaluator did).  With a multi-worker strategy
the workers must stop at the same step (they meet in collectives every step), so there every
worker calls `should_stop_fn` at the same steps and they stop together if any said stop
(`_SyncedStopHook`; `run_every_steps` only, as in the original).
"""
import collections
import json
import operator
import os
import time
import uuid

import tensorflow as tf

from tpu_estimator.distribute import replication
from tpu_estimator import errors
from tpu_estimator.hooks import periodic

_v1 = tf.compat.v1
_log = tf.get_logger()

MARKER = 'early_stopping.json'
_EVENT_FILES = '*.tfevents.*'


# ---------------------------------------------------------------------------------------------
# Reading eval results

def read_eval_metrics(eval_dir):
  """{global step: {metric name: value}} from the scalar summaries in `eval_dir`'s event
  files, ordered by step.  A damaged file is read up to the damage (with a warning)."""
  by_step = collections.defaultdict(dict)
  if tf.io.gfile.exists(eval_dir):
    for path in sorted(tf.io.gfile.glob(os.path.join(eval_dir, _EVENT_FILES))):
      try:
        for event in _v1.train.summary_iterator(path):
          values = {v.tag: v.simple_value for v in event.summary.value
                    if v.HasField('simple_value')}
          if values:
            by_step[event.step].update(values)
      except tf.errors.DataLossError as e:
        _log.warning('Reading eval results: skipped the rest of %s, which is damaged (%s).',
                     path, e)
  return collections.OrderedDict(sorted(by_step.items()))


def _eval_dir_of(estimator, eval_dir):
  if eval_dir is not None:
    return eval_dir
  if hasattr(estimator, 'eval_dir'):
    return estimator.eval_dir()
  return os.path.join(estimator.model_dir, 'eval')  # an estimator-like object of the user's


def _metric(metrics, metric_name, step, eval_dir):
  if metric_name not in metrics:
    raise errors.value_error(
        'Early stopping tracks metric %r, which the evaluation at step %d did not write to %s.'
        % (metric_name, step, eval_dir), 'Pass one of the metrics evaluate() returns.',
        metric_name=metric_name, metrics_at_step=sorted(metrics))
  return metrics[metric_name]


# ---------------------------------------------------------------------------------------------
# The public hooks (tf.estimator.experimental)

def stop_if_higher_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0,
                        run_every_secs=60, run_every_steps=None):
  """Stops training once an evaluation at step >= `min_steps` has `metric_name` > `threshold`."""
  return _threshold_hook(estimator, metric_name, threshold, True, eval_dir, min_steps,
                         run_every_secs, run_every_steps)


def stop_if_lower_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0,
                       run_every_secs=60, run_every_steps=None):
  """Stops training once an evaluation at step >= `min_steps` has `metric_name` < `threshold`."""
  return _threshold_hook(estimator, metric_name, threshold, False, eval_dir, min_steps,
                         run_every_secs, run_every_steps)


def stop_if_no_increase_hook(estimator, metric_name, max_steps_without_increase, eval_dir=None,
                             min_steps=0, run_every_secs=60, run_every_steps=None):
  """Stops training once `metric_name` has not risen above its best for
  `max_steps_without_increase` global steps (evaluations before `min_steps` are ignored)."""
  return _no_improvement_hook(estimator, metric_name, max_steps_without_increase, True, eval_dir,
                              min_steps, run_every_secs, run_every_steps)


def stop_if_no_decrease_hook(estimator, metric_name, max_steps_without_decrease, eval_dir=None,
                             min_steps=0, run_every_secs=60, run_every_steps=None):
  """Stops training once `metric_name` has not fallen below its best for
  `max_steps_without_decrease` global steps (evaluations before `min_steps` are ignored)."""
  return _no_improvement_hook(estimator, metric_name, max_steps_without_decrease, False,
                              eval_dir, min_steps, run_every_secs, run_every_steps)


def _threshold_hook(estimator, metric_name, threshold, higher, eval_dir, min_steps,
                    run_every_secs, run_every_steps):
  _check_estimator(estimator)
  eval_dir = _eval_dir_of(estimator, eval_dir)
  crossed = operator.gt if higher else operator.lt
  words = 'above' if higher else 'below'

  def should_stop():
    for step, metrics in read_eval_metrics(eval_dir).items():
      if step < min_steps:
        continue
      value = _metric(metrics, metric_name, step, eval_dir)
      if crossed(value, threshold):
        _log.info('Early stopping: at step %d, %s = %s is %s the threshold %s.', step,
                  metric_name, value, words, threshold)
        return True
    return False

  return make_early_stopping_hook(estimator, should_stop, run_every_secs, run_every_steps)


def _no_improvement_hook(estimator, metric_name, max_steps_without_improvement, higher,
                         eval_dir, min_steps, run_every_secs, run_every_steps):
  _check_estimator(estimator)
  eval_dir = _eval_dir_of(estimator, eval_dir)
  better = operator.gt if higher else operator.lt
  words = 'increase' if higher else 'decrease'

  def should_stop():
    best, best_step = None, None
    for step, metrics in read_eval_metrics(eval_dir).items():
      if step < min_steps:
        continue
      value = _metric(metrics, metric_name, step, eval_dir)
      if best is None or better(value, best):
        best, best_step = value, step
      if step - best_step >= max_steps_without_improvement:
        _log.info('Early stopping: no %s in %s for %d steps (best %s at step %d; the limit is '
                  '%s steps).', words, metric_name, step - best_step, best, best_step,
                  max_steps_without_improvement)
        return True
    return False

  return make_early_stopping_hook(estimator, should_stop, run_every_secs, run_every_steps)


def make_early_stopping_hook(estimator, should_stop_fn, run_every_secs=60, run_every_steps=None):
  """A hook that stops training when `should_stop_fn()` returns True, asked every
  `run_every_secs` seconds or every `run_every_steps` steps (exactly one of them set)."""
  _check_estimator(estimator)
  if not callable(should_stop_fn):
    raise errors.type_error('`should_stop_fn` must be callable (taking no arguments).',
                            should_stop_fn=should_stop_fn)
  if run_every_secs is not None and run_every_steps is not None:
    raise errors.value_error(
        'Only one of `run_every_secs` and `run_every_steps` must be set.',
        'Pass run_every_secs=None with run_every_steps (run_every_secs defaults to 60).',
        run_every_secs=run_every_secs, run_every_steps=run_every_steps)
  if run_every_secs is None and run_every_steps is None:
    raise errors.value_error('One of `run_every_secs` and `run_every_steps` must be set.',
                             run_every_secs=run_every_secs, run_every_steps=run_every_steps)
  if run_every_steps is not None:
    errors.check_positive_int('run_every_steps', run_every_steps)
  elif isinstance(run_every_secs, bool) or not isinstance(run_every_secs, (int, float)) or \
      run_every_secs < 0:
    raise errors.value_error('`run_every_secs` must be a number >= 0.',
                             run_every_secs=run_every_secs)
  config = estimator.config
  if _synced_workers(estimator):
    if run_every_secs is not None:
      raise errors.value_error(
          'run_every_secs should not be set when training on several workers: they must ask '
          'should_stop_fn at the same global steps.', 'Pass run_every_secs=None and '
          'run_every_steps=N.', run_every_secs=run_every_secs)
    return _SyncedStopHook(should_stop_fn, run_every_steps, estimator.model_dir, config)
  if config.is_chief:
    return _StopOnPredicateHook(should_stop_fn, run_every_secs, run_every_steps,
                                estimator.model_dir)
  return _FollowStopHook(estimator.model_dir)


def _check_estimator(estimator):
  if not (hasattr(estimator, 'model_dir') and hasattr(estimator, 'config') and
          hasattr(estimator, 'train')):
    raise errors.type_error('`estimator` must be an Estimator (tpu_estimator.Estimator or '
                            'TPUEstimator).', estimator=type(estimator).__name__)


def _synced_workers(estimator):
  """Whether `estimator.train` runs on several workers in lock-step (multi-worker strategy)."""
  return bool(getattr(estimator, '_use_tpu', False)) and \
      replication.is_multi_worker(estimator.config)


# ---------------------------------------------------------------------------------------------
# The marker the chief leaves for other tasks

def stopped_at(model_dir):
  """The step the chief stopped training at early (from `early_stopping.json`), or None."""
  path = os.path.join(model_dir, MARKER)
  try:
    with tf.io.gfile.GFile(path) as f:
      return int(json.load(f)['step'])
  except (tf.errors.NotFoundError, ValueError, KeyError, TypeError):
    return None


def _write_marker(model_dir, step):
  tf.io.gfile.makedirs(model_dir)
  temp = os.path.join(model_dir, '.%s.tmp-%s' % (MARKER, uuid.uuid4().hex))
  with tf.io.gfile.GFile(temp, 'w') as f:
    json.dump({'step': int(step), 'time': time.time()}, f)
  tf.io.gfile.rename(temp, os.path.join(model_dir, MARKER), overwrite=True)


def _clear_marker(model_dir):
  path = os.path.join(model_dir, MARKER)
  if tf.io.gfile.exists(path):
    tf.io.gfile.remove(path)


# ---------------------------------------------------------------------------------------------
# The hooks' implementations

class _StepHook(_v1.train.SessionRunHook):
  """Base of the hooks below: they act on the global step after each run
  (`periodic.StepAfterRun`); those with a trigger (`_trigger`, a `periodic.StepTrigger`) act
  when it is due."""
  _trigger = None

  def __init__(self):
    self._step = periodic.StepAfterRun('Early stopping')

  def begin(self):
    if self._trigger is not None:
      self._trigger.reset()
    self._step.begin()

  def before_run(self, run_context):
    del run_context
    return self._step.args()

  def _due_step(self, run_context, run_values):
    """The step after this run when the trigger is due at it (marked fired), else None."""
    return self._trigger.due_step(self._step, run_context, run_values)


class _StopOnPredicateHook(_StepHook):
  """The deciding trainer: asks `should_stop_fn` when the timer says, then leaves the marker
  and requests the stop."""

  def __init__(self, should_stop_fn, run_every_secs, run_every_steps, model_dir):
    super().__init__()
    self._should_stop_fn = should_stop_fn
    self._trigger = periodic.StepTrigger(every_steps=run_every_steps,
                                         every_secs=run_every_secs)
    self._model_dir = model_dir

  def after_create_session(self, session, coord):
    del session, coord
    _clear_marker(self._model_dir)  # left by an earlier training that stopped early

  def after_run(self, run_context, run_values):
    step = self._due_step(run_context, run_values)
    if step is None:
      return
    if self._should_stop_fn():
      _log.info('Requesting early stopping at global step %d.', step)
      _write_marker(self._model_dir, step)
      run_context.request_stop()


class _FollowStopHook(_StepHook):
  """A non-chief trainer (without a multi-worker strategy): stops when the chief's marker
  names a step after the one this session started at (an older marker is from an earlier
  training).  The file is read at most once a second."""

  def __init__(self, model_dir, every_secs=1.0):
    super().__init__()
    self._model_dir = model_dir
    self._every = every_secs
    self._start_step = None
    self._last_check = 0.0

  def begin(self):
    super().begin()
    self._start_step = None

  def after_run(self, run_context, run_values):
    step = self._step.value(run_context, run_values)
    if self._start_step is None:
      self._start_step = step - 1
    now = time.time()
    if now - self._last_check < self._every:
      return
    self._last_check = now
    stop_step = stopped_at(self._model_dir)
    if stop_step is not None and stop_step > self._start_step:
      _log.info('Early stopping requested by the chief at step %d; stopping.', stop_step)
      run_context.request_stop()


class _SyncedStopHook(_StepHook):
  """Multi-worker training: every `run_every_steps` steps every worker asks `should_stop_fn`,
  and the answers are combined by an all-reduce (max) over the workers, so all of them stop
  after the same loop when any said stop.  The steps are the same on every worker, since the
  workers train in lock-step."""

  _GROUP_KEY = 0x45535450  # 'ESTP': far from the strategy's own group keys
  _INSTANCE_KEY = 0x45535450

  def __init__(self, should_stop_fn, run_every_steps, model_dir, config):
    super().__init__()
    self._should_stop_fn = should_stop_fn
    self._trigger = periodic.StepTrigger(every_steps=run_every_steps)
    self._model_dir = model_dir
    self._is_chief = config.is_chief
    self._num_workers = config.num_worker_replicas
    self._device = '/job:%s/replica:0/task:%d/device:CPU:0' % (config.task_type, config.task_id)

  def begin(self):
    super().begin()
    with tf.device(self._device):
      self._vote = _v1.placeholder_with_default(tf.constant(0.0), [], name='early_stop_vote')
      self._votes = tf.raw_ops.CollectiveReduce(
          input=tf.reshape(self._vote, [1]), group_size=self._num_workers,
          group_key=self._GROUP_KEY, instance_key=self._INSTANCE_KEY, merge_op='Max',
          final_op='Id', subdiv_offsets=[0], communication_hint='auto')

  def after_create_session(self, session, coord):
    del session, coord
    if self._is_chief:
      _clear_marker(self._model_dir)

  def after_run(self, run_context, run_values):
    step = self._due_step(run_context, run_values)
    if step is None:
      return
    vote = 1.0 if self._should_stop_fn() else 0.0
    votes = run_context.session.run(self._votes, feed_dict={self._vote: vote})
    if votes[0] > 0:
      _log.info('Early stopping at global step %d (requested by %s).', step,
                'this worker' if vote else 'another worker')
      if self._is_chief:
        _write_marker(self._model_dir, step)
      run_context.request_stop()


# ---------------------------------------------------------------------------------------------
# make_stop_at_checkpoint_step_hook

class _StopAtCheckpointStepHook(_v1.train.SessionRunHook):
  """A non-chief trainer: stops once the chief's latest checkpoint reached `last_step`,
  checking the checkpoint (then waiting `wait_after_file_check_secs`) once its own step did."""

  def __init__(self, model_dir, last_step, wait_after_file_check_secs=30):
    self._model_dir = model_dir
    self._last_step = last_step
    self._wait = wait_after_file_check_secs
    self._step = periodic.StepAfterRun('Early stopping')

  def begin(self):
    self._step.begin()

  def before_run(self, run_context):
    del run_context
    return self._step.args()

  def after_run(self, run_context, run_values):
    if self._step.value(run_context, run_values, lambda s: s >= self._last_step) < \
        self._last_step:
      return
    from tpu_estimator.checkpoints import restoring  # pylint: disable=import-outside-toplevel
    latest = restoring.latest_checkpoint(self._model_dir)
    if latest and restoring.global_step_of(latest) >= self._last_step:
      run_context.request_stop()
    else:
      time.sleep(self._wait)


def make_stop_at_checkpoint_step_hook(estimator, last_step, wait_after_file_check_secs=30):
  """Stops training at `last_step`: the chief by its own step, other trainers once the chief's
  checkpoint reached it."""
  _check_estimator(estimator)
  errors.check_positive_int('last_step', last_step)
  if estimator.config.is_chief:
    return _v1.train.StopAtStepHook(last_step=last_step)
  return _StopAtCheckpointStepHook(estimator.model_dir, last_step, wait_after_file_check_secs)
