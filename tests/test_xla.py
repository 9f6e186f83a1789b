"""TPUConfig(xla=...): the training step of use_tpu=True compiled with XLA gives the results and
checkpoints of the uncompiled one; a model_fn with an op XLA cannot compile falls back with a
warning naming it; bad settings are refused."""
import logging

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from tpu_estimator.distribute import host_input
from tpu_estimator.distribute import loop_clock
from tpu_estimator.distribute import xla
from helpers import XlaRunSpy, convolved, dataset_input_fn, make_data, make_model_fn, \
    scalar_summaries

v1 = tf.compat.v1
BATCH = 16


def _estimator(model_dir, model_fn, use_xla, shards=1, ipl=3, accumulate=1, **kwargs):
  config = te.RunConfig(model_dir=str(model_dir), tf_random_seed=1, **kwargs,
                        tpu_config=te.TPUConfig(iterations_per_loop=ipl, num_shards=shards,
                                                xla=use_xla,
                                                gradient_accumulation_steps=accumulate))
  return te.TPUEstimator(model_fn, config=config, use_tpu=True, train_batch_size=BATCH)


def _train(model_dir, model_fn, use_xla, shards=1, steps=5, static=True, rows=96,
           repeat=True, accumulate=1):
  """Trains to `steps`; `static`: the input batched with drop_remainder=True."""
  x, y = make_data(rows)
  est = _estimator(model_dir, model_fn, use_xla, shards, accumulate=accumulate)
  spy = XlaRunSpy()
  est.train(dataset_input_fn(x, y, drop_remainder=static, repeat=repeat), max_steps=steps,
            hooks=[spy])
  return est, spy


def _values(est):
  return {name: est.get_variable_value(name) for name in est.get_variable_names()}


def _assert_same_training(compiled, plain):
  got, want = _values(compiled), _values(plain)
  assert sorted(got) == sorted(want)  # same checkpoint: same names, shapes, dtypes
  assert got['global_step'] == want['global_step']
  # On a GPU, XLA's fused kernels sum in another order than TensorFlow's (measured on an H100
  # after 5 steps: 2e-4 relative, 9e-6 absolute at most); on CPU they agree to 1e-5.
  rtol, atol = (1e-3, 1e-5) if tf.config.list_physical_devices('GPU') else (1e-5, 1e-6)
  for name in want:
    assert got[name].dtype == want[name].dtype, name
    np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol, err_msg=name)


# Static input shapes: the whole loop is one computation (two logical CPU shards too, their
# variables then on the first device); input without static shapes: the step is compiled on
# its own.
@pytest.mark.parametrize('optimizer,shards,static', [
    ('sgd', 1, True), ('adam', 1, True), ('adam', 1, False), ('sgd', 2, True),
    ('adam', 2, True)])
def test_compiled_step_equals_uncompiled(tmp_path, optimizer, shards, static):
  model_fn = make_model_fn(tpu=True, optimizer=optimizer, cross_shard=shards > 1)
  plain, plain_spy = _train(tmp_path / 'plain', model_fn, False, shards, static=static)
  compiled, spy = _train(tmp_path / 'xla', model_fn, True, shards, static=static)
  assert plain_spy.compiled_runs == 0
  assert spy.compiled_runs > 0  # the device loop's step really ran as an XLA cluster
  assert (spy.whole_loop_runs == spy.compiled_runs) == static
  assert plain.get_variable_value('global_step') == 5
  _assert_same_training(compiled, plain)
  # One data file a checkpoint, as the original's CPU checkpoints (programs look for
  # `.data-00000-of-00001`): the compiled loop places its variables on the CPU, the global
  # step has no device, and a Saver sharded by device string wrote two.
  for model_dir in (tmp_path / 'plain', tmp_path / 'xla'):
    data = [p.name for p in model_dir.glob('model.ckpt-*.data-*')]
    assert data and all(name.endswith('.data-00000-of-00001') for name in data), data
  want = _values(plain)
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


def _counting_aside(features, labels, mode, params):
  """Adds 1 to a variable in an op no output needs: a session never runs it."""
  counter = v1.get_variable('counter', [], initializer=tf.zeros_initializer(), trainable=False)
  counter.assign_add(1.0)
  return make_model_fn(tpu=True)(features, labels, mode, params)


