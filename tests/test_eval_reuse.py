"""evaluate()/predict() called again with the same arguments reuse the graph and session of the
previous call (graph_cache.py): same results as a new estimator on the same checkpoint, new
weights seen after more training, a new graph whenever anything that shapes it changed."""
import gc
import glob
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te

v1 = tf.compat.v1


def _estimator(model_dir, shards, model_fn, **config):
  """One device (`shards` None: Estimator) or a TPUEstimator on `shards` CPU shards."""
  if shards is None:
    return te.Estimator(model_fn, model_dir=str(model_dir), params={'batch_size': 16},
                        config=te.EstimatorRunConfig(**config) if config else None)
  return te.TPUEstimator(model_fn, config=h.tpu_config(shards, 4, model_dir=str(model_dir),
                                                       **config),
                         train_batch_size=16, eval_batch_size=16, predict_batch_size=16)


def _fresh_eval(model_dir, shards, input_fn, **kwargs):
  return _estimator(model_dir, shards, h.make_model_fn(tpu=shards is not None)).evaluate(
      input_fn, **kwargs)


def _assert_same(got, expected):
  assert set(got) == set(expected)
  for key in expected:
    np.testing.assert_allclose(got[key], expected[key], rtol=1e-6, err_msg=key)


@pytest.fixture
def data():
  return h.make_data(90)  # 90 rows: a short final batch of 10


@pytest.mark.parametrize('shards', [None, 2])
def test_second_evaluate_reuses_graph_and_equals_a_new_estimator(tmp_path, data, shards):
  model_fn, calls = h.counting(h.make_model_fn(tpu=shards is not None))
  est = _estimator(tmp_path, shards, model_fn)
  est.train(h.dataset_input_fn(*data), steps=4)
  eval_fn = h.dataset_input_fn(*data, repeat=False)
  first = est.evaluate(eval_fn)
  built = len(calls)
  second = est.evaluate(eval_fn)
  third = est.evaluate(eval_fn)
  assert len(calls) == built  # model_fn not called again: the graph was reused
  _assert_same(second, first)  # metrics reset between calls, input restarted
  _assert_same(third, first)
  _assert_same(second, _fresh_eval(tmp_path, shards, eval_fn))

  # More training: the kept graph restores the new checkpoint.
  est.train(h.dataset_input_fn(*data), steps=4)
  built = len(calls)
  after = est.evaluate(eval_fn)
  assert len(calls) == built
  assert after['global_step'] == 8
  assert after['loss'] != first['loss']
  _assert_same(after, _fresh_eval(tmp_path, shards, eval_fn))

  # steps= limits a reused graph as a new one.
  limited = est.evaluate(eval_fn, steps=2)
  _assert_same(est.evaluate(eval_fn, steps=2), limited)
  _assert_same(limited, _fresh_eval(tmp_path, shards, eval_fn, steps=2))


def test_eval_summaries_of_reused_graph_written_per_checkpoint(tmp_path, data):
  est = _estimator(tmp_path, None, h.make_model_fn())
  eval_fn = h.dataset_input_fn(*data, repeat=False)
  losses = {}
  for _ in range(3):
    est.train(h.dataset_input_fn(*data), steps=3)
    result = est.evaluate(eval_fn)
    losses[int(result['global_step'])] = float(result['loss'])
  written = {}
  for path in glob.glob(os.path.join(str(tmp_path), 'eval', 'events.out.tfevents.*')):
    for event in v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == 'loss':
          written[event.step] = value.simple_value
  assert written == pytest.approx(losses)


@pytest.mark.parametrize('change', ['input_fn', 'steps', 'name'])
def test_other_arguments_build_a_new_graph(tmp_path, data, change):
  model_fn, calls = h.counting(h.make_model_fn())
  est = _estimator(tmp_path, None, model_fn)
  est.train(h.dataset_input_fn(*data), steps=2)
  eval_fn = h.dataset_input_fn(*data, repeat=False)
  est.evaluate(eval_fn, steps=3)
  built = len(calls)
  kwargs = {'input_fn': eval_fn, 'steps': 3}
  if change == 'input_fn':  # of another element spec (one of the same is read: below)
    kwargs['input_fn'] = h.dataset_input_fn(data[0][:32], data[1][:32], repeat=False,
                                            drop_remainder=True)
  elif change == 'steps':
    kwargs['steps'] = 2
  else:
    kwargs['name'] = 'other'
  result = est.evaluate(**kwargs)
  assert len(calls) == built + 1
  _assert_same(result, _fresh_eval(tmp_path, None, **kwargs))


