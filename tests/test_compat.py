"""Legacy drop-in: unmodified Estimator/TPUEstimator programs (tests/legacy_programs/) run
through `tpu-estimator run` on TensorFlow 2.16+, and agree with the original (TF 2.15 +
tensorflow-estimator, the reference venv of scripts/reference-venv.sh) running the
same programs natively.

Every program runs in its own process (install() patches TensorFlow for a whole process; it is
never called in the test process).  All processes are started once per session by the `runs`
fixture, two at a time, in two rounds:
  1. the original and ours (single device, and sharded over 2 logical CPUs with `--use_tpu`)
     run tpu_classifier.py; both run layers_estimator.py (tf.compat.v1.layers, tf_keras);
     ours runs tf1_contrib_classifier.py with `--tf1`; plus the CLI and compat probes;
  2. ours (sharded) resumes, evaluates, predicts and exports a copy of the model_dir the
     original wrote, and the original does the same with the sharded model_dir ours wrote;
     each loads the other's SavedModel.
A broken reference venv FAILS the tests: the comparison is the point. Only a machine that cannot
have one (no Python 3.9-3.11) skips them, with one reason (tests/reference.py).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

import reference
import zygote

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(REPO, 'tests', 'legacy_programs')
PARALLEL = 2
TIMEOUT = 600
RTOL, ATOL = 1e-4, 1e-5
N_STEPS, TOTAL_STEPS = 12, 20  # round 1 trains to 12 (3 epochs of 4 loops), round 2 to 20
EVAL_METRICS = {
    'eval_accuracy', 'eval_loss', 'mean_per_class_accuracy', 'precision_class0',
    'recall_class0', 'auc_class0', 'true_positives_class0', 'false_negatives_class0',
    'mse_probabilities', 'rmse_probabilities', 'mae_probabilities', 'mean_iou', 'recall_at_2'}


_Failure = reference.Unavailable
_env = reference.env


def _reference_python():
  return reference.python('The compat tests')


# ---------------------------------------------------------------------------------------------
# Running the processes

class _Job:
  """One process: `argv` under `impl`'s environment, started once `deps` have finished."""

  def __init__(self, name, impl, argv, deps=(), cwd=PROGRAMS, expect_rc=0, before=None):
    self.name, self.impl, self.argv, self.deps = name, impl, argv, tuple(deps)
    self.cwd, self.expect_rc, self.before = cwd, expect_rc, before
    self.proc = self.log = self.rc = self.seconds = None

  def start(self, workdir):
    if self.before is not None:
      self.before()
    self.log_path = os.path.join(workdir, self.name + '.log')
    self.log = open(self.log_path, 'w')
    self.started = time.time()
    self.proc = zygote.Popen(self.argv, cwd=self.cwd, env=_env(self.impl), stdout=self.log,
                             stderr=subprocess.STDOUT)

  def poll(self):
    rc = self.proc.poll()
    if rc is None and time.time() - self.started > TIMEOUT:
      self.proc.kill()
      rc = self.proc.wait()
    if rc is not None:
      self.rc, self.seconds = rc, time.time() - self.started
      self.log.close()
    return rc

  def output(self):
    with open(self.log_path) as f:
      return f.read()


def _run_jobs(jobs, workdir):
  pending, running, done = list(jobs), [], {}
  while pending or running:
    for job in list(running):
      if job.poll() is not None:
        running.remove(job)
        done[job.name] = job
    failed_deps = [j for j in pending if any(d in done and done[d].rc != done[d].expect_rc
                                             for d in j.deps)]
    for job in failed_deps:  # a dependency failed: report that job as not run
      pending.remove(job)
      job.rc, job.seconds, job.log_path = 'not run', 0.0, None
      done[job.name] = job
    for job in list(pending):
      if len(running) < PARALLEL and all(d in done for d in job.deps):
        pending.remove(job)
        job.start(workdir)
        running.append(job)
    time.sleep(0.2)
  return done


