"""`Estimator` and `TPUEstimator`: validate the call, build a fresh graph for it, run it in a
`MonitoredSession` with hooks.  The layout (`layout.OneDevice` or `layout.Sharded`) says
where things run; the step builders (`steps`) say what one `session.run` computes."""
import contextlib
import copy
import dataclasses
import functools
import os
import tempfile

import numpy as np
import tensorflow as tf
from google.protobuf import message

from tpu_estimator import _tf_internals
from tpu_estimator.checkpoints import lock as model_dir_lock
from tpu_estimator.checkpoints import pinning
from tpu_estimator.checkpoints import restoring
from tpu_estimator.checkpoints import saving
from tpu_estimator.checkpoints import scaffolds
from tpu_estimator.config import RunConfig
from tpu_estimator.config import TPURunConfig
from tpu_estimator.core import fetch_plans
from tpu_estimator.core import graph_cache
from tpu_estimator.core import host_calls
from tpu_estimator.core import model_fn as model_fn_lib
from tpu_estimator.core import savedmodel
from tpu_estimator.core import steps as steps_lib
from tpu_estimator.core import strategy_steps
from tpu_estimator.distribute import gpus
from tpu_estimator.distribute import input_fn as input_fn_lib
from tpu_estimator.distribute import iterators
from tpu_estimator.distribute import layout as layout_lib
from tpu_estimator.distribute import replication
from tpu_estimator.distribute import tpu_embedding
from tpu_estimator.distribute import xla
from tpu_estimator import errors
from tpu_estimator.hooks import preemption
from tpu_estimator.hooks import progress
from tpu_estimator.hooks import run_control as hooks_lib
from tpu_estimator import quiet
from tpu_estimator.specs import ModeKeys
from tpu_estimator.specs import TPUEstimatorSpec
from tpu_estimator import warm_starting

_v1 = tf.compat.v1
_log = tf.get_logger()


def _checked_config(config, config_type):
  if config is None:
    return config_type()
  if not isinstance(config, config_type):
    raise errors.type_error('`config` must be a %s.%s.' % (config_type.__module__,
                                                           config_type.__name__), config=config)
  return config


def with_model_dir(config, model_dir, config_type=RunConfig):
  """`config` (None: the default `config_type`) with its model_dir: the one given here or in
  `config` (an error where both are given and differ), else a new temporary folder.  Also the
  original's `estimator.maybe_overwrite_model_dir_and_session_config(config, model_dir)`,
  which TF-Lattice's canned estimators call before the constructor."""
  config = _checked_config(config, config_type)
  if model_dir is not None:
    model_dir = os.fspath(model_dir)
  if model_dir and config.model_dir and model_dir != config.model_dir:
    raise errors.value_error(
        '`model_dir` is set both in the constructor and in RunConfig, with different values.',
        'Set it in one place.', model_dir=model_dir, config_model_dir=config.model_dir)
  model_dir = model_dir or config.model_dir
  if not model_dir:
    model_dir = tempfile.mkdtemp()
    _log.warning('Using temporary folder as model directory: %s', model_dir)
  return config if config.model_dir == model_dir else config.replace(model_dir=model_dir)


