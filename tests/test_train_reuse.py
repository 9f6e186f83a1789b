"""train() again on the same estimator and input_fn goes on in the graph and session the
previous call kept, with the results of a new graph per call (RunConfig(reuse_train_graphs=
False), the original's way): same weights, same global step, the input restarted.  Whatever
would make the kept graph differ from a new one builds a new one."""
import glob
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te
from helpers import dataset_input_fn, make_data, make_model_fn, scalar_summaries

v1 = tf.compat.v1
BATCH = 16


class _Counted:
  """model_fn that counts its calls: one per graph built."""

  def __init__(self, model_fn):
    self.model_fn = model_fn
    self.calls = 0

  def __call__(self, features, labels, mode, params):
    self.calls += 1
    return self.model_fn(features, labels, mode, params)


def _estimator(model_dir, model_fn, reuse=True, seed=None, xla=False):
  config = te.RunConfig(model_dir=str(model_dir), tf_random_seed=seed,
                        reuse_train_graphs=reuse,
                        tpu_config=te.TPUConfig(iterations_per_loop=3, xla=xla))
  return te.TPUEstimator(model_fn, config=config, use_tpu=True, train_batch_size=BATCH,
                         eval_batch_size=BATCH)


def _weights(est):
  return {name: est.get_variable_value(name) for name in est.get_variable_names()}


def _assert_same(got, want):
  assert sorted(got) == sorted(want)
  for name in want:
    np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-7, err_msg=name)


def _counted_estimator(model_dir):
  """(input_fn, counted model_fn, estimator) of the plain SGD model on fixed data."""
  x, y = make_data(96)
  model_fn = _Counted(make_model_fn(tpu=True))
  return dataset_input_fn(x, y, drop_remainder=True), model_fn, _estimator(model_dir, model_fn)


def _shuffled_input_fn(x, y, seed=None):
  def input_fn(params):
    ds = tf.data.Dataset.from_tensor_slices(({'x': x}, y)).shuffle(64, seed=seed).repeat()
    return ds.batch(params['batch_size'], drop_remainder=True)
  return input_fn


@pytest.mark.parametrize('xla,host_call', [(False, False), (True, False), (True, True)])
def test_repeated_train_calls_reuse_the_graph_with_the_same_results(tmp_path, xla, host_call):
  """A host_call's summaries go on from the kept graph, each step written once."""
  x, y = make_data(96)
  input_fn = dataset_input_fn(x, y, drop_remainder=True)
  results = {}
  for reuse in (True, False):
    model_fn = _Counted(make_model_fn(tpu=True, optimizer='adam', host_call=host_call))
    est = _estimator(tmp_path / str(reuse), model_fn, reuse, xla=xla)
    for _ in range(3):
      est.train(input_fn, steps=4)  # loops of 3 and 1: the clipped loop is fed per call
    results[reuse] = (_weights(est), model_fn.calls)
    if host_call:
      summaries = scalar_summaries(str(tmp_path / str(reuse)), 'host_loss')
      assert sorted(summaries) == list(range(12)), sorted(summaries)
  assert results[True][1] == 1 and results[False][1] == 3
  assert results[True][0]['global_step'] == 12
  _assert_same(results[True][0], results[False][0])
  # Evaluation reads what the reused training saved.
  assert est.evaluate(input_fn, steps=2)['global_step'] == 12


def _graph_events(model_dir):
  return sum(event.WhichOneof('what') == 'graph_def'
             for path in glob.glob(os.path.join(str(model_dir), 'events.out.tfevents.*'))
             for event in v1.train.summary_iterator(path))


def test_a_kept_graph_is_written_to_the_model_dir_once(tmp_path):
  """graph.pbtxt and the graph event are written by the call that built the graph (a new graph
  per call writes them per call, as the original did); a deleted graph.pbtxt comes back."""
  input_fn, model_fn, est = _counted_estimator(tmp_path / 'kept')
  x, y = make_data(96)
  rebuilt = _estimator(tmp_path / 'rebuilt', make_model_fn(tpu=True), reuse=False)
  counts = {'kept': [], 'rebuilt': []}
  for _ in range(3):
    est.train(input_fn, steps=2)
    rebuilt.train(dataset_input_fn(x, y, drop_remainder=True), steps=2)
    for name in counts:
      counts[name].append(_graph_events(tmp_path / name))
  assert model_fn.calls == 1 and counts['kept'][2] == counts['kept'][0] > 0, counts
  assert counts['rebuilt'][2] == counts['rebuilt'][0] + 2, counts
  os.remove(tmp_path / 'kept' / 'graph.pbtxt')
  est.train(input_fn, steps=2)
  assert os.path.exists(tmp_path / 'kept' / 'graph.pbtxt')