def _classifier(impl, python, name, model_dir, init, export, out, extra=(), write_init=True):
  argv = [python] + (['-m', 'tpu_estimator', 'run'] if impl == 'ours' else [])
  argv += ['tpu_classifier.py', '--model_dir=' + model_dir, '--init_checkpoint=' + init,
           '--export_dir=' + export, '--output_json=' + out]
  return argv + (['--write_init_checkpoint'] if write_init else []) + list(extra)


def _build_jobs(orig_python, d):
  ours = sys.executable
  run = [ours, '-m', 'tpu_estimator', 'run']
  sharded = ['--use_tpu', '--num_shards=2', '--iterations_per_loop=4']
  resume = ['--schedule=load_export,evaluate,predict,export,train,evaluate,predict',
            '--train_steps=%d' % TOTAL_STEPS]

  def copy(src, dst):
    return lambda: shutil.copytree(d(src), d(dst))

  def last_export(export_base):
    return lambda: os.path.join(d(export_base), sorted(os.listdir(d(export_base)))[-1])

  jobs = [
      _Job('orig_single', 'orig', _classifier(
          'orig', orig_python, 'orig_single', d('orig_single'), d('orig_init', 'model.ckpt'),
          d('orig_single_export'), d('orig_single.json'))),
      _Job('ours_sharded', 'ours', _classifier(
          'ours', ours, 'ours_sharded', d('ours_sharded'), d('ours_sharded_init', 'model.ckpt'),
          d('ours_sharded_export'), d('ours_sharded.json'), sharded)),
      _Job('ours_single', 'ours', _classifier(
          'ours', ours, 'ours_single', d('ours_single'), d('ours_init', 'model.ckpt'),
          d('ours_single_export'), d('ours_single.json'))),
      _Job('orig_layers', 'orig', [orig_python, 'layers_estimator.py', '--model_dir',
                                   d('orig_layers'), '--output_json', d('orig_layers.json')]),
      _Job('ours_layers', 'ours', run + ['layers_estimator.py', '--model_dir', d('ours_layers'),
                                         '--output_json', d('ours_layers.json')]),
      _Job('ours_tf1', 'ours', run + [
          '--tf1', 'tf1_contrib_classifier.py', '--model_dir=' + d('ours_tf1'),
          '--init_checkpoint=' + d('ours_init', 'model.ckpt'), '--use_tpu', '--num_tpu_cores=2',
          '--export_dir=' + d('ours_tf1_export'), '--output_json=' + d('ours_tf1.json')],
           deps=['ours_single']),
      _Job('probe', 'ours', [ours, 'compat_probe.py', d('probe.json')]),
      _Job('cli_exit_code', 'ours', run + ['argv_and_exit.py', d('cli_exit_code.json'), '3', '--tf1',
                                           '-h', '--', 'x y'], expect_rc=3),
      _Job('cli_tf1_module', 'ours', run + ['--tf1', '-m', 'tf1_probe', d('cli_tf1_module.json'),
                                            '-m', 'x'], expect_rc=1),
  ]
  # Round 2: each side resumes the model_dir the other wrote, and loads the other's export.
  orig_export, ours_export = last_export('orig_single_export'), last_export(
      'ours_sharded_export')
  resume_ours = _Job('ours_resumes_orig', 'ours', None, deps=['orig_single', 'ours_sharded'],
                     before=copy('orig_single', 'ours_resumes_orig'))
  resume_orig = _Job('orig_resumes_ours', 'orig', None, deps=['orig_single', 'ours_sharded'],
                     before=copy('ours_sharded', 'orig_resumes_ours'))

  def set_argv(job, impl, python, export_fn, extra):
    def before(copy_fn=job.before):
      copy_fn()
      job.argv = _classifier(
          impl, python, job.name, d(job.name), d('orig_init', 'model.ckpt'),
          d(job.name + '_export'), d(job.name + '.json'),
          extra + resume + ['--load_export=' + export_fn()], write_init=False)
    job.before = before

  set_argv(resume_ours, 'ours', ours, orig_export, sharded)
  set_argv(resume_orig, 'orig', orig_python, ours_export, [])
  return jobs + [resume_ours, resume_orig]


