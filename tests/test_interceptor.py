"""The one patch of the v1 Optimizer (tpu_estimator/updates/interceptor.py): installed once,
layers asked outermost first where their state is on the root graph, `inner` skipping a layer.

The layers here are stand-ins (the registry is swapped per test), so these pin the dispatch
alone; tests/test_precision.py and tests/test_accumulation.py pin the real layers."""
import pytest
import tensorflow as tf

from tpu_estimator import _tf_internals as internals
from tpu_estimator.updates import interceptor

v1 = tf.compat.v1


@pytest.fixture
def calls(monkeypatch):
  """Stand-in layers recording (layer, method); a layer answers its state's value."""
  seen = []

  def layer(name):
    def handler(state, method, optimizer, *args, **kwargs):
      del optimizer, args, kwargs
      seen.append((name, method))
      return state
    return handler

  monkeypatch.setattr(interceptor, '_layers', {})
  interceptor.register('precision', interceptor.METHODS, layer('precision'))
  interceptor.register('accumulation', ('apply_gradients',), layer('accumulation'))
  interceptor.install()
  with tf.Graph().as_default() as graph:
    yield graph, seen


def _variable():
  return v1.get_variable('v', [], initializer=tf.zeros_initializer())


def _apply(variable):
  return v1.train.GradientDescentOptimizer(1.0).apply_gradients([(tf.constant(1.0), variable)])


def test_install_patches_each_method_once():
  interceptor.install()
  patched = [getattr(v1.train.Optimizer, method) for method in interceptor.METHODS]
  interceptor.install()
  assert patched == [getattr(v1.train.Optimizer, method) for method in interceptor.METHODS]
  assert all(f is not interceptor._ORIGINAL[m] for f, m in zip(patched, interceptor.METHODS))


def test_layers_are_asked_outermost_first_and_may_pass(calls):
  graph, seen = calls
  internals.set_graph_state(graph, 'precision', 'from precision')
  internals.set_graph_state(graph, 'accumulation', 'from accumulation')
  variable = _variable()
  assert _apply(variable) == 'from precision'
  internals.set_graph_state(graph, 'precision', interceptor.PASS)
  assert _apply(variable) == 'from accumulation'
  assert seen == [('precision', 'apply_gradients')] * 2 + [('accumulation', 'apply_gradients')]


def test_inner_skips_the_layer_and_those_outside_it(calls):
  graph, seen = calls
  internals.set_graph_state(graph, 'precision', 'from precision')
  internals.set_graph_state(graph, 'accumulation', 'from accumulation')
  variable = _variable()
  optimizer = v1.train.GradientDescentOptimizer(1.0)
  assert interceptor.inner('precision', 'apply_gradients', optimizer,
                           [(tf.constant(1.0), variable)]) == 'from accumulation'
  assert isinstance(interceptor.inner('accumulation', 'apply_gradients', optimizer,
                                      [(tf.constant(1.0), variable)]), tf.Operation)
  assert seen == [('accumulation', 'apply_gradients')]


def test_state_is_read_on_the_root_graph_and_unset_means_the_original(calls):
  graph, seen = calls
  variable = _variable()
  assert isinstance(_apply(variable), tf.Operation)  # no state: the original method
  internals.set_graph_state(graph, 'accumulation', 'from accumulation')
  answers = []

  def body(i):
    answers.append(_apply(variable))  # built in the loop body; the state is on its outer graph
    return i + 1

  tf.while_loop(lambda i: i < 1, body, [tf.constant(0)])
  v1.train.GradientDescentOptimizer(1.0).compute_gradients(variable * 2.0)
  assert answers == ['from accumulation']
  assert seen == [('accumulation', 'apply_gradients')]  # compute_gradients is not its method


def test_register_refuses_unknown_layers_and_methods(calls):
  del calls
  with pytest.raises(ValueError, match='Unknown layer'):
    interceptor.register('clipping', ('apply_gradients',), lambda *a: None)
  with pytest.raises(ValueError, match='Unknown layer'):
    interceptor.register('precision', ('minimize',), lambda *a: None)
