"""TPUConfig(xla=...): the training step of use_tpu=True compiled with XLA gives the results and
checkpoints of the uncompiled one; a model_fn with an op XLA cannot compile falls back with a
warning naming it; bad settings are refused."""
import logging

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from tpu_estimator import xla
from helpers import dataset_input_fn, make_data, make_model_fn

v1 = tf.compat.v1
BATCH = 16


class _XlaRunSpy(v1.train.SessionRunHook):
  """Traces every run and records whether any node ran as a compiled XLA cluster."""

  def __init__(self):
    self.compiled_runs = 0

  def before_run(self, run_context):
    del run_context
    return v1.train.SessionRunArgs(
        None, options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE))

  def after_run(self, run_context, run_values):
    del run_context
    names = [node.node_name for dev in run_values.run_metadata.step_stats.dev_stats
             for node in dev.node_stats]
    # Compiled clusters run as `_XlaRun` nodes named `cluster_<n>_1/xla_run`.
    if any(name.endswith('xla_run') for name in names):
      self.compiled_runs += 1


def _estimator(model_dir, model_fn, use_xla, shards=1, ipl=3):
  config = te.RunConfig(model_dir=str(model_dir), tf_random_seed=1,
                        tpu_config=te.TPUConfig(iterations_per_loop=ipl, num_shards=shards,
                                                xla=use_xla))
  return te.TPUEstimator(model_fn, config=config, use_tpu=True, train_batch_size=BATCH)


def _train(model_dir, model_fn, use_xla, shards=1, steps=5):
  x, y = make_data(96)
  est = _estimator(model_dir, model_fn, use_xla, shards)
  spy = _XlaRunSpy()
  est.train(dataset_input_fn(x, y), max_steps=steps, hooks=[spy])
  return est, spy


def _values(est):
  return {name: est.get_variable_value(name) for name in est.get_variable_names()}


@pytest.mark.parametrize('optimizer,shards', [('sgd', 1), ('adam', 1), ('sgd', 2), ('adam', 2)])
def test_compiled_step_equals_uncompiled(tmp_path, optimizer, shards):
  model_fn = make_model_fn(tpu=True, optimizer=optimizer, cross_shard=shards > 1)
  plain, plain_spy = _train(tmp_path / 'plain', model_fn, False, shards)
  compiled, spy = _train(tmp_path / 'xla', model_fn, True, shards)
  assert plain_spy.compiled_runs == 0
  assert spy.compiled_runs > 0  # the device loop's step really ran as an XLA cluster
  got, want = _values(compiled), _values(plain)
  assert sorted(got) == sorted(want)  # same checkpoint: same names, shapes, dtypes
  assert got['global_step'] == want['global_step'] == 5
  # On a GPU, XLA's fused kernels sum in another order than TensorFlow's (measured on an H100
  # after 5 steps: 2e-4 relative, 9e-6 absolute at most); on CPU they agree to 1e-5.
  rtol, atol = (1e-3, 1e-5) if tf.config.list_physical_devices('GPU') else (1e-5, 1e-6)
  for name in want:
    assert got[name].dtype == want[name].dtype, name
    np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol, err_msg=name)
  # Training moved the weights, so equality says something.
  assert not np.allclose(want['dense/kernel'],
                         _values(_train(tmp_path / 'one', model_fn, False, shards, 1)[0])[
                             'dense/kernel'])


def _with_extra_op(make_extra):
  inner = make_model_fn(tpu=True)

  def model_fn(features, labels, mode, params):
    features = dict(features, x=make_extra(features['x']))
    return inner(features, labels, mode, params)

  return model_fn


def _py_identity(x):
  out = tf.py_function(lambda t: t, [x], tf.float32)
  out.set_shape(x.shape)
  return out


def _string_round_trip(x):
  return tf.strings.to_number(tf.strings.as_string(x, precision=9), tf.float32)


@pytest.mark.parametrize('extra,op_type', [(_py_identity, 'EagerPyFunc'),
                                           (_string_round_trip, 'AsString')])
def test_uncompilable_op_falls_back_with_a_logged_reason(tmp_path, caplog, extra, op_type):
  model_fn = _with_extra_op(extra)
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    est, spy = _train(tmp_path / 'xla', model_fn, True)
  reasons = [r.getMessage() for r in caplog.records if 'without XLA' in r.getMessage()]
  assert len(reasons) == 1 and op_type in reasons[0], reasons
  assert spy.compiled_runs == 0
  plain, _ = _train(tmp_path / 'plain', model_fn, False)
  np.testing.assert_allclose(_values(est)['dense/kernel'], _values(plain)['dense/kernel'],
                             rtol=1e-6)


def test_summaries_in_model_fn_do_not_stop_compilation(tmp_path, caplog):
  def extra(x):
    v1.summary.scalar('mean_x', tf.reduce_mean(x))
    v1.summary.histogram('x', x)
    return x

  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    _, spy = _train(tmp_path, _with_extra_op(extra), True)
  assert not [r for r in caplog.records if 'without XLA' in r.getMessage()]
  assert spy.compiled_runs > 0


def test_default_is_the_measured_default(tmp_path):
  _, spy = _train(tmp_path, make_model_fn(tpu=True), None, steps=2)
  assert (spy.compiled_runs > 0) == xla.DEFAULT


def test_use_tpu_false_is_not_compiled(tmp_path):
  x, y = make_data(96)
  config = te.RunConfig(model_dir=str(tmp_path), tpu_config=te.TPUConfig(xla=True))
  est = te.TPUEstimator(make_model_fn(tpu=True), config=config, use_tpu=False,
                        train_batch_size=BATCH)
  spy = _XlaRunSpy()
  est.train(dataset_input_fn(x, y), max_steps=2, hooks=[spy])
  assert spy.compiled_runs == 0
  assert est.get_variable_value('global_step') == 2


@pytest.mark.parametrize('value', ['yes', 1, 0, 'auto', [True]])
def test_bad_setting_is_refused(value):
  with pytest.raises(TypeError, match=r'`xla` must be None, True or False.*xla=') as info:
    te.TPUConfig(xla=value)
  assert repr(value) in str(info.value)
