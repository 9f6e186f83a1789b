"""The estimator's sessions plan a run's fetches once per fetch structure
(tpu_estimator/core/fetch_plans.py): every run returns what `Session.run` returns, the plan is
made again wherever a kept one could differ, and a one-step-per-run call makes a handful of
plans, not one a step."""
import collections
import gc
import weakref

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te
from tpu_estimator import _tf_internals
from tpu_estimator.core import fetch_plans

v1 = tf.compat.v1
Pair = collections.namedtuple('Pair', ['first', 'second'])


class _Key:
  """A dict key compared by identity, as a MonitoredSession keys its hooks' requests."""


@pytest.fixture
def plans_made(monkeypatch):
  """The structures `fetch_plan` was asked to plan, in order."""
  made = []
  real = _tf_internals.fetch_plan

  def counted(graph, fetches):
    made.append(fetches)
    return real(graph, fetches)

  monkeypatch.setattr(_tf_internals, 'fetch_plan', counted)
  return made


def _sessions(graph):
  return fetch_plans.planned(v1.Session(graph=graph)), v1.Session(graph=graph)


def _same(a, b):
  assert type(a) is type(b), (a, b)
  if isinstance(a, dict):
    assert list(a) == list(b)
    for key in a:
      _same(a[key], b[key])
  elif isinstance(a, (list, tuple)):
    assert len(a) == len(b)
    for x, y in zip(a, b):
      _same(x, y)
  else:
    np.testing.assert_array_equal(a, b)


def test_repeated_structures_return_what_session_run_returns_from_one_plan(graph, plans_made):
  counter = v1.get_variable('counter', [], tf.int64, initializer=tf.zeros_initializer(),
                            use_resource=True)
  step = counter.assign_add(1)
  with tf.control_dependencies([step]):
    doubled = tf.identity(2 * counter.read_value(), name='doubled')
  vector = tf.constant([1.0, 2.0, 3.0], name='vector')
  hook_key = _Key()
  structures = [
      doubled,
      'vector:0',
      [step.op, doubled],
      (vector, Pair(doubled, 'vector:0')),
      Pair({'v': vector}, [doubled, {'n': 'vector:0'}]),  # dicts inside a namedtuple and a list
      {'caller': [step.op, doubled], hook_key: (doubled, {'v': vector, 'n': 'vector:0'}),
       7: vector},
  ]
  planned, plain = _sessions(graph)
  for session in (planned, plain):
    session.run(counter.initializer)
  plans_made.clear()
  for _ in range(3):
    for fetches in structures:
      _same(planned.run(fetches), plain.run(fetches))
  assert len(plans_made) == len(structures)  # each planned at its first run only
  # An equal structure written anew (new containers, the same elements) reuses the plan.
  _same(planned.run({'caller': [step.op, doubled], hook_key: (doubled, {'v': vector,
                                                                         'n': 'vector:0'}),
                     7: vector}),
        plain.run(structures[-1]))
  assert len(plans_made) == len(structures)


def test_a_dict_changed_after_its_run_gets_its_own_plan(graph, plans_made):
  a = tf.constant(1.0, name='a')
  b = tf.constant(2.0, name='b')
  planned, _ = _sessions(graph)
  fetches = {'a': a}
  assert planned.run(fetches) == {'a': 1.0}
  fetches['b'] = b  # the caller's dict changes after its run
  assert planned.run(fetches) == {'a': 1.0, 'b': 2.0}
  del fetches['a']
  assert planned.run(fetches) == {'b': 2.0}
  # The first plan still gives its one key: it was made from a copy of the dict, not the dict.
  assert planned.run({'a': a}) == {'a': 1.0}
  assert len(plans_made) == 3


def test_feeds_and_other_fetch_kinds_are_planned_at_each_run_as_by_tensorflow(graph,
                                                                             plans_made):
  x = v1.placeholder(tf.float32, [], name='x')
  y = tf.add(x, 1.0, name='y')
  variable = v1.get_variable('w', [], initializer=tf.constant_initializer(3.0),
                             use_resource=True)
  sparse = tf.SparseTensor(indices=[[0, 1]], values=[5.0], dense_shape=[2, 2])
  z = tf.constant(4.0, name='z')
  planned, plain = _sessions(graph)
  for session in (planned, plain):
    session.run(variable.initializer)
  plans_made.clear()
  for _ in range(2):
    assert planned.run(y, feed_dict={x: 2.0}) == 3.0
    assert planned.run([y, x], feed_dict={x: 5.0}) == [6.0, 5.0]  # a fetch fed: its feed
    assert planned.run(variable) == 3.0
    assert planned.run({'w': variable, 'z': z}) == {'w': 3.0, 'z': 4.0}
    got, expected = planned.run(sparse), plain.run(sparse)
    np.testing.assert_array_equal(got.values, expected.values)
    np.testing.assert_array_equal(got.indices, expected.indices)
  assert plans_made == []


def test_errors_are_those_of_session_run(graph):
  a = tf.constant(1.0)
  with tf.Graph().as_default():
    elsewhere = tf.constant(2.0)
  planned, plain = _sessions(graph)
  for session in (planned, plain):
    for _ in range(2):  # a structure that failed is not kept: it fails again
      with pytest.raises(TypeError):
        session.run(None)
      with pytest.raises(TypeError):
        session.run([a, None])
      with pytest.raises(ValueError, match='not an element of this graph'):
        session.run({'x': elsewhere})
      with pytest.raises(ValueError, match='no_such_op'):
        session.run('no_such_op:0')
  assert planned.run(a) == 1.0
  planned.close()
  with pytest.raises(RuntimeError, match='closed Session'):
    planned.run(a)


