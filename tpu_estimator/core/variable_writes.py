"""Which ops of a graph may write a variable, and which of them no output needs.

A compiled computation (`tf.xla.experimental.compile`) runs every op built inside it, while a
session (and TensorFlow's function runtime) runs only what its fetches need: an optimizer's
`minimize` that a model_fn builds in every mode, but returns only in training, never runs in
the original's evaluation; compiled, it would update the weights at every batch.  `stray`
finds such updates so that the loop is not compiled (core/steps.py)."""
import tensorflow as tf

# Op types that write a resource variable (by prefix: the optimizers' Resource(Sparse)Apply*).
_WRITES = ('AssignVariableOp', 'AssignAddVariableOp', 'AssignSubVariableOp', 'ResourceApply',
           'ResourceSparseApply', 'ResourceScatter', 'ResourceStridedSliceAssign',
           'ResourceCountUpTo')


def upstream(ops):
  """`ops` and every op they depend on (inputs and control inputs), in their graph."""
  found, stack = set(), list(ops)
  while stack:
    op = stack.pop()
    if op is None or op in found:
      continue
    found.add(op)
    stack.extend(t.op for t in op.inputs)
    stack.extend(op.control_inputs)
  return found


def stray(operations, outputs):
  """The sorted types of the variable writes among `operations` that none of `outputs`
  (tensors or ops, nested) depends on."""
  roots = [getattr(o, 'op', o) for o in tf.nest.flatten(outputs) if o is not None]
  needed = upstream(roots)
  return sorted({op.type for op in operations
                 if op.type.startswith(_WRITES) and op not in needed})
