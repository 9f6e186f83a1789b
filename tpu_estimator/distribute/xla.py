"""XLA-compiled device loops: `TPUConfig(xla=None | True | False)`.

The decision is made in two steps and travels only in frozen values:

* **With the plan** (`intent`, kept as `Plan.xla`): `LOOP`, `STEP` or `OFF`, from the config,
  the replicas and iterations_per_loop, before `model_fn` and the input are seen.
* **Once the training step is built** (`whole_loop`, `step_compiles`; the answer is
  `TrainStep.compiles_step`, passed on as `Replicas.session_config(base, xla=...)`): a `LOOP`
  whose input cannot be grouped compiles its step alone; one whose step cannot be compiled
  whole (an op without an XLA kernel, a host_call tensor that is a string) raises
  `NotCompilable` and is built again as `STEP`; a `STEP` whose step has an op without an XLA
  kernel runs without XLA.

With XLA on, `use_tpu=True` training is compiled in one of two ways:

* **The whole loop** (`LOOP`, then `HostInput` grouping the input): one replica, or logical
  CPU replicas with their variables on the first device (`Replicas.centralized`; where that
  cannot be built, `central_build` has the call built again on mirrored replicas), input of
  static shapes.  The loop's input is read before it and the loop with every step in it is
  one XLA computation (`compile_computation`, built by `device_loop.compiled_train_loop`): no
  TensorFlow op runs per step.  A host_call's tensors leave the computation, each step's
  stacked, and the host runs host_call once per step after it (`host_calls.after_loop`), as
  the original's host ran it on what each step's outfeed carried.  With gradient
  accumulation each step's micro-batches are read with the group and accumulated inside.
* **The step alone** otherwise: the training session runs with TensorFlow's XLA
  auto-clustering (`global_jit_level=ON_1`, plus the process flag that allows it on CPU): the
  graph optimizer gathers the compilable ops of the device loop's body (the replicated step)
  into clusters per device, compiled once per session; the loop and the input (`get_next`)
  stay TensorFlow ops.

Either way the graph's variable names and so the checkpoints are those of the uncompiled loop
(results equal within float rounding).  Before the session starts, the op types `model_fn`
built into the step are checked against XLA's kernels for the replicas' device: if one has
none (a `tf.py_function`, string ops, `tf.print`), nothing is compiled and a warning names the
op types (a partly compiled step would cut the clusters around them and cost more than it
saves).

`xla=None` (the default) is "where it applies and pays" (`AUTO`, docs/design-decisions.md, "XLA
by default"): the whole loop is compiled, on one replica or logical CPU replicas with static
input shapes (with a host_call or not), for a call of at least `AUTO_MIN_STEPS` steps or one
that repeats an earlier call with the same `input_fn` whose graph was kept (later calls reuse
it: `Auto`); anything else runs uncompiled, never the step alone. Where the loop cannot be
compiled (an op without an XLA kernel at build, a compilation error at its first run:
`CompileFailed`, variable updates no output needs: core/steps.py) the call is built again
uncompiled with one warning, and later calls of the estimator do not try again; so it is,
quietly, where compiling would not pay (convolutions on CPU: `check_pays`) or would change
the results (float16 matrix products where XLA's CPU backend keeps them in float32:
`check_float16`), and from the next call on where the compiled loop was timed slower than the
uncompiled one (`Auto.judge`, loop_clock.py).

Evaluation and prediction with `use_tpu=True` on one replica or logical CPU replicas
(`collect_intent`) compile their loop as a whole the same way
(`device_loop.compiled_collect_loop`): the input is read a group of batches of one shape at a
time (grouping.py: the short final batch is a group of its own, never padded, so `model_fn`
sees exactly the uncompiled loop's batches), `model_fn` runs per batch inside the computation,
and each batch's outputs (the loss, the `eval_metrics` tensors, the predictions) leave it
packed as bytes (packed.py) for the host to do what it does with the uncompiled loop's rows
(`metric_fn` once over all rows, predictions per example). `xla=True` compiles them wherever it
can; what it cannot compile (several GPU replicas, a time-based iterations_per_loop, input of
non-numeric or otherwise-varying shapes, an op without an XLA kernel, string outputs) runs
uncompiled with one warning naming why. `xla=None` compiles only an evaluation known to be long
(`evaluate(steps=...)` of at least `AUTO_MIN_BATCHES`), where the compilation pays; a
compilation failure at any of its runs (a new batch shape compiles when it comes) builds it
again uncompiled with one warning. Prediction is not compiled by default.
"""
import contextlib
import functools
import logging
import threading
import weakref