@pytest.mark.parametrize('shards', [None, 2])
def test_hooks_passed_to_the_call_run_in_the_kept_graph(tmp_path, data, shards):
  """The hooks of train_and_evaluate's EvalSpec, or any passed to evaluate()/predict(), see
  what a new graph's session shows them; the graph is reused."""
  model_fn, calls = h.counting(h.make_model_fn(tpu=shards is not None))
  est = _estimator(tmp_path, shards, model_fn)
  est.train(h.dataset_input_fn(*data), steps=2)
  eval_fn = h.dataset_input_fn(*data, repeat=False)
  first = est.evaluate(eval_fn)
  predicted = list(est.predict(eval_fn))
  built = len(calls)
  fresh_hooks = [h.EventsHook(), h.EventsHook()]
  fresh = _estimator(tmp_path, shards, h.make_model_fn(tpu=shards is not None))
  fresh.evaluate(eval_fn, hooks=[fresh_hooks[0]])
  list(fresh.predict(eval_fn, hooks=[fresh_hooks[1]]))
  for _ in range(2):
    hooks = [h.EventsHook(), h.EventsHook()]
    counter = v1.train.StepCounterHook(every_n_steps=1, output_dir=str(tmp_path / 'counter'))
    _assert_same(est.evaluate(eval_fn, hooks=[hooks[0], counter]), first)
    again = list(est.predict(eval_fn, hooks=[hooks[1]]))
    assert len(calls) == built
    assert [hook.events for hook in hooks] == [hook.events for hook in fresh_hooks]
    assert hooks[0].events[:2] == ['begin', 'created'] and hooks[0].events[-1] == 'end'
    for got, expected in zip(again, predicted):
      np.testing.assert_allclose(got['probabilities'], expected['probabilities'], rtol=1e-6)


def test_a_hook_building_ops_gets_a_new_graph_which_is_not_kept(tmp_path, data):
  model_fn, calls = h.counting(h.make_model_fn())
  est = _estimator(tmp_path, None, model_fn)
  est.train(h.dataset_input_fn(*data), steps=2)
  eval_fn = h.dataset_input_fn(*data, repeat=False)
  first = est.evaluate(eval_fn)
  built = len(calls)
  hook = h.BuildsOpsHook()
  _assert_same(est.evaluate(eval_fn, hooks=[hook]), first)  # the kept graph is finalized
  assert len(calls) == built + 1 and hook.fetched and set(hook.fetched) == {1.0}
  # That graph holds the hook's op, which a new graph would not: it was not kept.
  _assert_same(est.evaluate(eval_fn), first)
  assert len(calls) == built + 2
  _assert_same(est.evaluate(eval_fn, hooks=[h.EventsHook()]), first)
  assert len(calls) == built + 2


def _copied_input_fn(x, y, **kwargs):
  """An input_fn over copies of (x, y): a new input as far as the kept graph can tell."""
  return h.dataset_input_fn(x.copy(), y.copy(), repeat=False, **kwargs)


@pytest.mark.parametrize('shards,xla', [(None, None), (2, None), (1, True)])
def test_a_new_input_of_the_same_structure_is_read_by_the_kept_graph(tmp_path, data, shards,
                                                                       xla):
  """Another input_fn over other data of the same element spec: the kept graph reads it (its
  dataset fed serialized), with a new estimator's results, and again when the same input_fn
  is called again (the dataset made by the call before reused); model_fn is not called
  again."""
  tpu = shards is not None
  config = {'xla': xla} if xla else {}
  model_fn, calls = h.counting(h.make_model_fn(tpu=tpu))
  est = _estimator(tmp_path, shards, model_fn, **config)
  est.train(h.dataset_input_fn(*data), steps=2)
  fresh = _estimator(tmp_path, shards, h.make_model_fn(tpu=tpu), reuse_eval_graphs=False,
                     **config)
  x, y = data
  for part in [(x[:48], y[:48]), (x[48:], y[48:]), (x[:48], y[:48]), (x[5:90], y[5:90])]:
    expected = fresh.evaluate(h.dataset_input_fn(*part, repeat=False))
    input_fn = _copied_input_fn(*part)
    _assert_same(est.evaluate(input_fn), expected)
    _assert_same(est.evaluate(input_fn), expected)
    got = list(est.predict(_copied_input_fn(*part)))
    expected = list(fresh.predict(h.dataset_input_fn(*part, repeat=False)))
    assert len(got) == len(expected) == len(part[0])
    np.testing.assert_allclose([p['probabilities'] for p in got],
                               [p['probabilities'] for p in expected], rtol=1e-6)
  per_graph = shards or 1  # model_fn is called once per replica
  assert calls.count(te.ModeKeys.EVAL) == calls.count(te.ModeKeys.PREDICT) == per_graph


