"""Differential tests of the canned estimators: tests/differential/canned_program.py (census-style
columns: numeric, vocabulary, hashed + embedding, bucketized, crossed; classifiers with
label_vocabulary and weight_column, regressors, multi-class, batch norm, wide-and-deep,
baselines; the TF1-semantics `tf.compat.v1.estimator` DNN, linear and wide-and-deep) runs on
the original (`tf.estimator`, TF 2.15 + tensorflow-estimator 2.15) and on
`tpu_estimator.canned` (TF 2.21).

Two rounds of two parallel subprocesses:
  1. each side trains every model N steps in its own model_dir (then K more in a copy) and
     reports variable names, evaluation, predictions and export signatures;
  2. each side evaluates, predicts and trains K more steps in a copy of the model_dir the OTHER
     side wrote: an original model_dir resumes here (and ours there) with the same results.
"""
import os
import shutil
import sys
import tempfile

import pytest

import reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(REPO, 'tests', 'differential', 'canned_program.py')
IMPLS = ('orig', 'ours')
MODELS = ('dnn_classifier', 'dnn_regressor', 'dnn_multiclass', 'dnn_batch_norm',
          'linear_classifier', 'linear_regressor', 'wide_deep_classifier',
          'wide_deep_regressor', 'baseline_classifier', 'baseline_regressor', 'multi_label',
          'multi_head', 'v1_dnn_classifier', 'v1_linear_regressor', 'v1_wide_deep_classifier')
N_STEPS, K_STEPS = 12, 6
RTOL, ATOL = 2e-4, 1e-5
TIMEOUT = 900


def _run_round(pythons, tasks, workdir, tag):
  return reference.run_both(pythons, PROGRAM, tasks, workdir, tag, TIMEOUT)


def _run_all():
  pythons = {'orig': reference.python('The canned differential tests'), 'ours': sys.executable}
  workdir = tempfile.mkdtemp(prefix='tpu_estimator_canned_')
  try:
    d = lambda *parts: os.path.join(workdir, *parts)
    first = _run_round(pythons, {
        impl: [{'task': 'write', 'model': m, 'dir': d(impl, m), 'steps': N_STEPS,
                'more': K_STEPS} for m in MODELS] for impl in IMPLS}, workdir, 'write')
    tasks = {}
    for impl in IMPLS:
      other = 'ours' if impl == 'orig' else 'orig'
      tasks[impl] = []
      for m in MODELS:
        target = d(impl, 'from_%s_%s' % (other, m))
        shutil.copytree(d(other, m), target, ignore=shutil.ignore_patterns('export'))
        tasks[impl].append({'task': 'resume', 'model': m, 'dir': target, 'more': K_STEPS})
    second = _run_round(pythons, tasks, workdir, 'resume')
    return {impl: {'tf_version': first[impl]['tf_version'],
                   'write': dict(zip(MODELS, first[impl]['results'])),
                   'resume': dict(zip(MODELS, second[impl]['results']))} for impl in IMPLS}
  finally:
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope='module')
def runs():
  try:
    return _run_all()
  except reference.Unavailable as e:
    return e


def assert_close(expected, actual, what):
  reference.assert_close(expected, actual, what, RTOL, ATOL)


def _write(results, impl, model):
  return results[impl]['write'][model]


def test_reference_is_the_original(runs):
  results = reference.check(runs)
  assert results['orig']['tf_version'].startswith('2.15'), results['orig']['tf_version']
  assert not results['ours']['tf_version'].startswith('2.15')


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
  for stage in ('trained', 'more'):
    orig, ours = (_write(results, impl, model)[stage] for impl in IMPLS)
    assert_close(orig['evaluation'], ours['evaluation'], '%s %s evaluation' % (model, stage))
    assert_close(orig['predictions'], ours['predictions'], '%s %s predictions' % (model, stage))


@pytest.mark.parametrize('model', MODELS)
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


@pytest.mark.parametrize('model', MODELS)
def test_our_model_dir_resumes_in_the_original(runs, model):
  results = reference.check(runs)
  ours = _write(results, 'ours', model)
  resumed = results['orig']['resume'][model]
  assert_close(ours['trained']['evaluation'], resumed['loaded']['evaluation'], 'loaded')
  assert_close(ours['more']['evaluation'], resumed['more']['evaluation'], 'trained on')