class Estimator:
  """Trains, evaluates and predicts with a `model_fn`, as `tf.estimator.Estimator` did."""

  def __init__(self, model_fn, model_dir=None, config=None, params=None, warm_start_from=None):
    self._layout = layout_lib.OneDevice(copy.deepcopy(params or {}))
    self._init(model_fn, model_dir, config, params, warm_start_from, RunConfig)

  def _init(self, model_fn, model_dir, config, params, warm_start_from, config_type):
    # `params` is passed to model_fn and input_fn as given (a dict, or e.g. an HParams or
    # argparse.Namespace, as the original allowed); TPUEstimator checks its own.
    model_fn_lib.verify_model_fn(model_fn, params,
                                 require_params=self._layout.allow_tpu_spec)
    config = _checked_config(config, config_type)
    if self._layout.allow_tpu_spec and self._layout.use_tpu:  # sharded by its TPUConfig
      replication.reject_distribute_config(config)
    else:
      replication.check_strategies(config)
    gpus.grow_memory_unless_configured(config.session_config)
    config = with_model_dir(config, model_dir, config_type)
    self._model_fn = model_fn
    self._config = config
    self._model_dir = config.model_dir
    self._params = copy.deepcopy(params or {})
    self._warm_start = warm_starting.settings_from(warm_start_from)
    self._graph_cache = graph_cache.Cache(self)
    self._xla_auto = xla.Auto()

  model_dir = property(lambda self: self._model_dir)
  config = property(lambda self: copy.deepcopy(self._config))
  params = property(lambda self: copy.deepcopy(self._params))

  @property
  def model_fn(self):
    """The model_fn bound to `self.params`, as the original's: called as
    `model_fn(features, labels, mode, config)`, it calls the one given to the constructor with
    the arguments that one takes and returns its checked spec."""
    def public_model_fn(features, labels, mode, config):
      return model_fn_lib.call_model_fn(self._model_fn, features, labels, mode, self.params,
                                        config, allow_tpu_spec=isinstance(self, TPUEstimator))
    return public_model_fn

  def latest_checkpoint(self):
    return restoring.latest_checkpoint(self._model_dir)

  def eval_dir(self, name=None):
    """Where `evaluate(name=name)` writes its summaries: `<model_dir>/eval`, or
    `<model_dir>/eval_<name>`."""
    return os.path.join(self._model_dir, 'eval' if not name else 'eval_' + name)

  def get_variable_names(self):
    return restoring.variable_names(self._model_dir)

  def get_variable_value(self, name):
    return restoring.variable_value(self._model_dir, name)

  # -------------------------------------------------------------------------------------------
  def _graph(self):
    graph = tf.Graph()
    if self._config.tf_random_seed is not None:
      with graph.as_default():
        _v1.set_random_seed(self._config.tf_random_seed)
    return graph

  @contextlib.contextmanager
  def _call_graph(self, mode, input_fn, compile_loop=True, key=None, checkpoint=None):
    """The new graph of one call in `mode`, set up as every mode needs it, in this order: the
    call's plan (its replicas first), the global step (mirrored over the replicas) and its
    cached read, which TensorFlow's hooks fetch, made before anything reads it (so that a
    StepCounterHook passed to evaluate() builds no op: the graph can be kept), then the
    input.  Yields (graph, plan, global_step, host_input, kept) inside the graph.  With `key`
    (the call's graph_cache.Key) a graph kept for the same call with another `input_fn` may
    read this call's input instead (`_kept_reading`, with `checkpoint` for training): `kept`
    is that graph's entry, and the input's iterators are not made; None: build.  A training graph
    is built under `RunConfig.device_fn` or, in a parameter-server cluster, the device function
    that puts its variables on the ps tasks, as the original built it.  Replicas planned for
    one computation raise `xla.NotCompilable` where the call cannot be built so
    (`xla.central_build`): it is built again on mirrored replicas.  The variables of a call
    with a device loop (TPUEstimator with use_tpu=True) are resource variables, as the
    original made them on TPU, even under `disable_v2_behavior()`: the loop is a function, in
    which a reference variable (the global step) cannot be assigned."""
    with self._graph().as_default() as graph:
      plan = self._layout.plan(mode, self._config, compile_loop)
      if plan.sharded:  # a device loop's variables, as the original's on TPU (docstring)
        _v1.get_variable_scope().set_use_resource(True)
      device_fn = None
      if mode == ModeKeys.TRAIN:
        device_fn = self._config.device_fn or getattr(plan.replicas, 'device_fn', None)
      with graph.device(device_fn) if device_fn else contextlib.nullcontext():
        with plan.replicas.scope(), _v1.variable_scope(
            _v1.get_variable_scope(), use_resource=self._layout.resource_global_step or None):
          global_step = _v1.train.get_or_create_global_step(graph)
        saving.cache_global_step_read(global_step)
        host_input = self._layout.host_input(input_fn, plan)
        plan = layout_lib.for_input(plan, host_input)
        with xla.central_build(plan.replicas, host_input.ungrouped):
          kept = None if key is None else \
              self._kept_reading(key, graph, host_input, plan.replicas, checkpoint)
          if kept is None:
            host_input.make_iterators()
          yield graph, plan, global_step, host_input, kept

  def _session(self, replicas, scaffold, hooks, xla_step=False, inference=False,
               rewrites=True, **kwargs):
    """A MonitoredSession restoring `checkpoint_dir`/`checkpoint_filename_with_path`.

    Across workers it does not recover from a lost peer by re-creating the session (that
    would wait for the dead worker for hours): the error ends the call.  `xla_step`: the
    session compiles the training step with XLA (`TrainStep.compiles_step`).
    `inference`: an evaluation's or prediction's session, its raw session closed on a thread
    once the call is done (`iterators.ClosedInBackground`); a training session, which holds
    optimizer slots too, is closed before its call returns.  `rewrites`: as
    `Replicas.session_config`'s (`_graph_rewrites`).  A hook's `begin()` building a Saver
    over a dict of variables (tensorflow/tpu's LoadEMAHook: `Saver(ema.variables_to_restore())`)
    gets each distributed variable in it whole, every replica's copy (scaffolds.py)."""
    with scaffolds.whole_variables():
      return self._new_session(replicas, scaffold, hooks, xla_step, inference, rewrites,
                               **kwargs)

  def _new_session(self, replicas, scaffold, hooks, xla_step, inference, rewrites, **kwargs):
    config = replicas.session_config(self._config.session_config, xla=xla_step,
                                     rewrites=rewrites)
    if replicas.kind == 'parameter_servers':  # recovers from lost tasks, for a bounded time
      return replicas.monitored_session(scaffold, hooks, config, **kwargs)
    if replicas.kind == 'multi_worker':
      return _v1.train.SingularMonitoredSession(hooks=hooks, scaffold=scaffold,
                                                master=replicas.master, config=config, **kwargs)
    creator = scaffolds.WithReadyChecks(_v1.train.ChiefSessionCreator(
        scaffold=scaffold, master=replicas.master, config=config, **kwargs), scaffold)
    # Either way the raw session reuses its runs' fetch plans (core/fetch_plans.py).
    creator = iterators.ClosedInBackground(creator) if inference else \
        fetch_plans.PlannedSessions(creator)
    with quiet.internal_calls():  # TensorFlow's restore code calls its deprecated helpers
      return _v1.train.MonitoredSession(session_creator=creator, hooks=hooks)

  # -------------------------------------------------------------------------------------------
  def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
    """Trains for `steps` more steps, up to `max_steps` in all, or until the input ends."""
    if steps is not None and max_steps is not None:
      raise errors.value_error('Can not provide both steps and max_steps.',
                               'Pass one of them.', steps=steps, max_steps=max_steps)
    steps = errors.step_count('steps', steps)
    max_steps = errors.step_count('max_steps', max_steps)
    hooks = list(errors.check_hooks('hooks', hooks))
    listeners = list(saving_listeners or ())
    for listener in listeners:
      if not isinstance(listener, _v1.train.CheckpointSaverListener):
        raise errors.type_error('saving_listeners must be CheckpointSaverListener instances.',
                                listener=listener)
    lock = model_dir_lock.held(self._model_dir) if self._config.is_chief else \
        contextlib.nullcontext()
    with lock:
      return self._train_locked(input_fn, hooks, steps, max_steps, listeners)

  def _train_locked(self, input_fn, hooks, steps, max_steps, listeners):
    # The newest intact checkpoint, every tensor read (resuming from a damaged one would crash
    # or restart training); a missing, unreadable or wrong state file is rewritten to name it.
    checkpoint = restoring.latest_checkpoint(self._model_dir, repair=self._config.is_chief,
                                               verify=True)
    call_steps = steps
    if max_steps is not None:
      start = restoring.global_step_of(checkpoint)
      if max_steps <= start:
        _log.info('Skipping training since max_steps has already saved.')
        return self
      call_steps = max_steps - start
    compile_loop = self._xla_auto.compile_loop(self._config, input_fn, call_steps)
    try:
      return self._train_graph(input_fn, hooks, steps, max_steps, listeners, checkpoint,
                               compile_loop)
    except xla.NotCompilable as refusal:  # raised while building, or at a first run
      xla.log_uncompiled(self._config, refusal)
      self._xla_auto.refuse(ModeKeys.TRAIN, refusal)
      if isinstance(refusal, xla.CompileFailed):  # its session may have saved a checkpoint
        checkpoint = restoring.latest_checkpoint(self._model_dir, verify=True)
      return self._train_graph(input_fn, hooks, steps, max_steps, listeners, checkpoint, False)

  def _train_graph(self, input_fn, hooks, steps, max_steps, listeners, checkpoint,
                   compile_loop):
    """One training call, in the graph and session an earlier call with the same `input_fn`
    kept (graph_cache.py) or in a new graph; `compile_loop=False`: never compile its loop as a
    whole."""
    key = graph_cache.Key(ModeKeys.TRAIN, input_fn, (compile_loop,))
    entry = self._kept_train_graph(key, checkpoint)
    while True:
      if entry is None:
        entry = self._build_train(key, input_fn, listeners, checkpoint, compile_loop)
      finished = stale = False
      watch = graph_cache.HookWatch()
      clock = self._xla_auto.clock(self._config, input_fn, entry.parts.built.compiled_loop)
      try:
        with entry.graph.as_default():
          last_loss = self._run_train(entry, watch.around(hooks), steps, max_steps, listeners,
                                      checkpoint, clock)
        finished = not watch.built
      except graph_cache.Stale:  # a hook of this call builds ops: not in a kept graph
        stale = True
      finally:
        if finished and entry.reason is None:
          self._note_saved(entry, checkpoint)
          self._xla_auto.kept(input_fn)
        self._keep_or_close(entry, finished)
      if finished and clock is not None:
        self._xla_auto.judge(input_fn)  # a compiled loop measured slower is not used again
      if stale:
        entry = None
        continue
      _log.info('Loss for final step: %s.', last_loss)
      return self

  def _note_saved(self, entry, start):
    """After a call in a kept graph: the checkpoint its session holds, if the call saved one
    (with saving turned off the session is ahead of every checkpoint: the next call restores,
    as a new graph would)."""
    latest = restoring.latest_checkpoint(self._model_dir)
    state = graph_cache.checkpoint_state(latest) if latest else None
    before = graph_cache.checkpoint_state(start) if start else None
    entry.saved = state if state != before else None
    entry.signature = graph_cache.checkpoint_signature(latest) if latest else None

  def _kept_train_graph(self, key, checkpoint):
    """The training graph a previous call kept, if it can go on from `checkpoint`: the one it
    saved last, or another with the same variables (restored into it)."""
    if not self._config.reuse_train_graphs or not checkpoint:
      return None  # without a checkpoint a new graph initializes anew
    return _going_on_from(self._graph_cache.take(key), checkpoint)

  def _build_train(self, key, input_fn, listeners, checkpoint, compile_loop):
    reading = key if checkpoint and not listeners else None  # (else a new graph is not kept)
    with self._call_graph(ModeKeys.TRAIN, input_fn, compile_loop, reading, checkpoint) as (
        graph, plan, global_step, host_input, kept):
      if kept is not None:
        return kept
      built = _with_writers(
          _steps_of(plan).build_train(plan, self._model_fn, host_input, global_step))
      if not checkpoint:
        warm_starting.apply(self._warm_start)
      _v1.summary.scalar('loss', built.loss)
      saving.ensure_saver(self._config)
      if checkpoint:
        restoring.check_shapes(checkpoint)
      entry = graph_cache.Entry(key, graph, built.scaffold, _TrainParts(
          plan, built, host_input, global_step))
      entry.reason = self._why_train_not_kept(graph, plan, built, host_input, listeners)
      if entry.reason is not None:
        _log.debug('The training graph is built for this call only: %s.', entry.reason)
      return entry

  def _why_train_not_kept(self, graph, plan, built, host_input, listeners):
    if not self._config.reuse_train_graphs:
      return 'RunConfig(reuse_train_graphs=False)'
    if listeners:
      return 'saving_listeners were passed to the call'
    roots = [t for t in (built.loss, built.train_op, built.global_step, built.steps_run)
             if t is not None]
    # Our own hooks (the input's, host_call's) serve any call; what they run is checked.
    return graph_cache.why_not_kept(
        graph, built.scaffold, built.spec_hooks + built.chief_hooks,
        roots + _hook_tensors(host_input.hooks + built.hooks), bool(host_input.hooks),
        plan.replicas, unseeded_ok=True)

  def _run_train(self, entry, hooks, steps, max_steps, listeners, checkpoint, clock):
    """Runs training in `entry`'s graph; returns the last loss.  `graph_cache.Stale` when a
    hook would build ops in a kept (finalized) graph: the call needs a new one
    (`_kept_session`).  `clock`: times the device loop's runs (xla.Auto.clock)."""
    parts = entry.parts
    plan, built = parts.plan, parts.built
    all_hooks = self._train_hooks(plan, built, parts.host_input, hooks, parts.global_step,
                                  steps, max_steps, listeners, clock)
    reused = entry.session is not None
    if clock is not None:
      clock.call_started(new_session=not reused)
    last_loss = None
    with preemption.deferred_sigterm() as sigterm:
      all_hooks.insert(1, preemption.PreemptionHook(sigterm))
      with restoring.restore_errors(checkpoint):
        session = self._train_session(entry, all_hooks, checkpoint)
      first = built.compiled_loop and not reused  # XLA compiles the loop at its first run
      with errors.runtime_checks_as_value_errors(), session:
        while not session.should_stop():
          try:
            if built.train_op is None:
              last_loss = session.run(built.loss)
            else:
              _, last_loss = session.run([built.train_op, built.loss])
          except tf.errors.OpError as error:
            if first and xla.first_run_failed(self._config, error):
              raise xla.CompileFailed(error) from error
            raise
          first = False
    return last_loss

  def _train_session(self, entry, hooks, checkpoint):
    replicas = entry.parts.plan.replicas
    if entry.reason is not None:
      return self._session(replicas, entry.scaffold, hooks, entry.parts.built.compiles_step,
                           checkpoint_dir=self._model_dir)
    return self._kept_session(replicas, entry, hooks, checkpoint,
                              entry.parts.built.compiles_step)

  def _train_hooks(self, plan, built, host_input, hooks, global_step, steps, max_steps,
                   listeners, clock):
    config = self._config
    step = built.global_step  # read after the step (or device loop) ran
    result = [hooks_lib.NanLossHook(built.loss, step)]
    bar = config.is_chief and progress.bar_enabled(config.progress_bar)
    if bar:
      result.append(progress.ProgressBarHook(
          counter=global_step, step=step, loss=built.loss, last_step=max_steps,
          num_steps=steps, label='train', unit='steps', enabled=True))
    if config.log_step_count_steps and not bar:
      # One step a run: the step it started at, as the original logged (`step = 0` first); a
      # device loop: the step it ended at.
      shown = step if plan.loop else _tf_internals.global_step_read()
      result.append(hooks_lib.StepLoggingHook(
          {'loss': built.loss, 'step': shown}, step, config.log_step_count_steps))
    if plan.loop:
      result.append(hooks_lib.LoopControlHook(
          built.iterations, built.steps_run, step, global_step, plan.ipl,
          num_steps=steps, last_step=max_steps, clock=clock))
    elif steps is not None or max_steps is not None:
      result.append(_v1.train.StopAtStepHook(num_steps=steps, last_step=max_steps))
    # As the original (MonitoredTrainingSession): the chief's saver, then its other hooks, then
    # the user's, so a user hook sees the evaluation train_and_evaluate ran on this step's
    # checkpoint (an early-stopping hook stops on the step whose evaluation said stop).
    if config.is_chief:
      saver = saving.saver_hook(self._model_dir, config, built.scaffold, listeners)
      if saver is not None:
        result.append(saver)
      result += built.chief_hooks
      if config.log_step_count_steps:
        batch_size = self._layout.examples_per_step()
        if batch_size:  # TPUEstimator: examples/sec next to global_step/sec, as the original
          result.append(progress.ExamplesPerSecondHook(
              batch_size, every_n_steps=config.log_step_count_steps, output_dir=self._model_dir))
        else:
          result.append(_v1.train.StepCounterHook(every_n_steps=config.log_step_count_steps,
                                                  output_dir=self._model_dir))
      if config.save_summary_steps:
        summary_hook = hooks_lib.LoopSummarySaverHook if plan.loop else \
            _v1.train.SummarySaverHook
        result.append(summary_hook(save_steps=config.save_summary_steps,
                                   output_dir=self._model_dir, scaffold=built.scaffold))
    return result + hooks + built.spec_hooks + host_input.hooks + built.hooks

  # -------------------------------------------------------------------------------------------
  def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
    """Evaluates on `steps` batches (or the whole input) from a checkpoint; returns metrics,
    `loss` (mean over batches) and `global_step`."""
    steps = errors.step_count('steps', steps)
    hooks = list(errors.check_hooks('hooks', hooks))
    if name is not None and not isinstance(name, str):
      raise errors.type_error('`name` must be a string.', name=name)
    checkpoint = restoring.resolve_checkpoint(self._model_dir, checkpoint_path, 'evaluate')
    return self._evaluate_checkpoint(input_fn, steps, hooks, checkpoint, bool(checkpoint_path),
                                     name)

  def _evaluate_checkpoint(self, input_fn, steps, hooks, checkpoint, explicit, name):
    compile_loop = self._xla_auto.compile_loop(self._config, input_fn, steps, ModeKeys.EVAL)
    args = (input_fn, steps, hooks, checkpoint, explicit, name)
    try:
      return self._evaluate_graph(*args, compile_loop)
    except xla.NotCompilable as refusal:  # raised while building, or at a run
      self._refused_loop(ModeKeys.EVAL, refusal)
      return self._evaluate_graph(*args, False)

  def _evaluate_graph(self, input_fn, steps, hooks, checkpoint, explicit, name, compile_loop):
    """One evaluation, in the graph an earlier call with the same key kept or in a new one;
    `compile_loop=False`: never compile its loop as a whole."""
    key = graph_cache.Key(ModeKeys.EVAL, input_fn, (steps, name, compile_loop))
    entry = self._kept_graph(key)
    while True:
      if entry is None:
        entry = self._build_eval(key, input_fn, steps, compile_loop)
      try:
        return self._run_eval(entry, steps, hooks, checkpoint, explicit, name)
      except graph_cache.Stale:  # the checkpoint's variables differ from the kept graph's
        entry = None

  def _refused_loop(self, mode, refusal):
    """After a loop built for whole compilation in `mode` could not be compiled: says why and
    remembers it (xla=None does not try again)."""
    xla.log_uncompiled_loop(self._config, mode, refusal, refusal.model)
    self._xla_auto.refuse(mode, refusal)

  def _kept_graph(self, key):
    """The graph a previous call with `key` kept, if this call may reuse it."""
    if not self._config.reuse_eval_graphs:
      return None
    return self._graph_cache.take(key)

  def _build_eval(self, key, input_fn, steps, compile_loop=True):
    with self._call_graph(ModeKeys.EVAL, input_fn, compile_loop, key) as (
        graph, plan, global_step, host_input, kept):
      if kept is not None:
        return kept
      built = _steps_of(plan).build_eval(plan, self._model_fn, host_input, steps)
      saving.ensure_saver(self._config)
      values = dict(built.values)
      values[_v1.GraphKeys.GLOBAL_STEP] = global_step
      parts = _Parts(plan.replicas, fetches=built.update, values=values, loop=plan.sharded,
                     compiled=built.compiled_loop)
      return self._entry(key, graph, built, host_input, parts,
                         [built.update] + list(values.values()))

  def _kept_reading(self, key, graph, host_input, replicas, checkpoint=None):
    """The graph an earlier call kept for `key`'s mode and arguments but another `input_fn`,
    now reading the input this call prepared in its new `graph` (graph_cache.read_new_input,
    in a session configured for `replicas`); None: the call goes on building its own.
    Training: only a graph that can go on from `checkpoint`, unseeded random ops allowed (as
    for a kept training graph's own input)."""
    training = key.mode == ModeKeys.TRAIN
    if not (self._config.reuse_train_graphs if training else self._config.reuse_eval_graphs):
      return None
    entry = self._graph_cache.take_other_input(key)
    if training:
      entry = _going_on_from(entry, checkpoint)
    if entry is None:
      return None
    # The session only serializes datasets: the replicas' devices (logical CPUs), no GPU (a
    # GPU device made for every call would log its creation), ops placed where they can run.
    config = replicas.session_config(self._config.session_config, rewrites=False)
    config.device_count['GPU'] = 0
    config.allow_soft_placement = True
    reading = False
    try:
      reading = graph_cache.read_new_input(entry, key, graph, host_input, config,
                                           unseeded_ok=training)
    finally:
      if not reading:  # still kept for the calls it serves
        self._graph_cache.put(entry)
    return entry if reading else None

  def _entry(self, key, graph, built, host_input, parts, roots):
    """A `graph_cache.Entry` for a just-built graph, and whether it may be kept."""
    parts.host_input = host_input
    entry = graph_cache.Entry(key, graph, built.scaffold, parts)
    own_hooks = host_input.hooks + _with_writers(built).hooks
    parts.first_hooks = own_hooks + built.spec_hooks  # the first call's
    parts.templates = [copy.copy(h) for h in own_hooks]  # fresh state for later calls
    entry.reason = 'RunConfig(reuse_eval_graphs=False)'
    if self._config.reuse_eval_graphs:
      entry.reason = graph_cache.why_not_kept(
          graph, built.scaffold, built.spec_hooks, roots + _hook_tensors(own_hooks),
          bool(host_input.hooks), parts.replicas)
    if entry.reason is not None:
      _log.debug('The %s graph is built for this call only: %s.', key.mode, entry.reason)
    return entry

  def _run_eval(self, entry, steps, hooks, checkpoint, explicit, name):
    parts = entry.parts
    kept = False
    watch = graph_cache.HookWatch()
    try:
      with entry.graph.as_default():
        final = _v1.train.FinalOpsHook(parts.values)
        bar = progress.ProgressBarHook(step=parts.fetches, num_steps=steps,
                                       label='evaluate', unit='batches',
                                       enabled=self._config.progress_bar)
        all_hooks = _call_hooks(entry) + watch.around(hooks) + [final, bar]
        session, checkpoint = self._restored_session(parts.replicas, entry.scaffold,
                                                     all_hooks, checkpoint, explicit,
                                                     'evaluate', entry)
        with errors.runtime_checks_as_value_errors(), session:
          while not session.should_stop():
            # XLA compiles the loop at its first run, and again for each new batch shape (the
            # short final batch): nothing was returned yet, so any run may fall back.
            self._compiled_run(session, parts.fetches, parts.compiled)
        results = final.final_ops_values
        kept = not watch.built
        _write_eval_summary(self.eval_dir(name), results, checkpoint)
    finally:
      self._keep_or_close(entry, kept)
    _log.info('Saving dict for global step %d: %s', results[_v1.GraphKeys.GLOBAL_STEP],
              ', '.join('%s = %s' % kv for kv in sorted(results.items())
                        if not isinstance(kv[1], bytes)))  # (a summary's bytes: an image's)
    return results

  def _compiled_run(self, session, fetches, first):
    """`session.run(fetches)`; a run of a loop compiled as a whole that may still fall back
    (`first`: the first of a prediction, any of an evaluation) and that XLA fails to compile
    under xla=None raises `xla.CompileFailed` (the call is built again uncompiled)."""
    try:
      return session.run(fetches)
    except tf.errors.OpError as error:
      if first and xla.first_run_failed(self._config, error):
        raise xla.CompileFailed(error) from error
      raise

  def _keep_or_close(self, entry, finished):
    """After a call: its graph and session kept for the next call when the call finished and
    the graph may be reused, closed otherwise."""
    if finished and entry.reason is None and entry.session is not None:
      self._graph_cache.put(entry)
    else:
      entry.close()

  def _restored_session(self, replicas, scaffold, hooks, checkpoint, explicit, what,
                        entry=None):
    """(session, checkpoint restored): a session restoring `checkpoint` from a pinned snapshot
    (a trainer with a small keep_checkpoint_max cannot delete it meanwhile), after checking the
    model's shapes against it.  If the latest checkpoint (not an `explicit` one) was deleted
    before it could be pinned, the new latest is restored instead.  Errors name `checkpoint`,
    never the snapshot.  A graph kept by an earlier call (`entry`) restores into its open
    session (none where that session holds the checkpoint's values already: the same files
    restored, `Entry.holds_values_of`); `graph_cache.Stale` when the checkpoint's variables are
    not those it restored."""
    def restore(checkpoint, snapshot):
      if entry is None or not entry.holds_values_of(snapshot):  # (else checked when restored)
        if entry is not None and entry.session is not None and not entry.fits(snapshot):
          raise graph_cache.Stale(checkpoint)
        restoring.check_shapes(snapshot, checkpoint)
      if what == 'evaluate':
        _log.info('Starting evaluation, restoring parameters from %s', checkpoint)
      rewrites = _graph_rewrites(entry)
      with restoring.restore_errors(snapshot, checkpoint):
        if entry is not None and entry.reason is None:
          return self._kept_session(replicas, entry, hooks, snapshot,
                                    rewrites=rewrites), checkpoint
        return self._session(replicas, scaffold, hooks, inference=True, rewrites=rewrites,
                             checkpoint_filename_with_path=snapshot), checkpoint

    return pinning.with_latest_pinned(self._model_dir, checkpoint, explicit, what, restore)

  def _kept_session(self, replicas, entry, hooks, snapshot, xla_step=False, rewrites=True):
    """A MonitoredSession over `entry`'s session (created on its first call), `snapshot`
    restored into it; closing it leaves that session open for the next call (`xla_step`,
    `rewrites`: as `_session`)."""
    config = replicas.session_config(self._config.session_config, xla=xla_step,
                                     rewrites=rewrites)
    creator = entry.creator(snapshot, replicas.master, config)
    reused = entry.session is not None
    try:
      with quiet.internal_calls(), scaffolds.whole_variables():  # (as `_session`)
        return _v1.train.MonitoredSession(session_creator=creator, hooks=hooks)
    except RuntimeError as error:  # a hook's begin() building ops in the finalized graph
      if reused and 'finalized' in str(error):
        raise graph_cache.Stale(snapshot) from error
      raise

  # -------------------------------------------------------------------------------------------
  def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None,
              yield_single_examples=True):
    """Yields predictions per example (or per batch) for every input, in order."""
    hooks = list(errors.check_hooks('hooks', hooks))
    predict_keys = _predict_keys(predict_keys)
    if checkpoint_path:
      checkpoint = restoring.resolve_checkpoint(self._model_dir, checkpoint_path, 'predict')
    else:
      checkpoint = self.latest_checkpoint()
      if not checkpoint:
        _log.info('Could not find trained model in model_dir: %s, running initialization to '
                  'predict.', self._model_dir)
    compile_loop = self._xla_auto.compile_loop(self._config, input_fn, None, ModeKeys.PREDICT)
    args = (input_fn, predict_keys, hooks, checkpoint, bool(checkpoint_path),
            yield_single_examples)
    try:
      yield from self._predict_graph(*args, compile_loop)
    except xla.NotCompilable as refusal:  # at the build or the first run: nothing yielded
      self._refused_loop(ModeKeys.PREDICT, refusal)
      yield from self._predict_graph(*args, False)

  def _predict_graph(self, input_fn, predict_keys, hooks, checkpoint, explicit,
                     yield_single_examples, compile_loop):
    """One prediction, in the graph an earlier call with the same key kept or in a new one;
    `compile_loop=False`: never compile its loop as a whole."""
    key = graph_cache.Key(ModeKeys.PREDICT, input_fn, (
        None if predict_keys is None else tuple(predict_keys), compile_loop))
    entry = self._kept_graph(key) if checkpoint else None
    while True:
      if entry is None:
        entry = self._build_predict(key, input_fn, predict_keys, compile_loop,
                                    reuse=bool(checkpoint))
        if not checkpoint:
          entry.reason = 'no checkpoint to restore'  # a new session initializes anew
      try:
        yield from self._run_predict(entry, hooks, checkpoint, explicit, yield_single_examples)
        return
      except graph_cache.Stale:  # raised before anything was yielded
        entry = None

  def _build_predict(self, key, input_fn, predict_keys, compile_loop=True, reuse=True):
    with self._call_graph(ModeKeys.PREDICT, input_fn, compile_loop, key if reuse else None) as (
        graph, plan, _, host_input, kept):
      if kept is not None:
        return kept
      built = steps_lib.build_predict(plan, self._model_fn, host_input)
      fetches = {'predictions': _select_keys(built.predictions, predict_keys)}
      if built.batch_rows is not None:
        fetches['batch_rows'] = built.batch_rows
      saving.ensure_saver(self._config)
      parts = _Parts(plan.replicas, fetches=fetches, advance=None if built.batch_rows is None
                     else tf.math.count_nonzero(built.batch_rows),
                     loop=plan.sharded, compiled=built.compiled_loop)
      return self._entry(key, graph, built, host_input, parts,
                         tf.nest.flatten(fetches) + tf.nest.flatten(parts.advance))

  def _run_predict(self, entry, hooks, checkpoint, explicit, yield_single_examples):
    parts = entry.parts
    finished = False
    reused = entry.session is not None
    watch = graph_cache.HookWatch()
    try:
      with entry.graph.as_default():
        bar = progress.ProgressBarHook(advance=parts.advance, label='predict',
                                       unit='batches', enabled=self._config.progress_bar)
        all_hooks = _call_hooks(entry) + watch.around(hooks) + [bar]
        if checkpoint:
          session, _ = self._restored_session(parts.replicas, entry.scaffold, all_hooks,
                                              checkpoint, explicit, 'predict', entry)
        else:
          session = self._session(parts.replicas, entry.scaffold, all_hooks, inference=True,
                                  rewrites=_graph_rewrites(entry))
        with errors.runtime_checks_as_value_errors(), session:
          first = parts.compiled and not reused  # XLA compiles the loop at its first run
          while not session.should_stop():
            out = self._compiled_run(session, parts.fetches, first)
            first = False
            if yield_single_examples:  # the batches of one run, concatenated: no need to split
              yield from _rows(out['predictions'])
            else:
              yield from _split_batches(out['predictions'], out.get('batch_rows'))
        finished = True
    except GeneratorExit:
      finished = True  # predictions left unread: the next call restarts everything anyway
      raise
    finally:
      self._keep_or_close(entry, finished and not watch.built)

  # -------------------------------------------------------------------------------------------
  def export_saved_model(self, export_dir_base, serving_input_receiver_fn, assets_extra=None,
                         as_text=False, checkpoint_path=None,
                         experimental_mode=ModeKeys.PREDICT):
    """Exports the model for serving as a timestamped SavedModel under `export_dir_base`;
    returns its path (bytes).  `experimental_mode` TRAIN or EVAL exports that graph instead
    (its receiver fn returns a SupervisedInputReceiver)."""
    if experimental_mode not in savedmodel.EXPORT_MODES:
      raise errors.value_error('`experimental_mode` must be a ModeKeys value.',
                               experimental_mode=experimental_mode,
                               allowed=list(savedmodel.EXPORT_MODES))
    _check_receiver_fn(serving_input_receiver_fn)
    return self._export_modes(export_dir_base, {experimental_mode: serving_input_receiver_fn},
                              assets_extra, as_text, checkpoint_path)

  def experimental_export_all_saved_models(self, export_dir_base, input_receiver_fn_map,
                                           assets_extra=None, as_text=False,
                                           checkpoint_path=None):
    """Exports one SavedModel holding a MetaGraph for each mode of `input_receiver_fn_map`
    ({ModeKeys.TRAIN/EVAL/PREDICT: receiver fn}; a mode mapped to None is left out), tagged
    'train', 'eval' and 'serve'; returns its path (bytes)."""
    if not isinstance(input_receiver_fn_map, dict):
      raise errors.type_error('`input_receiver_fn_map` must be a dict {mode: receiver_fn}.',
                              input_receiver_fn_map=input_receiver_fn_map)
    unknown = sorted(set(input_receiver_fn_map) - set(savedmodel.EXPORT_MODES), key=str)
    if unknown:
      raise errors.value_error('`input_receiver_fn_map` keys must be ModeKeys values.',
                               modes=unknown, allowed=list(savedmodel.EXPORT_MODES))
    wanted = {mode: fn for mode, fn in input_receiver_fn_map.items() if fn is not None}
    if not wanted:
      raise errors.value_error('`input_receiver_fn_map` has no receiver fn to export.',
                               'Map at least one mode to its input receiver fn.',
                               input_receiver_fn_map=input_receiver_fn_map)
    return self._export_modes(export_dir_base, wanted, assets_extra, as_text,
                              checkpoint_path)

  def _export_modes(self, export_dir_base, receiver_fns, assets_extra, as_text,
                    checkpoint_path, strip_default_attrs=True):
    if not isinstance(export_dir_base, (str, bytes, os.PathLike)):
      raise errors.type_error('`export_dir_base` must be a path.',
                              export_dir_base=export_dir_base)
    metagraphs = []
    for mode in [mode for mode in savedmodel.EXPORT_MODES if mode in receiver_fns]:
      if mode == ModeKeys.PREDICT:
        targets = self._layout.export_targets()
        if not targets:
          raise errors.value_error('One of export_to_cpu and export_to_tpu must be true.',
                                   export_to_cpu=False, export_to_tpu=False)
        metagraphs += [(tags, self._serving_builder(receiver_fns[mode], params))
                       for tags, params in targets]
      else:
        metagraphs.append((list(_tf_internals.export_utils.EXPORT_TAG_MAP[mode]),
                           self._supervised_builder(mode, receiver_fns[mode])))
    checkpoint = restoring.resolve_checkpoint(self._model_dir, checkpoint_path, 'export')

    def write(checkpoint, snapshot):  # restored from a pinned snapshot, as evaluate does
      return savedmodel.write_saved_model(
          os.fspath(export_dir_base), snapshot, metagraphs, assets_extra=assets_extra,
          as_text=as_text, session_config=self._config.session_config,
          reported_checkpoint=checkpoint, strip_default_attrs=strip_default_attrs)

    return pinning.with_latest_pinned(self._model_dir, checkpoint, bool(checkpoint_path),
                                      'export', write)

  def export_savedmodel(self, export_dir_base, serving_input_receiver_fn, assets_extra=None,
                        as_text=False, checkpoint_path=None, strip_default_attrs=False):
    """TF 1.x's name for `export_saved_model`, with its own last argument: node attributes
    at their default values are kept unless `strip_default_attrs` (TF 1.x's default)."""
    _check_receiver_fn(serving_input_receiver_fn)
    return self._export_modes(export_dir_base, {ModeKeys.PREDICT: serving_input_receiver_fn},
                              assets_extra, as_text, checkpoint_path,
                              strip_default_attrs=bool(strip_default_attrs))

  def _export_graph_start(self):
    if self._config.tf_random_seed is not None:
      _v1.set_random_seed(self._config.tf_random_seed)
    _v1.train.get_or_create_global_step()

  def _serving_builder(self, serving_input_receiver_fn, params):
    def build():
      self._export_graph_start()
      receiver = savedmodel.call_receiver_fn(serving_input_receiver_fn)
      spec = model_fn_lib.call_model_fn(
          self._model_fn, receiver.features, None, ModeKeys.PREDICT, params, self._config,
          allow_tpu_spec=self._layout.allow_tpu_spec)
      spec = model_fn_lib.tpu_spec_parts(spec)
      model_fn_lib.check_tpu_spec(spec, ModeKeys.PREDICT)
      outputs = savedmodel.export_outputs_of(spec)
      scaffold = steps_lib.scaffold_of(spec)
      return savedmodel.signature_defs(receiver, outputs), scaffold
    return build

  def _supervised_builder(self, mode, input_receiver_fn):
    """The TRAIN or EVAL MetaGraph of an export: `model_fn` in `mode` on the receiver's
    features and labels, on the CPU (as the original), its metrics (a TPUEstimatorSpec's
    `metric_fn` called here) and loss in the signature, a train op in the SavedModel's
    train op collection."""
    def build():
      self._export_graph_start()
      receiver = savedmodel.call_supervised_receiver_fn(input_receiver_fn, mode)
      spec = model_fn_lib.call_model_fn(
          self._model_fn, receiver.features, getattr(receiver, 'labels', None), mode,
          self._layout.supervised_export_params(), self._config,
          allow_tpu_spec=self._layout.allow_tpu_spec)
      metrics, loss = steps_lib.metric_ops_one_device(spec, mode)
      if spec.train_op is not None:
        _v1.add_to_collection(_tf_internals.SAVED_MODEL_TRAIN_OP_KEY, spec.train_op)
      signatures = savedmodel.supervised_signatures(mode, receiver, spec.predictions, loss,
                                                    metrics)
      return signatures, steps_lib.scaffold_of(spec)
    return build


