"""TPUEstimator-era programs built on `tensorflow.contrib`, run unchanged through
`tpu-estimator run` (tests/legacy_programs/):
- contrib_tf115_classifier.py: TF 1.15 style (`import tensorflow.compat.v1 as tf`,
  `from tensorflow.contrib import X as contrib_X`) WITHOUT --tf1, on one device and sharded
  over 2 logical CPUs, which must agree;
- contrib_tf113_cnn.py: TF 1.13 style (`import tensorflow as tf`, `tf.contrib.X.name`, deep
  `tensorflow.contrib.tpu.python.tpu` paths, slim arg_scope) with --tf1, sharded and on one
  replica's device loop.
Each trains, evaluates, predicts and exports; checkpoints must hold TF 1.x's variable names.
Four processes, two at a time."""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest
import tensorflow as tf

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(REPO, 'tests', 'legacy_programs')
TIMEOUT = 600
SHARDED = ['--use_tpu', '--num_shards=2']


def _env():
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONPATH=REPO)
  for name in ('TF_CONFIG', 'TF_USE_LEGACY_KERAS'):
    env.pop(name, None)
  return env


@pytest.fixture(scope='module')
def runs():
  """{name: report} for the three runs; a failed run's output is kept as its report."""
  workdir = tempfile.mkdtemp(prefix='tpu_estimator_contrib_programs_')
  run = [sys.executable, '-m', 'tpu_estimator', 'run']

  def argv(name, program, extra, tf1=False):
    return run + (['--tf1'] if tf1 else []) + [
        program, '--model_dir=' + os.path.join(workdir, name),
        '--output_json=' + os.path.join(workdir, name + '.json')] + extra

  hparams = ['--hparams=hidden_size=6,learning_rate=0.02']
  pending = [
      ('tf115_single', argv('tf115_single', 'contrib_tf115_classifier.py', hparams)),
      ('tf115_sharded', argv('tf115_sharded', 'contrib_tf115_classifier.py',
                             hparams + SHARDED)),
      ('tf113_sharded', argv('tf113_sharded', 'contrib_tf113_cnn.py', SHARDED, tf1=True)),
      ('tf113_single', argv('tf113_single', 'contrib_tf113_cnn.py',
                            ['--use_tpu', '--num_shards=1'], tf1=True)),
  ]
  running, results = {}, {}
  deadline = time.time() + TIMEOUT
  while pending or running:
    while pending and len(running) < 2:
      name, command = pending.pop(0)
      log = open(os.path.join(workdir, name + '.log'), 'w+')
      running[name] = (subprocess.Popen(command, cwd=PROGRAMS, env=_env(), stdout=log,
                                        stderr=subprocess.STDOUT), log)
    for name, (proc, log) in list(running.items()):
      if proc.poll() is None and time.time() < deadline:
        continue
      if proc.poll() is None:
        proc.kill()
      proc.wait()
      del running[name]
      log.seek(0)
      output = log.read()
      log.close()
      path = os.path.join(workdir, name + '.json')
      if proc.returncode == 0 and os.path.isfile(path):
        with open(path) as f:
          results[name] = json.load(f)
      else:
        results[name] = {'failed': 'exit %s:\n%s' % (proc.returncode, output[-6000:])}
    time.sleep(0.2)
  return results


def _report(runs, name):
  report = runs[name]
  assert 'failed' not in report, report.get('failed')
  return report


TF115_VARIABLES = {
    'bert/encoder/fully_connected/weights', 'bert/encoder/fully_connected/biases',
    'bert/encoder/LayerNorm/beta', 'bert/encoder/LayerNorm/gamma', 'output_weights',
    'output_bias'}


@pytest.mark.parametrize('name', ['tf115_single', 'tf115_sharded'])
def test_tf115_program_trains_evaluates_predicts_exports_without_tf1(runs, name):
  report = _report(runs, name)
  assert report['executing_eagerly'] is True  # ran as TensorFlow 2: no --tf1 needed
  assert report['hparams'] == {'hidden_size': 6, 'learning_rate': 0.02, 'weight_decay': 0.001,
                               'l2': 0.0001, 'use_layer_norm': True}
  assert json.loads(report['hparams_json']) == report['hparams']
  assert report['global_step'] == 8
  # TF 1.x's names: contrib layers' scopes, AdamW's slots (`AdamW`, `AdamW_1`), Adam's powers
  slots = {v + s for v in TF115_VARIABLES for s in ('/AdamW', '/AdamW_1')}
  assert set(report['variable_names']) == (
      TF115_VARIABLES | slots | {'beta1_power', 'beta2_power', 'global_step'})
  assert np.shape(report['variables']['bert/encoder/LayerNorm/gamma']) == (6,)
  # host_call: a contrib summary per step, in the model_dir's events
  assert report['host_loss_steps'] == list(range(8))
  # the export serves what predict gave
  np.testing.assert_allclose(report['exported'], report['predictions'][:4], atol=1e-5)


