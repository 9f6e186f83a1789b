"""A weight regularizer's loss, rebuilt for another replica's copy of its variables.

A layer adds the loss of its weights' regularizer to `REGULARIZATION_LOSSES` when it makes
the weights, which the first replica of a sharded `model_fn` does alone: the other replicas'
layers find the variables made and add nothing.  Where that loss is a tensor (tf_keras' v1
layers: `tf.compat.v1.layers`, tf-slim's `conv2d` and `fully_connected`), it reads the first
replica's copy of the variables, so in another replica's loss it had no gradient: on 2 shards
weight decay came out at half its strength, silently (tensorflow/models' object detection).
`get_variable(regularizer=...)` adds a lazy tensor, made again where it is read, which did not
have the problem.

`for_replica(loss, copies_for(index))` copies the ops between the loss and the variables it
reads, with replica `index`'s copies of those variables in place of any other replica's, in the
current graph (the loss itself where it reads replica `index`'s already).  A loss that reads
anything but variables and constants (an activity regularizer, made from the replica's own
inputs, which each replica adds for itself) gives None; `maker(loss)` then says which replica
made it.
"""
import re

import tensorflow as tf

from tpu_estimator import _tf_internals

_MAX_OPS = 256  # a weight regularizer is a few ops; past this the loss is taken as the replica's


class _NotWeightsOnly(Exception):
  pass


def for_replica(loss, copies):
  """`loss` computed from the variable copies `copies` (from `copies_for`) maps it to, or None
  where it reads anything but variables and constants."""
  try:
    return _rebuilt(loss, copies, {})
  except _NotWeightsOnly:
    return None


def maker(item):
  """The index of the replica whose `model_fn` call made `item` (a tensor or an operation):
  a strategy's replica threads after the first build under the name scope `replica_<index>`."""
  found = re.match(r'replica_(\d+)/', item.name)
  return int(found.group(1)) if found else 0


def copies_for(index):
  """{every replica's variable tensor (handle, or ref) -> replica `index`'s (the variable's
  own where the replicas share one)}, with the placeholders a loop body's graph captured them
  as (in the current graph)."""
  graph = tf.compat.v1.get_default_graph()
  copies = {}
  for variable in tf.compat.v1.global_variables() + tf.compat.v1.local_variables():
    values = getattr(variable, 'values', None) or (variable,)  # one copy: the replicas share it
    mine = values[index % len(values)].op.outputs[0]
    for value in values:
      copies[value.op.outputs[0].ref()] = mine
  while hasattr(graph, 'captures'):  # a FuncGraph: its placeholders for outer tensors
    for external, internal in graph.captures:
      if external.ref() in copies:
        copies[internal.ref()] = copies[external.ref()]
    graph = getattr(graph, 'outer_graph', None)
    if graph is None:
      break
  return copies


def _rebuilt(tensor, copies, memo):
  key = tensor.ref()
  if key in copies:
    return copies[key]
  if key in memo:
    return memo[key]
  op = tensor.op
  if op.type == 'Const':
    result = tensor
  elif not op.inputs or len(memo) >= _MAX_OPS:
    raise _NotWeightsOnly()  # an input, a random op, a placeholder, or a long computation
  else:
    inputs = [_rebuilt(t, copies, memo) for t in op.inputs]
    if all(new is old for new, old in zip(inputs, op.inputs)):
      result = tensor  # it reads this replica's copies already
    else:
      result = _tf_internals.copy_op(op, inputs).outputs[tensor.value_index]
  memo[key] = result
  return result
