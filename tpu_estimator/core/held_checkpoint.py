"""Whether a kept evaluation or prediction session still holds a checkpoint's values, so that a
call on the same checkpoint need not restore it again (graph_cache._Creator).

Two things must hold:
* the checkpoint's files are those restored last (`identity`: the index file's device, inode,
  size and modification time; a pinned snapshot is a hard link, so it names the same file);
* nothing in the graph can change a restored variable (`may_change_restored`): every op that
  takes a restored variable's handle (or reference) reads it, passes it on to ops that do, or
  belongs to the restore or to the variables' initializers.  Functions (loop bodies, branches,
  calls) are followed through the graph's function library.  Anything else taking the handle
  counts as a write, whether or not the call runs it: a hook may run any op of the graph.
"""
import os

import tensorflow as tf

from tpu_estimator.core import variable_writes

# Ops that read a variable through its resource handle without changing it.
_READS = frozenset(['ReadVariableOp', 'ResourceGather', 'ResourceGatherNd', 'VarIsInitializedOp',
                    'VariableShape', 'IsVariableInitialized'])
# Ops that hand a resource (or reference) on, unchanged, in their outputs.
_PASS_ON = frozenset(['Identity', 'RefIdentity', 'Enter', 'RefEnter', 'Exit', 'RefExit',
                      'Switch', 'RefSwitch', 'Merge', 'RefMerge', 'NextIteration',
                      'RefNextIteration'])
_LOOPS = frozenset(['While', 'StatelessWhile'])
_BRANCHES = frozenset(['If', 'StatelessIf', 'Case', 'StatelessCase'])
_CALLS = frozenset(['PartitionedCall', 'StatefulPartitionedCall'])
_VARIABLES = frozenset(['VarHandleOp', 'VariableV2', 'Variable'])


def identity(checkpoint_path):
  """What identifies a checkpoint's files (None where they cannot be told: a remote path)."""
  try:
    info = os.stat(checkpoint_path + '.index')
  except (OSError, ValueError):
    return None
  return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def may_change_restored(graph, saver, initializers):
  """Whether some op of `graph` may write a variable `saver` restores, other than the restore
  itself and the ops `initializers` run (the scaffold's init op: the global variables'
  initializers)."""
  restore = graph.get_operation_by_name(saver.saver_def.restore_op_name)
  exempt = variable_writes.upstream([restore] + list(initializers))
  functions = _Functions(graph)
  # Every op naming a restored variable (another handle op with its shared name too).
  restored = {_variable_name(op) for op in variable_writes.upstream([restore])
              if op.type in _VARIABLES}
  if functions.name_variables(restored):
    return True
  tensors = [t for op in graph.get_operations()
             if op.type in _VARIABLES and _variable_name(op) in restored for t in op.outputs]
  seen = set()
  while tensors:
    tensor = tensors.pop()
    if (tensor.op.name, tensor.value_index) in seen:  # (graph tensors are not hashable)
      continue
    seen.add((tensor.op.name, tensor.value_index))
    for op in tensor.consumers():
      if op in exempt:
        continue
      followed = _consumer(op, [i for i, t in enumerate(op.inputs) if t is tensor], functions)
      if followed is None:
        return True
      tensors.extend(t for t in followed if _handle(t))
  return False


def _handle(tensor):
  """Whether `tensor` can change a variable: a resource handle or a reference (a value read
  from a reference variable cannot)."""
  return tensor.dtype == tf.resource or tensor.dtype != tensor.dtype.base_dtype


def _variable_name(op):
  """What the variable an op creates or looks up is shared under (its container and shared
  name; the op's own name where it has none, as TensorFlow does)."""
  def attr(name):
    try:
      return op.get_attr(name).decode()
    except ValueError:
      return ''
  return attr('container'), attr('shared_name') or op.name


def _consumer(op, indices, functions):
  """The outputs of `op` that carry on the handle it takes at `indices` (a list, possibly
  empty), or None where `op` may change the variable."""
  if op.type in _READS:
    return []
  if op.type in _PASS_ON:
    return list(op.outputs)
  if all(not _takes_ref(op, i) for i in indices) and _reference(op, indices):
    return []  # a reference variable's value read by an op taking a plain tensor
  outputs = _called(op.type, lambda name: _attr_functions(op, name), indices, functions)
  return None if outputs is None else [op.outputs[i] for i in outputs]


