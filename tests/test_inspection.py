"""`tpu-estimator inspect`: checkpoints, variables, eval results and exports of a model_dir
(tpu_estimator.tools.inspection; registered on a parser of our own, as cli.py registers it)."""
import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te
from tpu_estimator.tools import inspection

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _parser():
  parser = argparse.ArgumentParser(prog='tpu-estimator')
  subparsers = parser.add_subparsers(dest='command', metavar='COMMAND')
  subparsers.required = True
  inspection.add_parser(subparsers)
  return parser


def _run(argv):
  args = _parser().parse_args(argv)
  out, err = io.StringIO(), io.StringIO()
  code = args.handler(args, out=out, err=err)
  return code, out.getvalue(), err.getvalue()


def _receiver():
  return te.export.build_raw_serving_input_receiver_fn({'x': tf.zeros([1, h.NUM_FEATURES])})


@pytest.fixture(scope='module')
def model(tmp_path_factory):
  """A model_dir trained 10 steps (checkpoints 0, 5, 10), evaluated twice (`eval`,
  `eval_holdout`), exported under model_dir/export/best and under a separate directory."""
  root = tmp_path_factory.mktemp('inspect')
  model_dir = str(root / 'model')
  x, y = h.make_data()
  est = te.Estimator(h.make_model_fn(), config=te.EstimatorRunConfig(
      model_dir=model_dir, save_checkpoints_steps=5, tf_random_seed=0))
  before = time.time()
  est.train(h.dataset_input_fn(x, y, batch_size=8), max_steps=10)
  after = time.time()
  results = est.evaluate(h.dataset_input_fn(x, y, batch_size=32, repeat=False))
  holdout = est.evaluate(h.dataset_input_fn(x[:16], y[:16], batch_size=8, repeat=False),
                         name='holdout', steps=1)
  best = est.export_saved_model(os.path.join(model_dir, 'export', 'best'), _receiver()).decode()
  other = est.export_saved_model(str(root / 'other_exports'), _receiver()).decode()
  return dict(model_dir=model_dir, results=results, holdout=holdout, best=best, other=other,
              other_base=str(root / 'other_exports'), root=root, train_time=(before, after))


def test_inspect_model_dir_lists_everything(model):
  info = inspection.inspect_model_dir(model['model_dir'], exports=[model['other_base']])
  assert info['model_dir'] == model['model_dir']
  assert info['warnings'] == []

  steps = [c['step'] for c in info['checkpoints']]
  assert steps == [0, 5, 10], info['checkpoints']
  assert all(c['exists'] for c in info['checkpoints'])
  assert info['latest_checkpoint'] == os.path.join(model['model_dir'], 'model.ckpt-10')
  start, end = model['train_time']
  for c in info['checkpoints']:
    assert start - 2 <= c['time'] <= end + 2, (c, start, end)
  assert [c['time'] for c in info['checkpoints']] == sorted(c['time'] for c in info['checkpoints'])

  variables = {v['name']: v for v in info['variables']}
  assert variables['dense/kernel']['shape'] == [h.NUM_FEATURES, h.NUM_CLASSES]
  assert variables['dense/kernel']['dtype'] == 'float32'
  assert variables['dense/bias']['shape'] == [h.NUM_CLASSES]
  assert variables['global_step'] == {'name': 'global_step', 'shape': [], 'dtype': 'int64'}
  assert info['num_values'] == h.NUM_FEATURES * h.NUM_CLASSES + h.NUM_CLASSES + 1

  evals = info['evaluations']
  assert sorted(evals) == ['eval', 'eval_holdout']
  for name, results in (('eval', model['results']), ('eval_holdout', model['holdout'])):
    assert evals[name]['step'] == 10
    assert sorted(evals[name]['metrics']) == ['accuracy', 'loss', 'mean_label']
    for key in ('accuracy', 'loss', 'mean_label'):
      assert evals[name]['metrics'][key] == pytest.approx(float(results[key]), rel=1e-6)
    assert evals[name]['checkpoint_path'] == info['latest_checkpoint']

  exports = {e['path']: e for e in info['exports']}
  assert sorted(exports) == sorted([model['best'], model['other']])
  for export in exports.values():
    assert export['timestamp'] == int(os.path.basename(export['path']))
    assert export['meta_graphs'] == [{'tags': ['serve'],
                                      'signatures': ['serving_default']}], export
  # JSON-serialisable as is.
  assert json.loads(json.dumps(info))['latest_checkpoint'] == info['latest_checkpoint']


def test_eval_results_follow_the_latest_step(model, tmp_path):
  """A later evaluation (higher step) wins; at equal steps the later event wins."""
  logdir = str(tmp_path / 'eval')
  with tf.Graph().as_default():
    writer = tf.compat.v1.summary.FileWriter(logdir)
    for step, value in ((20, 1.0), (30, 2.0), (10, 9.0), (30, 3.0)):
      summary = tf.compat.v1.Summary()
      summary.value.add(tag='accuracy', simple_value=value)
      writer.add_summary(summary, step)
    writer.close()
  step, _, values = inspection.read_last_step_scalars(logdir)
  assert (step, values) == (30, {'accuracy': 3.0})


