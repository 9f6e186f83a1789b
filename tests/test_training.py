"""train_and_evaluate locally: evaluations after checkpoints, exporters, final result."""
import glob
import os

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te

v1 = tf.compat.v1


def _receiver():
  return te.export.build_raw_serving_input_receiver_fn({'x': tf.zeros([1, h.NUM_FEATURES])})


def _eval_steps(model_dir):
  steps = set()
  for path in glob.glob(os.path.join(model_dir, 'eval', 'events.out.tfevents.*')):
    for event in v1.train.summary_iterator(path):
      if any(v.tag == 'loss' for v in event.summary.value):
        steps.add(event.step)
  return sorted(steps)


def test_train_and_evaluate_local_evaluates_at_checkpoints_and_exports(tmp_path):
  x, y = h.make_data(96)
  config = te.RunConfig(model_dir=str(tmp_path), save_checkpoints_steps=4,
                        tpu_config=te.TPUConfig(iterations_per_loop=2, num_shards=2))
  est = te.TPUEstimator(h.make_model_fn(tpu=True), config=config, train_batch_size=16,
                        eval_batch_size=16)
  exporters = [te.FinalExporter('final', _receiver()),
               te.LatestExporter('latest', _receiver(), exports_to_keep=2)]
  train_spec = te.TrainSpec(h.dataset_input_fn(x, y), max_steps=12)
  eval_spec = te.EvalSpec(h.dataset_input_fn(x, y, repeat=False), steps=None,
                          exporters=exporters, throttle_secs=0)
  result, exports = te.train_and_evaluate(est, train_spec, eval_spec)
  assert result['global_step'] == 12
  assert set(result) == {'accuracy', 'mean_label', 'loss', 'global_step'}
  assert _eval_steps(str(tmp_path)) == [4, 8, 12]
  assert len(os.listdir(tmp_path / 'export' / 'final')) == 1
  assert len(os.listdir(tmp_path / 'export' / 'latest')) == 2  # exports_to_keep
  # the final evaluation's exports, one per exporter (as the original)
  assert len(exports) == 2 and all(exports)
  assert b'/final/' in exports[0] and b'/latest/' in exports[1]
  tf.saved_model.load(exports[0].decode(), tags=['serve'])


def test_throttle_secs_skips_evaluations_but_final_eval_runs(tmp_path):
  x, y = h.make_data(96)
  est = te.Estimator(h.make_model_fn(), model_dir=str(tmp_path), params={'batch_size': 16},
                     config=te.EstimatorRunConfig(save_checkpoints_steps=2))
  result, _ = te.train_and_evaluate(
      est, te.TrainSpec(h.dataset_input_fn(x, y), max_steps=8),
      te.EvalSpec(h.dataset_input_fn(x, y, repeat=False), throttle_secs=3600))
  assert result['global_step'] == 8
  assert _eval_steps(str(tmp_path)) == [2, 8]  # first save evaluated, then throttled, final


def test_best_exporter_keeps_only_improving_exports(tmp_path):
  x, y = h.make_data(96)
  calls = []

  def compare(best, current):
    calls.append((best['global_step'], current['global_step']))
    return current['global_step'] in (4, 12)  # "improves" at steps 4 and 12 only

  est = te.Estimator(h.make_model_fn(), model_dir=str(tmp_path), params={'batch_size': 16},
                     config=te.EstimatorRunConfig(save_checkpoints_steps=4))
  best = te.BestExporter(serving_input_receiver_fn=_receiver(), compare_fn=compare,
                         exports_to_keep=None)
  _, exports = te.train_and_evaluate(
      est, te.TrainSpec(h.dataset_input_fn(x, y), max_steps=16),
      te.EvalSpec(h.dataset_input_fn(x, y, repeat=False), exporters=best, throttle_secs=0))
  # step 4: first result, exported; 8: not better; 12: better; 16: not better
  assert exports == [None]  # the final evaluation (16) did not improve
  assert len(os.listdir(tmp_path / 'export' / 'best_exporter')) == 2
  assert calls == [(4, 8), (4, 12), (12, 16)]