import numpy as np
import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import quiet
from tpu_estimator.core import function_identity
from tpu_estimator.distribute import loop_clock
from tpu_estimator.distribute import packed

_v1 = tf.compat.v1
_log = logging.getLogger('tpu_estimator')

# `xla=None` compiles a call's loop when the call runs at least this many steps (or repeats an
# earlier call's input_fn): about what a small model needs on CPU to win back the ~0.5 s a
# compilation costs (docs/design-decisions.md, "XLA by default").
AUTO_MIN_STEPS = 2000
# `xla=None` compiles an evaluation's loop when the call is known to run at least this many
# batches (`evaluate(steps=...)`): the small MLP on the 2-core CPU gains ~0.4 ms a batch
# compiled and pays ~1.5 s more for its first call (build and compilation), and every call
# ~0.08 s more for its grouped input; prediction (no length known) is not compiled by default
# (docs/design-decisions.md, "XLA by default").
AUTO_MIN_BATCHES = 4000

# Ops left out of the check: they are never part of a compiled cluster and do not need to be
# (input reads, summaries that the device loop drops, control-flow and call wrappers whose
# bodies are checked op by op, variable handles living outside the step).
_IGNORED = frozenset([
    'IteratorGetNext', 'IteratorGetNextSync', 'IteratorGetNextAsOptional',
    'OptionalGetValue', 'OptionalHasValue', 'MakeIterator',
    'ScalarSummary', 'HistogramSummary', 'ImageSummary', 'AudioSummaryV2', 'TensorSummary',
    'TensorSummaryV2', 'MergeSummary',
    'While', 'StatelessWhile', 'If', 'StatelessIf', 'Case', 'StatelessCase',
    'PartitionedCall', 'StatefulPartitionedCall', 'NoOp', 'Placeholder', 'VarHandleOp',
])
_JIT_DEVICE = {'gpu': 'XLA_GPU_JIT'}

from tpu_estimator.distribute import compile_cache  # noqa: E402,F401  (activates on import)
# Auto-clustering on CPU is off unless this process-wide flag is set, and TensorFlow reads it
# once, when the first session of the process optimizes a graph: it is set on import.  It only
# matters to sessions that ask for a jit level (ours when compiling; the default level is off).
_tf_internals.enable_xla_cpu_auto_clustering()
_registered = threading.Lock()
_state = {'kernels': False}


def setting(config):
  """`config`'s TPUConfig(xla=...): True, False, or None (automatic)."""
  return getattr(getattr(config, 'tpu_config', None), 'xla', None)


OFF, STEP, LOOP, AUTO = 'off', 'step', 'loop', 'auto'


