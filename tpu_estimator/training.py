"""`TrainSpec`, `EvalSpec`, `train_and_evaluate` and the exporters that run after evaluations.

Locally (and on a `master` task), `train_and_evaluate` trains once with a checkpoint listener
that evaluates the newest checkpoint after each save (at most every `throttle_secs`), runs the
exporters on each result, and evaluates once more at the end.  With `TF_CONFIG`, the `chief` and
`worker` tasks train, a `ps` task serves the variables until the job ends
(parameter_servers.py), and an `evaluator` task evaluates each new checkpoint the chief writes
until training is done.
"""
import collections
import json
import numbers
import os
import time

import tensorflow as tf

from tpu_estimator.checkpoints import restoring
from tpu_estimator.config import TaskType
from tpu_estimator.distribute import parameter_servers
from tpu_estimator import errors
from tpu_estimator.hooks import early_stopping

_v1 = tf.compat.v1
_log = tf.get_logger()


class TrainSpec(collections.namedtuple('TrainSpec', ['input_fn', 'max_steps', 'hooks',
                                                     'saving_listeners'])):
  """How `train_and_evaluate` trains: `input_fn`, up to `max_steps` (None: until the input
  ends), `hooks`, `saving_listeners`."""

  def __new__(cls, input_fn, max_steps=None, hooks=None, saving_listeners=None):
    if not callable(input_fn):
      raise errors.type_error('`input_fn` must be callable.', input_fn=input_fn)
    errors.step_count('max_steps', max_steps)  # kept as given (a float too), as the original
    listeners = tuple(saving_listeners or ())
    for listener in listeners:
      if not isinstance(listener, _v1.train.CheckpointSaverListener):
        raise errors.type_error('`saving_listeners` must be CheckpointSaverListener instances.',
                                listener=listener)
    return super().__new__(cls, input_fn, max_steps, errors.check_hooks('hooks', hooks), listeners)


class EvalSpec(collections.namedtuple('EvalSpec', [
    'input_fn', 'steps', 'name', 'hooks', 'exporters', 'start_delay_secs', 'throttle_secs'])):
  """How `train_and_evaluate` evaluates: `steps` batches (None: the whole input) of
  `input_fn`, into `eval_<name>`, then `exporters`; not more often than `throttle_secs`."""

  def __new__(cls, input_fn, steps=100, name=None, hooks=None, exporters=None,
              start_delay_secs=120, throttle_secs=600):
    if not callable(input_fn):
      raise errors.type_error('`input_fn` must be callable.', input_fn=input_fn)
    errors.step_count('steps', steps)  # kept as given (a float too), as the original
    if name is not None and not isinstance(name, str):
      raise errors.type_error('`name` must be a string.', name=name)
    exporters = _check_exporters(exporters)
    for field, value in (('start_delay_secs', start_delay_secs),
                         ('throttle_secs', throttle_secs)):
      if isinstance(value, bool) or not isinstance(value, numbers.Real) or value < 0:
        raise errors.value_error('`%s` must be a number >= 0.' % field, **{field: value})
    return super().__new__(cls, input_fn, steps, name, errors.check_hooks('hooks', hooks),
                           exporters, start_delay_secs, throttle_secs)


def _check_exporters(exporters):
  if exporters is None:
    return ()
  if isinstance(exporters, Exporter):
    exporters = (exporters,)
  exporters = tuple(exporters)
  names = set()
  for exporter in exporters:
    if not isinstance(exporter, Exporter):
      raise errors.type_error('`exporters` must be Exporter instances.', exporter=exporter)
    if not exporter.name or not isinstance(exporter.name, str):
      raise errors.value_error('An exporter needs a non-empty string name.',
                               name=exporter.name)
    if exporter.name in names:
      raise errors.value_error('Exporter names must be unique.', name=exporter.name)
    names.add(exporter.name)
  return exporters


# ---------------------------------------------------------------------------------------------
# Exporters

class Exporter:
  """Exports a model after an evaluation; subclasses decide when and what to keep."""

  @property
  def name(self):
    raise NotImplementedError

  def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
    raise NotImplementedError


class _SavedModelExporter(Exporter):

  def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False):
    if not callable(serving_input_receiver_fn):
      raise errors.type_error('`serving_input_receiver_fn` must be callable.',
                              serving_input_receiver_fn=serving_input_receiver_fn)
    self._name = name
    self._receiver_fn = serving_input_receiver_fn
    self._assets_extra = assets_extra
    self._as_text = as_text

  @property
  def name(self):
    return self._name

  def _export(self, estimator, export_path, checkpoint_path):
    return estimator.export_saved_model(export_path, self._receiver_fn,
                                        assets_extra=self._assets_extra, as_text=self._as_text,
                                        checkpoint_path=checkpoint_path)