def _check_receiver_fn(serving_input_receiver_fn):
  if serving_input_receiver_fn is None or not callable(serving_input_receiver_fn):
    raise errors.type_error('`serving_input_receiver_fn` must be a callable returning a '
                            'ServingInputReceiver.',
                            serving_input_receiver_fn=serving_input_receiver_fn)


def _steps_of(plan):
  """The step builders of a call: a RunConfig strategy's (per-replica model_fn, one step per
  run) or the others'."""
  return strategy_steps if plan.distribute else steps_lib


@dataclasses.dataclass
class _TrainParts:
  """What running a training graph needs, kept with it (`graph_cache.Entry.parts`)."""
  plan: object
  built: object
  host_input: object
  global_step: object


@dataclasses.dataclass
class _Parts:
  """What running an evaluate/predict graph needs, kept with it (`graph_cache.Entry.parts`):
  its `replicas`, what each run fetches (`fetches`: evaluation's update op, prediction's
  predictions and batch rows), evaluation's final metric `values`, prediction's progress
  `advance`, and the graph's own hooks: the first call's (`first_hooks`, used once) and
  `templates` copied fresh for later calls; `loop`: its batches run in a device loop (a
  sharded call); `compiled`: the loop is one XLA computation; `host_input`: its input
  (another call's input can be read in its place: graph_cache.read_new_input)."""
  replicas: object
  fetches: object
  values: dict = None
  advance: object = None
  first_hooks: list = None
  templates: list = None
  loop: bool = False
  compiled: bool = False
  host_input: object = None