class Auto:
  """What `xla=None` keeps of one estimator's calls: the input_fns whose training call kept
  its graph for the next one (a call repeating one, or one that calling cannot tell apart from
  it (function_identity.py), will reuse what it builds: compiling pays),
  and per mode ('train', 'eval', 'infer') why the model could not be compiled (`refuse`:
  later calls in that mode do not try again), and the timings of its training loops, compiled
  and not (`clock`, `judge`: loop_clock.py)."""

  def __init__(self):
    self._kept = weakref.WeakSet()
    self._refused = {}
    self._timings = loop_clock.Timings()

  def refuse(self, mode, refusal):
    """Calls in `mode` are not compiled again (`refusal`: why)."""
    self._refused[mode] = refusal

  def kept(self, input_fn):
    """A training call with `input_fn` kept its graph for the next call with it."""
    try:
      self._kept.add(input_fn)
    except TypeError:  # not weakly referenceable: never seen as the same
      pass

  def compile_loop(self, config, input_fn, call_steps, mode='train'):
    """Whether a call in `mode` of `call_steps` steps or batches (None: until the input ends)
    with `input_fn` is built for whole compilation (xla=True: always; the plan then decides
    whether it can be)."""
    if setting(config) is not None:
      return True
    if self._refused.get(mode) is not None:
      return False
    if mode != 'train':  # a kept graph's later calls still pay for their input (see above)
      return call_steps is not None and call_steps >= AUTO_MIN_BATCHES
    reused = any(function_identity.same_function(input_fn, kept) for kept in self._kept)
    return reused or (call_steps is not None and call_steps >= AUTO_MIN_STEPS)

  def clock(self, config, input_fn, compiled):
    """The `loop_clock.LoopClock` timing the device-loop runs of a training call with
    `input_fn` (`compiled`: its loop is one XLA computation), or None: only under xla=None,
    while training may still be compiled and until the two kinds were compared."""
    if setting(config) is not None or self._refused.get('train') is not None:
      return None
    return self._timings.clock(input_fn, compiled)

  def judge(self, input_fn):
    """After a training call with `input_fn`: once its loop was timed enough both compiled
    and uncompiled, a compiled loop `loop_clock.SLOWER` times slower or more a step is not used
    again (the mode is refused, with an info line saying both times)."""
    times = self._timings.compare(input_fn)
    if times is None:
      return
    compiled, uncompiled = times
    said = '%.3g ms a step compiled against %.3g ms uncompiled' % (compiled * 1e3,
                                                                   uncompiled * 1e3)
    if compiled < loop_clock.SLOWER * uncompiled:
      _log.debug('The compiled training loop pays: %s.', said)
      return
    _log.info('The training loop runs uncompiled from the next call on: it ran %s '
              '(TPUConfig(xla=None) compiles it where that pays; xla=True compiles it '
              'anyway).', said)
    self.refuse('train', NotCompilable('XLA ran it slower: %s' % said))


def first_run_failed(config, error):
  """Whether `error`, raised by the first run of a loop compiled as a whole (or any run of a
  compiled evaluation: nothing was returned yet), is XLA failing to compile it under xla=None
  (the call is then built again uncompiled: `CompileFailed`); with xla=True the error is the
  answer."""
  if setting(config) is not None or isinstance(error, tf.errors.OutOfRangeError):
    return False
  text = str(error)
  return 'XLA' in text or 'xla' in text or 'compil' in text.lower()


def intent(config, replicas, ipl, loop, compile_loop=True):
  """What XLA is to compile of one call (`Plan.xla`), decided with its plan, before model_fn
  and the input are seen (the built step may still fall back, see `whole_loop` and
  `step_compiles`).  `LOOP` (xla=True) or `AUTO` (xla=None): the training loop as a whole:
  one replica on this machine (a computation runs on one device) or several logical CPU
  devices of this process (`Replicas.one_computation`: the plan then keeps their variables
  on the first, `Replicas.centralized`), a loop (`loop`) of a fixed number of steps (`ipl`),
  and not refused (`compile_loop=False`: after `NotCompilable`, or xla=None where it does not
  pay).  `STEP`: with xla=True, the step alone, in any other training device loop, except
  across workers.  `OFF` otherwise
  (evaluation, prediction, use_tpu=False, xla=False)."""
  value = setting(config)
  if not loop or value is False:
    return OFF
  whole = (compile_loop and (replicas.num_replicas == 1 or replicas.one_computation) and
           ipl is not None and ipl[0] == 'count')
  if value is None:
    return AUTO if whole and replicas.kind != 'multi_worker' else OFF
  if replicas.kind == 'multi_worker':
    _log.warning('TPUConfig(xla=True): training across workers runs without XLA (its '
                 'collective all-reduce is not compiled by this build).')
    return OFF
  return LOOP if whole else STEP


