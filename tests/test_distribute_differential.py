"""`RunConfig(train_distribute=..., eval_distribute=...)`: tests/differential/distribute_program.py
runs on the original (TF 2.15 + tensorflow-estimator 2.15) and on ours, on one device and on 2
logical CPU replicas of each strategy class; the results must agree, and the replicas must
equal one device where the original's do (input_fn(input_context) batches of 8 rows per replica
are one device's batches of 16).  Evaluation of an input whose final batches do not fill the
replicas covers every row here (the original dropped them).
"""
import sys

import pytest

import reference

PROGRAM = reference.REPO + '/tests/differential/distribute_program.py'
RTOL, ATOL = 1e-5, 1e-6


def _task(name, strategy, replicas=2, context=False, model='custom', eval_rows=64):
  return {'name': name, 'strategy': strategy, 'replicas': replicas, 'context': context,
          'model': model, 'eval_rows': eval_rows}


TASKS = [
    _task('one_device', None, 1),
    _task('mirrored', 'mirrored'),
    _task('mirrored_context', 'mirrored', context=True),
    _task('mirrored_v1', 'mirrored_v1'),
    _task('central_storage', 'central'),
    _task('one_device_strategy', 'one_device', 1),
    _task('dnn_one_device', None, 1, context=True, model='dnn'),
    _task('dnn_mirrored_context', 'mirrored', context=True, model='dnn'),
]
UNEVEN = [_task('uneven_one_device', None, 1, context=True, eval_rows=72),
          _task('uneven_mirrored', 'mirrored', context=True, eval_rows=72)]


@pytest.fixture(scope='module')
def runs():
  def run(workdir):
    pythons = {'orig': reference.python('The strategy differential tests'),
               'ours': sys.executable}
    tasks = {'orig': TASKS, 'ours': TASKS + UNEVEN}
    return reference.run_both(pythons, PROGRAM, tasks, workdir, 'distribute', 600)
  return reference.outcome('tpu_estimator_distribute_', run)


@pytest.mark.parametrize('name', [t['name'] for t in TASKS])
def test_same_program_same_results(runs, name):
  """Variables, evaluation (keys in the original's order, values) and predictions of the
  same program under the same strategy equal the original's."""
  runs = reference.check(runs)
  orig, ours = runs['orig'][name], runs['ours'][name]
  assert ours['eval_keys'] == orig['eval_keys']
  evaluation = dict(orig['eval'])
  if name.startswith('dnn') and 'mirrored' in name:
    # The original's accuracy_baseline under a strategy is max(m, 1 - m) of a label mean
    # summed wrongly over replicas (it reports values below 0.5); ours is one device's.
    evaluation['accuracy_baseline'] = runs['ours']['dnn_one_device']['eval'][
        'accuracy_baseline']
  reference.assert_close(evaluation, ours['eval'], name + ' eval', RTOL, ATOL)
  reference.assert_close(orig['variables'], ours['variables'], name + ' variables', RTOL, ATOL)
  reference.assert_close(orig['predictions'], ours['predictions'], name + ' predictions', RTOL,
                         ATOL)


@pytest.mark.parametrize('impl', ['orig', 'ours'])
@pytest.mark.parametrize('replicated,single', [('mirrored_context', 'one_device'),
                                               ('dnn_mirrored_context', 'dnn_one_device')])
def test_two_replicas_equal_one_device(runs, impl, replicated, single):
  """Two replicas reading per-replica batches of 8 rows train and evaluate as one device on
  batches of 16, on the original and here."""
  result = reference.check(runs)[impl]
  reference.assert_close(result[single]['variables'], result[replicated]['variables'],
                         replicated, RTOL, ATOL)
  assert result[replicated]['eval']['loss'] == pytest.approx(result[single]['eval']['loss'],
                                                             rel=RTOL)


def test_uneven_final_batches_are_all_evaluated(runs):
  """72 rows in batches of 16 on 2 replicas: the fifth batch has no partner; it is evaluated
  (the other replica gets 0 rows), so every metric equals one device's over all 72 rows."""
  ours = reference.check(runs)['ours']
  single, replicated = ours['uneven_one_device']['eval'], ours['uneven_mirrored']['eval']
  assert replicated.keys() == single.keys()
  for key in ('accuracy', 'auc', 'loss'):
    assert replicated[key] == pytest.approx(single[key], rel=RTOL, abs=ATOL), key