def _going_on_from(entry, checkpoint):
  """A kept training `entry` (or None) if it can go on from `checkpoint`: the one it saved
  last, or another with the same variables (restored into it); otherwise it is closed."""
  if entry is not None and graph_cache.checkpoint_state(checkpoint) != entry.saved and \
      not entry.fits(checkpoint):
    entry.close()
    return None
  return entry


def _graph_rewrites(entry):
  """Whether the session of an evaluation's or prediction's `entry` (a graph_cache.Entry with
  `_Parts`, or None) runs Grappler's rewrites (`Replicas.session_config`): all but a device
  loop's.  Training sessions always do."""
  return entry is None or not entry.parts.loop


def _with_writers(built):
  """`built` (a step builder's result) with the hook initialising and flushing every summary
  writer its graph has (`host_calls.writers_hooks`: a host_call's, or one model_fn created),
  in every mode and on every path."""
  return dataclasses.replace(built, hooks=list(built.hooks) + host_calls.writers_hooks())


def _call_hooks(entry):
  """The hooks of the graph itself for this call: the ones built with it on its first call,
  fresh copies of its own (input, loop) hooks on later ones."""
  first, entry.parts.first_hooks = entry.parts.first_hooks, None
  if first is not None:
    return list(first)
  return [copy.copy(h) for h in entry.parts.templates]