def _run_all():
  workdir = tempfile.mkdtemp(prefix='tpu_estimator_compat_')
  d = lambda *parts: os.path.join(workdir, *parts)
  try:
    jobs = _build_jobs(_reference_python(), d)
    done = _run_jobs(jobs, workdir)
    failures = []
    for job in jobs:
      if job.rc != job.expect_rc:
        tail = job.output()[-6000:] if job.log_path else ''
        failures.append('%s (%s) exited %s, expected %s:\n%s' % (
            job.name, ' '.join(job.argv or ()), job.rc, job.expect_rc, tail))
    results = {'seconds': {name: round(job.seconds, 1) for name, job in done.items()},
               'failures': failures, 'logs': {}}
    for job in jobs:
      path = d(job.name + '.json')
      if os.path.isfile(path):
        with open(path) as f:
          results[job.name] = json.load(f)
    for name in ('cli_exit_code', 'cli_tf1_module'):
      results['logs'][name] = done[name].output() if done[name].log_path else ''
    results['workdir'] = workdir
    return results
  finally:
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope='session')
def runs():
  """Every process, run once per session; a setup failure is kept so each test reports it."""
  try:
    return _run_all()
  except _Failure as e:
    return e


def _result(runs, *names):
  """The results of the named processes, failing (not erroring) the test when one failed."""
  reference.check(runs)
  failed = [f for f in runs['failures'] if f.split(' ', 1)[0] in names]
  if failed:
    pytest.fail('\n\n'.join(failed), pytrace=False)
  return [runs[name] for name in names]


def _action(report, action, index=0):
  return [r for r in report['results'] if r['action'] == action][index]


def assert_close(expected, actual, what, rtol=RTOL, atol=ATOL):
  reference.assert_close(expected, actual, what, rtol, atol)


# ---------------------------------------------------------------------------------------------
# tpu_classifier.py: the original vs ours, single device and sharded

OURS = ('ours_single', 'ours_sharded')


def test_each_program_ran_on_its_implementation(runs):
  orig, single, sharded = _result(runs, 'orig_single', *OURS)
  assert orig['tf_version'].startswith('2.15') and orig['estimator_module'].startswith(
      'tensorflow_estimator.')
  for ours in (single, sharded):
    assert not ours['tf_version'].startswith('2.15')
    assert ours['estimator_module'] == 'tpu_estimator.estimator'


@pytest.mark.parametrize('which', OURS)
def test_training_global_step_checkpoints_and_variables(runs, which):
  orig, ours = _result(runs, 'orig_single', which)
  orig_train, ours_train = _action(orig, 'train'), _action(ours, 'train')
  assert orig_train['global_step'] == ours_train['global_step'] == N_STEPS
  assert ours_train['all_checkpoints'] == orig_train['all_checkpoints'] == [
      'model.ckpt-0', 'model.ckpt-4', 'model.ckpt-8', 'model.ckpt-12']
  assert ours_train['variable_names'] == orig_train['variable_names']
  assert 'encoder/kernel/Adam' in ours_train['variable_names']
  assert_close(orig_train['variables'], ours_train['variables'], which + ' variables')
  # init_from_checkpoint (in scaffold_fn) took the encoder from the pretrained checkpoint: a
  # zero-initialised encoder would have had no gradient through its ReLU.
  assert np.abs(np.array(ours_train['variables']['encoder/kernel'])).min() > 0


@pytest.mark.parametrize('which', OURS)
def test_eval_metrics_keys_and_values(runs, which):
  orig, ours = _result(runs, 'orig_single', which)
  expected = _action(orig, 'evaluate')['metrics']
  got = _action(ours, 'evaluate')['metrics']
  assert set(expected) == EVAL_METRICS | {'loss', 'global_step'}
  assert got['global_step'] == expected['global_step'] == N_STEPS
  assert_close(expected, got, which + ' metrics')