@pytest.mark.parametrize('accumulate', [1, 2])
def test_variable_updates_no_output_needs_are_not_compiled_into_the_loop(tmp_path, caplog,
                                                                         accumulate):
  """A compiled computation runs every op in it: the loop goes on without XLA, with one
  warning naming the update, and trains as the uncompiled loop (the counter never runs), with
  gradient accumulation too."""
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    est, spy = _train(tmp_path / 'xla', _counting_aside, True, accumulate=accumulate)
  reasons = [r.getMessage() for r in caplog.records if 'variable updates' in r.getMessage()]
  assert len(reasons) == 1 and 'AssignAddVariableOp' in reasons[0], reasons
  assert spy.whole_loop_runs == 0
  plain, _ = _train(tmp_path / 'plain', _counting_aside, False, accumulate=accumulate)
  assert est.get_variable_value('counter') == plain.get_variable_value('counter') == 0
  _assert_same_training(est, plain)


def test_default_trains_convolutions_uncompiled_on_cpu(tmp_path, caplog, monkeypatch):
  """XLA's CPU backend runs convolutions slower than TensorFlow (EfficientNet-B0 17x): a call
  that xla=None would compile trains uncompiled on CPU, quietly, with the same results;
  xla=True compiles it all the same.  On a GPU the default compiles it."""
  monkeypatch.setattr(xla, 'AUTO_MIN_STEPS', 4)
  model_fn = _with_extra_op(convolved)
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    auto, spy = _train(tmp_path / 'auto', model_fn, None, steps=6)
  assert not [r for r in caplog.records if 'XLA' in r.getMessage()]
  assert (spy.whole_loop_runs > 0) == bool(tf.config.list_physical_devices('GPU'))
  _assert_same_training(auto, _train(tmp_path / 'plain', model_fn, False, steps=6)[0])
  assert _train(tmp_path / 'xla', model_fn, True, steps=6)[1].whole_loop_runs > 0


def test_summaries_in_model_fn_do_not_stop_compilation(tmp_path, caplog):
  def extra(x):
    v1.summary.scalar('mean_x', tf.reduce_mean(x))
    v1.summary.histogram('x', x)
    return x

  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    _, spy = _train(tmp_path, _with_extra_op(extra), True)
  assert not [r for r in caplog.records if 'without XLA' in r.getMessage()]
  assert spy.compiled_runs > 0


def _needs_a_constant(x):
  """An op with an XLA kernel that XLA cannot compile here: a shape computed from the data
  (XLA needs it at compile time), found only when the compiled loop first runs."""
  rows = tf.cast(tf.reduce_sum(tf.abs(x)) > -1.0, tf.int32) + 1  # always 2, not a constant
  return x + tf.reduce_sum(tf.zeros(tf.stack([rows, 1])))


def _calls(est, input_fn, spy, *steps):
  for n in steps:
    est.train(input_fn, steps=n, hooks=[spy])
  return est


def _counting_adam_model():
  """(model_fn, the same model_fn counting its builds in `built`, built, a static input_fn)."""
  model_fn = make_model_fn(tpu=True, optimizer='adam')
  built = []
  counted = lambda features, labels, mode, params: built.append(1) or model_fn(
      features, labels, mode, params)
  x, y = make_data(96)
  return model_fn, counted, built, dataset_input_fn(x, y, drop_remainder=True)


def test_default_compiles_a_long_call_and_a_call_repeating_its_input_fn(tmp_path, monkeypatch):
  """xla=None: a short call runs uncompiled; the next call with the same input_fn, whose graph
  is reused from then on, and a call of at least AUTO_MIN_STEPS steps compile the whole loop,
  with the results of xla=False."""
  model_fn, counted, built, input_fn = _counting_adam_model()
  first, again = XlaRunSpy(), XlaRunSpy()
  auto = _calls(_estimator(tmp_path / 'auto', counted, None), input_fn, first, 4)
  assert first.compiled_runs == 0
  _calls(auto, input_fn, again, 3, 2)
  assert again.whole_loop_runs == again.compiled_runs > 0
  assert len(built) == 2  # built again once, compiled; the third call reuses that graph
  plain = _calls(_estimator(tmp_path / 'plain', model_fn, False), input_fn, XlaRunSpy(), 4, 3,
                 2)
  _assert_same_training(auto, plain)
  # Calls that build their graph anew each time compile only when long enough.
  rebuilt = XlaRunSpy()
  _calls(_estimator(tmp_path / 'rebuilt', model_fn, None, reuse_train_graphs=False), input_fn,
         rebuilt, 4, 3, 2)
  assert rebuilt.compiled_runs == 0
  monkeypatch.setattr(xla, 'AUTO_MIN_STEPS', 9)
  long_call = XlaRunSpy()
  _calls(_estimator(tmp_path / 'long', model_fn, None), input_fn, long_call, 9)
  assert long_call.whole_loop_runs == long_call.compiled_runs > 0
  plain_long = _calls(_estimator(tmp_path / 'plain_long', model_fn, False), input_fn,
                      XlaRunSpy(), 9)
  _assert_same_training(_estimator(tmp_path / 'long', model_fn, None), plain_long)


