"""Differential tests of the canned estimators: tests/differential/canned_program.py (census-style
columns: numeric, vocabulary, hashed + embedding, bucketized, crossed; classifiers with
label_vocabulary and weight_column, regressors, multi-class, batch norm, wide-and-deep,
baselines; the TF1-semantics `tf.compat.v1.estimator` DNN, linear and wide-and-deep) runs on
the original (`tf.estimator`, TF 2.15 + tensorflow-estimator 2.15) and on
`tpu_estimator.canned` (TF 2.21).

Two rounds in two parallel subprocesses (one per side, for both rounds):
  1. each side trains every model N steps in its own model_dir and reports variable names,
     evaluation, predictions and export signatures (the RESUMED models then K more in a copy);
  2. for the RESUMED models, each side evaluates, predicts and trains K more steps in a copy of
     the model_dir the OTHER side wrote: an original model_dir resumes here (and ours there)
     with the same results.
"""
import os

import pytest

import reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(REPO, 'tests', 'differential', 'canned_program.py')
IMPLS = ('orig', 'ours')
MODELS = ('dnn_classifier', 'dnn_regressor', 'dnn_multiclass', 'dnn_batch_norm',
          'linear_classifier', 'linear_regressor', 'wide_deep_classifier',
          'wide_deep_regressor', 'baseline_classifier', 'baseline_regressor', 'multi_label',
          'multi_head', 'v1_dnn_classifier', 'v1_linear_regressor', 'v1_wide_deep_classifier')
# Resumed across implementations, and trained on from a copy on each side: one model of each
# family and optimizer set (DNN with batch norm, linear + DNN, multi-head, the TF1-semantics
# classes, baseline).  Every model's variable names, shapes, evaluation, predictions and
# signatures are compared after the first training; equal names and shapes are what restoring
# needs, so resuming the other ten too (two more trainings and reports each, on both sides) cost
# CI time for no check of its own.
RESUMED = ('dnn_batch_norm', 'wide_deep_classifier', 'multi_head', 'v1_wide_deep_classifier',
           'baseline_regressor')
N_STEPS, K_STEPS = 12, 6
RTOL, ATOL = 2e-4, 1e-5
TIMEOUT = 900


def _run_all(workdir):
  return reference.write_and_resume('The canned differential tests', PROGRAM, workdir, MODELS,
                                    {'steps': N_STEPS, 'more': K_STEPS}, RESUMED, K_STEPS,
                                    TIMEOUT)


@pytest.fixture(scope='module')
def runs():
  return reference.outcome('tpu_estimator_canned_', _run_all)


def assert_close(expected, actual, what):
  reference.assert_close(expected, actual, what, RTOL, ATOL)


def _write(results, impl, model):
  return results[impl]['write'][model]


def test_reference_is_the_original(runs):
  reference.assert_is_the_original(reference.check(runs))


@pytest.mark.parametrize('model', MODELS)
def test_checkpoint_variable_names(runs, model):
  """The same variables, optimizer slots and hyperparameters as the original's checkpoints."""
  results = reference.check(runs)
  orig = _write(results, 'orig', model)['trained']['variable_names']
  assert _write(results, 'ours', model)['trained']['variable_names'] == orig
  assert 'global_step' in orig
  if model.startswith('v1_'):  # tf.compat.v1.train slots beside their variables
    assert any(n.endswith(('/Adagrad', '/Ftrl')) for n in orig), orig
    assert not any(n.startswith('training') for n in orig), orig
  else:  # Keras optimizer variables: training/..., training_2/... for MultiHead
    assert any(n.startswith('training') for n in orig)


@pytest.mark.parametrize('model', MODELS)
def test_metric_and_prediction_keys_and_signatures(runs, model):
  results = reference.check(runs)
  orig, ours = (_write(results, impl, model)['trained'] for impl in IMPLS)
  assert sorted(ours['evaluation']) == sorted(orig['evaluation'])
  assert [sorted(p) for p in ours['predictions']] == [sorted(p) for p in orig['predictions']]
  assert ours['signatures'] == orig['signatures']
  assert 'serving_default' in orig['signatures']


@pytest.mark.parametrize('model', MODELS)
def test_same_program_same_values(runs, model):
  """Trained from scratch on both sides with the same seed and data: same evaluation and
  predictions (to float tolerance), also after training on from a copy."""
  results = reference.check(runs)
  for stage in ('trained', 'more') if model in RESUMED else ('trained',):
    orig, ours = (_write(results, impl, model)[stage] for impl in IMPLS)
    assert_close(orig['evaluation'], ours['evaluation'], '%s %s evaluation' % (model, stage))
    assert_close(orig['predictions'], ours['predictions'], '%s %s predictions' % (model, stage))


@pytest.mark.parametrize('model', RESUMED)
def test_original_model_dir_resumes_here(runs, model):
  """Ours evaluates and predicts the original's checkpoint as the original did, and training
  on from it gives what the original's own continued training gave."""
  results = reference.check(runs)
  orig = _write(results, 'orig', model)
  resumed = results['ours']['resume'][model]
  assert_close(orig['trained']['evaluation'], resumed['loaded']['evaluation'], 'loaded')
  assert_close(orig['trained']['predictions'], resumed['loaded']['predictions'], 'predictions')
  assert_close(orig['more']['evaluation'], resumed['more']['evaluation'], 'trained on')
  assert resumed['more']['evaluation']['global_step'] == N_STEPS + K_STEPS


@pytest.mark.parametrize('model', RESUMED)
def test_our_model_dir_resumes_in_the_original(runs, model):
  results = reference.check(runs)
  ours = _write(results, 'ours', model)
  resumed = results['orig']['resume'][model]
  assert_close(ours['trained']['evaluation'], resumed['loaded']['evaluation'], 'loaded')
  assert_close(ours['more']['evaluation'], resumed['more']['evaluation'], 'trained on')
