"""The demo end to end: digits CNN trained, evaluated and predicted with TPUEstimator over 2
logical CPU shards, in-process and through `python -m tpu_estimator demo`."""
import glob
import logging
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from tpu_estimator import quiet
from tpu_estimator.tools import cli
from tpu_estimator.tools import demo

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STARTUP = os.path.join(REPO, 'tests', 'startup')  # see tests/conftest.py
STEPS = 300
ITERATIONS_PER_LOOP = 100


def _summary_tags(logdir):
  """{tag: [steps]} over the event files directly in `logdir`."""
  tags = {}
  for path in glob.glob(os.path.join(logdir, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        tags.setdefault(value.tag, []).append(event.step)
  return tags


def test_demo_trains_evaluates_and_predicts(tmp_path):
  model_dir = str(tmp_path / 'model')
  lines = []
  result = demo.run(steps=STEPS, shards=2, model_dir=model_dir,
                    iterations_per_loop=ITERATIONS_PER_LOOP, out=lines.append)

  _, (x_test, _) = demo.load_data()
  assert result['accuracy'] > 0.9, result
  assert result['global_step'] == STEPS
  assert result['predictions'] == len(x_test) == result['test_size']
  # Predicted classes agree with the evaluated accuracy (same checkpoint, same examples).
  assert result['predict_accuracy'] == pytest.approx(result['accuracy'], abs=1e-6)
  assert result['steps_per_sec'] > 0
  assert result['model_dir'] == os.path.abspath(model_dir)

  # The host_call's TF2 summary was written to model_dir at the training steps.
  tags = _summary_tags(model_dir)
  assert 'host_call/loss' in tags, sorted(tags)
  steps = tags['host_call/loss']
  assert min(steps) >= 0 and max(steps) <= STEPS and len(steps) >= STEPS // 2, steps

  report = '\n'.join(lines)
  assert 'Test accuracy: %.4f' % result['accuracy'] in report
  assert 'steps/s' in report
  assert 'tensorboard --logdir %s' % result['model_dir'] in report


# What TensorFlow prints about the library's own internals, and its C++ start-up lines.
LIBRARY_NOISE = ('WARNING', 'Issue encountered', 'deprecated', 'cpu_feature_guard', 'absl',
                 'I0000', 'W0000')
# TensorFlow's full (GPU) wheel prints these from its C++ static initializers during
# `import tensorflow`, before TF_CPP_MIN_LOG_LEVEL can apply (TF 2.21 on an H100 machine; the
# tensorflow-cpu wheel does not): TensorFlow's own start-up, not notes about the library.
TENSORFLOW_PREINIT = ('All log messages before absl::InitializeLog()',
                      'oneDNN custom operations are on')


def test_cli_demo_subprocess(tmp_path):
  """The command as a user runs it (no TF_CPP_MIN_LOG_LEVEL set): the report, and not one line
  of TensorFlow's notes about the library's internals, from `demo` and then `inspect`."""
  model_dir = str(tmp_path / 'cli_model')
  env = dict(os.environ)
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)
  # The demo reads scikit-learn's digits: this program sees the optional packages the others
  # do not (tests/startup/sitecustomize.py).
  env['PYTHONPATH'] = os.pathsep.join(
      [REPO] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p and p != STARTUP])
  proc = subprocess.run(
      [sys.executable, '-m', 'tpu_estimator', 'demo', '--steps', '100', '--model-dir',
       model_dir, '--iterations-per-loop', '50'],
      cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  assert 'Test accuracy: ' in proc.stdout, proc.stdout
  assert 'tensorboard --logdir %s' % model_dir in proc.stdout, proc.stdout
  assert glob.glob(os.path.join(model_dir, 'model.ckpt-100.*'))
  inspected = subprocess.run([sys.executable, '-m', 'tpu_estimator', 'inspect', model_dir],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
                             check=False)
  assert inspected.returncode == 0, inspected.stdout + inspected.stderr
  assert 'model.ckpt-100' in inspected.stdout
  for output in (proc.stdout + proc.stderr, inspected.stdout + inspected.stderr):
    noise = [line for line in output.splitlines() if any(n in line for n in LIBRARY_NOISE) and
             not any(p in line for p in TENSORFLOW_PREINIT)]
    assert not noise, output


def test_cli_hides_tensorflow_startup_lines_unless_the_user_chose(monkeypatch):
  monkeypatch.setattr(sys, 'argv', ['/venv/bin/tpu-estimator', 'demo'])
  monkeypatch.delenv('TF_CPP_MIN_LOG_LEVEL', raising=False)
  quiet.quiet_startup()
  assert os.environ['TF_CPP_MIN_LOG_LEVEL'] == '2'
  monkeypatch.setenv('TF_CPP_MIN_LOG_LEVEL', '0')  # the user's choice stands
  quiet.quiet_startup()
  assert os.environ['TF_CPP_MIN_LOG_LEVEL'] == '0'
  monkeypatch.delenv('TF_CPP_MIN_LOG_LEVEL')  # a program importing the library: untouched
  monkeypatch.setattr(sys, 'argv', ['train.py'])
  monkeypatch.setattr(sys, 'orig_argv', ['python', 'train.py'], raising=False)
  quiet.quiet_startup()
  assert 'TF_CPP_MIN_LOG_LEVEL' not in os.environ


def test_internal_calls_hide_tensorflow_notes_only_while_they_run():
  """The library's own calls into TF1 APIs are quiet; the user's code still gets TensorFlow's
  deprecation notice (once, as TensorFlow gives it) and its other warnings."""
  from tensorflow.python.util import deprecation  # pylint: disable=import-outside-toplevel

  @deprecation.deprecated(None, 'Use something else.')
  def old_api():
    return 1

  records = []

  class Collect(logging.Handler):
    def emit(self, record):
      records.append(record.getMessage())

  handler = Collect()
  logger = logging.getLogger('tensorflow')
  logger.addHandler(handler)
  try:
    with quiet.internal_calls():
      old_api()
      logger.warning('Issue encountered when serializing global_step.')
    assert records == []
    logger.warning('Issue encountered when serializing my_collection.')
    old_api()
  finally:
    logger.removeHandler(handler)
  assert len(records) == 2, records
  assert 'my_collection' in records[0] and 'old_api' in records[1], records


@pytest.mark.parametrize('argv', [[], ['demo', '--steps', '0'], ['demo', '--shards', 'x'],
                                  ['demo', '--iterations-per-loop', '5x']])
def test_cli_rejects_bad_arguments(argv, capsys):
  with pytest.raises(SystemExit) as exit_info:
    cli.main(argv)
  assert exit_info.value.code == 2
  assert 'usage: tpu-estimator' in capsys.readouterr().err


def test_cli_parses_demo_flags():
  args = cli.build_parser().parse_args(
      ['demo', '--steps', '7', '--shards', '4', '--model-dir', '/tmp/x',
       '--iterations-per-loop', '30s'])
  assert (args.command, args.steps, args.shards, args.model_dir, args.iterations_per_loop) == (
      'demo', 7, 4, '/tmp/x', '30s')
  defaults = cli.build_parser().parse_args(['demo'])
  assert (defaults.steps, defaults.shards, defaults.model_dir,
          defaults.iterations_per_loop) == (demo.DEFAULT_STEPS, None, None,
                                            demo.DEFAULT_ITERATIONS_PER_LOOP)


def test_demo_export_reloads_and_classifies_like_predict(tmp_path):
  result = demo.run(steps=150, shards=2, model_dir=str(tmp_path / 'model'), out=lambda _: None)
  assert os.path.isfile(os.path.join(result['export_dir'], 'saved_model.pb'))
  assert len(result['served_classes']) == demo.EXPORT_EXAMPLES
  assert result['served_classes'] == result['predicted_classes']  # serving == predict
