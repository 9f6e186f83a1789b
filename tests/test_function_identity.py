"""An input_fn written anew in every call (a lambda, a nested function, a partial, a bound
method) that calling cannot tell apart from the kept graph's reuses that graph; one that reads
other values builds its own (core/function_identity.py)."""
import functools

import numpy as np
import pytest

import helpers as h
import tpu_estimator as te
from tpu_estimator.core.function_identity import Identity

SCALE = 1.0  # a module global read by the lambdas below (rebound by one test)


def _make(value, batch=None):
  return lambda: (value, batch)


def _scaled(value):
  return lambda: value * SCALE


def _mapped():
  return lambda: list(map(lambda x: x * SCALE, [1]))


class _Source:

  def input_fn(self):
    return SCALE


def _same(a, b):
  return Identity(a).same_as(Identity(b))


def test_functions_that_calling_cannot_tell_apart():
  data = np.zeros(3)
  assert _same(_make(data), _make(data))  # new lambdas, the same array
  assert _same(_make(2, batch=32), _make(2, batch=32))  # equal scalars
  assert _same(_make((1, 'a')), _make((1, 'a')))
  source = _Source()
  assert _same(source.input_fn, source.input_fn)  # a new bound method per access
  assert _same(functools.partial(_make, data), functools.partial(_make, data))


def test_functions_that_differ():
  assert not _same(_make(np.zeros(3)), _make(np.zeros(3)))  # equal arrays, other objects
  assert not _same(_make(2), _make(3))
  assert not _same(_make(0.0), _make(-0.0))
  assert not _same(_make(1), _make(True))
  assert not _same(_make(2, batch=32), _make(2, batch=64))
  assert not _same(_Source().input_fn, _Source().input_fn)
  assert not _same(functools.partial(_make, 1), functools.partial(_make, 2))
  assert not _same(_make(1), _scaled(1))  # other code
  tagged = _make(1)
  tagged.note = 'attributes'
  assert not _same(tagged, _make(1))


def test_a_rebound_global_that_the_code_reads_is_another_function(monkeypatch):
  before, nested = Identity(_scaled(2)), Identity(_mapped())
  monkeypatch.setattr(__import__(__name__), 'SCALE', 2.0)
  assert not before.same_as(Identity(_scaled(2)))
  assert not nested.same_as(Identity(_mapped()))  # read by a lambda inside the function
  monkeypatch.setattr(__import__(__name__), 'SCALE', 2.0)
  assert Identity(_scaled(2)).same_as(Identity(_scaled(2)))


def _estimator(model_dir, model_fn, shards=1):
  return te.TPUEstimator(model_fn, config=h.tpu_config(shards, 4, model_dir=str(model_dir)),
                         train_batch_size=16, eval_batch_size=16, predict_batch_size=16)


def test_a_lambda_written_in_every_call_reuses_the_graph(tmp_path):
  """As many graphs as with one input_fn object passed to every call (the second training
  call builds the loop compiled: xla=None compiles a loop that later calls reuse)."""
  x, y = h.make_data(80)
  train_fn, eval_fn = h.dataset_input_fn(x, y), h.dataset_input_fn(x, y, repeat=False)
  built = {}
  for written_anew in (False, True):
    model_fn, calls = h.counting(h.make_model_fn(tpu=True))
    est = _estimator(tmp_path / str(written_anew), model_fn)
    pick = (lambda fn: lambda params: fn(params)) if written_anew else (lambda fn: fn)
    for _ in range(3):
      est.train(pick(train_fn), steps=2)
    results = [est.evaluate(pick(eval_fn)) for _ in range(2)]
    predictions = [list(est.predict(pick(eval_fn))) for _ in range(2)]
    built[written_anew] = list(calls)
    assert calls.count('eval') == 1 and calls.count('infer') == 1
    assert results[0] == pytest.approx(results[1])
    np.testing.assert_allclose([p['probabilities'] for p in predictions[0]],
                               [p['probabilities'] for p in predictions[1]], rtol=1e-6)
  assert built[True] == built[False]


def test_an_input_fn_over_other_data_reads_that_data(tmp_path):
  """A loop over data sets, each call's lambda closing over the loop's variable: not the
  kept call's input_fn, so the kept graph reads the new data (graph_cache.read_new_input)."""
  model_fn, calls = h.counting(h.make_model_fn(tpu=True))
  est = _estimator(tmp_path, model_fn)
  x, y = h.make_data(80)
  est.train(h.dataset_input_fn(x, y), steps=4)
  parts = [(x[:48], y[:48]), (x[48:], y[48:])]
  got = [est.evaluate(lambda params: h.dataset_input_fn(*part, repeat=False)(params))
         for part in parts]
  assert calls.count('eval') == 1
  fresh = _estimator(tmp_path, h.make_model_fn(tpu=True))
  for result, part in zip(got, parts):
    assert result == pytest.approx(fresh.evaluate(h.dataset_input_fn(*part, repeat=False)))
  assert got[0]['loss'] != pytest.approx(got[1]['loss'])
