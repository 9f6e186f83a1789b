"""Differential tests: the same user program (tests/differential/program.py) runs on the
original Estimator/TPUEstimator (TF 2.15 + tensorflow-estimator, the reference venv built by
scripts/reference-venv.sh) and on tpu_estimator (TF 2.21); the results must agree.

Two rounds in two subprocesses (original and ours in parallel, each in one process for both):
  1. each implementation runs every scenario in its own model_dirs, and writes the sources for
     the cross-implementation checks (N steps) and a reference run (N+K steps in one go);
  2. each implementation evaluates, predicts and resumes training (K steps) in a copy of the
     model_dir the OTHER implementation wrote in round 1.
A broken reference venv FAILS the tests: the comparison is the point. Only a machine that cannot
have one (no Python 3.9-3.11) skips them, with one reason (tests/reference.py).
"""
import os
import shutil
import sys
import tempfile

import numpy as np
import pytest

import reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(REPO, 'tests', 'differential', 'program.py')
IMPLS = ('orig', 'ours')
RTOL, ATOL = 1e-4, 1e-6

SCENARIO_MODELS = ('linear_sgd', 'mlp_adam', 'tpu_list', 'tpu_dict')
RESUME_MODELS = ('mlp_adam', 'tpu_list')
N_STEPS = 12  # two epochs of 6 batches: a resumed input_fn restarts at an epoch boundary
K_STEPS = 8
TIMEOUT = 600


_Failure = reference.Unavailable


def _reference_python():
  return reference.python('The differential tests')


def _run_all():
  pythons = {'orig': _reference_python(), 'ours': sys.executable}
  workdir = tempfile.mkdtemp(prefix='tpu_estimator_differential_')
  try:
    return _run_rounds(pythons, workdir)
  finally:
    shutil.rmtree(workdir, ignore_errors=True)


def _run_rounds(pythons, workdir):
  """Round 1 (scenarios, sources, one-go references), then round 2 (cross resumes)."""

  def d(*parts):
    return os.path.join(workdir, *parts)

  round1 = {}
  for impl in IMPLS:
    tasks = [{'task': 'scenario', 'model': m, 'dir': d(impl, m)} for m in SCENARIO_MODELS]
    for m in RESUME_MODELS:
      tasks.append({'task': 'write', 'model': m, 'dir': d(impl, 'src_' + m), 'steps': N_STEPS})
      tasks.append({'task': 'write', 'model': m, 'dir': d(impl, 'full_' + m),
                    'steps': N_STEPS + K_STEPS})
    tasks.append({'task': 'contract', 'dir': d(impl, 'contract')})
    round1[impl] = tasks

  sources = {impl: {m: d(impl, 'src_' + m) for m in RESUME_MODELS} for impl in IMPLS}
  round2 = lambda: reference.resume_tasks(workdir, sources, RESUME_MODELS, K_STEPS)
  out1, out2 = reference.run_rounds(pythons, PROGRAM, [round1, round2], workdir, 'round',
                                    TIMEOUT)

  results = {}
  for impl in IMPLS:
    r1 = out1[impl]['results']
    n = len(SCENARIO_MODELS)
    results[impl] = {
        'tf_version': out1[impl]['tf_version'],
        'scenario': dict(zip(SCENARIO_MODELS, r1[:n])),
        'src': {m: r1[n + 2 * i] for i, m in enumerate(RESUME_MODELS)},
        'full': {m: r1[n + 2 * i + 1] for i, m in enumerate(RESUME_MODELS)},
        'resumed': dict(zip(RESUME_MODELS, out2[impl]['results'])),
        'contract': r1[n + 2 * len(RESUME_MODELS)],
    }
  return results


@pytest.fixture(scope='session')
def runs():
  """Both rounds, run once per session; a failure is kept so every test reports it."""
  try:
    return _run_all()
  except _Failure as e:
    return e


def _checked(runs):
  # Failing here (in the test, not in the fixture) makes the tests FAIL rather than ERROR.
  return reference.check(runs)


# ---------------------------------------------------------------------------------------------
def assert_close(expected, actual, what):
  reference.assert_close(expected, actual, what, RTOL, ATOL)


def _scenario(results, impl, model):
  return results[impl]['scenario'][model]


def test_reference_is_the_original(runs):
  reference.assert_is_the_original(_checked(runs))