@pytest.mark.parametrize('which', OURS)
def test_predictions(runs, which):
  orig, ours = _result(runs, 'orig_single', which)
  expected = _action(orig, 'predict')['predictions']
  assert len(expected) == 40
  assert_close(expected, _action(ours, 'predict')['predictions'], which + ' predictions')


@pytest.mark.parametrize('which', OURS)
def test_export_saved_model_loads_with_the_same_signatures(runs, which):
  orig, ours = _result(runs, 'orig_single', which)
  expected, got = _action(orig, 'export')['loaded'], _action(ours, 'export')['loaded']
  assert got['tags'] == expected['tags'] == [['serve'], ['serve', 'tpu']]
  assert got['signatures'] == expected['signatures'] == ['serving_default']
  assert got['inputs'] == expected['inputs']
  assert_close(expected['outputs'], got['outputs'], which + ' export outputs')
  predictions = _action(orig, 'predict')['predictions']
  assert_close([p['probabilities'] for p in predictions], got['outputs']['probabilities'],
               'export vs predict')


def test_user_hooks_with_session_run_args(runs):
  """training/evaluation/prediction_hooks fetching the global step with SessionRunArgs: one
  after_run per session.run (sharded: per device loop of 4 steps, or of up to 4 batches)."""
  orig, single, sharded = _result(runs, 'orig_single', *OURS)
  for report in (orig, single, sharded):
    assert _action(report, 'train')['hooks']['train']['end_step'] == N_STEPS
    assert _action(report, 'evaluate')['hooks']['evaluate']['end_step'] == N_STEPS
    assert _action(report, 'predict')['hooks']['predict']['begin'] == 1
  for action, name in (('train', 'train'), ('evaluate', 'evaluate'), ('predict', 'predict')):
    assert _action(single, action)['hooks'][name] == _action(orig, action)['hooks'][name]
  assert _action(orig, 'train')['hooks']['train']['runs'] == N_STEPS
  assert _action(sharded, 'train')['hooks']['train']['runs'] == N_STEPS // 4
  assert _action(sharded, 'evaluate')['hooks']['evaluate']['runs'] == 2  # 5 batches, 4 a run


def _steps_one_late_at_most(steps):
  """One summary per step, each at its step or (a read racing with the update) one later."""
  return len(steps) == N_STEPS and all(s in (e, e + 1) for s, e in zip(steps, range(N_STEPS)))


def _host_summaries(report, tag):
  return [s for s in report['summaries'] if s[0] == '.' and s[1] == tag]


@pytest.mark.parametrize('which', OURS)
def test_host_call_tf2_summaries(runs, which):
  """host_call's TF2 summaries (its own file writer on model_dir) hold every step's values.
  On one device the step comes from a read of the global step that races with the update in
  both implementations, so there a step may be one late; sharded, it is exact."""
  orig, ours = _result(runs, 'orig_single', which)
  for tag in ('host/loss', 'host/learning_rate'):
    expected, got = _host_summaries(orig, tag), _host_summaries(ours, tag)
    assert _steps_one_late_at_most([s[2] for s in expected])  # the original races too
    assert_close([s[3] for s in expected], [s[3] for s in got], which + ' ' + tag)
    steps = [s[2] for s in got]
    if which == 'ours_sharded':
      assert steps == list(range(N_STEPS))
    else:
      assert _steps_one_late_at_most(steps), steps
  eval_orig = sorted(s for s in orig['summaries'] if s[0] == 'eval')
  eval_ours = sorted(s for s in ours['summaries'] if s[0] == 'eval')
  assert_close(eval_orig, eval_ours, which + ' eval summaries')


# ---------------------------------------------------------------------------------------------
# Model dirs across implementations (round 2)