def _exports_in(export_path):
  """The timestamped exports under `export_path`, oldest first (any filesystem TensorFlow
  reads: a local path or a URI such as gs://)."""
  if not tf.io.gfile.isdir(export_path):
    return []
  names = [name.rstrip('/') for name in tf.io.gfile.listdir(export_path)]
  return [name for _, name in sorted((int(n), n) for n in names if n.isdigit())]


def _keep_newest(export_path, exports_to_keep):
  """Deletes all but the newest `exports_to_keep` timestamped exports under `export_path`."""
  if exports_to_keep is None:
    return
  for old in _exports_in(export_path)[:-exports_to_keep]:
    try:
      tf.io.gfile.rmtree(os.path.join(export_path, old))
    except tf.errors.NotFoundError:  # removed meanwhile (another evaluator's collection)
      pass


class FinalExporter(_SavedModelExporter):
  """Exports once, after the final evaluation."""

  def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
    del eval_result
    if not is_the_final_export:
      return None
    return self._export(estimator, export_path, checkpoint_path)


class LatestExporter(_SavedModelExporter):
  """Exports after every evaluation, keeping the newest `exports_to_keep`."""

  def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False,
               exports_to_keep=5):
    super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)
    if exports_to_keep is not None:
      errors.check_positive_int('exports_to_keep', exports_to_keep)
    self._keep = exports_to_keep

  def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
    del eval_result, is_the_final_export
    path = self._export(estimator, export_path, checkpoint_path)
    _keep_newest(export_path, self._keep)
    return path


def _loss_smaller(best_eval_result, current_eval_result):
  for result in (best_eval_result, current_eval_result):
    if not result or 'loss' not in result:
      raise errors.value_error('The default compare_fn needs `loss` in eval results.',
                               'Pass compare_fn for other metrics.', eval_result=result)
  return best_eval_result['loss'] > current_eval_result['loss']


class BestExporter(_SavedModelExporter):
  """Exports only when the evaluation beats the best so far (`compare_fn(best, current)`;
  default: smaller loss).  The best so far is first read from the eval event files; the first
  evaluation of a process is exported whatever it is when `export_path` holds no export yet."""

  def __init__(self, name='best_exporter', serving_input_receiver_fn=None,
               event_file_pattern='eval/*.tfevents.*', compare_fn=_loss_smaller,
               assets_extra=None, as_text=False, exports_to_keep=5):
    super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)
    if not callable(compare_fn):
      raise errors.type_error('`compare_fn` must be callable.', compare_fn=compare_fn)
    if exports_to_keep is not None:
      errors.check_positive_int('exports_to_keep', exports_to_keep)
    self._compare = compare_fn
    self._pattern = event_file_pattern
    self._keep = exports_to_keep
    self._best = None
    self._read_events = False

  def _best_from_events(self, model_dir):
    best = None
    for path in tf.io.gfile.glob(os.path.join(model_dir, self._pattern)):
      for event in _v1.train.summary_iterator(path):
        values = {v.tag: v.simple_value for v in event.summary.value if v.HasField('simple_value')}
        if not values:
          continue
        values['global_step'] = event.step
        if best is None or self._compare(best, values):
          best = values
    return best

  def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
    del is_the_final_export
    if not self._read_events:
      self._read_events = True
      self._best = self._best_from_events(estimator.model_dir)
      if self._best is not None and (
          self._best.get('global_step') == eval_result.get('global_step') or
          not _exports_in(export_path)):
        # The event file already holds this very evaluation, or nothing is exported here
        # yet: export it, as the original's first export of a process.
        self._best = None
    if self._best is not None and not self._compare(self._best, eval_result):
      return None
    self._best = dict(eval_result)
    path = self._export(estimator, export_path, checkpoint_path)
    _keep_newest(export_path, self._keep)
    return path


# ---------------------------------------------------------------------------------------------
# train_and_evaluate

class _Evaluator:
  """Evaluates the newest checkpoint and runs the exporters on the result."""

  def __init__(self, estimator, eval_spec, max_steps):
    self._estimator = estimator
    self._spec = eval_spec
    self._max_steps = max_steps
    self.last_result = None
    self.export_results = []
    self.last_checkpoint = None

  def evaluate_and_export(self, training_ended=False):
    """The export is final when training reached max_steps (or ended, without max_steps)."""
    checkpoint = self._estimator.latest_checkpoint()
    if not checkpoint or checkpoint == self.last_checkpoint:
      return self.last_result
    result = self._estimator.evaluate(self._spec.input_fn, steps=self._spec.steps,
                                      hooks=self._spec.hooks, checkpoint_path=checkpoint,
                                      name=self._spec.name)
    is_the_final_export = training_ended or (
        self._max_steps is not None and result['global_step'] >= self._max_steps)
    self.last_checkpoint, self.last_result = checkpoint, result
    # As the original: the export results of the latest evaluation, one per exporter.
    self.export_results = []
    for exporter in self._spec.exporters:
      path = os.path.join(self._estimator.model_dir, 'export', exporter.name)
      self.export_results.append(
          exporter.export(self._estimator, path, checkpoint, result, is_the_final_export))
    return result