def test_evaluate_again_reads_a_cached_inputs_source_again(tmp_path, data):
  """A kept graph's later calls start over the dataset its first call made, unless it holds
  state a call would see: a `cache()` read its source once, where the original's new graph
  read it at every call (here a source that changed between calls)."""
  model_fn, calls = h.counting(h.make_model_fn())
  est = _estimator(tmp_path, None, model_fn)
  est.train(h.dataset_input_fn(*data), steps=4)
  x, y = data
  source = {'rows': 48}

  def rows():
    for i in range(source['rows']):
      yield {'x': x[i]}, y[i]

  def input_fn(params):
    spec = ({'x': tf.TensorSpec([h.NUM_FEATURES], tf.float32)}, tf.TensorSpec([], tf.int64))
    ds = tf.data.Dataset.from_generator(rows, output_signature=spec).cache()
    return ds.batch(params['batch_size'])

  fresh = _estimator(tmp_path, None, h.make_model_fn(), reuse_eval_graphs=False)
  for count in (48, 48, 90, 90, 30):
    source['rows'] = count
    expected = fresh.evaluate(h.dataset_input_fn(x[:count], y[:count], repeat=False))
    _assert_same(est.evaluate(input_fn), expected)
  assert calls.count(te.ModeKeys.EVAL) == 1  # one graph, kept


def test_predict_again_reads_a_file_its_model_reads(tmp_path, data):
  """A model_fn reading a file (`tf.io.read_file`): a kept graph's next call reads it again,
  as the original's new graph did (a session would fold the read into its first value)."""
  offset = tmp_path / 'offset.txt'

  def model_fn(features, labels, mode, params):
    spec = h.make_model_fn()(features, labels, mode, params)
    if mode != te.ModeKeys.PREDICT:
      return spec
    shift = tf.strings.to_number(tf.io.read_file(str(offset)))
    return te.EstimatorSpec(mode, predictions={'shifted': spec.predictions['classes'] * 0 +
                                               tf.cast(shift, tf.int64)})

  counted, calls = h.counting(model_fn)
  est = _estimator(tmp_path / 'model', None, counted)
  est.train(h.dataset_input_fn(*data), steps=2)
  predict_fn = h.dataset_input_fn(data[0][:8], data[1][:8], repeat=False)
  for value in (3, 3, 7, 11):
    offset.write_text(str(value))
    assert [p['shifted'] for p in est.predict(predict_fn)] == [value] * 8
  assert calls.count(te.ModeKeys.PREDICT) == 1  # one graph, kept


def test_evaluate_again_lists_its_inputs_files_again(tmp_path, data):
  """`Dataset.list_files` lists its files when the dataset is made: a file added between two
  calls of a kept graph is read by the next call, as by the original's new graph (a session
  folds the listing into a constant at its first run unless told not to), also by another
  input_fn of the same structure."""
  model_fn, calls = h.counting(h.make_model_fn())
  est = _estimator(tmp_path / 'model', None, model_fn)
  est.train(h.dataset_input_fn(*data), steps=4)
  x, y = data
  rows = tmp_path / 'rows'
  rows.mkdir()

  def listing(pattern):
    def input_fn(params):
      files = tf.data.Dataset.list_files(str(rows / pattern), shuffle=False)
      return tf.data.TextLineDataset(files).map(h.parse_csv_row).batch(params['batch_size'])
    return input_fn

  fresh = _estimator(tmp_path / 'model', None, h.make_model_fn(), reuse_eval_graphs=False)
  input_fn, other = listing('*.csv'), listing('?.csv')
  for name, lo, hi, calls_of in (('a.csv', 0, 20, input_fn), (None, 0, 20, input_fn),
                                 ('b.csv', 20, 40, input_fn), ('c.csv', 40, 60, other),
                                 ('d.csv', 60, 90, other)):
    if name:
      h.write_csv_rows(rows / name, x, y, lo, hi)
    expected = fresh.evaluate(h.dataset_input_fn(x[:hi], y[:hi], repeat=False))
    _assert_same(est.evaluate(calls_of), expected)
  assert calls.count(te.ModeKeys.EVAL) == 2  # the other input_fn's graph: not read serialized