def _check_reads(writer, reader, loading, evaluating, predicting):
  """`reader`, on `writer`'s model_dir, loads its SavedModel (both tag sets) and evaluates and
  predicts as `writer` did.  The other arguments name each check in failures."""
  loaded = _action(reader, 'load_export')['loaded']
  assert loaded['tags'] == [['serve'], ['serve', 'tpu']]
  assert_close(_action(writer, 'export')['loaded']['outputs'], loaded['outputs'], loading)
  assert_close(_action(writer, 'evaluate')['metrics'], _action(reader, 'evaluate')['metrics'],
               evaluating)
  assert_close(_action(writer, 'predict')['predictions'],
               _action(reader, 'predict')['predictions'], predicting)


def test_ours_sharded_reads_exports_and_resumes_the_originals_model_dir(runs):
  """A model_dir the original wrote: ours (2 shards) evaluates, predicts and exports it as the
  original did, loads the original's SavedModel, then trains on from step 12 to 20."""
  orig, ours = _result(runs, 'orig_single', 'ours_resumes_orig')
  _check_reads(orig, ours, "ours loading the original's export",
               "evaluating the original's checkpoint", "predicting from the original's checkpoint")
  exported = _action(ours, 'export')['loaded']
  assert exported['tags'] == [['serve'], ['serve', 'tpu']]
  assert_close(_action(orig, 'export')['loaded']['outputs'], exported['outputs'],
               "exporting the original's checkpoint")
  trained = _action(ours, 'train')
  assert trained['global_step'] == TOTAL_STEPS
  assert trained['variable_names'] == _action(orig, 'train')['variable_names']
  assert _action(ours, 'evaluate', 1)['metrics']['global_step'] == TOTAL_STEPS


def test_original_reads_exports_and_resumes_our_sharded_model_dir(runs):
  """The reverse: the original evaluates, predicts, exports and resumes the model_dir ours
  wrote with 2 shards, and loads ours' SavedModel."""
  ours, orig = _result(runs, 'ours_sharded', 'orig_resumes_ours')
  _check_reads(ours, orig, 'the original loading our export',
               'the original evaluating our checkpoint',
               'the original predicting from our checkpoint')
  assert _action(orig, 'train')['global_step'] == TOTAL_STEPS


def test_both_resumed_runs_agree(runs):
  """Ours (sharded) continuing the original's run and the original continuing ours (the two
  step-12 sources agree) end with the same variables, checkpoints and metrics at step 20."""
  ours, orig = _result(runs, 'ours_resumes_orig', 'orig_resumes_ours')
  ours_train, orig_train = _action(ours, 'train'), _action(orig, 'train')
  assert ours_train['all_checkpoints'] == orig_train['all_checkpoints'] == [
      'model.ckpt-4', 'model.ckpt-8', 'model.ckpt-12', 'model.ckpt-16', 'model.ckpt-20']
  assert_close(orig_train['variables'], ours_train['variables'], 'variables at step 20')
  assert_close(_action(orig, 'evaluate', 1)['metrics'], _action(ours, 'evaluate', 1)['metrics'],
               'metrics at step 20')
  assert_close(_action(orig, 'predict', 1)['predictions'],
               _action(ours, 'predict', 1)['predictions'], 'predictions at step 20')
  before = _action(ours, 'evaluate')['metrics']['eval_loss']
  assert _action(ours, 'evaluate', 1)['metrics']['eval_loss'] != before  # training happened


# ---------------------------------------------------------------------------------------------
# layers_estimator.py: tf.compat.v1.layers (tf_keras), Estimator, train_and_evaluate

def test_compat_v1_layers_program_matches_the_original(runs):
  orig, ours = _result(runs, 'orig_layers', 'ours_layers')
  assert ours['layers_module'].startswith('tf_keras.'), ours['layers_module']
  assert ours['estimator_module'] == 'tpu_estimator.estimator'
  assert ours['variable_names'] == orig['variable_names']
  assert 'batch_normalization/moving_mean' in ours['variable_names']
  assert ours['metrics']['global_step'] == orig['metrics']['global_step'] == N_STEPS
  for key in ('metrics', 'variables', 'predictions'):
    assert_close(orig[key], ours[key], 'layers ' + key)
  assert ours['export_dir'] == orig['export_dir'] == 'export/final'
  assert_close(orig['export'], ours['export'], 'classification export')


