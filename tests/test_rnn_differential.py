"""Differential tests of the RNN estimators: tests/differential/rnn_program.py (a sequence
numeric column and an embedded sequence vocabulary column; an LSTM classifier with a context
column, weights and a label vocabulary; an `RNNEstimator` with a regression head over a GRU
layer and Adam; a stacked simple-RNN multi-class classifier with `return_sequences` and an
embedded context column) runs on the original (`tf.estimator.experimental`, TF 2.15 +
tensorflow-estimator 2.15) and on `tpu_estimator.canned` (TF 2.21).

Two rounds in two parallel subprocesses: (1) each side trains each model a few steps and
reports variable names and shapes, evaluation and prediction keys, export signatures; (2) each
side evaluates, predicts and trains on in a copy of the model_dir the OTHER side wrote.  Fresh
initial values differ (the two graphs draw them with different op seeds), so values are
compared from one checkpoint: the original's model_dir evaluates, predicts and trains on here
to the values the original itself gives from it, and ours there.
"""
import os

import pytest

import reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(REPO, 'tests', 'differential', 'rnn_program.py')
IMPLS = reference.IMPLS
MODELS = ('lstm_classifier', 'gru_regressor', 'sequence_multiclass')
N_STEPS, K_STEPS = 3, 3
RTOL, ATOL = 2e-4, 1e-5
TIMEOUT = 900


def _run(workdir):
  return reference.write_and_resume('The RNN differential tests', PROGRAM, workdir, MODELS,
                                    {'steps': N_STEPS, 'more': K_STEPS}, MODELS, K_STEPS,
                                    TIMEOUT)


@pytest.fixture(scope='module')
def runs():
  return reference.outcome('tpu_estimator_rnn_', _run)


def test_reference_is_the_original(runs):
  reference.assert_is_the_original(reference.check(runs))


@pytest.mark.parametrize('model', MODELS)
def test_checkpoint_variables(runs, model):
  """The same variables with the same shapes: network, feature columns, Keras 2 optimizer
  slots."""
  results = reference.check(runs)
  orig = results['orig']['write'][model]['variables']
  assert results['ours']['write'][model]['variables'] == orig
  assert any(name.startswith('rnn_model/') for name in orig), orig
  assert any(name.startswith('sequence_features/') for name in orig), orig


@pytest.mark.parametrize('model', MODELS)
def test_metric_and_prediction_keys_and_signatures(runs, model):
  results = reference.check(runs)
  orig, ours = (results[impl]['write'][model] for impl in IMPLS)
  assert sorted(ours['evaluation']) == sorted(orig['evaluation'])
  assert [sorted(p) for p in ours['predictions']] == [sorted(p) for p in orig['predictions']]
  assert ours['signatures'] == orig['signatures']
  assert 'serving_default' in orig['signatures']


@pytest.mark.parametrize('model', MODELS)
def test_original_model_dir_restores_and_trains_here(runs, model):
  """From the original's checkpoint ours evaluates and predicts what the original did, and
  training on from it (same optimizer, learning rate, gradient clipping, masking) reaches what
  the original's own training on reached."""
  results = reference.check(runs)
  orig, ours = results['orig']['write'][model], results['ours']['resume'][model]
  _assert_same(orig, ours['loaded'], '%s loaded here' % model)
  _assert_same(orig['more'], ours['more'], '%s trained on here' % model, ('evaluation',))
  assert ours['more']['evaluation']['global_step'] == \
      ours['loaded']['evaluation']['global_step'] + K_STEPS


@pytest.mark.parametrize('model', MODELS)
def test_our_model_dir_restores_and_trains_in_the_original(runs, model):
  results = reference.check(runs)
  ours, orig = results['ours']['write'][model], results['orig']['resume'][model]
  _assert_same(ours, orig['loaded'], '%s loaded in the original' % model)
  _assert_same(ours['more'], orig['more'], '%s trained on in the original' % model,
               ('evaluation',))


def _assert_same(expected, actual, what, keys=('evaluation', 'predictions')):
  for key in keys:
    reference.assert_close(expected[key], actual[key], '%s: %s' % (what, key), RTOL, ATOL)
