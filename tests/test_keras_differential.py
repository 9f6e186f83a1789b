"""Differential tests for Keras-layer model_fns: tests/differential/keras_program.py runs on the
original TPUEstimator (TF 2.15, Keras 2; the reference venv of scripts/reference-venv.sh) and on
tpu_estimator (TF 2.21, Keras 3), and the results must agree.

Two rounds in one subprocess per implementation, the two in parallel:
  1. each side trains every model N steps in its own model_dir, evaluates, predicts, exports
     and serves the export (tf.saved_model.load);
  2. each side evaluates, predicts and trains K more steps in a copy of the model_dir the
     OTHER side wrote in round 1.
Dropout draws different masks on the two sides, so the Conv+BN+Dropout model's trained values
are compared only through the cross-implementation rounds (evaluation has no dropout).
A broken reference venv fails these tests; a machine that cannot have one skips them.
"""
import os
import sys

import numpy as np
import pytest

import reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(REPO, 'tests', 'differential', 'keras_program.py')
IMPLS = ('orig', 'ours')
MODELS = ('mlp', 'conv_bn_dropout', 'two_inputs', 'subclassed', 'sequential')
RANDOM_IN_TRAINING = ('conv_bn_dropout',)
N_STEPS, K_STEPS = 6, 4
RTOL, ATOL = 1e-4, 1e-5
TIMEOUT = 600


def _run(workdir):
  pythons = {'orig': reference.python('The Keras differential tests'), 'ours': sys.executable}
  src = {impl: {m: os.path.join(workdir, impl, 'src_' + m) for m in MODELS} for impl in IMPLS}
  first, second = reference.run_rounds(pythons, PROGRAM, [
      {impl: [{'task': 'write', 'model': m, 'dir': src[impl][m], 'steps': N_STEPS,
               'export': True} for m in MODELS] for impl in IMPLS},
      lambda: reference.resume_tasks(workdir, src, MODELS, K_STEPS)], workdir, 'round', TIMEOUT)
  return {impl: {'versions': (first[impl]['tf_version'], first[impl]['keras_version']),
                 'written': dict(zip(MODELS, first[impl]['results'])),
                 'resumed': dict(zip(MODELS, second[impl]['results']))} for impl in IMPLS}


@pytest.fixture(scope='module')
def runs():
  return reference.outcome('tpu_estimator_keras_differential_', _run)


def close(expected, actual, what):
  """Same structure and keys; numbers equal to tolerance."""
  if isinstance(expected, dict):
    assert sorted(actual) == sorted(expected), '%s: keys %s, expected %s' % (
        what, sorted(actual), sorted(expected))
    for key in expected:
      close(expected[key], actual[key], '%s[%r]' % (what, key))
  elif isinstance(expected, list) and expected and isinstance(expected[0], (dict, list)):
    assert len(actual) == len(expected), what
    for i, (e, a) in enumerate(zip(expected, actual)):
      close(e, a, '%s[%d]' % (what, i))
  else:
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64),
                               rtol=RTOL, atol=ATOL, err_msg=what)


def test_the_reference_is_keras_2_on_tf_2_15(runs):
  results = reference.check(runs)
  assert results['orig']['versions'][0].startswith('2.15')
  assert results['orig']['versions'][1].startswith('2.')
  assert results['ours']['versions'][1].startswith('3.')


@pytest.mark.parametrize('model', MODELS)
def test_same_variable_names(runs, model):
  """Keras 3 layers in our model_fn are named as Keras 2 named them in the original (slots,
  BatchNormalization statistics and the global step included; no extra variables)."""
  results = reference.check(runs)
  orig = results['orig']['written'][model]['state']['variable_names']
  ours = results['ours']['written'][model]['state']['variable_names']
  assert ours == orig
  assert any(name.endswith('/kernel') for name in ours)


@pytest.mark.parametrize('model', [m for m in MODELS if m not in RANDOM_IN_TRAINING])
def test_same_training_metrics_predictions_and_exports(runs, model):
  results = reference.check(runs)
  orig, ours = results['orig']['written'][model], results['ours']['written'][model]
  assert ours['state']['global_step'] == orig['state']['global_step'] == N_STEPS
  close(orig['state']['variables'], ours['state']['variables'], 'variables')
  close(orig['eval'], ours['eval'], 'evaluate')
  close(orig['predict'], ours['predict'], 'predict')
  close(orig['served'], ours['served'], 'served export')


@pytest.mark.parametrize('model', MODELS)
def test_exports_serve_the_predictions(runs, model):
  """Each side's export, loaded with tf.saved_model.load, gives that side's predictions."""
  results = reference.check(runs)
  for impl in IMPLS:
    written = results[impl]['written'][model]
    logits = [row['logits'] for row in written['predict']]
    close(logits, written['served']['logits'], '%s served logits' % impl)


@pytest.mark.parametrize('model', MODELS)
def test_ours_resumes_the_originals_model_dir(runs, model):
  """Ours evaluates and predicts the original's checkpoint as the original did, then trains
  on from its step with its variables."""
  results = reference.check(runs)
  written = results['orig']['written'][model]
  resumed = results['ours']['resumed'][model]
  assert resumed['before']['global_step'] == N_STEPS
  close(written['state']['variables'], resumed['before']['variables'], 'restored variables')
  close(written['eval'], resumed['eval_before'], 'evaluate the original checkpoint')
  close(written['predict'], resumed['predict_before'], 'predict the original checkpoint')
  assert resumed['after']['global_step'] == N_STEPS + K_STEPS
  assert resumed['after']['variable_names'] == written['state']['variable_names']


@pytest.mark.parametrize('model', MODELS)
def test_the_original_resumes_our_model_dir(runs, model):
  results = reference.check(runs)
  written = results['ours']['written'][model]
  resumed = results['orig']['resumed'][model]
  assert resumed['before']['global_step'] == N_STEPS
  close(written['state']['variables'], resumed['before']['variables'], 'restored variables')
  close(written['eval'], resumed['eval_before'], 'the original evaluating our checkpoint')
  close(written['predict'], resumed['predict_before'], 'the original predicting ours')
  assert resumed['after']['global_step'] == N_STEPS + K_STEPS


@pytest.mark.parametrize('model', [m for m in MODELS if m not in RANDOM_IN_TRAINING])
def test_resumed_training_agrees(runs, model):
  """Both sides resuming (each from the other's equal checkpoint) train to the same values."""
  results = reference.check(runs)
  close(results['orig']['resumed'][model]['after']['variables'],
        results['ours']['resumed'][model]['after']['variables'], 'variables after resuming')
  close(results['orig']['resumed'][model]['eval_after'],
        results['ours']['resumed'][model]['eval_after'], 'evaluate after resuming')