def test_train_and_evaluate_export_results_as_the_original(runs):
  orig, ours = _result(runs, 'orig_layers', 'ours_layers')
  assert ours['export_results'] == orig['export_results'] == [True]


# ---------------------------------------------------------------------------------------------
# tf1_contrib_classifier.py: `tpu-estimator run --tf1`, tf.contrib.tpu, sharded

def test_tf1_contrib_program_matches_the_original(runs):
  """The TF1 spelling of tpu_classifier.py, sharded over 2 CPUs with tf.contrib.tpu names
  and v2 behaviour off, gives what the original gave for tpu_classifier.py."""
  orig, ours = _result(runs, 'orig_single', 'ours_tf1')
  assert ours['tf_module'] == 'TF1Module' and ours['executing_eagerly'] is False
  assert ours['estimator_class'] == 'tpu_estimator.estimator.TPUEstimator'
  train = _action(orig, 'train')
  assert ours['global_step'] == N_STEPS
  assert ours['variable_names'] == train['variable_names']
  assert_close(train['variables'], ours['variables'], 'tf1 variables')
  expected = _action(orig, 'evaluate')['metrics']
  assert_close({k: expected[k] for k in ours['metrics']}, ours['metrics'], 'tf1 metrics')
  assert set(ours['metrics']) == {'eval_accuracy', 'eval_loss', 'auc_class0', 'loss',
                                  'global_step'}
  assert_close(_action(orig, 'predict')['predictions'], ours['predictions'], 'tf1 predictions')
  assert_close(_action(orig, 'export')['loaded']['outputs'], ours['export_outputs'],
               'tf1 export')
  # values in step order; the original's one-device steps may be one late (a racing read)
  assert_close([s[3] for s in _host_summaries(orig, 'host/loss')],
               [s[1] for s in ours['host_losses']], 'tf1 host_call summaries')
  assert [s[0] for s in ours['host_losses']] == list(range(N_STEPS))  # sharded: exact


# ---------------------------------------------------------------------------------------------
# The command: arguments, exit codes, --tf1, -m

def test_run_passes_arguments_and_keeps_the_exit_code(runs):
  """`run SCRIPT ARGS`: sys.argv as `python SCRIPT ARGS` (options after the script are the
  script's), __main__, the script's directory first on sys.path, sys.exit(3) -> exit 3;
  legacy names resolve and tf.compat.v1.layers uses tf_keras."""
  (report,) = _result(runs, 'cli_exit_code')
  assert report['argv'][0] == 'argv_and_exit.py'
  assert report['argv'][2:] == ['3', '--tf1', '-h', '--', 'x y']
  assert report['name'] == '__main__'
  assert os.path.samefile(report['path0'], PROGRAMS)
  assert report['estimator'] == report['tpu_estimator'] == 'tpu_estimator.estimator'
  assert report['cross_shard_optimizer'] == 'tpu_estimator.cross_shard_optimizer'
  assert report['legacy_keras'] == '1'
  assert report['layers'].startswith('tf_keras.')
  assert report['executing_eagerly'] is True  # without --tf1 the program stays TF2


