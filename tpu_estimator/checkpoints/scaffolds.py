"""The Scaffold a sharded call's session uses, with a Saver that works in its graph.

Sharded (and in device loops), `model_fn` runs inside a loop body: a function graph inside the
graph the session runs.  Two patterns of the TPU era then restore the wrong values, silently:

1. A `Saver` built inside `model_fn` (`Saver(ema.variables_to_restore())`, returned through
   `scaffold_fn`): its ops live in the loop body, and a Saver restores by op *name*, so the
   session ran the graph's default Saver of that name instead (the raw weights, not the
   averages).  On one device (the original's CPU path) the same model_fn builds it in the
   session's graph.
2. A `Saver({name: variable})` over mirrored variables (what `variables_to_restore()` returns
   in a replica): TensorFlow's Saver turns such a dict entry into the first replica's copy
   only, so the others stay uninitialized (the session never gets ready).

`for_session` rebuilds such a Saver in the session's graph with the same checkpoint keys and
options, each mirrored variable restored into every replica's copy.  Any other Saver is kept.

3. The same dict over variables with a copy per replica synchronized on read (batch
   normalization's moving statistics under a strategy, and their moving averages): TensorFlow's
   Saver reads such an entry as its aggregated value, not a variable, and raises.  A Saver
   built while `scaffold_fn` runs, or while the call's hooks begin (`whole_variables`), gets
   each distributed variable of its dict as the saveable of every copy (tensorflow/tpu's
   EfficientNet and MnasNet on 2 cores; MobileNet's and Inception v3's evaluation hook
   restoring the moving averages, which restored into the first replica's copy alone).

`add_ready_checks` builds the Scaffold's default readiness checks in fewer ops
(`WithReadyChecks` where TensorFlow's session creator finalizes the Scaffold).
"""
import contextlib
import os
import threading

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.checkpoints import saving

_v1 = tf.compat.v1


def _has_op(graph, name):
  try:
    graph.get_operation_by_name(name)
    return True
  except (KeyError, ValueError):
    return False


def _distributed(variable):
  """The mirrored variable `variable` is, or is one replica's copy of; else None."""
  variable = _tf_internals.mirrored_of(variable)
  return variable if _tf_internals.is_distributed(variable) else None


def _whole(name, variable):
  """What saves and restores `variable` under `name`: every replica's copy for a mirrored
  one (TensorFlow's own saveable for it), `variable` itself otherwise."""
  mirrored = _distributed(variable)
  if mirrored is None:
    return variable
  factories = _tf_internals.mirrored_saveables(mirrored)
  if len(factories) != 1:
    return variable
  factory = next(iter(factories.values()))
  return factory(name) if callable(factory) else factory


def _whole_dict(graph, var_list):
  """A Saver's `var_list` with each entry of a dict made whole (`_whole_entry`)."""
  if not isinstance(var_list, dict):
    return var_list
  return dict(_whole_entry(graph, name, variable) for name, variable in var_list.items())


_converting = threading.local()  # `depth` > 0 while this thread runs a `scaffold_fn` or begins
# a call's hooks
_saver_init = []  # TensorFlow's Saver.__init__, once `whole_variables` has wrapped it


def _init_with_whole_variables(self, var_list=None, *args, **kwargs):
  if getattr(_converting, 'depth', 0):
    var_list = _whole_dict(_v1.get_default_graph(), var_list)
  _saver_init[0](self, var_list, *args, **kwargs)


def _whole_entry(graph, name, variable):
  """(checkpoint key, saveable) of a Saver's dict entry: the variable whole (`_whole`), under
  its own name where `name` was taken from the op of its aggregated read."""
  mirrored = None if isinstance(variable, (list, tuple)) else _distributed(variable)
  if mirrored is None:
    return name, variable
  own = mirrored.name.split(':')[0]
  if name != own and not name.startswith(own + '/'):
    read = _aggregate_read_prefix(graph, name, mirrored)
    if read is not None:
      name = own + name[len(read):]
  return name, _whole(name, variable)


def _aggregate_read_prefix(graph, name, mirrored):
  """The part of `name` that names an op reading `mirrored`'s copies, else None.  Outside a
  replica, a variable synchronized on read (batch norm's moving statistics) is read as the
  aggregate of its copies, and its `.op` is that read's op ('Identity_4'):
  `ExponentialMovingAverage.variables_to_restore()` keys such a variable by that name."""
  handles = {copy.handle.op.name for copy in mirrored.values}
  parts = name.split('/')
  for end in range(len(parts), 0, -1):
    try:
      op = graph.get_operation_by_name('/'.join(parts[:end]))
    except (KeyError, ValueError):
      continue
    if _reads_any(op, handles):
      return '/'.join(parts[:end])
  return None