def _shuffled_copy(x, y):
  def input_fn(params):
    ds = tf.data.Dataset.from_tensor_slices(({'x': x.copy()}, y.copy())).shuffle(8, seed=3)
    return ds.batch(params['batch_size'])
  return input_fn


def _python_mapped(x, y):
  def input_fn(params):
    ds = tf.data.Dataset.from_tensor_slices(({'x': x}, y)).batch(params['batch_size'])
    return ds.map(lambda f, label: ({'x': tf.py_function(lambda t: t, [f['x']], tf.float32)},
                                    label))
  return input_fn


def _noting_in_a_collection(x, y):
  def input_fn(params):
    v1.add_to_collection('input_notes', tf.constant(len(x)))  # model_fn could read it
    return h.dataset_input_fn(x.copy(), y.copy(), repeat=False)(params)
  return input_fn


@pytest.mark.parametrize('other', ['static_batch', 'shuffled', 'python_function', 'collection'])
def test_a_new_input_the_kept_graph_cannot_read_gets_its_own_graph(tmp_path, data, other):
  """Another element spec (a static batch dimension), a dataset whose random state a kept
  graph would carry on, one that cannot be serialized (a Python function), or an input_fn
  leaving something else in the graph: built anew."""
  model_fn, calls = h.counting(h.make_model_fn())
  est = _estimator(tmp_path, None, model_fn)
  est.train(h.dataset_input_fn(*data), steps=2)
  eval_fn = h.dataset_input_fn(*data, repeat=False)
  first = est.evaluate(eval_fn)
  x, y = data
  other_fn = {'static_batch': _copied_input_fn(x[:80], y[:80], batch_size=16,
                                               drop_remainder=True),
              'shuffled': _shuffled_copy(x, y), 'python_function': _python_mapped(x, y),
              'collection': _noting_in_a_collection(x, y)}[other]
  built = calls.count(te.ModeKeys.EVAL)
  result = est.evaluate(other_fn)
  assert calls.count(te.ModeKeys.EVAL) == built + 1
  expected = _estimator(tmp_path, None, h.make_model_fn()).evaluate(other_fn)
  _assert_same(result, expected)
  _assert_same(est.evaluate(eval_fn), first)


def _sized_model_fn(hidden):
  def model_fn(features, labels, mode, params):
    del params
    init = tf.constant_initializer(0.1)
    net = tf.matmul(features['x'], v1.get_variable('hidden/kernel', [h.NUM_FEATURES, hidden],
                                                   initializer=init))
    logits = tf.matmul(net, v1.get_variable('logits/kernel', [hidden, h.NUM_CLASSES],
                                            initializer=init))
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    train_op = v1.train.AdamOptimizer(0.01).minimize(loss, v1.train.get_global_step()) \
        if mode == te.ModeKeys.TRAIN else None
    return te.EstimatorSpec(mode, loss=loss, train_op=train_op)
  return model_fn


def test_checkpoint_of_another_model_builds_a_new_graph(tmp_path, data):
  eval_fn = h.dataset_input_fn(*data, repeat=False)
  est = te.Estimator(_sized_model_fn(8), model_dir=str(tmp_path / 'a'),
                     params={'batch_size': 16})
  est.train(h.dataset_input_fn(*data), steps=2)
  est.evaluate(eval_fn)
  # Another model (other shapes) writes the newest checkpoint: restoring it is an error
  # naming the variable, as for a new graph, not a silent restore into the kept one.
  te.Estimator(_sized_model_fn(5), model_dir=str(tmp_path / 'b'),
               params={'batch_size': 16}).train(h.dataset_input_fn(*data), steps=3)
  with pytest.raises(ValueError, match='hidden/kernel.*8.*5'):
    est.evaluate(eval_fn, checkpoint_path=str(tmp_path / 'b' / 'model.ckpt-3'))
  # The kept graph was dropped after the failure, and the estimator still evaluates.
  _assert_same(est.evaluate(eval_fn), te.Estimator(
      _sized_model_fn(8), model_dir=str(tmp_path / 'a'),
      params={'batch_size': 16}).evaluate(eval_fn))