@pytest.mark.parametrize('model', SCENARIO_MODELS)
def test_global_steps_after_steps_then_max_steps(runs, model):
  """train(steps=7) -> 7; train(max_steps=23) -> 23; train(max_steps=20) is a no-op."""
  results = _checked(runs)
  got = {impl: [_scenario(results, impl, model)[k]['global_step']
                for k in ('after_steps', 'after_max_steps', 'after_noop_max_steps')]
         for impl in IMPLS}
  assert got['orig'] == [7, 23, 23]
  assert got['ours'] == got['orig']
  for impl in IMPLS:
    evals = _scenario(results, impl, model)
    assert evals['eval_steps2']['global_step'] == 23
    assert evals['eval_all']['global_step'] == 23


@pytest.mark.parametrize('model', SCENARIO_MODELS)
def test_checkpoint_variable_names(runs, model):
  results = _checked(runs)
  for key in ('after_steps', 'after_max_steps'):
    orig = _scenario(results, 'orig', model)[key]['variable_names']
    ours = _scenario(results, 'ours', model)[key]['variable_names']
    assert ours == orig


@pytest.mark.parametrize('model', SCENARIO_MODELS)
def test_checkpoint_files(runs, model):
  """Same latest checkpoint and retained checkpoints (save_checkpoints_steps=10, keep 3)."""
  results = _checked(runs)
  for key in ('after_steps', 'after_max_steps', 'after_noop_max_steps'):
    for field in ('latest', 'all_checkpoints'):
      orig = _scenario(results, 'orig', model)[key][field]
      ours = _scenario(results, 'ours', model)[key][field]
      assert ours == orig, '%s %s: original %s, ours %s' % (key, field, orig, ours)


@pytest.mark.parametrize('model', SCENARIO_MODELS)
def test_variable_values(runs, model):
  results = _checked(runs)
  for key in ('after_steps', 'after_max_steps'):
    assert_close(_scenario(results, 'orig', model)[key]['variables'],
                 _scenario(results, 'ours', model)[key]['variables'], '%s %s' % (model, key))


@pytest.mark.parametrize('model', SCENARIO_MODELS)
@pytest.mark.parametrize('which', ['eval_steps2', 'eval_all'])
def test_evaluate_metric_keys_and_values(runs, model, which):
  """evaluate(steps=2) and evaluate() over the whole (partial-final-batch) input."""
  results = _checked(runs)
  orig = _scenario(results, 'orig', model)[which]
  ours = _scenario(results, 'ours', model)[which]
  assert list(ours) == list(orig)  # the order too: names sorted, then global_step
  assert {'loss', 'global_step', 'accuracy'} <= set(orig)
  assert_close(orig, ours, '%s %s' % (model, which))


@pytest.mark.parametrize('model', SCENARIO_MODELS)
def test_predict_outputs(runs, model):
  results = _checked(runs)
  orig = _scenario(results, 'orig', model)
  ours = _scenario(results, 'ours', model)
  assert len(orig['predict']) == 40
  assert_close(orig['predict'], ours['predict'], '%s predict' % model)
  # predict_keys + yield_single_examples=False: one dict per batch (16, 16, 8).
  assert [len(b['classes']) for b in orig['predict_classes_batches']] == [16, 16, 8]
  assert_close(orig['predict_classes_batches'], ours['predict_classes_batches'],
               '%s predict batches' % model)


@pytest.mark.parametrize('model', SCENARIO_MODELS)
def test_model_dir_layout_and_summaries(runs, model):
  """Same files in model_dir (checkpoints, graph.pbtxt, event files, eval/) and the same
  scalar summaries (train loss at the same steps, eval metrics at the checkpoint's step)."""
  results = _checked(runs)
  orig = _scenario(results, 'orig', model)
  ours = _scenario(results, 'ours', model)
  assert ours['layout'] == orig['layout']
  assert [s[:3] for s in ours['summaries']] == [s[:3] for s in orig['summaries']]
  assert_close(orig['summaries'], ours['summaries'], '%s summaries' % model)


def test_eval_metrics_list_and_dict_agree(runs):
  """eval_metrics=(metric_fn, [tensors]) and (metric_fn, {name: tensor}) give one result."""
  results = _checked(runs)
  for impl in IMPLS:
    as_list = _scenario(results, impl, 'tpu_list')
    as_dict = _scenario(results, impl, 'tpu_dict')
    for which in ('eval_steps2', 'eval_all'):
      assert_close(as_list[which], as_dict[which], '%s %s' % (impl, which))