@pytest.mark.parametrize('name', ['tf115_single', 'tf115_sharded'])
def test_tf115_streaming_metrics_agree_with_the_predictions(runs, name):
  """metric_fn's contrib streaming metrics, recomputed from the predicted probabilities."""
  report = _report(runs, name)
  metrics = report['metrics']
  labels = np.array(report['labels'])
  probabilities = np.array(report['predictions'])
  assert len(probabilities) == len(labels) == 20
  positive = probabilities[:, 1]
  np.testing.assert_allclose(metrics['accuracy'],
                             np.mean(probabilities.argmax(axis=1) == labels), atol=1e-6)
  np.testing.assert_allclose(metrics['pearson'], np.corrcoef(positive, labels)[0, 1],
                             atol=1e-5)
  cross_entropy = -np.log(probabilities[np.arange(len(labels)), labels])
  np.testing.assert_allclose(metrics['mean_loss'], cross_entropy.mean(), atol=1e-5)
  pairs = [(p, n) for p in positive[labels == 1] for n in positive[labels == 0]]
  exact_auc = np.mean([1.0 if p > n else 0.5 if p == n else 0.0 for p, n in pairs])
  assert abs(metrics['auc'] - exact_auc) < 0.03  # 200 thresholds, as TF 1.x computed it
  predicted = positive > 0.5
  f1_at_half = 2 * np.sum(predicted & (labels == 1)) / (np.sum(predicted) + np.sum(labels))
  assert f1_at_half - 1e-6 <= metrics['f1'] <= 1.0  # the best F1 over the thresholds
  assert metrics['concat_labels'] == report['labels']


def test_tf115_sharded_run_equals_the_single_device_run(runs):
  """2 shards on the global batch: the same updates, metrics and predictions as 1 device, to
  float rounding (about 1e-7 on CPU).  A looser bound once hid a race (AdamW's decay sometimes
  ran before the forward pass read the weights: 3e-5 to 1.8e-4 apart, varying run to run); on
  a GPU, cuBLAS sums the two shards' halves in another order than the whole batch."""
  single, sharded = _report(runs, 'tf115_single'), _report(runs, 'tf115_sharded')
  assert sharded['variable_names'] == single['variable_names']
  tol = 1e-4 if tf.config.list_physical_devices('GPU') else 1e-5
  for name, value in single['variables'].items():
    np.testing.assert_allclose(sharded['variables'][name], value, rtol=tol, atol=tol,
                               err_msg=name)
  for name, value in single['metrics'].items():
    np.testing.assert_allclose(sharded['metrics'][name], value, rtol=tol, atol=tol,
                               err_msg=name)
  np.testing.assert_allclose(sharded['predictions'], single['predictions'], atol=tol)


@pytest.mark.parametrize('name', ['tf113_sharded', 'tf113_single'])
def test_tf113_program_runs_with_tf1_in_device_loops(runs, name):
  """Sharded, and on one replica, whose device loop once failed under --tf1: its global step
  was a reference variable, which the loop's function cannot assign."""
  report = _report(runs, name)
  assert report['executing_eagerly'] is False
  # tf.contrib.layers' scopes (Conv, BatchNorm with scale=True, fully_connected) and
  # MomentumW's slot, as TF 1.x named them
  trained = {'Conv/weights', 'Conv/biases', 'BatchNorm/beta', 'BatchNorm/gamma',
             'fully_connected/weights', 'fully_connected/biases'}
  assert set(report['variable_names']) == (
      trained | {v + '/MomentumW' for v in trained} |
      {'BatchNorm/moving_mean', 'BatchNorm/moving_variance', 'global_step'})
  assert report['checkpoints'] == ['model.ckpt-6']  # contrib checkpoints_iterator
  labels, predictions = np.array(report['labels']), np.array(report['predictions'])
  accuracy = np.mean(labels == predictions)
  assert report['metrics']['accuracy'] == pytest.approx(accuracy)
  assert report['metrics']['streaming_accuracy'] == pytest.approx(accuracy)
  assert report['metrics']['global_step'] == 6
  assert 'saved_model.pb' in report['export']
  # record_summaries_every_n_global_steps(2): steps 0, 2, 4 of 0..5
  assert report['host_call_steps'] == [0, 2, 4]