def test_checkpoint_with_other_variables_builds_a_new_graph(tmp_path, data):
  model_fn, calls = h.counting(h.make_model_fn())
  _estimator(tmp_path, None, h.make_model_fn(optimizer='adam')).train(
      h.dataset_input_fn(*data), steps=2)
  est = _estimator(tmp_path, None, model_fn)
  eval_fn = h.dataset_input_fn(*data, repeat=False)
  est.evaluate(eval_fn)
  built = len(calls)
  # Training on with SGD: the new checkpoint has no Adam slot variables.
  est.train(h.dataset_input_fn(*data), steps=2)
  built = len(calls)
  result = est.evaluate(eval_fn)
  assert len(calls) == built + 1
  _assert_same(result, _fresh_eval(tmp_path, None, eval_fn))


@pytest.mark.parametrize('shards', [None, 2])
def test_predict_reuses_graph_with_the_same_rows(tmp_path, data, shards):
  model_fn, calls = h.counting(h.make_model_fn(tpu=shards is not None))
  est = _estimator(tmp_path, shards, model_fn)
  est.train(h.dataset_input_fn(*data), steps=3)

  def predict_fn(params):
    return tf.data.Dataset.from_tensor_slices({'x': data[0]}).batch(params['batch_size'])

  first = [p['probabilities'] for p in est.predict(predict_fn)]
  built = len(calls)
  # A generator left half read, then whole calls: each starts at the first row.
  partial = est.predict(predict_fn)
  assert np.allclose(next(partial)['probabilities'], first[0])
  partial.close()
  second = [p['probabilities'] for p in est.predict(predict_fn)]
  assert len(calls) == built
  assert len(second) == len(first) == 90
  np.testing.assert_allclose(second, first, rtol=1e-6)
  est.train(h.dataset_input_fn(*data), steps=3)
  built = len(calls)
  third = [p['probabilities'] for p in est.predict(predict_fn)]
  assert len(calls) == built
  fresh = _estimator(tmp_path, shards, h.make_model_fn(tpu=shards is not None))
  np.testing.assert_allclose(third, [p['probabilities'] for p in fresh.predict(predict_fn)],
                             rtol=1e-6)
  assert not np.allclose(third, first)
  keys = list(est.predict(predict_fn, predict_keys=['classes']))
  assert len(calls) > built and set(keys[0]) == {'classes'}  # other fetches: a new graph


@pytest.mark.parametrize('shards', [None, 2])
def test_inference_loops_on_cpu_run_without_graph_rewrites_unless_configured(
    tmp_path, data, shards, monkeypatch):
  """An evaluation's or prediction's device loop on CPU (new graph or kept) runs without
  Grappler's rewrites: at most ~5% slower without them, and each new graph's first call
  0.04-0.07 s shorter.  Training and one batch per run (the original's graph, where the
  rewrites paid within ~1000 batches) keep them, a `session_config` given is used as given,
  and the results are those of a session with the rewrites."""
  from tensorflow.python.client import session as session_lib  # pylint: disable=import-outside-toplevel
  rewrites_off = []
  init = session_lib.Session.__init__

  def recording(self, target='', graph=None, config=None):
    rewrites_off.append(config is not None and bool(config.graph_options.rewrite_options
                                                    .disable_meta_optimizer))
    init(self, target, graph, config)

  monkeypatch.setattr(session_lib.Session, '__init__', recording)
  est = _estimator(tmp_path, shards, h.make_model_fn(tpu=shards is not None))
  est.train(h.dataset_input_fn(*data), steps=3)
  assert rewrites_off and not any(rewrites_off)
  del rewrites_off[:]
  eval_fn = h.dataset_input_fn(*data, repeat=False)
  results = [est.evaluate(eval_fn), est.evaluate(eval_fn)]  # a new graph, then the kept one
  predictions = [p['probabilities'] for p in est.predict(eval_fn)]
  assert rewrites_off and set(rewrites_off) == {shards is not None}
  del rewrites_off[:]
  configured = _estimator(tmp_path, shards, h.make_model_fn(tpu=shards is not None),
                          session_config=v1.ConfigProto(allow_soft_placement=True))
  _assert_same(results[0], configured.evaluate(eval_fn))
  _assert_same(results[1], results[0])
  np.testing.assert_allclose(
      predictions, [p['probabilities'] for p in configured.predict(eval_fn)], rtol=1e-6)
  assert rewrites_off and not any(rewrites_off)


