"""Differential tests for `tf.keras.estimator.model_to_estimator`: tests/differential/
keras_estimator_program.py runs on the original (TF 2.15, tensorflow-estimator 2.15, Keras 2)
and on tpu_estimator (compat.install(), tf_keras), and the results must agree.

Two rounds in one subprocess per implementation, the two in parallel:
  1. each side converts a Sequential and a functional model, trains, evaluates, predicts,
     exports and loads its export;
  2. each side converts the same models onto a copy of the model_dir the OTHER side wrote in
     round 1, evaluates (the trained checkpoint, not the Keras weights), trains on, evaluates.
A broken reference venv fails these tests; a machine that cannot have one skips them.
"""
import os
import sys

import numpy as np
import pytest

import reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(REPO, 'tests', 'differential', 'keras_estimator_program.py')
IMPLS = ('orig', 'ours')
MODELS = ('sequential', 'functional')
N_STEPS, K_STEPS = 5, 3
RTOL, ATOL = 1e-4, 1e-5


def _run(workdir):
  pythons = {'orig': reference.python('The model_to_estimator differential tests'),
             'ours': sys.executable}
  src = {impl: {m: os.path.join(workdir, impl, 'src_' + m) for m in MODELS} for impl in IMPLS}
  first, second = reference.run_rounds(pythons, PROGRAM, [
      {impl: [{'task': 'write', 'model': m, 'dir': src[impl][m], 'steps': N_STEPS}
              for m in MODELS] for impl in IMPLS},
      lambda: reference.resume_tasks(workdir, src, MODELS, K_STEPS)], workdir, 'round', 600)
  return {impl: {'written': dict(zip(MODELS, first[impl]['results'])),
                 'resumed': dict(zip(MODELS, second[impl]['results']))} for impl in IMPLS}


@pytest.fixture(scope='module')
def runs():
  return reference.outcome('tpu_estimator_mte_differential_', _run)


def _evaluated(orig, ours, what):
  """Same keys in the same order (metrics and loss by name, global_step last), same values."""
  assert [k for k, _ in ours] == [k for k, _ in orig], what
  np.testing.assert_allclose([v for _, v in ours], [v for _, v in orig], rtol=RTOL, atol=ATOL,
                             err_msg=what)


@pytest.mark.parametrize('model', MODELS)
def test_same_checkpoint_names_metrics_predictions_and_signatures(runs, model):
  results = reference.check(runs)
  orig, ours = results['orig']['written'][model], results['ours']['written'][model]
  assert ours['checkpoint']['names'] == orig['checkpoint']['names']
  reference.assert_close(orig['checkpoint']['values'], ours['checkpoint']['values'],
                         'trained variables', RTOL, ATOL)
  _evaluated(orig['eval'], ours['eval'], 'evaluate')
  assert ours['eval'][-1] == ['global_step', N_STEPS]
  reference.assert_close(orig['predict'], ours['predict'], 'predict', RTOL, ATOL)
  assert ours['signatures'] == orig['signatures']
  assert {'checkpoint', 'keras_model.ckpt.index'} <= set(ours['keras_dir'])


@pytest.mark.parametrize('model', MODELS)
def test_each_side_resumes_the_other_sides_model_dir(runs, model):
  """Ours on the original's model_dir computes what the original does on ours."""
  results = reference.check(runs)
  orig, ours = results['orig']['resumed'][model], results['ours']['resumed'][model]
  _evaluated(results['orig']['written'][model]['eval'], ours['eval_before'],
             'ours evaluating the original\'s checkpoint')
  _evaluated(orig['eval_after'], ours['eval_after'], 'evaluate after resuming')
  assert ours['eval_after'][-1] == ['global_step', N_STEPS + K_STEPS]
  assert ours['checkpoint']['names'] == orig['checkpoint']['names']
