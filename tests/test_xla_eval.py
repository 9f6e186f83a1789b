"""TPUConfig(xla=...) for evaluation and prediction with use_tpu=True on one replica (or logical
CPU replicas): the loop compiled as one computation gives the metrics and predictions of the
uncompiled loop, the short final batch and a last group shorter than iterations_per_loop
included; what cannot be compiled runs uncompiled with one warning; xla=None compiles only a
long evaluation."""
import logging

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from tpu_estimator.distribute import xla
from helpers import XlaRunSpy, convolved, dataset_input_fn, make_data, make_model_fn

BATCH = 16
ROWS = 70  # 4 full batches and one of 6 rows: with iterations_per_loop=3, groups of 3, 1, 1


@pytest.fixture(scope='module')
def model_dir(tmp_path_factory):
  directory = tmp_path_factory.mktemp('trained')
  x, y = make_data(96)
  _estimator(directory, make_model_fn(tpu=True), False).train(
      dataset_input_fn(x, y, drop_remainder=True), max_steps=3)
  return directory


def _estimator(model_dir, model_fn, use_xla, shards=1):
  config = te.RunConfig(model_dir=str(model_dir), tf_random_seed=1, tpu_config=te.TPUConfig(
      iterations_per_loop=3, num_shards=shards, xla=use_xla))
  return te.TPUEstimator(model_fn, config=config, use_tpu=True, train_batch_size=BATCH,
                         eval_batch_size=BATCH, predict_batch_size=BATCH)


def _input_fn(rows=ROWS):
  x, y = make_data(rows, seed=1)
  return dataset_input_fn(x, y, repeat=False)


def _evaluate(model_dir, model_fn, use_xla, shards=1, **kwargs):
  spy = XlaRunSpy()
  results = _estimator(model_dir, model_fn, use_xla, shards).evaluate(
      _input_fn(), hooks=[spy], **kwargs)
  return results, spy


def _predict(model_dir, model_fn, use_xla, shards=1, **kwargs):
  spy = XlaRunSpy()
  out = list(_estimator(model_dir, model_fn, use_xla, shards).predict(
      _input_fn(), hooks=[spy], **kwargs))
  return out, spy


def _assert_same_results(got, want):
  assert sorted(got) == sorted(want)
  for name in want:
    np.testing.assert_allclose(got[name], want[name], rtol=1e-6, err_msg=name)


def _assert_same_predictions(got, want):
  assert len(got) == len(want)
  for a, b in zip(got, want):
    assert sorted(a) == sorted(b)
    for key in b:
      if isinstance(b[key], bytes):
        assert a[key] == b[key]
      else:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-7, err_msg=key)


def _warnings(caplog):
  return [r.getMessage() for r in caplog.records
          if r.levelno >= logging.WARNING and 'XLA' in r.getMessage()]


def test_compiled_evaluation_equals_uncompiled(model_dir):
  model_fn = make_model_fn(tpu=True)
  plain, plain_spy = _evaluate(model_dir, model_fn, False)
  compiled, spy = _evaluate(model_dir, model_fn, True)
  assert plain_spy.compiled_runs == 0
  # Three runs (groups of 3 and 1 full batches, then the 6-row batch), each one computation.
  assert spy.compiled_runs == spy.whole_loop_runs == 3
  _assert_same_results(compiled, plain)
  # Every row counted once: the mean label over the 70 rows, not over padded or lost ones.
  np.testing.assert_allclose(plain['mean_label'], make_data(ROWS, seed=1)[1].mean(), rtol=1e-6)
  # Again on a kept graph (no hooks): its input read anew from the start, the same results.
  built = []
  counting = lambda features, labels, mode, params: built.append(mode) or model_fn(
      features, labels, mode, params)
  est = _estimator(model_dir, counting, True)
  input_fn = _input_fn()
  for _ in range(2):
    _assert_same_results(est.evaluate(input_fn), plain)
  assert len(built) == 1  # the second call ran the first one's compiled graph
  # A loop clipped by steps= (4 batches: a group of 3, then 1).
  clipped, spy = _evaluate(model_dir, model_fn, True, steps=4)
  assert spy.whole_loop_runs == 2
  _assert_same_results(clipped, _evaluate(model_dir, model_fn, False, steps=4)[0])


