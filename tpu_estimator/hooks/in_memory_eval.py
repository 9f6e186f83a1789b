"""`InMemoryEvaluatorHook`: evaluate the weights being trained, without waiting for a
checkpoint in the model_dir.

The original copied the variables from the training session into an evaluation graph.  Here the
training session's variables are written with the model's own `Saver` to a private temporary
checkpoint (outside the model_dir, never named in its `checkpoint` state file), and
`estimator.evaluate` runs on it.  So the evaluation is exactly `evaluate`'s (sharded or not,
padded final batch, eval hooks, metrics written to `eval`/`eval_<name>` at the training step),
with no second way of building an evaluation to keep in step with it.
"""
import shutil
import tempfile

import tensorflow as tf

from tpu_estimator import errors
from tpu_estimator.hooks import periodic

_v1 = tf.compat.v1


class InMemoryEvaluatorHook(_v1.train.SessionRunHook):
  """Evaluates the model being trained every `every_n_iter` training iterations
  (`session.run` calls: one step each, or one device loop each), once before the first and
  once after the last.  `input_fn`, `steps`, `hooks` and `name` are `evaluate`'s."""

  def __init__(self, estimator, input_fn, steps=None, hooks=None, name=None, every_n_iter=100):
    if isinstance(every_n_iter, bool) or not isinstance(every_n_iter, int) or every_n_iter <= 0:
      raise errors.value_error('`every_n_iter` must be a positive int.',
                               every_n_iter=every_n_iter)
    if not (hasattr(estimator, 'evaluate') and hasattr(estimator, 'config')):
      raise errors.type_error('`estimator` must be an Estimator.', estimator=estimator)
    config = estimator.config
    if config.num_ps_replicas > 0 or config.num_worker_replicas > 1:
      raise errors.value_error(
          'InMemoryEvaluatorHook supports only training on one machine.',
          'Use train_and_evaluate with an evaluator task instead.',
          num_ps_replicas=config.num_ps_replicas,
          num_worker_replicas=config.num_worker_replicas)
    if not callable(input_fn):
      raise errors.type_error('`input_fn` must be callable.', input_fn=input_fn)
    errors.step_count('steps', steps)  # a float too: evaluate() rounds it up, as the original
    self._estimator = estimator
    self._input_fn = input_fn
    self._steps = steps
    self._hooks = list(errors.check_hooks('hooks', hooks))
    self._name = name
    self._trigger = periodic.StepTrigger(every_steps=every_n_iter)  # counting runs
    self._saver = None
    self._runs = 0
    self.last_result = None  # the latest evaluation's metrics

  def begin(self):
    self._runs = 0
    self._trigger.reset()
    # The model's Saver ops (the variables checkpoints hold), but a Saver object of its own:
    # the model's one keeps the list of checkpoints to delete beyond keep_checkpoint_max.
    savers = _v1.get_collection(_v1.GraphKeys.SAVERS)
    if savers:
      self._saver = _v1.train.Saver(saver_def=savers[0].as_saver_def())
    else:
      self._saver = _v1.train.Saver(sharded=True, allow_empty=True)

  def after_create_session(self, session, coord):
    del coord
    self._evaluate(session)  # the starting point, as the original

  def after_run(self, run_context, run_values):
    del run_values
    self._runs += 1
    if self._trigger.due(self._runs):
      self._evaluate(run_context.session)

  def end(self, session):
    if self._trigger.last_step() != self._runs:
      self._evaluate(session)

  def _evaluate(self, session):
    self._trigger.fire(self._runs)
    directory = tempfile.mkdtemp(prefix='tpu_estimator_in_memory_eval_')
    try:
      step = int(session.run(_v1.train.get_global_step()))
      path = self._saver.save(session, '%s/model.ckpt' % directory, global_step=step,
                              write_meta_graph=False, write_state=False)
      self.last_result = self._estimator.evaluate(
          self._input_fn, steps=self._steps, hooks=self._hooks, checkpoint_path=path,
          name=self._name)
    finally:
      shutil.rmtree(directory, ignore_errors=True)