def test_switch_turns_reuse_off(tmp_path, data):
  model_fn, calls = h.counting(h.make_model_fn())
  est = _estimator(tmp_path, None, model_fn, reuse_eval_graphs=False)
  est.train(h.dataset_input_fn(*data), steps=2)
  eval_fn = h.dataset_input_fn(*data, repeat=False)
  est.evaluate(eval_fn)
  est.evaluate(eval_fn)
  list(est.predict(eval_fn))
  list(est.predict(eval_fn))
  assert calls.count(te.ModeKeys.EVAL) == 2 and calls.count(te.ModeKeys.PREDICT) == 2
  with pytest.raises(TypeError, match='reuse_eval_graphs.*Received: reuse_eval_graphs=1'):
    te.EstimatorRunConfig(reuse_eval_graphs=1)


def test_stateful_input_or_spec_hooks_build_a_new_graph(tmp_path, data):
  """A shuffled input (its random state would carry over) and model_fn hooks rebuild."""
  inner = h.make_model_fn()
  hook_model_fn, hook_calls = h.counting(
      lambda f, l, mode, params: inner(f, l, mode, params)._replace(
          evaluation_hooks=[v1.train.StopAtStepHook(last_step=10 ** 6)])
      if mode == te.ModeKeys.EVAL else inner(f, l, mode, params))
  est = _estimator(tmp_path, None, hook_model_fn)
  est.train(h.dataset_input_fn(*data), steps=2)
  eval_fn = h.dataset_input_fn(*data, repeat=False)
  est.evaluate(eval_fn)
  est.evaluate(eval_fn)
  assert hook_calls.count(te.ModeKeys.EVAL) == 2

  def shuffled(params):
    return tf.data.Dataset.from_tensor_slices(({'x': data[0]}, data[1])).shuffle(
        90, seed=1).batch(params['batch_size'])

  model_fn, calls = h.counting(h.make_model_fn())
  est = _estimator(tmp_path, None, model_fn, tf_random_seed=3)
  first = est.evaluate(shuffled, steps=2)
  second = est.evaluate(shuffled, steps=2)
  assert calls.count(te.ModeKeys.EVAL) == 2
  _assert_same(second, first)  # the same shuffle as a new graph's


def test_kept_session_closed_with_the_estimator(tmp_path, data):
  est = _estimator(tmp_path, None, h.make_model_fn())
  est.train(h.dataset_input_fn(*data), steps=2)
  est.evaluate(h.dataset_input_fn(*data, repeat=False))
  # pylint: disable=protected-access
  sessions = [e.session for e in est._graph_cache._entries.values()]
  assert len(sessions) == 2  # the training call's and the evaluation's
  assert not any(session._closed for session in sessions)
  del est
  gc.collect()
  assert all(session._closed for session in sessions)


def _generator_input_fn(x, y, events, teardown_seconds):
  """An input_fn over a Python generator that logs when it starts and when it is closed (the
  iterator reading it torn down), taking `teardown_seconds` to close."""

  def batches():
    events.append('start')
    try:
      for start in range(0, len(x), 16):
        yield {'x': x[start:start + 16]}, y[start:start + 16]
    finally:
      time.sleep(teardown_seconds)
      events.append('closed')

  def input_fn(params):
    del params
    return tf.data.Dataset.from_generator(batches, output_signature=(
        {'x': tf.TensorSpec([None, x.shape[1]], tf.float32)}, tf.TensorSpec([None], tf.int64)))

  return input_fn


def test_a_kept_graph_reads_its_input_while_the_previous_one_is_torn_down(tmp_path, data):
  """Restarting the input of a kept graph does not wait for the previous call's input to be
  torn down (iterators.py: tf.data's autotuning can make that teardown wait for up to a
  minute): here the previous generator takes seconds to close, and the next call has read its
  own input (with the same result) before it has."""
  events = []
  est = _estimator(tmp_path, None, h.make_model_fn())
  est.train(h.dataset_input_fn(*data), steps=2)
  eval_fn = _generator_input_fn(*data, events, teardown_seconds=3.0)
  first = est.evaluate(eval_fn, steps=2)  # the generator stays open: 2 of 6 batches read
  second = est.evaluate(eval_fn, steps=2)
  assert events[:2] == ['start', 'start']
  _assert_same(second, first)
  deadline = time.time() + 30
  while events.count('closed') < 1 and time.time() < deadline:
    time.sleep(0.1)
  assert 'closed' in events  # the first call's input was released, in the background