def test_compiled_prediction_equals_uncompiled(model_dir):
  model_fn = make_model_fn(tpu=True)
  plain, plain_spy = _predict(model_dir, model_fn, False)
  compiled, spy = _predict(model_dir, model_fn, True)
  assert plain_spy.compiled_runs == 0 and spy.compiled_runs == spy.whole_loop_runs == 3
  assert len(plain) == ROWS
  _assert_same_predictions(compiled, plain)
  est, input_fn = _estimator(model_dir, model_fn, True), _input_fn()
  for _ in range(2):  # the second call in the graph the first one kept
    _assert_same_predictions(list(est.predict(input_fn)), plain)
  batches = list(_estimator(model_dir, model_fn, True).predict(
      _input_fn(), yield_single_examples=False))
  assert [len(b['classes']) for b in batches] == [16, 16, 16, 16, 6]
  np.testing.assert_allclose(np.concatenate([b['probabilities'] for b in batches]),
                             [p['probabilities'] for p in plain], rtol=1e-5, atol=1e-7)


def _with_extra_op(make_extra, in_predictions=False):
  inner = make_model_fn(tpu=True)

  def model_fn(features, labels, mode, params):
    spec = inner(dict(features, x=make_extra(features['x'])), labels, mode, params)
    if in_predictions and mode == te.ModeKeys.PREDICT:
      predictions = dict(spec.predictions,
                         name=tf.strings.as_string(spec.predictions['classes']))
      return te.TPUEstimatorSpec(mode, predictions=predictions)
    return spec

  return model_fn


def _py_identity(x):
  out = tf.py_function(lambda t: t, [x], tf.float32)
  out.set_shape(x.shape)
  return out


def test_uncompilable_model_runs_uncompiled_with_one_warning(model_dir, caplog):
  """An op without an XLA kernel (evaluation) and string predictions: xla=True says why and
  gives the uncompiled results."""
  model_fn = _with_extra_op(_py_identity)
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    results, spy = _evaluate(model_dir, model_fn, True)
  warnings = _warnings(caplog)
  assert len(warnings) == 1 and 'EagerPyFunc' in warnings[0] and 'evaluation' in warnings[0]
  assert spy.compiled_runs == 0
  _assert_same_results(results, _evaluate(model_dir, model_fn, False)[0])
  caplog.clear()
  model_fn = _with_extra_op(tf.identity, in_predictions=True)
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    out, spy = _predict(model_dir, model_fn, True)
  warnings = _warnings(caplog)
  assert len(warnings) == 1 and 'string' in warnings[0] and 'prediction' in warnings[0]
  assert spy.compiled_runs == 0
  assert [p['name'] for p in out] == [str(p['classes']).encode() for p in out]
  _assert_same_predictions(out, _predict(model_dir, model_fn, False)[0])


def _optimizer_in_every_mode(features, labels, mode, params):
  """Builds its optimizer's update in evaluation too (returned only in training, as many
  model_fns do): a session never runs it there."""
  spec = make_model_fn(tpu=True)(features, labels, mode, params)
  if mode == te.ModeKeys.EVAL:
    tf.compat.v1.train.GradientDescentOptimizer(0.5).minimize(spec.loss)
  return spec


def test_evaluation_with_updates_no_output_needs_runs_uncompiled(model_dir, caplog):
  """Compiled, the update would run at every batch (every op of a computation runs) and the
  metrics would come from weights changing under them: one warning, the uncompiled results."""
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    results, spy = _evaluate(model_dir, _optimizer_in_every_mode, True)
  warnings = _warnings(caplog)
  assert len(warnings) == 1 and 'variable updates' in warnings[0], warnings
  assert spy.compiled_runs == 0
  _assert_same_results(results, _evaluate(model_dir, make_model_fn(tpu=True), False)[0])