_LOOP_NAMES = {'eval': 'evaluation', 'infer': 'prediction'}


def collect_intent(config, mode, replicas, ipl, compile_loop=True):
  """What XLA is to compile of a use_tpu=True evaluation or prediction call (`Plan.xla`):
  `LOOP` (xla=True) or `AUTO` (xla=None, where `compile_loop`: it pays, `Auto`): its loop as
  one computation, on one replica (or logical CPU replicas, `Replicas.one_computation`) with
  a count-based iterations_per_loop; `OFF` otherwise
  (with a warning under xla=True, a debug line under xla=None).  Never the step alone."""
  value = setting(config)
  if value is False or (value is None and not compile_loop):
    return OFF
  reason = None
  if replicas.num_replicas != 1 and not replicas.one_computation:
    reason = ('it has %d replicas (a computation runs on one device)' %
              replicas.num_replicas)
  elif ipl is None or ipl[0] != 'count':
    reason = 'iterations_per_loop is a time, not a number of batches'
  elif not compile_loop:
    return OFF  # refused before (NotCompilable): said once, then
  if reason is None:
    return LOOP if value else AUTO
  log_uncompiled_loop(config, mode, reason, model=False)
  return OFF


def log_uncompiled_loop(config, mode, reason, model=True):
  """Says why the evaluation or prediction loop (`mode` 'eval', 'infer') runs without XLA: a
  warning under xla=True, or under xla=None where the model itself cannot be compiled
  (`model`); a debug line otherwise."""
  what = _LOOP_NAMES[mode]
  if setting(config) is True or model:
    _log.warning('TPUConfig(xla=%s): the %s loop runs without XLA: %s.  It goes on '
                 'uncompiled%s.', setting(config), what, reason,
                 '' if setting(config) else '; pass TPUConfig(xla=False) to skip the attempt')
  else:
    _log.debug('The %s loop runs without XLA: %s.', what, reason)


def whole_collect_loop(plan, ungrouped):
  """Whether the evaluation or prediction loop of `plan` is built as one computation: planned
  so (`LOOP`, `AUTO`) and its input grouped (`ungrouped`: why not)."""
  if plan.xla not in (LOOP, AUTO):
    return False
  if ungrouped:
    log_uncompiled_loop(plan.config, plan.mode, ungrouped, model=False)
  return not ungrouped


def check_outputs(outputs):
  """Raises `NotCompilable` where an output of a compiled evaluation/prediction step cannot
  leave the computation (strings and other non-numeric tensors)."""
  bad = sorted({t.dtype.name for t in map(tf.convert_to_tensor, tf.nest.flatten(outputs))
                if not packed.packable(t)})
  if bad:
    raise NotCompilable('model_fn returns tensors of type %s' % ', '.join(bad), model=True)


def check_compilable(plan_xla, graph, operations, replicas):
  """Raises `NotCompilable` where the ops `model_fn` built in a compiled evaluation or
  prediction loop (`operations` in `graph`) include one without an XLA kernel, or, under
  xla=None, one that would not pay (`check_pays`) or float16 products XLA would not round
  (`check_float16`, which warns under xla=True)."""
  types, float16_products = step_ops(graph, operations)
  missing = missing_kernels(types, replicas)
  if missing:
    raise NotCompilable('ops without an XLA kernel: %s' % ', '.join(missing), model=True)
  check_pays(plan_xla, types, replicas)
  check_float16(plan_xla, float16_products, replicas)


def groups_input(plan_xla):
  """Whether a training loop planned with `plan_xla` is to be compiled whole, so its input is
  read a loop's worth at a time (`HostInput(group=...)`)."""
  return plan_xla in (LOOP, AUTO)