def test_best_exporter_on_a_uri_model_dir_across_restarts(tmp_path):
  """A model_dir given as a URI (file://, as gs://) works with the exporters' listing and
  collection (BLEURT's BestExporter stopped there).  A restarted process's first evaluation is
  compared with the best in the event files while an export exists (a worse one is not
  exported over it), and exported whatever it is when none does (as the original's first
  export of a process)."""
  x, y = h.make_data(96)
  model_dir = 'file://' + str(tmp_path)
  export_dir = tmp_path / 'export' / 'best_exporter'

  def run(max_steps, improves):
    est = te.Estimator(h.make_model_fn(), model_dir=model_dir, params={'batch_size': 16},
                       config=te.EstimatorRunConfig(save_checkpoints_steps=4))
    best = te.BestExporter(serving_input_receiver_fn=_receiver(), exports_to_keep=1,
                           compare_fn=lambda best, current: improves)
    te.train_and_evaluate(est, te.TrainSpec(h.dataset_input_fn(x, y), max_steps=max_steps),
                          te.EvalSpec(h.dataset_input_fn(x, y, repeat=False), exporters=best,
                                      throttle_secs=0))
    return sorted(os.listdir(export_dir)) if export_dir.exists() else []

  first = run(8, improves=True)  # steps 4 and 8 exported; exports_to_keep=1 keeps the newest
  assert len(first) == 1
  assert run(12, improves=False) == first  # restarted: step 12 is not better, not exported
  for name in first:
    tf.io.gfile.rmtree(str(export_dir / name))
  assert len(run(16, improves=False)) == 1  # nothing exported yet here: step 16 is


def test_best_exporter_default_compares_loss(tmp_path):
  exporter = te.BestExporter(serving_input_receiver_fn=_receiver())
  assert exporter._compare({'loss': 2.0}, {'loss': 1.0})
  assert not exporter._compare({'loss': 1.0}, {'loss': 2.0})
  with pytest.raises(ValueError, match='loss'):
    exporter._compare({'accuracy': 1.0}, {'loss': 2.0})


@pytest.mark.parametrize('build,error,match', [
    (lambda: te.TrainSpec(None), TypeError, 'input_fn'),
    (lambda: te.TrainSpec(lambda: None, max_steps=0), ValueError, 'max_steps=0'),
    (lambda: te.TrainSpec(lambda: None, hooks=[1]), TypeError, 'SessionRunHook'),
    (lambda: te.EvalSpec(lambda: None, steps=-1), ValueError, 'steps=-1'),
    (lambda: te.EvalSpec(lambda: None, steps='2'), TypeError, "steps='2'"),
    (lambda: te.TrainSpec(lambda: None, max_steps=0.0), ValueError, 'max_steps=0.0'),
    (lambda: te.EvalSpec(lambda: None, throttle_secs=-5), ValueError, 'throttle_secs=-5'),
    (lambda: te.EvalSpec(lambda: None, exporters=['x']), TypeError, 'Exporter'),
    (lambda: te.EvalSpec(lambda: None, exporters=[te.FinalExporter('a', _receiver()),
                                                   te.FinalExporter('a', _receiver())]),
     ValueError, "name='a'"),
    (lambda: te.LatestExporter('l', _receiver(), exports_to_keep=0), ValueError,
     'exports_to_keep=0'),
    (lambda: te.train_and_evaluate(object(), None, None), TypeError, 'estimator'),
])
def test_spec_errors(build, error, match):
  with pytest.raises(error, match=match):
    build()


def test_evaluator_task_evaluates_checkpoints_until_max_steps(tmp_path, monkeypatch):
  x, y = h.make_data(96)
  trainer = te.Estimator(h.make_model_fn(), model_dir=str(tmp_path), params={'batch_size': 16})
  trainer.train(h.dataset_input_fn(x, y), max_steps=6)
  monkeypatch.setenv('TF_CONFIG', '{"cluster": {"chief": ["127.0.0.1:2222"]}, '
                                  '"task": {"type": "evaluator", "index": 0}}')
  evaluator = te.Estimator(h.make_model_fn(), model_dir=str(tmp_path),
                           params={'batch_size': 16})
  assert evaluator.config.task_type == 'evaluator'
  result, exports = te.train_and_evaluate(
      evaluator, te.TrainSpec(h.dataset_input_fn(x, y), max_steps=6),
      te.EvalSpec(h.dataset_input_fn(x, y, repeat=False), start_delay_secs=0, throttle_secs=0,
                  exporters=te.FinalExporter('final', _receiver())))
  assert result['global_step'] == 6
  assert exports[0] is not None and _eval_steps(str(tmp_path)) == [6]
