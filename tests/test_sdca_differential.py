"""Differential tests of `LinearSDCA`: tests/differential/sdca_program.py trains a binary
`LinearClassifier` and a `LinearRegressor` (`tf.estimator` and `tf.compat.v1.estimator`) on
numeric, multi-dimensional numeric, vocabulary (with out-of-vocabulary values), hashed and
bucketized columns, on the original (TF 2.15 + tensorflow-estimator 2.15) and on ours (TF 2.21).

TensorFlow's SDCA kernel visits a batch's examples in a random order it draws itself (no seed
reaches it: the original gives different weights run to run), so one step cannot be compared
value for value.  What is compared:
  * exactly: checkpoint names, shapes and dtypes (the state table's included), metric and
    prediction keys, the first step's loss (all weights still zero), which examples the state
    tables hold and in which shard;
  * after 40 steps (20 passes over the data): the weights, evaluation and predictions, to the
    tolerance of a solver that converged to the regularized problem's one optimum;
  * an original model_dir here (and ours there), for the v2 classifier and the v1 regressor:
    evaluation and predictions of its checkpoint as its writer's, and one more step keeps
    every example's restored solver state.
"""
import os

import pytest

import reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(REPO, 'tests', 'differential', 'sdca_program.py')
IMPLS = reference.IMPLS
MODELS = ('classifier', 'regressor', 'v1_classifier', 'v1_regressor')
# Resumed on the other side: v2 and v1, one and two table shards, with and without L1.
RESUMED = ('classifier', 'v1_regressor')
N_STEPS, K_STEPS, N_EXAMPLES = 40, 1, 48
EXACT = dict(rtol=1e-5, atol=1e-6)
# The kernel's unseeded shuffle makes every run differ, the original's among themselves too.
# Measured (10 runs of the regressor, 5 per side): predictions within 0.015 of each other on
# either side and across; one pair in a loaded test run 0.023 apart (0.136 against 0.113).
CONVERGED = dict(rtol=2e-2, atol=4e-2)
TIMEOUT = 600


def _run_all(workdir):
  return reference.write_and_resume('The LinearSDCA differential tests', PROGRAM, workdir,
                                    MODELS, {'steps': N_STEPS}, RESUMED, K_STEPS, TIMEOUT)


@pytest.fixture(scope='module')
def runs():
  return reference.outcome('tpu_estimator_sdca_', _run_all)


def _written(results, impl, model):
  return results[impl]['write'][model]


def test_reference_is_the_original(runs):
  reference.assert_is_the_original(reference.check(runs))


@pytest.mark.parametrize('model', MODELS)
def test_checkpoint_layout_and_keys(runs, model):
  """The model weights, their `_unshrunk` copies and the sharded state table, under the
  original's names, shapes and dtypes; the same metric and prediction keys."""
  results = reference.check(runs)
  orig, ours = (_written(results, impl, model)['trained'] for impl in IMPLS)
  assert ours['variable_names'] == orig['variable_names']
  assert ours['shapes'] == orig['shapes']
  shards = 1 if model.endswith('classifier') else 2
  assert sorted(orig['state_tables']) == [
      'ShardedMutableHashTable-%d-of-%d' % (i + 1, shards) for i in range(shards)]
  assert any(n.endswith('_unshrunk') for n in orig['variable_names'])
  assert sorted(ours['evaluation']) == sorted(orig['evaluation'])
  assert [sorted(p) for p in ours['predictions']] == [sorted(p) for p in orig['predictions']]


@pytest.mark.parametrize('model', MODELS)
def test_same_training(runs, model):
  """The same first loss and hashed example ids per shard; converged to the same model."""
  results = reference.check(runs)
  orig, ours = (_written(results, impl, model) for impl in IMPLS)
  assert len(ours['losses']) == len(orig['losses']) == N_STEPS
  reference.assert_close(orig['losses'][0], ours['losses'][0], 'first loss', **EXACT)
  for name, table in orig['trained']['state_tables'].items():
    assert sorted(ours['trained']['state_tables'][name]) == sorted(table), name
  assert sum(len(t) for t in orig['trained']['state_tables'].values()) == N_EXAMPLES
  for key in ('variables', 'evaluation', 'predictions'):
    reference.assert_close(orig['trained'][key], ours['trained'][key], key, **CONVERGED)
  reference.assert_close(orig['losses'][-3:], ours['losses'][-3:], 'last losses', **CONVERGED)


@pytest.mark.parametrize('model', RESUMED)
@pytest.mark.parametrize('reader', IMPLS)
def test_model_dir_resumes_on_the_other_side(runs, model, reader):
  """`reader` loads the other side's model_dir: the same evaluation and predictions as its
  writer's; one more step (half the examples) keeps the other half's restored solver state."""
  results = reference.check(runs)
  writer = 'ours' if reader == 'orig' else 'orig'
  written = _written(results, writer, model)['trained']
  resumed = results[reader]['resume'][model]
  for key in ('evaluation', 'predictions', 'variables', 'state_tables'):
    reference.assert_close(written[key], resumed['loaded'][key], 'loaded ' + key, **EXACT)
  assert resumed['more']['variables']['global_step'] == N_STEPS + K_STEPS
  changed = 0
  for name, table in written['state_tables'].items():
    after = resumed['more']['state_tables'][name]
    assert sorted(after) == sorted(table), name  # every example still has its state
    changed += sum(after[key] != state for key, state in table.items())
  assert 0 < changed <= N_EXAMPLES // 2