def whole_loop(plan_xla, ungrouped):
  """Whether a training loop planned with `plan_xla` is built as one computation: `LOOP` or
  `AUTO`, unless its input could not be grouped (`ungrouped`: why, logged for `LOOP`)."""
  if plan_xla == LOOP and ungrouped:
    log_step_only(ungrouped)
  elif plan_xla == AUTO and ungrouped:
    _log.debug('The training loop runs uncompiled: %s.', ungrouped)
  return groups_input(plan_xla) and not ungrouped


def missing_kernels(types, replicas):
  """The sorted op types among the step's `types` (`step_ops`) without an XLA kernel for the
  replicas' device."""
  kind = 'gpu' if any('gpu' in d.lower() for d in replicas.devices) else 'cpu'
  return uncompilable(types, kind)


def log_step_only(reason):
  """Says why a training loop that `xla=True` would compile as a whole is not."""
  _log.warning('TPUConfig(xla=True): the training loop is not compiled as a whole (%s); '
               'its step is compiled on its own, which gains less.', reason)


class NotCompilable(Exception):
  """A training loop built for whole compilation cannot be compiled: build it again without.
  `log`: the reason is to be logged (not where `step_compiles` names the ops again);
  `model`: the model itself cannot be compiled (not a structural reason)."""

  def __init__(self, reason, log=True, model=False):
    super().__init__(reason)
    self.log = log
    self.model = model


class CompileFailed(NotCompilable):
  """The first run of a loop compiled under xla=None failed (XLA could not compile it, e.g. an
  op needing a compile-time constant): the call is built again uncompiled."""

  def __init__(self, error):
    super().__init__('XLA could not compile it: %s' % first_line(error), model=True)


def first_line(error):
  """The first line of an error's message that says something."""
  text = getattr(error, 'message', None) or str(error)
  lines = [line.strip() for line in text.splitlines()]
  lines = [line for line in lines if line and line != 'Graph execution error:']
  return lines[0] if lines else type(error).__name__


def log_uncompiled(config, refusal):
  """Says why a call whose loop was to be compiled whole is built again without (`refusal`:
  `NotCompilable`): xla=True goes on with the step alone; xla=None goes on uncompiled, with a
  warning where the model cannot be compiled and a debug line where the loop is not one
  computation by design."""
  if setting(config) is True:
    if refusal.log:
      log_step_only(refusal)
  elif refusal.model:
    _log.warning('The training loop runs without XLA (TPUConfig(xla=None) compiles it where '
                 'it can): %s.  Training goes on uncompiled; pass TPUConfig(xla=False) to '
                 'skip the attempt.', refusal)
  else:
    _log.debug('The training loop runs without XLA: %s.', refusal)


def _ensure_kernels_registered():
  """XLA registers its kernels with TensorFlow's registry the first time a session optimizes
  a graph with auto-clustering on: a tiny such session, once per process."""
  with _registered:
    if _state['kernels']:
      return
    graph = tf.Graph()
    with graph.as_default():
      value = tf.constant(1.0) + 1.0
    with _v1.Session(graph=graph, config=session_config(_v1.ConfigProto())) as session:
      session.run(value)
    _state['kernels'] = True


def _has_kernel(op_type, jit_device):
  return jit_device in _tf_internals.registered_kernel_devices(op_type)


def step_ops(graph, operations):
  """(types, float16_products): the op types of `operations` and of every function they
  call, transitively, and those of them that are matrix products of float16
  (`check_float16`)."""
  types, products = set(), set()
  for node in _node_defs(graph, operations):
    types.add(node.op)
    if node.op in _PRODUCTS and _is_float16(node):
      products.add(node.op)
  return types, products