def test_a_graph_built_for_one_call_returns_before_its_input_is_torn_down(tmp_path, data):
  """An evaluation's session not kept for later calls (here: reuse turned off) is closed on
  a background thread (iterators.ClosedInBackground): closing tears its input down, which can
  wait out tf.data's autotuning period (0.15 s after a long evaluation).  The call returns its
  results first; the input is still torn down."""
  events = []
  est = _estimator(tmp_path, None, h.make_model_fn(), reuse_eval_graphs=False)
  est.train(h.dataset_input_fn(*data), steps=2)
  eval_fn = _generator_input_fn(*data, events, teardown_seconds=2.0)
  result = est.evaluate(eval_fn, steps=2)
  assert events == ['start']  # the generator (2 of 6 batches read) is still being closed
  _assert_same(result, est.evaluate(h.dataset_input_fn(*data, repeat=False), steps=2))
  deadline = time.time() + 30
  while 'closed' not in events and time.time() < deadline:
    time.sleep(0.1)
  assert events == ['start', 'closed']


def test_a_prediction_left_unread_lets_the_interpreter_exit(tmp_path):
  """A prediction not read to the end leaves its session to `__del__`, which closes it in
  place: at the interpreter's exit no thread can start, and one started then hung the exit."""
  code = '\n'.join([
      'import sys',
      'sys.path.insert(0, %r)' % os.path.dirname(os.path.abspath(__file__)),
      'import helpers as h, tpu_estimator as te',
      'est = te.TPUEstimator(h.make_model_fn(tpu=True), config=h.tpu_config(1, 4, '
      'model_dir=%r, reuse_eval_graphs=False), train_batch_size=16, eval_batch_size=16, '
      'predict_batch_size=16)' % str(tmp_path),
      'est.train(h.dataset_input_fn(*h.make_data(64)), steps=2)',
      'predictions = est.predict(h.dataset_input_fn(*h.make_data(64), repeat=False))',
      'print(sorted(next(predictions)))'])
  proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                        timeout=240, check=False, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.strip()


@pytest.mark.parametrize('mode', ['evaluate', 'predict'])
def test_calls_after_new_training_with_a_replica_synchronised_variable(tmp_path, mode):
  """Batch norm's moving statistics on 2 shards are ON_READ variables: a call into the graph
  kept from the previous one (a new checkpoint after more training, as train_and_evaluate or
  tensorflow/tpu's Mask R-CNN and UNet 3D loops do) checks the checkpoint's shapes without
  building a cross-replica read in that finalized graph (it raised RuntimeError)."""
  x = np.random.RandomState(0).rand(16, 4).astype(np.float32)
  y = x.sum(axis=1, keepdims=True)

  def input_fn(params):
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat(2).batch(params['batch_size'],
                                                                       drop_remainder=True)

  def model_fn(features, labels, mode, params):
    del params
    stat = v1.get_variable('moving_mean', [4], initializer=v1.zeros_initializer(),
                           trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                           aggregation=tf.VariableAggregation.MEAN)
    out = tf.matmul(features - stat, v1.get_variable('w', [4, 1]))
    if mode == te.ModeKeys.PREDICT:
      return te.TPUEstimatorSpec(mode, predictions={'y': out})
    loss = v1.losses.mean_squared_error(labels, out)
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, v1.train.get_or_create_global_step())
    return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                               eval_metrics=(lambda y: {'m': v1.metrics.mean(y)}, [labels]))

  est = te.TPUEstimator(model_fn, config=h.tpu_config(2, 1, model_dir=str(tmp_path)),
                        train_batch_size=4, eval_batch_size=4, predict_batch_size=4)
  results = []
  for _ in range(2):
    est.train(input_fn, steps=1)
    if mode == 'evaluate':
      results.append(est.evaluate(input_fn, steps=2))
    else:
      results.append([p['y'][0] for p in est.predict(lambda params: input_fn(params).map(
          lambda f, l: f))])
  if mode == 'evaluate':
    assert [r['global_step'] for r in results] == [1, 2]
    assert results[0]['loss'] != results[1]['loss']  # the new weights were read
  else:
    assert len(results[1]) == 32 and results[0] != results[1]