def _hook_tensors(hooks):
  """The tensors and ops the hooks fetch or run (what runs besides the fetches)."""
  found = []
  for hook in hooks:
    for value in vars(hook).values():
      for item in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(item, (tf.Tensor, tf.Operation)):
          found.append(item)
  return found


def _flag(name, value):
  """A bool argument: True/False, a numpy bool, 1/0 or None (the original read them as truth
  values: tensorflow/models' object detection passes export_to_tpu=None); anything else (a
  string such as 'False' would read as true) is refused."""
  if value is None:
    return False
  if isinstance(value, (bool, np.bool_)) or (errors.is_int(value) and value in (0, 1)):
    return bool(value)
  raise errors.type_error('`%s` must be a bool.' % name, **{name: value})


def _predict_keys(predict_keys):
  """`predict_keys` as a list, or None for all: a key, or any collection of keys (a list,
  tuple, set, dict keys...); empty means all, as in the original."""
  if predict_keys is None or isinstance(predict_keys, str):
    return [predict_keys] if predict_keys else None
  try:
    keys = list(predict_keys)
  except TypeError:
    raise errors.type_error('`predict_keys` must be a list of strings.',
                            predict_keys=predict_keys) from None
  return keys or None


def _select_keys(predictions, keys):
  if keys is None:
    return predictions
  if not isinstance(predictions, dict):
    raise errors.value_error('`predict_keys` needs model_fn to return predictions as a dict.',
                             predict_keys=keys)
  selected = {k: v for k, v in predictions.items() if k in keys}
  if not selected:
    raise errors.value_error('Expected to run at least one output from %s.' %
                             sorted(predictions), 'Pass keys that model_fn predicts.',
                             predict_keys=keys)
  return selected