def _node_defs(graph, operations):
  """The NodeDefs of `operations` and of every function they call, transitively."""
  seen, pending = set(), []
  for op in operations:
    node = op.node_def
    yield node
    pending.extend(_tf_internals.called_function_names(node))
  while pending:
    name = pending.pop()
    if name in seen:
      continue
    seen.add(name)
    function = _tf_internals.graph_function(graph, name)
    if function is None:
      continue
    for node in function.definition.node_def:
      yield node
      pending.extend(_tf_internals.called_function_names(node))


def uncompilable(types, device_kind):
  """The sorted op types in `types` without an XLA kernel for `device_kind` ('cpu'/'gpu')."""
  _ensure_kernels_registered()
  jit_device = _JIT_DEVICE.get(device_kind, 'XLA_CPU_JIT')
  return sorted(t for t in types if t not in _IGNORED and not _has_kernel(t, jit_device))


@contextlib.contextmanager
def central_build(replicas, ungrouped):
  """Around the building of a call's graph on `replicas` (`Estimator._call_graph`): where
  they were planned for one computation (`Replicas.centralized`), raises `NotCompilable` (the
  call is built again on the usual mirrored replicas) when its input cannot be read a group
  at a time (`ungrouped`: why, known before model_fn is called), when it cannot be built with
  the variables in one place (a variable assigned per replica without an aggregation, as
  Keras 3's batch normalization does; Keras 3 layers whose variables the saver then finds
  twice; an error of model_fn itself comes again from the second build), and when model_fn
  made variables synchronized on read, a copy per replica (batch normalization's moving
  statistics, gradient accumulators), which central variables would share."""
  if not replicas.central:
    yield
    return
  if ungrouped:
    raise NotCompilable(ungrouped)
  try:
    yield
  except NotCompilable:
    raise
  except Exception as error:  # pylint: disable=broad-except
    raise NotCompilable('model_fn cannot be built with the replicas\' variables in one place '
                        '(%s)' % first_line(error)) from error
  if replicas.read_per_replica:
    raise NotCompilable('model_fn makes variables with a copy per replica (synchronization='
                        'ON_READ: %s), which one computation over the replicas would share' %
                        ', '.join(sorted(set(map(str, replicas.read_per_replica)))))


# Op types XLA's CPU backend runs slower than TensorFlow's own kernels (TF 2.21, one layer's
# forward and backward on 8x32x32x64 with jit_compile against without: a 3x3 depthwise
# convolution 16.6x slower, a 3x3 convolution 1.2x slower, a 1x1 one 0.5x; tensorflow/tpu's
# EfficientNet-B0 trained at 0.53 steps/s compiled against 8.4-9.8 uncompiled).  By prefix:
# their gradients too.
_SLOWER_COMPILED_ON_CPU = ('DepthwiseConv2dNative', 'Conv2D', 'Conv3D')


def check_pays(plan_xla, types, replicas):
  """Under xla=None (`AUTO`), raises `NotCompilable` (a structural reason: a debug line, and
  the mode is not tried again) where the loop runs on CPU and its step's op `types`
  (`step_ops`) include ones that XLA's CPU backend runs slower than TensorFlow: compiling
  would not pay.  xla=True compiles them all the same."""
  if plan_xla != AUTO or not replicas.on_cpu:
    return
  slower = sorted(t for t in types if t.startswith(_SLOWER_COMPILED_ON_CPU))
  if slower:
    raise NotCompilable('XLA\'s CPU backend runs %s slower than TensorFlow does' %
                        ', '.join(slower))


# Matrix products whose float16 results XLA's CPU backend may keep in float32 (`check_float16`).
_PRODUCTS = frozenset(['MatMul', 'BatchMatMul', 'BatchMatMulV2', 'BatchMatMulV3', 'Einsum'])


