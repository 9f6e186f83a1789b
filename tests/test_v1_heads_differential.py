"""Differential tests of the head-taking `tf.compat.v1.estimator` classes (`DNNEstimator`,
`LinearEstimator`, `DNNLinearCombinedEstimator`, `BaselineEstimator`) and of the experimental
logit_fn API: tests/differential/v1_heads_program.py, a legacy program using the original's
v1 head factories, runs unchanged on the original (TF 2.15 + tensorflow-estimator 2.15) and on
ours (TF 2.21, after `tpu_estimator.compat.install()`).

Two rounds in two parallel subprocesses: each side trains every model; then each side
evaluates a copy of the model_dir the OTHER side wrote.
"""
import os

import pytest

import reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(REPO, 'tests', 'differential', 'v1_heads_program.py')
IMPLS = reference.IMPLS
MODELS = ('dnn', 'linear', 'wide_deep', 'baseline', 'logit_fn')
N_STEPS = 8
RTOL, ATOL = 2e-4, 1e-5
TIMEOUT = 900


def _run(workdir):
  return reference.write_and_resume('The v1 head estimator differential tests', PROGRAM,
                                    workdir, MODELS, {'steps': N_STEPS}, MODELS, 0, TIMEOUT)


@pytest.fixture(scope='module')
def runs():
  return reference.outcome('tpu_estimator_v1_heads_', _run)


def assert_close(expected, actual, what):
  reference.assert_close(expected, actual, what, RTOL, ATOL)


def test_reference_is_the_original(runs):
  reference.assert_is_the_original(reference.check(runs))


@pytest.mark.parametrize('model', MODELS)
def test_checkpoint_variables(runs, model):
  """The same variables (optimizer slots included) with the same shapes."""
  results = reference.check(runs)
  orig = results['orig']['write'][model]['variables']
  assert results['ours']['write'][model]['variables'] == orig
  names = [name for name, _ in orig]
  assert 'global_step' in names and any(n.endswith(('Adagrad', 'Ftrl', 'Adam')) for n in names)


@pytest.mark.parametrize('model', MODELS)
def test_metric_and_prediction_keys_and_signatures(runs, model):
  results = reference.check(runs)
  orig, ours = (results[impl]['write'][model] for impl in IMPLS)
  assert sorted(ours['evaluation']) == sorted(orig['evaluation'])
  assert [sorted(p) for p in ours['predictions']] == [sorted(p) for p in orig['predictions']]
  if 'signatures' in orig:  # one model per head type is exported
    assert ours['signatures'] == orig['signatures']
    assert 'serving_default' in orig['signatures']


@pytest.mark.parametrize('model', MODELS)
def test_same_program_same_values(runs, model):
  """Trained from scratch on both sides with the same seed and data: the same evaluation and
  predictions, to float tolerance."""
  results = reference.check(runs)
  orig, ours = (results[impl]['write'][model] for impl in IMPLS)
  assert_close(orig['evaluation'], ours['evaluation'], '%s evaluation' % model)
  assert_close(orig['predictions'], ours['predictions'], '%s predictions' % model)


@pytest.mark.parametrize('model', MODELS)
def test_model_dirs_restore_on_the_other_side(runs, model):
  """Ours evaluates the original's model_dir as the original did, and the original ours."""
  results = reference.check(runs)
  orig, ours = (results[impl]['write'][model] for impl in IMPLS)
  here, there = results['ours']['resume'][model], results['orig']['resume'][model]
  assert_close(orig['evaluation'], here['evaluation'], 'original model_dir here')
  assert_close(ours['evaluation'], there['evaluation'], 'our model_dir there')
  assert here['evaluation']['global_step'] == N_STEPS