def test_a_checkpoint_written_by_someone_else_is_restored_into_the_kept_graph(tmp_path):
  x, y = make_data(96)
  input_fn = dataset_input_fn(x, y, drop_remainder=True)
  model_fn = _Counted(make_model_fn(tpu=True, optimizer='adam'))
  est = _estimator(tmp_path / 'a', model_fn)
  est.train(input_fn, steps=4)
  other = _estimator(tmp_path / 'a', make_model_fn(tpu=True, optimizer='adam'))
  other.train(dataset_input_fn(x[::-1].copy(), y[::-1].copy(), drop_remainder=True), steps=2)
  est.train(input_fn, steps=4)  # goes on from the other estimator's step 6
  assert model_fn.calls == 1
  reference = _estimator(tmp_path / 'b', make_model_fn(tpu=True, optimizer='adam'),
                         reuse=False)
  reference.train(input_fn, steps=4)
  _estimator(tmp_path / 'b', make_model_fn(tpu=True, optimizer='adam')).train(
      dataset_input_fn(x[::-1].copy(), y[::-1].copy(), drop_remainder=True), steps=2)
  reference.train(input_fn, steps=4)
  assert est.get_variable_value('global_step') == 10
  _assert_same(_weights(est), _weights(reference))


def test_a_wiped_model_dir_starts_again_from_scratch(tmp_path):
  input_fn, model_fn, est = _counted_estimator(tmp_path)
  est.train(input_fn, steps=4)
  shutil.rmtree(str(tmp_path))
  est.train(input_fn, steps=4)
  assert model_fn.calls == 2  # a new graph: it initializes, as the original did
  assert est.get_variable_value('global_step') == 4


def test_unseeded_shuffle_keeps_the_graph_a_seeded_one_does_not(tmp_path):
  x, y = make_data(96)
  unseeded = _Counted(make_model_fn(tpu=True))
  est = _estimator(tmp_path / 'unseeded', unseeded)
  input_fn = _shuffled_input_fn(x, y)
  for _ in range(2):
    est.train(input_fn, steps=3)
  assert unseeded.calls == 1  # a new graph would shuffle at random too
  assert est.get_variable_value('global_step') == 6
  # With a seed, every call of the original shuffles the same way: a new graph per call.
  weights = []
  for reuse in (True, False):
    seeded = _Counted(make_model_fn(tpu=True))
    est = _estimator(tmp_path / ('seeded%s' % reuse), seeded, reuse=reuse, seed=3)
    for _ in range(2):
      est.train(input_fn, steps=3)
    assert seeded.calls == 2
    weights.append(_weights(est))
  _assert_same(weights[0], weights[1])
  op_seeded = _Counted(make_model_fn(tpu=True))
  est = _estimator(tmp_path / 'op_seeded', op_seeded)
  input_fn = _shuffled_input_fn(x, y, seed=7)
  for _ in range(2):
    est.train(input_fn, steps=3)
  assert op_seeded.calls == 2


def test_a_hook_building_ops_gets_a_new_graph_which_is_not_kept(tmp_path):
  input_fn, model_fn, est = _counted_estimator(tmp_path)
  est.train(input_fn, steps=3)
  hook = h.BuildsOpsHook()
  est.train(input_fn, steps=3, hooks=[hook])  # the kept graph is finalized: a new one
  assert model_fn.calls == 2 and hook.fetched and set(hook.fetched) == {1.0}
  assert est.get_variable_value('global_step') == 6
  # That graph holds the hook's op, which a new graph would not: it was not kept.
  est.train(input_fn, steps=3, hooks=[v1.train.StopAtStepHook(num_steps=100)])  # builds none
  assert model_fn.calls == 3 and est.get_variable_value('global_step') == 9
  est.train(input_fn, steps=3, hooks=[v1.train.StopAtStepHook(num_steps=100)])
  assert model_fn.calls == 3 and est.get_variable_value('global_step') == 12