def check_float16(plan_xla, products, replicas):
  """Where a loop compiled on CPU has float16 matrix products (`products`, their op types:
  `step_ops`) and this TensorFlow's XLA CPU backend computes them in float32 without rounding
  the result to float16 (`float16_products_rounded`; TensorFlow 2.16 does): the compiled
  loop would not give the uncompiled one's results (a product past float16's range stays
  finite there, so `precision='mixed_float16'` skips no step for it and never lowers its loss
  scale).  Under xla=None raises `NotCompilable` (a structural reason: the loop runs
  uncompiled, as it would on a TensorFlow whose XLA rounds); under xla=True compiles all the
  same, with a warning saying so."""
  if plan_xla == OFF or not replicas.on_cpu or not products or float16_products_rounded():
    return
  what = ('XLA\'s CPU backend in TensorFlow %s computes float16 matrix products (%s) in '
          'float32 without rounding them to float16' % (tf.__version__,
                                                        ', '.join(sorted(products))))
  if plan_xla == AUTO:
    raise NotCompilable(what + ', so compiled they would not give the uncompiled results')
  _log.warning('TPUConfig(xla=True): %s: the compiled loop gives other results than the '
               'uncompiled one (a product past float16\'s range stays finite, so float16 loss '
               'scaling skips no step for it).  Pass TPUConfig(xla=None) or xla=False for '
               'float16\'s own results.', what)


def _is_float16(node):
  return any(node.attr[name].type == tf.float16.as_datatype_enum
             for name in ('T', 'Tout') if name in node.attr)


@functools.lru_cache(maxsize=None)
def float16_products_rounded():
  """Whether XLA's CPU backend rounds a float16 matrix product to float16 (60000 x 2 gives
  inf), as TensorFlow's own kernel does: one tiny computation compiled and run once per
  process (~0.05 s)."""
  graph = tf.Graph()
  with graph.as_default(), tf.device('/cpu:0'):
    product = compile_computation(lambda a: tf.cast(tf.matmul(a, a * 0.0 + 2.0), tf.float32),
                                  [tf.constant([[60000.0]], tf.float16)])
  with _v1.Session(graph=graph, config=_v1.ConfigProto(device_count={'GPU': 0})) as session:
    value = session.run(product)
  return bool(np.isinf(value[0] if isinstance(value, (list, tuple)) else value).all())


def step_compiles(plan_xla, whole, graph, operations, replicas):
  """After a training loop planned with `plan_xla` is built (`whole`: as one computation):
  whether its session compiles the step by auto-clustering (`session_config`).  Only `STEP`
  (or `LOOP` fallen back) with every op of the step (the `operations` model_fn built in
  `graph`'s loop) having an XLA kernel for the replicas' device; the warning names the ops
  otherwise.  A whole loop with such an op raises `NotCompilable`: it is built again without
  (as `STEP`, where this names the ops)."""
  if plan_xla == OFF or (plan_xla == AUTO and not whole):
    return False
  types, float16_products = step_ops(graph, operations)
  missing = missing_kernels(types, replicas)
  if whole:
    if missing:
      raise NotCompilable('ops without an XLA kernel: %s' % ', '.join(missing), log=False,
                          model=True)
    check_pays(plan_xla, types, replicas)
    check_float16(plan_xla, float16_products, replicas)
    return False  # the loop is one computation already: nothing left to cluster
  if missing:
    _log.warning('TPUConfig(xla=True): the training step runs without XLA: these ops in '
                 'model_fn have no XLA kernel: %s.  Remove them from model_fn (or move them '
                 'to host_call) to compile the step.', ', '.join(missing))
    return False
  check_float16(plan_xla, float16_products, replicas)
  return True


def compile_computation(computation, inputs):
  """`computation(*inputs)` built as one XLA computation (TensorFlow's graph-mode
  `tf.xla.experimental.compile`, deprecated but the only one that compiles a v1 graph's
  while-loop with the variables model_fn creates inside it); returns its outputs."""
  with quiet.internal_calls():
    return tf.xla.experimental.compile(computation, inputs)


def session_config(config):
  """`config` (a ConfigProto, changed in place and returned) with auto-clustering on."""
  config.graph_options.optimizer_options.global_jit_level = _v1.OptimizerOptions.ON_1
  return config