@pytest.mark.parametrize('compiled_slower', [True, False])
def test_default_drops_a_compiled_loop_measured_slower(tmp_path, caplog, monkeypatch,
                                                       compiled_slower):
  """xla=None times the loop's runs uncompiled (the first call) and compiled (the next call
  with the same input_fn): a compiled loop measured slower (here: any, SLOWER=0) is not used
  from the next call on, which is built again uncompiled and trains on from the checkpoint,
  with one info line saying both times; a faster one (here: any) stays compiled."""
  monkeypatch.setattr(loop_clock, 'SLOWER', 0.0 if compiled_slower else float('inf'))
  model_fn, counted, built, input_fn = _counting_adam_model()
  spies = [XlaRunSpy() for _ in range(4)]
  auto = _estimator(tmp_path / 'auto', counted, None)
  with caplog.at_level(logging.DEBUG, logger='tpu_estimator'):
    for spy, steps in zip(spies, (12, 12, 6, 3)):  # ipl=3: 4 runs, 4, 2, 1
      _calls(auto, input_fn, spy, steps)
  said = [r.getMessage() for r in caplog.records if 'a step compiled' in r.getMessage()]
  assert len(said) == 1, said
  assert [s.whole_loop_runs > 0 for s in spies] == [False, True] + [not compiled_slower] * 2
  if compiled_slower:
    assert said[0].startswith('The training loop runs uncompiled from the next call on: it '
                              'ran ') and ' ms uncompiled' in said[0], said
    assert len(built) == 3  # uncompiled, compiled, uncompiled again (then kept)
  else:
    assert said[0].startswith('The compiled training loop pays'), said
    assert len(built) == 2
  plain = _calls(_estimator(tmp_path / 'plain', model_fn, False), input_fn, XlaRunSpy(), 12,
                 12, 6, 3)
  _assert_same_training(auto, plain)


def test_default_goes_on_uncompiled_where_xla_fails_at_the_first_run(tmp_path, caplog,
                                                                      monkeypatch):
  """XLA refuses the model only when the compiled loop first runs: xla=None trains it
  uncompiled from the same start with one warning, and does not try again; xla=True says why
  it cannot compile."""
  monkeypatch.setattr(xla, 'AUTO_MIN_STEPS', 1)
  model_fn = _with_extra_op(_needs_a_constant)
  x, y = make_data(96)
  input_fn = dataset_input_fn(x, y, drop_remainder=True)
  spy = XlaRunSpy()
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    auto = _calls(_estimator(tmp_path / 'auto', model_fn, None), input_fn, spy, 5, 4)
  warnings = [r.getMessage() for r in caplog.records if 'without XLA' in r.getMessage()]
  assert len(warnings) == 1 and 'compile-time constant' in warnings[0], warnings
  assert spy.compiled_runs == 0  # the failed run never reached after_run
  plain = _calls(_estimator(tmp_path / 'plain', model_fn, False), input_fn, XlaRunSpy(), 5, 4)
  _assert_same_training(auto, plain)
  assert auto.get_variable_value('global_step') == 9
  with pytest.raises(tf.errors.InvalidArgumentError, match='compile-time constant'):
    _calls(_estimator(tmp_path / 'forced', model_fn, True), input_fn, XlaRunSpy(), 5)


def test_default_goes_on_uncompiled_with_an_op_without_an_xla_kernel(tmp_path, caplog,
                                                                     monkeypatch):
  monkeypatch.setattr(xla, 'AUTO_MIN_STEPS', 1)
  x, y = make_data(96)
  input_fn = dataset_input_fn(x, y, drop_remainder=True)
  spy = XlaRunSpy()
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    auto = _calls(_estimator(tmp_path, _with_extra_op(_py_identity), None), input_fn, spy, 5, 4)
  warnings = [r.getMessage() for r in caplog.records if 'without XLA' in r.getMessage()]
  assert len(warnings) == 1 and 'EagerPyFunc' in warnings[0], warnings
  assert spy.compiled_runs == 0
  assert auto.get_variable_value('global_step') == 9