def _reads_any(op, handles, depth=4):
  """Whether `op` reads a variable of `handles` within `depth` ops up its inputs."""
  if op.type in ('ReadVariableOp', 'VarHandleOp') and \
      (op.name in handles or any(t.op.name in handles for t in op.inputs)):
    return True
  return depth > 0 and any(_reads_any(t.op, handles, depth - 1) for t in op.inputs)


@contextlib.contextmanager
def whole_variables():
  """While a `scaffold_fn` runs on this thread, or a call's session is made (its hooks'
  `begin()`): a `Saver` built over a dict saves and restores each distributed variable in it
  in every replica's copy (2. and 3. above)."""
  if not _saver_init:
    _saver_init.append(_v1.train.Saver.__init__)
    _v1.train.Saver.__init__ = _init_with_whole_variables
  _converting.depth = getattr(_converting, 'depth', 0) + 1
  try:
    yield
  finally:
    _converting.depth -= 1


def _needs_rebuild(saver, body_graph, graph):
  restore_op = saver.saver_def.restore_op_name if saver.saver_def is not None else None
  if restore_op and body_graph is not None and body_graph is not graph and \
      _has_op(body_graph, restore_op) and not _has_op(graph, restore_op):
    return True  # built in the loop body: the session cannot run its ops
  var_list = _tf_internals.saver_var_list(saver)
  return isinstance(var_list, dict) and any(
      _distributed(v) is not None for v in var_list.values()
      if not isinstance(v, (list, tuple)))


def for_session(scaffold, body_graph):
  """`scaffold`, or a copy whose Saver is rebuilt in the current (the session's) graph when
  `model_fn` built it in `body_graph` or over mirrored variables in a dict."""
  saver = scaffold.saver
  graph = _v1.get_default_graph()
  if not isinstance(saver, _v1.train.Saver) or not _needs_rebuild(saver, body_graph, graph):
    return scaffold
  options = _tf_internals.saver_options(saver)
  var_list = _whole_dict(graph, _tf_internals.saver_var_list(saver))
  if isinstance(var_list, (list, tuple)):
    chosen = {id(v) for v in var_list}
    var_list = [v for v in saving.saveable_variables()
                if id(v) in chosen or any(id(part) in chosen for part in getattr(v, 'values', ()))
                ] or var_list
  rebuilt = _v1.train.Saver(var_list=var_list, **options)
  return _v1.train.Scaffold(copy_from_scaffold=scaffold, saver=rebuilt)


def add_ready_checks(scaffold):
  """Registers the checks a new session runs before and after its local initialization
  (`scaffold`'s `ready_for_local_init_op` and `ready_op`, each unless the scaffold or the graph
  has one) as TensorFlow's defaults report them: the names of the uninitialized global
  variables, and of the uninitialized global and local ones.  Built in fewer ops: one check a
  variable for both (the defaults build the global variables' twice) and no boolean mask
  (~25 ops each), ~45 ops fewer for a small model, in a graph every first call builds.  Call
  it where the Scaffold would build them (after the hooks' `begin()`, before `finalize()`).
  A graph with resources (`RESOURCES`, `LOCAL_RESOURCES`) or without variables keeps
  TensorFlow's defaults."""
  graph = _v1.get_default_graph()
  keys = _v1.GraphKeys
  if scaffold is None or graph.finalized or graph.get_collection(keys.RESOURCES) or \
      graph.get_collection(keys.LOCAL_RESOURCES):
    return
  wanted = [(attr, key) for attr, key in (
      ('ready_for_local_init_op', keys.READY_FOR_LOCAL_INIT_OP), ('ready_op', keys.READY_OP))
            if getattr(scaffold, attr) is None and not graph.get_collection(key)]
  global_variables = _v1.global_variables()
  variables = global_variables + _v1.local_variables()
  if not wanted or not variables:
    return
  counts = {'ready_for_local_init_op': len(global_variables), 'ready_op': len(variables)}
  checked = variables[:max(counts[attr] for attr, _ in wanted)]
  with tf.name_scope('report_uninitialized_variables'):
    initialized = [_v1.is_variable_initialized(v) for v in checked]
    # Where TensorFlow's defaults gather the names (the variables' checks run where they are).
    with tf.device(os.environ.get('TF_DEVICE_FOR_UNINITIALIZED_VARIABLE_REPORTING', '/cpu:0')):
      def uninitialized(count):
        if not count:
          return tf.constant([], tf.string)
        names = tf.constant([v.op.name for v in checked[:count]])
        return tf.gather_nd(names, tf.where(tf.logical_not(tf.stack(initialized[:count]))))
      for attr, key in wanted:
        graph.add_to_collection(key, uninitialized(counts[attr]))


class WithReadyChecks(_v1.train.SessionCreator):
  """`creator`'s sessions, `scaffold`'s readiness checks added first (`add_ready_checks`):
  TensorFlow's session creators finalize the scaffold when they create a session."""

  def __init__(self, creator, scaffold):
    self._creator = creator
    self._scaffold = scaffold

  def create_session(self):
    add_ready_checks(self._scaffold)
    return self._creator.create_session()