def _reference(op, indices):
  return all(op.inputs[i].dtype != op.inputs[i].dtype.base_dtype for i in indices)


def _takes_ref(op, index):
  """Whether `op`'s input `index` is declared a reference (an op that may assign it)."""
  position = 0
  for arg in op.op_def.input_arg:
    if arg.number_attr:
      count = op.get_attr(arg.number_attr)
    elif arg.type_list_attr:
      count = len(op.get_attr(arg.type_list_attr))
    else:
      count = 1
    if index < position + count:
      return arg.is_ref
    position += count
  return True


def _attr_functions(op, name):
  value = op.get_attr(name)
  return [f.name for f in value] if isinstance(value, list) else [value.name]


def _called(op_type, functions_of, indices, functions):
  """For a loop, branch or call op taking the handle at input `indices`: the indices of its
  outputs that may carry the handle, or None where the functions it calls may change it (or
  `op_type` is none of those)."""
  if op_type in _LOOPS:
    if any(functions.changes(f, i) is None for f in functions_of('cond') + functions_of('body')
           for i in indices):
      return None
    return list(indices)  # a loop's outputs are its loop variables
  if op_type in _BRANCHES:
    names = functions_of('branches') if 'Case' in op_type else \
        functions_of('then_branch') + functions_of('else_branch')
    args = [i - 1 for i in indices if i > 0]
  elif op_type in _CALLS:
    names, args = functions_of('f'), list(indices)
  else:
    return None
  if len(args) != len(indices):
    return None  # the handle as a branch's condition: not a variable use we know
  outputs = set()
  for name in names:
    for arg in args:
      returned = functions.changes(name, arg)
      if returned is None:
        return None
      outputs.update(returned)
  return sorted(outputs)


class _Functions:
  """The same analysis inside the graph's functions (FunctionDefs), memoized."""

  def __init__(self, graph):
    self._graph = graph
    self._library = None  # read when first needed
    self._done = {}

  def name_variables(self, names):
    """Whether a function makes its own handle to a variable named in `names` (container,
    shared name) rather than taking one as an argument."""
    for fdef in self.library().values():
      for node in fdef.node_def:
        if node.op in _VARIABLES:
          shared = node.attr['shared_name'].s.decode() if 'shared_name' in node.attr else ''
          container = node.attr['container'].s.decode() if 'container' in node.attr else ''
          if shared and (container, shared) in names:
            return True
    return False

  def library(self):
    if self._library is None:
      self._library = {f.signature.name: f
                       for f in self._graph.as_graph_def().library.function}
    return self._library

  def changes(self, name, arg_index):
    """The indices of function `name`'s outputs that return its argument `arg_index` (a
    handle), or None where the function may change the variable."""
    key = (name, arg_index)
    if key not in self._done:
      self._done[key] = None  # a function reaching itself: assume the worst
      self._done[key] = self._follow(name, arg_index)
    return self._done[key]

  def _follow(self, name, arg_index):
    fdef = self.library().get(name)
    if fdef is None or arg_index >= len(fdef.signature.input_arg):
      return None
    tracked = {fdef.signature.input_arg[arg_index].name}
    consumers = {}
    for node in fdef.node_def:
      for position, source in enumerate(i for i in node.input if not i.startswith('^')):
        consumers.setdefault(source, []).append((node, position))
    stack, seen = list(tracked), set()
    while stack:
      source = stack.pop()
      if source in seen:
        continue
      seen.add(source)
      for node, position in consumers.get(source, []):
        followed = self._node(node, position)
        if followed is None:
          return None
        stack.extend(followed)
    returns = [o.name for o in fdef.signature.output_arg]
    return [i for i, out in enumerate(returns) if fdef.ret.get(out) in seen]

  def _node(self, node, position):
    """The tensor names inside the function that carry on the handle `node` takes at input
    `position`, or None where `node` may change the variable."""
    if node.op in _READS:
      return []
    if node.op in _PASS_ON:
      return ['%s:output:0' % node.name, '%s:output_true:0' % node.name,
              '%s:output_false:0' % node.name]
    def functions_of(attr):
      value = node.attr[attr]
      return [f.name for f in value.list.func] if value.HasField('list') else [value.func.name]
    outputs = _called(node.op, functions_of, [position], self)
    if outputs is None:
      return None
    return ['%s:output:%d' % (node.name, i) for i in outputs]