def test_default_compiles_logical_cpu_replicas_as_one_computation(tmp_path, caplog,
                                                                  monkeypatch):
  """Two logical CPU shards: xla=None compiles their whole loop as one computation (their
  variables on the first device), quietly, and trains as the uncompiled mirrored replicas do;
  a sharded evaluation (mirrored) reads its checkpoint.  Input without static shapes cannot be
  read a loop at a time: uncompiled, on mirrored replicas, quietly."""
  monkeypatch.setattr(xla, 'AUTO_MIN_STEPS', 1)
  model_fn = make_model_fn(tpu=True, cross_shard=True)
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    est, spy = _train(tmp_path / 'auto', model_fn, None, 2)
    dynamic, dynamic_spy = _train(tmp_path / 'dynamic', model_fn, None, 2, static=False)
  assert not [r for r in caplog.records if 'XLA' in r.getMessage()]
  assert spy.whole_loop_runs == spy.compiled_runs > 0
  assert dynamic_spy.compiled_runs == 0
  plain, _ = _train(tmp_path / 'plain', model_fn, False, 2)
  _assert_same_training(est, plain)
  _assert_same_training(dynamic, plain)
  x, y = make_data(40)
  metrics = [te.TPUEstimator(model_fn, config=e.config, use_tpu=True, train_batch_size=BATCH,
                             eval_batch_size=BATCH).evaluate(dataset_input_fn(x, y, repeat=False))
             for e in (est, plain)]
  assert metrics[0]['global_step'] == 5
  assert metrics[0].keys() == metrics[1].keys()
  for name in metrics[1]:
    np.testing.assert_allclose(metrics[0][name], metrics[1][name], rtol=1e-5, err_msg=name)


def test_logical_cpu_replicas_with_per_replica_variables_stay_mirrored(tmp_path, caplog):
  """Gradient accumulators have a copy per replica (synchronization ON_READ, as batch
  normalization's moving statistics): one computation over central variables would share
  them and apply every replica's sum twice.  xla=True says why once and trains as uncompiled."""
  x, y = make_data(96)
  model_fn = make_model_fn(tpu=True, cross_shard=True)
  values = {}
  for use_xla in (True, False):
    config = te.RunConfig(model_dir=str(tmp_path / str(use_xla)), tf_random_seed=1,
                          tpu_config=te.TPUConfig(iterations_per_loop=3, num_shards=2,
                                                  xla=use_xla, gradient_accumulation_steps=2))
    est = te.TPUEstimator(model_fn, config=config, use_tpu=True, train_batch_size=BATCH)
    spy = XlaRunSpy()
    with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
      est.train(dataset_input_fn(x, y, drop_remainder=True), max_steps=4, hooks=[spy])
    assert spy.whole_loop_runs == 0
    values[use_xla] = est
  reasons = [r.getMessage() for r in caplog.records if 'ON_READ' in r.getMessage()]
  assert len(reasons) == 1 and 'kernel_accumulator' in reasons[0], reasons
  _assert_same_training(values[True], values[False])


def test_use_tpu_false_is_not_compiled(tmp_path):
  x, y = make_data(96)
  config = te.RunConfig(model_dir=str(tmp_path), tpu_config=te.TPUConfig(xla=True))
  est = te.TPUEstimator(make_model_fn(tpu=True), config=config, use_tpu=False,
                        train_batch_size=BATCH)
  spy = XlaRunSpy()
  est.train(dataset_input_fn(x, y), max_steps=2, hooks=[spy])
  assert spy.compiled_runs == 0
  assert est.get_variable_value('global_step') == 2


@pytest.mark.parametrize('value', ['yes', 1, 0, 'auto', [True]])
def test_bad_setting_is_refused(value):
  with pytest.raises(TypeError, match=r'`xla` must be None, True or False.*xla=') as info:
    te.TPUConfig(xla=value)
  assert repr(value) in str(info.value)


def test_whole_loop_reads_every_batch_to_the_end_of_the_input(tmp_path):
  """7 batches, loops of 3: the compiled loop runs 3, 3, then the 1 left, as the uncompiled one
  does; no batch of the last, short group is dropped."""
  model_fn = make_model_fn(tpu=True)
  plain, _ = _train(tmp_path / 'plain', model_fn, False, steps=None, rows=112, repeat=False)
  compiled, spy = _train(tmp_path / 'xla', model_fn, True, steps=None, rows=112, repeat=False)
  assert spy.whole_loop_runs == spy.compiled_runs >= 3
  assert compiled.get_variable_value('global_step') == 7
  _assert_same_training(compiled, plain)