def _rows(report, title):
  """The rows of the table under `title` in a report, each a list of its cells (split on runs
  of 2+ spaces), the header first, the rule left out."""
  lines = report.splitlines()
  start = lines.index(title) + 1
  rows = []
  for line in lines[start:]:
    if not line.strip():
      break
    if set(line.strip()) != {'─'}:
      rows.append(re.split(r'\s{2,}', line.strip()))
  return rows


def test_format_report(model):
  info = inspection.inspect_model_dir(model['model_dir'])
  report = inspection.format_report(info)
  lines = report.splitlines()
  assert lines[0] == 'Model directory: %s' % model['model_dir']
  assert '\x1b' not in report and all(l == l.rstrip() for l in lines)
  assert _rows(report, 'Checkpoints (3, oldest first)') == [
      ['step', 'saved', 'checkpoint']] + [
          [str(c['step']), inspection._when(c['time']), c['name']]  # pylint: disable=protected-access
          + (['latest'] if c['step'] == 10 else []) for c in info['checkpoints']]
  assert _rows(report, 'Variables in model.ckpt-10 (3 variables, 16 values)') == [
      ['variable', 'dtype', 'shape'], ['dense/bias', 'float32', '[3]'],
      ['dense/kernel', 'float32', '[4, 3]'], ['global_step', 'int64', '[]']]
  evals = _rows(report, 'Evaluations (latest results per eval directory)')
  assert evals[0] == ['eval', 'eval_holdout'] and evals[1] == ['global step', '10', '10']
  assert [r[0] for r in evals[3:]] == ['accuracy', 'loss', 'mean_label'], evals
  accuracy = [float(v) for v in evals[3][1:]]
  assert accuracy == pytest.approx([float(model['results']['accuracy']),
                                    float(model['holdout']['accuracy'])], rel=1e-5)
  relative = os.path.relpath(model['best'], model['model_dir'])
  exports = _rows(report, 'Exports (1)')
  assert exports[0] == ['export', 'saved', 'tags', 'signatures']
  assert exports[1][0] == relative and exports[1][2:] == ['serve', 'serving_default'], exports
  assert model['other'] not in report  # only with --exports


class _Terminal(io.StringIO):

  def isatty(self):
    return True


def _screen(output):
  return re.sub(r'\x1b\[[0-9;?]*[A-Za-z]', '', output).splitlines()


def test_cli_handler(model, monkeypatch):
  code, out, err = _run(['inspect', model['model_dir'], '--exports', model['other_base']])
  assert (code, err) == (0, '')
  assert out.startswith('Model directory: %s\n' % model['model_dir'])
  assert os.path.basename(model['other']) in out and model['other_base'] in out
  assert '\x1b' not in out  # a pipe or a file: no colour, nothing wrapped
  assert any(l.startswith('  ' + model['other']) for l in out.splitlines()), out

  # On a terminal: colours, and the tables fit its width (long paths fold, not cut).
  monkeypatch.setenv('COLUMNS', '60')
  args = _parser().parse_args(['inspect', model['model_dir'], '--exports', model['other_base']])
  terminal = _Terminal()
  assert args.handler(args, out=terminal, err=io.StringIO()) == 0
  shown = terminal.getvalue()
  assert '\x1b[1m' in shown and '\x1b[32mlatest' in shown, repr(shown[:400])
  screen = _screen(shown)
  assert max(len(l) for l in screen) <= 60, screen
  assert 'Checkpoints (3, oldest first)' in screen and 'Exports (2)' in screen
  header = screen.index('Exports (2)') + 1
  column = slice(2, screen[header].index('saved'))
  first_cells = ''.join(l[column].strip() for l in screen[header + 2:])
  assert model['other'] in first_cells, screen[header:]  # folded over lines, whole

  # --json: the dict as it was, byte for byte.
  code, out, err = _run(['inspect', model['model_dir'], '--json'])
  assert code == 0
  assert out == json.dumps(inspection.inspect_model_dir(model['model_dir']), indent=2,
                           sort_keys=True) + '\n'
  assert [c['step'] for c in json.loads(out)['checkpoints']] == [0, 5, 10]
  terminal = _Terminal()
  args = _parser().parse_args(['inspect', model['model_dir'], '--json'])
  assert args.handler(args, out=terminal, err=io.StringIO()) == 0
  assert terminal.getvalue() == out  # on a terminal too


def test_cli_errors_name_the_directory(tmp_path):
  missing = str(tmp_path / 'nope')
  code, out, err = _run(['inspect', missing])
  assert (code, out) == (2, '')
  assert err.startswith('tpu-estimator inspect: error: ') and missing in err, err

  empty = tmp_path / 'empty'
  empty.mkdir()
  (empty / 'eval').mkdir()
  code, out, err = _run(['inspect', str(empty)])
  assert (code, out) == (2, '')
  assert 'No checkpoint in %s' % empty in err, err

  a_file = tmp_path / 'file'
  a_file.write_text('x')
  code, _, err = _run(['inspect', str(a_file)])
  assert code == 2 and 'is not a directory' in err and str(a_file) in err