def _split_batches(predictions, batch_rows):
  """The batches one `session.run` predicted: one, or (device loops) one per row count."""
  if batch_rows is None:
    return [predictions]
  bounds = np.cumsum([0] + list(batch_rows))
  pick = lambda v, a, b: v[a:b]
  return [tf.nest.map_structure(lambda v, a=a, b=b: pick(v, a, b), predictions)
          for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def _rows(batch):
  """Splits a batch of predictions (array or dict of arrays) into per-example results."""
  if not isinstance(batch, dict):
    yield from batch
    return
  lengths = {k: v.shape[0] if getattr(v, 'ndim', 0) else None for k, v in batch.items()}
  sizes = set(lengths.values())
  if None in sizes or len(sizes) != 1:
    raise errors.value_error(
        'Batch length of predictions should be the same for every key.',
        'Return predictions with the batch as first dimension, or predict with '
        'yield_single_examples=False.', batch_lengths=lengths)
  keys = list(batch)
  # Rows as numpy views (as v[i] gives), each example's dict built by one call of a function
  # of the columns' rows: half the time of dict(zip(keys, values)) per example.
  yield from map(_row_maker(len(keys))(*keys), *[batch[k] for k in keys])


@functools.lru_cache(maxsize=None)
def _row_maker(count):
  """`make(*keys)` → a function of `count` values returning `{keys[i]: values[i]}` as one
  dict display (the keys are arguments, never part of the generated source)."""
  names = ['value%d' % i for i in range(count)]
  source = 'def make(%s):\n  return lambda %s: {%s}\n' % (
      ', '.join('key%d' % i for i in range(count)), ', '.join(names),
      ', '.join('key%d: %s' % (i, name) for i, name in enumerate(names)))
  namespace = {}
  exec(source, namespace)  # pylint: disable=exec-used
  return namespace['make']


def _write_eval_summary(eval_dir, results, checkpoint):
  """Writes the results at the checkpoint's global step into `eval_dir`, as the original:
  scalars as scalars, a serialized `Summary` (an image metric's) as its values tagged
  `<key>/<i>`, other bytes and arrays as tensors."""
  summary = _v1.Summary()
  for key, value in results.items():
    if key == _v1.GraphKeys.GLOBAL_STEP or value is None:
      continue
    if isinstance(value, (np.floating, float, np.integer, int, np.bool_, bool)) or \
        getattr(value, 'ndim', None) == 0:
      summary.value.add(tag=key, simple_value=float(value))
    elif isinstance(value, bytes) and (values := _summary_values(value)):
      for index, item in enumerate(values):
        item.tag = '%s/%d' % (key, index)
        summary.value.append(item)
    elif isinstance(value, (bytes, np.ndarray)):
      summary.value.add(tag=key).tensor.CopyFrom(tf.make_tensor_proto(value))
  writer = _v1.summary.FileWriterCache.get(eval_dir)
  writer.add_summary(summary, int(results[_v1.GraphKeys.GLOBAL_STEP]))
  path_summary = _v1.Summary()
  path_summary.value.add(tag='checkpoint_path',
                         tensor=tf.make_tensor_proto(checkpoint.encode('utf-8')))
  writer.add_summary(path_summary, int(results[_v1.GraphKeys.GLOBAL_STEP]))
  writer.flush()


def _summary_values(serialized):
  """The values of a serialized `Summary` (none where `serialized` is not one)."""
  try:
    return list(_v1.Summary.FromString(serialized).value)
  except message.DecodeError:
    return []


class TPUEstimator(Estimator):
  """`tf.compat.v1.estimator.tpu.TPUEstimator`: with `use_tpu=True` the global batch is split
  over replicas (TPU cores, GPUs, or `TPUConfig.num_shards` logical CPU devices) and training
  runs `iterations_per_loop` steps per `session.run`.  `params['batch_size']` is the per-shard
  batch in `model_fn` and the per-host or per-shard batch in `input_fn`."""

  def __init__(self, model_fn=None, model_dir=None, config=None, params=None, use_tpu=True,
               train_batch_size=None, eval_batch_size=None, predict_batch_size=None,
               batch_axis=None, eval_on_tpu=True, export_to_tpu=True, export_to_cpu=True,
               warm_start_from=None, embedding_config_spec=None,
               export_saved_model_api_version=1):
    if config is None or not isinstance(config, TPURunConfig):
      raise errors.type_error('`config` must be provided with type `tpu_estimator.RunConfig` '
                              '(the TPU RunConfig).', 'Pass config=RunConfig(tpu_config=...).',
                              config=config)
    if params is not None and not isinstance(params, dict) and not layout_lib.is_hparams(params):
      raise errors.type_error('`params` must be a dict (or an HParams, as the original took).',
                              'Pass a dict of hyperparameters.', params=params)
    reserved = [k for k in layout_lib.RESERVED_PARAMS_KEYS if k in (params or {})]
    if reserved:
      raise errors.value_error('%s are reserved keys but existed in params.' % reserved,
                               'TPUEstimator sets them; rename your keys.', params=params)
    use_tpu, eval_on_tpu, export_to_tpu, export_to_cpu = (
        _flag(name, value) for name, value in (
            ('use_tpu', use_tpu), ('eval_on_tpu', eval_on_tpu),
            ('export_to_tpu', export_to_tpu), ('export_to_cpu', export_to_cpu)))
    if use_tpu and train_batch_size is None:
      raise errors.value_error('`train_batch_size` cannot be None with use_tpu=True.',
                               'Pass the global training batch size.',
                               train_batch_size=train_batch_size)
    for name, value in (('train_batch_size', train_batch_size),
                        ('eval_batch_size', eval_batch_size),
                        ('predict_batch_size', predict_batch_size)):
      errors.check_positive_int(name, value, allow_none=True)
    if export_saved_model_api_version not in (1, 2):
      raise errors.value_error('`export_saved_model_api_version` must be 1 or 2 '
                               '(ExportSavedModelApiVersion.V1/V2).',
                               export_saved_model_api_version=export_saved_model_api_version)
    if embedding_config_spec is not None:
      tpu_embedding.check_for_estimator(embedding_config_spec, use_tpu, eval_on_tpu,
                                        config.tpu_config)
    batch_sizes = {ModeKeys.TRAIN: train_batch_size, ModeKeys.EVAL: eval_batch_size,
                   ModeKeys.PREDICT: predict_batch_size}
    self._layout = layout_lib.Sharded(copy.deepcopy(params or {}), use_tpu, batch_sizes,
                                      config.tpu_config, batch_axis, eval_on_tpu,
                                      export_to_cpu=export_to_cpu, export_to_tpu=export_to_tpu,
                                      tpu_embedding=embedding_config_spec)
    self._init(model_fn, model_dir, config, params, warm_start_from, TPURunConfig)
    self._use_tpu = use_tpu  # read by the early-stopping hooks (sharded evaluation or not)
    self.train_batch_size = train_batch_size
    self.eval_batch_size = eval_batch_size
    self.predict_batch_size = predict_batch_size


_METRIC_FN_ARGS = ('features', 'labels', 'predictions', 'config')


def add_metrics(estimator, metric_fn):
  """A new `Estimator` (same model_dir, config and warm start) whose evaluation also reports
  the metrics `metric_fn` returns, as `tf.estimator.add_metrics` made one.

  `metric_fn` takes any of `features`, `labels`, `predictions` (the model_fn's) and `config`,
  and returns `{name: metric}`, each metric a Keras `Metric` it updated or a
  `(value, update_op)` pair; they join the model_fn's `eval_metric_ops` (a name already there
  is replaced)."""
  if not callable(metric_fn):
    raise errors.type_error('`metric_fn` must be callable.', metric_fn=metric_fn)
  unexpected = sorted(set(input_fn_lib.fn_args(metric_fn)) - set(_METRIC_FN_ARGS))
  if unexpected:
    raise errors.value_error('metric_fn has arguments add_metrics cannot give: %s.' % unexpected,
                             'Use only %s.' % ', '.join(_METRIC_FN_ARGS), metric_fn=metric_fn)

  def with_metrics(spec, features, labels, mode, config):
    if mode != ModeKeys.EVAL:
      return spec
    if isinstance(spec, TPUEstimatorSpec):
      spec = spec.as_estimator_spec()
    added = metric_fn(**input_fn_lib.accepted_kwargs(
        metric_fn, features=features, labels=labels, predictions=spec.predictions,
        config=config))
    if not isinstance(added, dict):
      raise errors.type_error('metric_fn must return a dict {name: metric}.',
                              'Return Keras Metric objects or (value, update_op) pairs.',
                              metric_fn_returned=added)
    metrics = dict(spec.eval_metric_ops)
    metrics.update(added)
    return spec._replace(eval_metric_ops=metrics)

  # The params go along too (the original's new Estimator had none, so an input_fn reading
  # params['batch_size'] failed there).
  return respecified(estimator, with_metrics,
                     warm_start_from=estimator._warm_start)  # pylint: disable=protected-access


def respecified(estimator, change_spec, **estimator_args):
  """A new `Estimator` on `estimator`'s model_dir, config and params (and `estimator_args`)
  whose model_fn returns `change_spec(spec, features, labels, mode, config)` of the spec
  `estimator`'s model_fn returns: `add_metrics`, and tf.contrib.estimator's
  `forward_features`."""
  inner = estimator.model_fn

  def model_fn(features, labels, mode, params, config):
    kwargs = input_fn_lib.accepted_kwargs(inner, labels=labels, mode=mode, params=params,
                                          config=config)
    return change_spec(inner(features=features, **kwargs), features, labels, mode, config)

  return Estimator(model_fn=model_fn, model_dir=estimator.model_dir, config=estimator.config,
                   params=estimator.params, **estimator_args)