def test_sources_agree(runs):
  """The N-step model_dirs each side wrote for the cross checks are themselves equal."""
  results = _checked(runs)
  for model in RESUME_MODELS:
    orig, ours = results['orig']['src'][model], results['ours']['src'][model]
    assert orig['state']['global_step'] == ours['state']['global_step'] == N_STEPS
    assert_close(orig, ours, 'src %s' % model)
    orig, ours = results['orig']['full'][model], results['ours']['full'][model]
    assert orig['state']['global_step'] == ours['state']['global_step'] == N_STEPS + K_STEPS
    assert_close(orig, ours, 'full %s' % model)


@pytest.mark.parametrize('model', RESUME_MODELS)
def test_ours_reads_and_resumes_original_model_dir(runs, model):
  """A model_dir the original trained N steps: ours evaluates and predicts from it as the
  original did, and train(steps=K) continues from N to N+K with the loaded values (equal to
  the original training N+K steps in one go)."""
  results = _checked(runs)
  src = results['orig']['src'][model]
  full = results['orig']['full'][model]
  resumed = results['ours']['resumed'][model]
  assert resumed['before']['global_step'] == N_STEPS
  assert_close(src['state']['variables'], resumed['before']['variables'], 'loaded variables')
  assert_close(src['eval'], resumed['eval_before'], 'evaluate from the original checkpoint')
  assert_close(src['predict'], resumed['predict_before'], 'predict from the original checkpoint')
  after = resumed['after']
  assert after['global_step'] == N_STEPS + K_STEPS
  assert after['variable_names'] == full['state']['variable_names']
  assert_close(full['state']['variables'], after['variables'], 'variables after resuming')
  assert_close(full['eval'], resumed['eval_after'], 'evaluate after resuming')
  # The values moved on from the loaded ones (training happened, from them).
  kernel = [n for n in after['variables'] if n.endswith('kernel')][0]
  assert not np.allclose(after['variables'][kernel], src['state']['variables'][kernel])


@pytest.mark.parametrize('model', RESUME_MODELS)
def test_original_reads_and_resumes_our_model_dir(runs, model):
  """The reverse: a model_dir ours trained N steps is evaluated, predicted and resumed by the
  original with the results ours gets."""
  results = _checked(runs)
  src = results['ours']['src'][model]
  full = results['ours']['full'][model]
  resumed = results['orig']['resumed'][model]
  assert resumed['before']['global_step'] == N_STEPS
  assert resumed['before']['variable_names'] == src['state']['variable_names']
  assert_close(resumed['eval_before'], src['eval'], 'original evaluating our checkpoint')
  assert_close(resumed['predict_before'], src['predict'], 'original predicting our checkpoint')
  assert resumed['after']['global_step'] == N_STEPS + K_STEPS
  assert_close(resumed['after']['variables'], full['state']['variables'],
               'original resuming our model_dir')


@pytest.mark.parametrize('model', RESUME_MODELS)
def test_resumed_checkpoint_files(runs, model):
  """Resuming a model_dir that already holds checkpoints keeps the same ones (keep 3, old
  runs' checkpoints counted) whichever implementation resumes."""
  results = _checked(runs)
  for field in ('latest', 'all_checkpoints'):
    assert results['ours']['resumed'][model]['before'][field] == \
        results['orig']['resumed'][model]['before'][field]
    assert results['ours']['resumed'][model]['after'][field] == \
        results['orig']['resumed'][model]['after'][field]


def test_contract_details_as_the_original(runs):
  """Float step counts (2.5 trains 3, max_steps=5.2 stops at 6, evaluate(steps=1.5) reads 2
  batches), a (None,) loss, a tf.Variable and a Keras Metric as metric values, evaluate's key
  order, and add_metrics: the same results on both."""
  results = _checked(runs)
  orig, ours = results['orig']['contract'], results['ours']['contract']
  assert (orig['after_steps_2_5'], orig['after_max_steps_5_2']) == (3, 6)
  assert orig['keys']['eval_all'] == ['accuracy', 'bias', 'loss', 'zeta_keras', 'global_step']
  assert orig['add_metrics']['accuracy'] == -1.0
  assert ours['keys'] == orig['keys']
  assert_close(orig, ours, 'contract')