@pytest.mark.parametrize('xla', [False, True])
def test_training_on_other_data_of_the_same_structure_goes_on_in_the_kept_graph(tmp_path, xla):
  """A new input_fn per call over other data (a day's files, a curriculum's stage): the kept
  graph reads it; the weights equal those of new graphs for every call."""
  x, y = make_data(96)
  stages = [(x[:48], y[:48]), (x[48:], y[48:]), (x[:48], y[:48])]
  weights = {}
  for reuse in (True, False):
    model_fn = _Counted(make_model_fn(tpu=True))
    est = _estimator(tmp_path / str(reuse), model_fn, reuse=reuse, xla=xla)
    for stage in stages:
      est.train(dataset_input_fn(stage[0].copy(), stage[1].copy(), drop_remainder=True),
                steps=3)
    weights[reuse] = _weights(est)
    assert model_fn.calls == (1 if reuse else len(stages))
  _assert_same(weights[True], weights[False])
  assert weights[True]['global_step'] == 9


def test_a_kept_training_graph_lists_its_inputs_files_again(tmp_path):
  """An input listing its files (`Dataset.list_files`) reads a file added between train()
  calls in the kept graph too: the session would otherwise fold the listing into the value
  of its first run. Same weights as a new graph per call."""
  x, y = make_data(96)
  rows = tmp_path / 'rows'
  rows.mkdir()

  def input_fn(params):
    files = tf.data.Dataset.list_files(str(rows / '*.csv'), shuffle=False)
    ds = tf.data.TextLineDataset(files).map(h.parse_csv_row).repeat()
    return ds.batch(params['batch_size'], drop_remainder=True)

  weights = {}
  for reuse in (True, False):
    for name in os.listdir(rows):
      os.remove(rows / name)
    model_fn = _Counted(make_model_fn(tpu=True))
    est = _estimator(tmp_path / str(reuse), model_fn, reuse=reuse)
    h.write_csv_rows(rows / 'b.csv', x, y, 0, 48)
    est.train(input_fn, steps=3)
    est.train(input_fn, steps=3)
    h.write_csv_rows(rows / 'a.csv', x, y, 48, 96)  # listed first from now on
    est.train(input_fn, steps=3)
    weights[reuse] = _weights(est)
    if reuse:
      assert model_fn.calls < 3  # the last call went on in a kept graph
  _assert_same(weights[True], weights[False])


def test_training_on_a_seeded_shuffle_gets_a_new_graph(tmp_path):
  input_fn, model_fn, est = _counted_estimator(tmp_path)
  est.train(input_fn, steps=3)
  x, y = make_data(96)
  est.train(_shuffled_input_fn(x.copy(), y.copy(), seed=5), steps=3)
  assert model_fn.calls == 2


def test_saving_listeners_get_a_new_graph(tmp_path):
  input_fn, model_fn, est = _counted_estimator(tmp_path)
  listener = v1.train.CheckpointSaverListener()
  for _ in range(2):
    est.train(input_fn, steps=3, saving_listeners=[listener])
  assert model_fn.calls == 2


@pytest.mark.parametrize('value', ['yes', 1, None])
def test_bad_setting_is_refused(value):
  with pytest.raises(TypeError, match='reuse_train_graphs'):
    te.RunConfig(reuse_train_graphs=value)


class _StartStep(v1.train.SessionRunHook):
  """Records the global step each call starts from."""

  def __init__(self):
    self.starts = []

  def after_create_session(self, session, coord):
    del coord
    self.starts.append(int(session.run(v1.train.get_global_step())))


def test_with_saving_off_each_call_starts_from_the_last_checkpoint(tmp_path):
  """Nothing saved the steps of the first call: the second starts from the checkpoint, as a
  new graph restoring it does, not from where the kept session was."""
  x, y = make_data(96)
  input_fn = dataset_input_fn(x, y, drop_remainder=True)
  _estimator(tmp_path, make_model_fn(tpu=True)).train(input_fn, steps=4)
  model_fn = _Counted(make_model_fn(tpu=True))
  # (xla=False: with the default the second call would build the compiled loop once.)
  config = te.RunConfig(model_dir=str(tmp_path), save_checkpoints_steps=None,
                        save_checkpoints_secs=None,
                        tpu_config=te.TPUConfig(iterations_per_loop=3, xla=False))
  est = te.TPUEstimator(model_fn, config=config, use_tpu=True, train_batch_size=BATCH)
  start = _StartStep()
  for _ in range(2):
    est.train(input_fn, steps=3, hooks=[start])
  assert start.starts == [4, 4]
  assert model_fn.calls == 1