class _EvaluateAfterSave(_v1.train.CheckpointSaverListener):
  """Evaluates after each checkpoint save (skipping the one written at start-up), at most
  every `throttle_secs`, and once more when training ends."""

  def __init__(self, evaluator, throttle_secs):
    self._evaluator = evaluator
    self._throttle = throttle_secs
    self._last_eval = None
    self._first = True

  def after_save(self, session, global_step_value):
    del session, global_step_value
    if self._first:
      self._first = False
      return
    now = time.time()
    if self._last_eval is not None and now - self._last_eval < self._throttle:
      return
    self._last_eval = now
    self._evaluator.evaluate_and_export()

  def end(self, session, global_step_value):
    del session, global_step_value
    self._evaluator.evaluate_and_export(training_ended=True)


def train_and_evaluate(estimator, train_spec, eval_spec):
  """Trains and evaluates; locally returns `(eval_result, export_results)`: the final
  evaluation's metrics and its exporters' results (one per exporter, None where one did not
  export)."""
  if not hasattr(estimator, 'train') or not hasattr(estimator, 'evaluate'):
    raise errors.type_error('`estimator` must be an Estimator.', estimator=estimator)
  if not isinstance(train_spec, TrainSpec):
    raise errors.type_error('`train_spec` must be a TrainSpec.', train_spec=train_spec)
  if not isinstance(eval_spec, EvalSpec):
    raise errors.type_error('`eval_spec` must be an EvalSpec.', eval_spec=eval_spec)
  config = estimator.config
  if config.task_type == TaskType.EVALUATOR:
    return _run_evaluator(estimator, train_spec, eval_spec)
  if config.task_type == TaskType.PS and config.cluster_spec.jobs:
    parameter_servers.serve(config)  # until the job ends
    return None, []
  listeners = list(train_spec.saving_listeners)
  if config.cluster_spec.jobs and config.task_type != TaskType.MASTER:
    # The chief and the workers train; an evaluator task (if any) does the evaluating.
    estimator.train(train_spec.input_fn, hooks=list(train_spec.hooks),
                    max_steps=train_spec.max_steps, saving_listeners=listeners)
    return None, []
  evaluator = _Evaluator(estimator, eval_spec, train_spec.max_steps)
  listeners.insert(0, _EvaluateAfterSave(evaluator, eval_spec.throttle_secs))
  estimator.train(train_spec.input_fn, hooks=list(train_spec.hooks),
                  max_steps=train_spec.max_steps, saving_listeners=listeners)
  if evaluator.last_result is None:  # max_steps was already reached: nothing trained
    evaluator.evaluate_and_export(training_ended=True)
  return evaluator.last_result, evaluator.export_results


def _run_evaluator(estimator, train_spec, eval_spec):
  """The `evaluator` task: evaluates each new checkpoint until `max_steps` is reached, or
  until it evaluated the step an early-stopping hook stopped the chief at.  Refused beside a
  `master` task, which evaluates itself (as the original refused it)."""
  jobs = sorted((json.loads(os.environ.get('TF_CONFIG') or '{}').get('cluster') or {}))
  if TaskType.MASTER in jobs:
    raise errors.value_error(
        'An evaluator task cannot run in a cluster with a master task: the master evaluates '
        'the checkpoints itself.', 'Drop the evaluator task, or name the master "chief".',
        cluster_jobs=jobs)
  time.sleep(eval_spec.start_delay_secs)
  evaluator = _Evaluator(estimator, eval_spec, train_spec.max_steps)
  evaluated = [-1]

  def stopped_early():
    stop = early_stopping.stopped_at(estimator.model_dir)
    return stop is not None and evaluated[0] >= stop

  for checkpoint in tf.train.checkpoints_iterator(
      estimator.model_dir, min_interval_secs=eval_spec.throttle_secs,
      timeout=_EARLY_STOP_POLL_SECS, timeout_fn=stopped_early):
    result = evaluator.evaluate_and_export()
    step = restoring.global_step_of(checkpoint)
    if result is not None:
      evaluated[0] = max(evaluated[0], int(result['global_step']))
    if train_spec.max_steps is not None and step >= train_spec.max_steps:
      break
    if stopped_early():
      break
  return evaluator.last_result, evaluator.export_results


_EARLY_STOP_POLL_SECS = 10  # how often a waiting evaluator looks for the early-stop marker
