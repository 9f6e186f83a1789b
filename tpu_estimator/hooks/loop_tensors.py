"""A spec's hooks on a device loop: a clear error where one reads a tensor `model_fn` built.

With `use_tpu=True`, `model_fn` is built inside the device loop's body (a function graph that
runs `iterations_per_loop` steps per `session.run`), so a session cannot fetch its
tensors.  A hook that asks for one (a `LoggingTensorHook` on the loss in `training_hooks`)
stopped with TensorFlow's "should have graph attribute that is equal to current graph" or "not
an element of this graph", and one that names it ('loss:0') with "does not exist in the graph";
`checked` wraps each hook so the error says what happened and what to do instead.  A hook that
fetches nothing of the loop's (the global step, its own variables) runs unchanged.
"""
import re

import tensorflow as tf

from tpu_estimator import errors

_v1 = tf.compat.v1
_FOREIGN_GRAPH = ('should have graph attribute that is equal to current graph',
                  'is not an element of this graph')
_MISSING_NAME = re.compile(r"The name '([^']*)' refers to an? \w+ which does not exist")


def checked(hooks, argument):
  """`hooks` (a spec's `argument`, e.g. 'training_hooks') each wrapped in `_LoopHook`."""
  return [_LoopHook(hook, argument) for hook in hooks]


def _loop_tensor_error(hook, argument, tensor=None, name=None):
  """The error for a hook reading a `tensor` of the loop, or a `name` its graph lacks."""
  what = ('%s, which model_fn built inside the device loop' % tensor if name is None else
          '%r, a name the session\'s graph lacks: model_fn\'s tensors are inside the device '
          'loop (or the name is misspelled)' % name)
  return errors.value_error(
      'A hook in the spec\'s %s (%s) reads %s. use_tpu=True runs iterations_per_loop steps '
      'in one session.run, whose session cannot fetch a tensor of the loop.'
      % (argument, type(hook).__name__, what),
      'Bring the value out through host_call (training) or eval_metrics (evaluation), or '
      'run with use_tpu=False, where every step is a session.run.', hook=hook)


def _in_graph(graph, name):
  try:
    graph.as_graph_element(name)
  except (KeyError, ValueError):
    return False
  return True


class _LoopHook(_v1.train.SessionRunHook):
  """`hook` as it is, but for the error above."""

  def __init__(self, hook, argument):
    self._hook = hook
    self._argument = argument

  def begin(self):
    try:
      self._hook.begin()
    except ValueError as error:
      if not any(text in str(error) for text in _FOREIGN_GRAPH):
        raise
      raise _loop_tensor_error(self._hook, self._argument, 'a tensor') from error
    except KeyError as error:
      missing = _MISSING_NAME.search(str(error))
      if not missing:
        raise
      raise _loop_tensor_error(self._hook, self._argument, name=missing.group(1)) from error

  def after_create_session(self, session, coord):
    self._hook.after_create_session(session, coord)

  def before_run(self, run_context):
    args = self._hook.before_run(run_context)
    if args is not None:
      graph = run_context.session.graph
      for fetch in tf.nest.flatten(args.fetches):
        if isinstance(fetch, (tf.Tensor, tf.Operation)) and fetch.graph is not graph:
          raise _loop_tensor_error(self._hook, self._argument, fetch.name)
        if isinstance(fetch, str) and not _in_graph(graph, fetch):
          raise _loop_tensor_error(self._hook, self._argument, name=fetch)
    return args

  def after_run(self, run_context, run_values):
    self._hook.after_run(run_context, run_values)

  def end(self, session):
    self._hook.end(session)