def test_run_tf1_module_gives_the_tf1_api_and_fails_on_uncaught_exceptions(runs):
  """`run --tf1 -m MODULE ARGS`: `import tensorflow as tf` is TF1 with tf.contrib.tpu and
  tf.contrib.cluster_resolver; tf.contrib modules not provided name their replacement; an uncaught
  exception exits 1 with its traceback."""
  (report,) = _result(runs, 'cli_tf1_module')
  assert report['argv'][0].endswith('tf1_probe.py') and report['argv'][2:] == ['-m', 'x']
  assert report['name'] == '__main__'
  assert report['executing_eagerly'] is False
  assert report['has_placeholder'] and report['has_contrib']
  assert report['placeholder_shape'] == '(?, 2)'
  assert set(report['contrib_tpu'].values()) <= {
      'tpu_estimator.estimator', 'tpu_estimator.specs', 'tpu_estimator.config',
      'tpu_estimator.cross_shard_optimizer'}
  assert report['contrib_tpu_run_config'] == 'TPURunConfig'
  assert report['estimator_tpu'] == report['from_contrib_import_tpu'] == (
      'tpu_estimator.estimator')
  assert report['cluster_resolver'] == 'TPUClusterResolver'
  assert 'tf.contrib.seq2seq' in report['contrib_seq2seq_error']
  assert 'tensorflow_addons.seq2seq' in report['contrib_seq2seq_error']
  assert report['contrib_gan_error'].startswith('ModuleNotFoundError')
  assert 'tensorflow_gan' in report['contrib_gan_error']
  assert report['compat_v1_is_tf1'] is None  # tf.compat.v1.contrib too
  assert report['layers'].startswith('tf_keras.')
  assert 'RuntimeError: tf1_probe fails on purpose' in runs['logs']['cli_tf1_module']


def test_run_argument_errors_in_process(tmp_path, capsys, monkeypatch):
  from tpu_estimator.tools import cli  # pylint: disable=import-outside-toplevel
  # Recorded as set, so monkeypatch removes what cli.main sets: later tests (and the
  # processes they start) must not inherit TF_USE_LEGACY_KERAS.
  monkeypatch.setenv('TF_USE_LEGACY_KERAS', 'placeholder')
  monkeypatch.delenv('TF_USE_LEGACY_KERAS')
  assert cli.main(['run', str(tmp_path / 'missing.py')]) == 2
  assert "can't open file" in capsys.readouterr().err
  assert cli.main(['run']) == 2
  assert 'expected SCRIPT or -m MODULE' in capsys.readouterr().err
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['run', '--help'])
  assert exit_info.value.code == 0
  assert 'tpu-estimator run [--tf1] SCRIPT [ARGS...]' in capsys.readouterr().out
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['run', '--bogus', 'x.py'])
  assert exit_info.value.code == 2
  assert cli._split_run_argv(['run', '--tf1', 'x.py', '-m', 'y']) == (
      ['run', '--tf1'], ['x.py', '-m', 'y'])
  assert cli._split_run_argv(['run', '-m', 'pkg.mod', '--flag']) == (
      ['run', '-m', 'pkg.mod'], ['--flag'])
  assert cli._split_run_argv(['run', '-mpkg', 'a']) == (['run', '-mpkg'], ['a'])
  assert cli._split_run_argv(['run', '--', '-x.py', 'a']) == (['run'], ['-x.py', 'a'])


def test_run_names_a_tpu_estimator_module_of_the_programs_own(tmp_path):
  """A program shipping its own tpu_estimator.py (transformer-xl's fork of TF 1.12's) gets
  this library under that name: run says so instead of leaving a puzzling error."""
  import tpu_estimator  # pylint: disable=import-outside-toplevel
  from tpu_estimator.tools import cli  # pylint: disable=import-outside-toplevel
  assert cli._own_tpu_estimator(str(tmp_path)) is None
  (tmp_path / 'tpu_estimator.py').write_text('class TPUEstimator: pass\n')
  assert cli._own_tpu_estimator(str(tmp_path)) == str(tmp_path / 'tpu_estimator.py')
  # this library's own checkout is not a program's module
  assert cli._own_tpu_estimator(os.path.dirname(os.path.dirname(tpu_estimator.__file__))) is None


# ---------------------------------------------------------------------------------------------
# compat.install() itself (compat_probe.py, in its own process)

def test_install_has_no_effect_until_called(runs):
  (probe,) = _result(runs, 'probe')
  assert probe['before/tf.estimator'] is False
  assert probe['before/tf.compat.v1.estimator'] is False
  assert probe['before/CrossShardOptimizer'] == (
      'tensorflow.python.tpu.tpu_optimizer.CrossShardOptimizer')
  assert probe['before/import tensorflow_estimator'].startswith('ERROR ModuleNotFoundError')
  assert not [k for k in probe['before/sys.modules']
              if k.startswith(('tensorflow_estimator', 'tensorflow.estimator',
                               'tensorflow.compat.v1.estimator'))]