def test_whole_loop_stops_at_the_step_whose_loss_is_not_finite(tmp_path):
  x, y = make_data(96)
  x = x.copy()
  x[85, 0] = np.nan  # the 6th batch of 16: the second loop of 3 steps
  est = _estimator(tmp_path, make_model_fn(tpu=True), True)
  spy = XlaRunSpy()
  with pytest.raises(te.NanLossDuringTrainingError, match='global step 6'):
    est.train(dataset_input_fn(x, y, drop_remainder=True), steps=20, hooks=[spy])
  assert spy.whole_loop_runs >= 1
  for name in est.get_variable_names():  # the NaN step's update was never checkpointed
    assert np.all(np.isfinite(est.get_variable_value(name))), name


def _host_call_training(model_dir, use_xla):
  """7 batches in loops of 3 (the last group short), host_call every 2nd step: (estimator,
  spy, {tag: {step: value}} of the host_call's TF2 and TF1 summaries)."""
  x, y = make_data(112)
  model_fn = make_model_fn(tpu=True, host_call=True)
  config = te.RunConfig(model_dir=str(model_dir), tf_random_seed=1, tpu_config=te.TPUConfig(
      iterations_per_loop=3, num_shards=1, xla=use_xla, experimental_host_call_every_n_steps=2))
  est = te.TPUEstimator(model_fn, config=config, use_tpu=True, train_batch_size=BATCH)
  spy = XlaRunSpy()
  est.train(dataset_input_fn(x, y, drop_remainder=True, repeat=False), steps=7, hooks=[spy])
  return est, spy, {tag: scalar_summaries(str(model_dir), tag)
                    for tag in ('host_loss', 'v1_host_loss')}


def test_host_call_runs_on_the_host_for_every_step_of_the_compiled_loop(tmp_path, caplog,
                                                                       monkeypatch):
  """The default compiles a loop with a host_call whole: each step's host_call tensors leave
  the computation and host_call runs once per step after it, at the step model_fn read, every
  n steps, as uncompiled (and as the original's outfeed)."""
  monkeypatch.setattr(xla, 'AUTO_MIN_STEPS', 1)
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    compiled, spy, got = _host_call_training(tmp_path / 'xla', None)
  assert not [r for r in caplog.records if 'XLA' in r.getMessage()]
  assert spy.whole_loop_runs == spy.compiled_runs == 3  # steps 1-3, 4-6, 7
  plain, plain_spy, want = _host_call_training(tmp_path / 'plain', False)
  assert plain_spy.compiled_runs == 0
  for tag in want:
    assert sorted(got[tag]) == sorted(want[tag]) == [0, 2, 4, 6], tag
    np.testing.assert_allclose([got[tag][s] for s in want[tag]], list(want[tag].values()),
                               rtol=1e-5, err_msg=tag)
  _assert_same_training(compiled, plain)


def _string_host_call(features, labels, mode, params):
  spec = make_model_fn(tpu=True)(features, labels, mode, params)
  step = tf.reshape(v1.train.get_global_step(), [1])
  host_fn = lambda step, text: tf.summary.scalar('host_step', step[0], step=step[0])
  return spec._replace(host_call=(host_fn, [step, tf.strings.as_string(step)]))


def test_host_call_of_strings_trains_uncompiled_with_a_warning(tmp_path, caplog, monkeypatch):
  monkeypatch.setattr(xla, 'AUTO_MIN_STEPS', 1)
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    est, spy = _train(tmp_path, _string_host_call, None)
  warnings = [r.getMessage() for r in caplog.records if 'without XLA' in r.getMessage()]
  assert len(warnings) == 1 and 'string' in warnings[0], warnings
  assert spy.compiled_runs == 0
  assert est.get_variable_value('global_step') == 5
  assert sorted(scalar_summaries(str(tmp_path), 'host_step')) == [0, 1, 2, 3, 4]


def test_input_larger_than_a_group_may_hold_compiles_the_step_only(tmp_path, caplog,
                                                                   monkeypatch):
  monkeypatch.setattr(host_input, 'GROUP_BYTES', 1024)
  with caplog.at_level(logging.WARNING, logger='tpu_estimator'):
    _, spy = _train(tmp_path, make_model_fn(tpu=True), True)
  reasons = [r.getMessage() for r in caplog.records if 'not compiled as a whole' in
             r.getMessage()]
  assert len(reasons) == 1 and 'MiB' in reasons[0], reasons
  assert spy.compiled_runs > 0 and spy.whole_loop_runs == 0