def test_logical_cpu_replicas_compile_evaluation_and_prediction(model_dir, caplog):
  """Two logical CPU replicas run the loop as one computation, their variables on the first
  device: the short final batch spread over them as uncompiled (6 rows: one replica gets
  them all), the same metrics and predictions, quietly."""
  model_fn = make_model_fn(tpu=True)
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    compiled, spy = _evaluate(model_dir, model_fn, True, shards=2)
    out, predict_spy = _predict(model_dir, model_fn, True, shards=2)
  assert not _warnings(caplog)
  assert spy.compiled_runs == spy.whole_loop_runs == 3
  assert predict_spy.compiled_runs == predict_spy.whole_loop_runs == 3
  _assert_same_results(compiled, _evaluate(model_dir, model_fn, False, shards=2)[0])
  np.testing.assert_allclose(compiled['mean_label'], make_data(ROWS, seed=1)[1].mean(),
                             rtol=1e-6)
  assert len(out) == ROWS
  _assert_same_predictions(out, _predict(model_dir, model_fn, False, shards=2)[0])


def test_default_compiles_only_a_long_evaluation(model_dir, caplog, monkeypatch):
  """xla=None: an evaluation of unknown or short length and a prediction run uncompiled,
  quietly; one of at least AUTO_MIN_BATCHES batches (steps=) is compiled."""
  monkeypatch.setattr(xla, 'AUTO_MIN_BATCHES', 4)
  model_fn = make_model_fn(tpu=True)
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    assert _evaluate(model_dir, model_fn, None)[1].compiled_runs == 0
    assert _evaluate(model_dir, model_fn, None, steps=3)[1].compiled_runs == 0
    assert _predict(model_dir, model_fn, None)[1].compiled_runs == 0
    results, spy = _evaluate(model_dir, model_fn, None, steps=5)
  assert not _warnings(caplog)
  assert spy.compiled_runs == spy.whole_loop_runs == 3
  _assert_same_results(results, _evaluate(model_dir, model_fn, False)[0])


def test_default_evaluates_convolutions_uncompiled_on_cpu(model_dir, caplog, monkeypatch):
  """An evaluation xla=None would compile (steps=) runs uncompiled on CPU where model_fn has
  convolutions, quietly (XLA's CPU backend runs them slower); xla=True compiles it."""
  monkeypatch.setattr(xla, 'AUTO_MIN_BATCHES', 4)
  model_fn = _with_extra_op(convolved)
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    results, spy = _evaluate(model_dir, model_fn, None, steps=5)
  assert not _warnings(caplog)
  assert (spy.whole_loop_runs > 0) == bool(tf.config.list_physical_devices('GPU'))
  _assert_same_results(results, _evaluate(model_dir, model_fn, False, steps=5)[0])
  assert _evaluate(model_dir, model_fn, True, steps=5)[1].whole_loop_runs == 3


def _needs_a_constant(x):
  """An op with an XLA kernel that XLA cannot compile here (a shape computed from the data),
  found only when the compiled loop first runs."""
  rows = tf.cast(tf.reduce_sum(tf.abs(x)) > -1.0, tf.int32) + 1  # always 2, not a constant
  return x + tf.reduce_sum(tf.zeros(tf.stack([rows, 1])))


def test_default_goes_on_uncompiled_where_xla_fails_at_the_first_run(model_dir, caplog,
                                                                      monkeypatch):
  monkeypatch.setattr(xla, 'AUTO_MIN_BATCHES', 1)
  model_fn = _with_extra_op(_needs_a_constant)
  est = _estimator(model_dir, model_fn, None)
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    results = est.evaluate(_input_fn(), steps=5)
    again = est.evaluate(_input_fn(), steps=5)  # refused once: not tried again
  warnings = _warnings(caplog)
  assert len(warnings) == 1 and 'compile-time constant' in warnings[0], warnings
  want = _evaluate(model_dir, model_fn, False)[0]
  _assert_same_results(results, want)
  _assert_same_results(again, want)
  with pytest.raises(tf.errors.InvalidArgumentError, match='compile-time constant'):
    _evaluate(model_dir, model_fn, True)