def test_install_is_idempotent_and_keeps_tensorflow_working(runs):
  (probe,) = _result(runs, 'probe')
  for key in ('idempotent/same modules', 'idempotent/same attributes', 'idempotent/meta_path',
              'core/eager still on', 'core/tf.compat.v1.tpu.rewrite'):
    assert probe[key] is True, key
  assert probe['contrib/tf.compat.v1.contrib without tf1'] is True  # tf.contrib: always


def test_install_resolves_every_legacy_name(runs):
  (probe,) = _result(runs, 'probe')
  names = {k: v for k, v in probe.items() if k.startswith('names/')}
  assert len(names) > 30
  wrong = {k: v for k, v in names.items() if v is not True and v != 'Namespace'}
  assert not wrong


def test_install_supports_legacy_import_styles(runs):
  (probe,) = _result(runs, 'probe')
  imports = {k: v for k, v in probe.items() if k.startswith('import/')}
  assert len(imports) > 15
  errors = {k: v for k, v in imports.items() if isinstance(v, str)}
  assert not errors
  assert probe['import/same objects'] is True
  assert probe['import/tpu_config.RunConfig is the TPU one'] is True


def test_missing_legacy_names_explain_themselves(runs):
  (probe,) = _result(runs, 'probe')
  assert 'canned estimators' in probe['missing/tf.estimator.BoostedTreesClassifier']
  # Boosted trees name why they cannot exist here (TensorFlow has no kernels for their ops),
  # in both namespaces.
  for key in ('missing/tf.estimator.BoostedTreesClassifier',
              'missing/tf.compat.v1.estimator.BoostedTreesRegressor'):
    assert probe[key].startswith('ERROR AttributeError') and 'no kernels' in probe[key]
  assert probe['canned/tf.estimator.DNNClassifier is ours'] is True
  assert 'tf.compat.v1.estimator.inputs' in probe['missing/tf.estimator.inputs']  # v1 only
  assert probe['missing/import canned'].startswith('ERROR ModuleNotFoundError')
  assert 'boosted_trees' in probe['missing/import canned']
  assert 'not among them' in probe['missing/import canned']
  assert 'no kernels' in probe['missing/import canned']
  assert probe['canned/import dnn'] is True  # the original's module path, our estimator


def test_boosted_trees_message_holds_on_this_tensorflow():
  """The BoostedTrees names' message says TensorFlow has no kernels for their ops: true of
  this TensorFlow (the ops are registered, every kernel is gone); should a release bring the
  kernels back, this fails and the estimators can be built on them (issue 30)."""
  from tpu_estimator import _tf_internals  # pylint: disable=import-outside-toplevel
  ops = ('BoostedTreesEnsembleResourceHandleOp', 'BoostedTreesPredict',
         'BoostedTreesUpdateEnsembleV2', 'BoostedTreesQuantileStreamResourceHandleOp')
  assert {op: _tf_internals.registered_kernel_devices(op) for op in ops} == {
      op: [] for op in ops}


def test_without_tf_keras_compat_v1_layers_names_the_extra(runs):
  (probe,) = _result(runs, 'probe')
  assert probe['no_tf_keras/legacy_keras_available'] is False
  assert probe['no_tf_keras/use_legacy_keras'] is False
  assert probe['no_tf_keras/env'] is None
  message = probe['no_tf_keras/layers.dense']
  # MissingExtraError: an AttributeError naming the extra (tpu-estimator doctor reads its type).
  assert message.startswith('ERROR MissingExtraError') and 'tpu-estimator[legacy]' in message


def test_process_timings_are_reported(runs):
  """Not a check: prints how long each process took (pytest -s shows it)."""
  if isinstance(runs, reference.NotHere):
    reference.check(runs)
  if isinstance(runs, _Failure):
    pytest.skip('no runs')
  print('\ncompat process seconds:', json.dumps(runs['seconds'], sort_keys=True))