def test_plans_are_bounded_per_session(graph, plans_made, monkeypatch):
  monkeypatch.setattr(fetch_plans, 'MAX_PLANS', 4)
  tensors = [tf.constant(float(i)) for i in range(10)]
  planned, _ = _sessions(graph)
  for i, t in enumerate(tensors):
    assert planned.run([t]) == [float(i)]
  assert len(planned._fetch_plans) <= 4  # pylint: disable=protected-access
  assert planned.run([tensors[0]]) == [0.0]


class _StepHook(v1.train.SessionRunHook):
  """Fetches the global step at every run, and the loss as a dict every 5 runs."""

  def __init__(self):
    self.steps = []

  def begin(self):
    self._step = _tf_internals.global_step_read()  # the read TensorFlow's own hooks fetch
    self._loss = tf.compat.v1.get_default_graph().get_tensor_by_name('loss:0')
    self._runs = 0

  def before_run(self, run_context):
    self._runs += 1
    if self._runs % 5 == 0:
      return v1.train.SessionRunArgs((self._step, {'loss': self._loss}))
    return v1.train.SessionRunArgs(self._step)

  def after_run(self, run_context, run_values):
    result = run_values.results
    self.steps.append(int(result[0] if isinstance(result, tuple) else result))


def _named_loss_model_fn(spec_hooks):
  base = h.make_model_fn()

  def model_fn(features, labels, mode, params):
    spec = base(features, labels, mode, params)
    if mode != te.ModeKeys.TRAIN:
      return spec
    loss = tf.identity(spec.loss, name='loss')
    return spec._replace(loss=loss, training_hooks=[_StepHook()] if spec_hooks else [])

  return model_fn


@pytest.mark.parametrize('spec_hooks', [False, True], ids=['kept-graph', 'graph-per-call'])
def test_a_one_step_per_run_training_makes_a_few_plans_not_one_per_step(tmp_path, plans_made,
                                                                       spec_hooks):
  """use_tpu=False runs one step per run: its runs reuse their plans, in a kept graph's
  session and in one built for the call (a spec with hooks), and train as before."""
  x, y = h.make_data()
  hook = _StepHook()
  estimator = te.TPUEstimator(_named_loss_model_fn(spec_hooks), use_tpu=False,
                              train_batch_size=16, eval_batch_size=16,
                              config=h.tpu_config(model_dir=str(tmp_path)))
  estimator.train(h.dataset_input_fn(x, y), steps=60, hooks=[hook])
  assert hook.steps == list(range(60))  # the step read before each run's update
  steps_planned = [f for f in plans_made if isinstance(f, dict) and 'caller' in f]
  assert 1 <= len(steps_planned) <= 3  # the hook's two requests (a third: the last run's)
  assert len(plans_made) < 15
  plans_made.clear()
  metrics = estimator.evaluate(h.dataset_input_fn(x, y, repeat=False), steps=None)
  assert metrics['global_step'] == 60
  assert 1 <= len(plans_made) < 10  # 6 batches
  reference = te.TPUEstimator(h.make_model_fn(), use_tpu=False, train_batch_size=16,
                              eval_batch_size=16,
                              config=h.tpu_config(model_dir=str(tmp_path / 'reference')))
  reference.train(h.dataset_input_fn(x, y), steps=60)
  for name in ('dense/kernel', 'dense/bias'):
    np.testing.assert_allclose(estimator.get_variable_value(name),
                               reference.get_variable_value(name), rtol=1e-6)


class _Holding(v1.train.SessionRunHook):
  """A user's hook holding what it was given (here a large array), fetching the global step."""

  def __init__(self):
    self.held = np.zeros(1 << 20, np.float32)

  def begin(self):
    self._step = _tf_internals.global_step_read()

  def before_run(self, run_context):
    return v1.train.SessionRunArgs(self._step)


@pytest.mark.parametrize('reuse', [True, False], ids=['kept-session', 'session-per-call'])
def test_a_session_does_not_keep_a_calls_hooks_past_the_call(tmp_path, reuse):
  """Plans key hook requests by the hook; a session kept for the next call forgets them at
  the end of each call, and one closed in the background at once."""
  x, y = h.make_data()
  estimator = te.TPUEstimator(h.make_model_fn(), use_tpu=False, train_batch_size=16,
                              eval_batch_size=16,
                              config=h.tpu_config(model_dir=str(tmp_path),
                                                  reuse_train_graphs=reuse,
                                                  reuse_eval_graphs=reuse))
  for call in (lambda hooks: estimator.train(h.dataset_input_fn(x, y), steps=3, hooks=hooks),
               lambda hooks: estimator.evaluate(h.dataset_input_fn(x, y, repeat=False),
                                                hooks=hooks)):
    for _ in range(2):  # the second call runs in the graph and session the first kept, if
      hook = _Holding()
      alive = weakref.ref(hook)
      call([hook])
      del hook
      gc.collect()
      assert alive() is None