def test_moved_dir_and_missing_state_file(model, tmp_path):
  """A state file holding stale absolute paths (the dir was moved) and a dir without a
  `checkpoint` file still list their checkpoints."""
  moved = str(tmp_path / 'moved')
  shutil.copytree(model['model_dir'], moved)
  with open(os.path.join(moved, 'checkpoint'), 'w') as f:
    f.write('model_checkpoint_path: "/gone/model.ckpt-10"\n'
            'all_model_checkpoint_paths: "/gone/model.ckpt-5"\n'
            'all_model_checkpoint_paths: "/gone/model.ckpt-10"\n')
  info = inspection.inspect_model_dir(moved)
  assert [(c['name'], c['step']) for c in info['checkpoints']] == [('model.ckpt-5', 5),
                                                                  ('model.ckpt-10', 10)]
  assert info['latest_checkpoint'] == os.path.join(moved, 'model.ckpt-10')

  # The state file's latest wins, even when it is not the last one listed.
  with open(os.path.join(moved, 'checkpoint'), 'w') as f:
    f.write('model_checkpoint_path: "model.ckpt-5"\n'
            'all_model_checkpoint_paths: "model.ckpt-5"\n'
            'all_model_checkpoint_paths: "model.ckpt-10"\n')
  info = inspection.inspect_model_dir(moved)
  assert info['latest_checkpoint'] == os.path.join(moved, 'model.ckpt-5')
  rows = _rows(inspection.format_report(info), 'Checkpoints (2, oldest first)')
  assert [(r[0], r[2:]) for r in rows[1:]] == [('5', ['model.ckpt-5', 'latest']),
                                               ('10', ['model.ckpt-10'])], rows

  # Naming only checkpoints that are gone: the *.index files are listed instead.
  with open(os.path.join(moved, 'checkpoint'), 'w') as f:
    f.write('model_checkpoint_path: "/gone/model.ckpt-99"\n')
  info = inspection.inspect_model_dir(moved)
  assert [c['step'] for c in info['checkpoints']] == [0, 5, 10]
  assert len(info['warnings']) == 1 and 'instead' in info['warnings'][0]

  os.remove(os.path.join(moved, 'checkpoint'))
  info = inspection.inspect_model_dir(moved)
  assert [c['step'] for c in info['checkpoints']] == [0, 5, 10]
  assert info['latest_checkpoint'] == os.path.join(moved, 'model.ckpt-10')
  assert info['warnings'] == []


def test_exports_option_accepts_a_saved_model_dir_and_warns_on_missing(model, tmp_path):
  missing = str(tmp_path / 'none')
  info = inspection.inspect_model_dir(model['model_dir'], exports=[model['other'], missing])
  assert sorted(e['path'] for e in info['exports']) == sorted([model['best'], model['other']])
  assert info['warnings'] == ['Export directory %s does not exist.' % missing]
  assert 'Warning: Export directory %s does not exist.' % missing in \
      inspection.format_report(info)


def test_subprocess_exit_code(tmp_path):
  """The handler's exit code reaches the shell (python -c with a parser of our own)."""
  code = ('import argparse, sys\n'
          'from tpu_estimator.tools import inspection\n'
          'p = argparse.ArgumentParser(prog="tpu-estimator")\n'
          'inspection.add_parser(p.add_subparsers(dest="command"))\n'
          'a = p.parse_args(sys.argv[1:])\n'
          'sys.exit(a.handler(a))\n')
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  env['PYTHONPATH'] = os.pathsep.join(p for p in (REPO, env.get('PYTHONPATH')) if p)
  missing = str(tmp_path / 'missing_dir')
  proc = subprocess.run([sys.executable, '-c', code, 'inspect', missing], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=120, check=False)
  assert proc.returncode == 2, proc.stderr
  assert 'tpu-estimator inspect: error: Model directory %s does not exist.' % missing in \
      proc.stderr
  assert proc.stdout == ''


def test_registering_the_subcommand_does_not_import_tensorflow():
  """cli.py builds every subcommand's parser; `inspect`'s must not import TensorFlow (loaded
  from its file, since importing the package imports TensorFlow)."""
  code = ('import argparse, importlib.util, sys\n'
          'spec = importlib.util.spec_from_file_location("inspection", sys.argv[1])\n'
          'module = importlib.util.module_from_spec(spec)\n'
          'spec.loader.exec_module(module)\n'
          'p = argparse.ArgumentParser()\n'
          'module.add_parser(p.add_subparsers(dest="command"))\n'
          'args = p.parse_args(["inspect", "d", "--exports", "e", "--json"])\n'
          'assert (args.model_dir, args.exports, args.json) == ("d", ["e"], True)\n'
          'print(sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow"))\n')
  proc = subprocess.run([sys.executable, '-c', code, inspection.__file__], capture_output=True,
                        text=True, timeout=60, check=False)
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.strip() == '[]', proc.stdout
