"""`tpu-estimator doctor`: reading a program's names (in this process: no install()), and the
verdicts, JSON and exit codes (one subprocess, tests/legacy_programs/doctor_probe.py, since the
doctor calls compat.install()).  The verdicts must agree with what the runtime does: the probe
executes every table name's statement after install() and the test compares, name by name."""
import json
import os
import subprocess
import sys

import pytest

from tpu_estimator.compat import extras
from tpu_estimator.tools import doctor

HERE = os.path.dirname(os.path.abspath(__file__))
LEGACY = os.path.join(HERE, 'legacy_programs')


def _scan_text(tmp_path, text, name='prog.py', **files):
  for other, body in files.items():
    path = tmp_path / other
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
  program = tmp_path / name
  program.write_text(text)
  refs, read = doctor.scan(str(program), str(tmp_path))
  return ({'.'.join(r.parts()) for r in refs if not r.package},
          [os.path.basename(f) for f in read], refs)


def test_scan_reads_every_import_style(tmp_path):
  names, _, _ = _scan_text(tmp_path, '''
import tensorflow as tf
import tensorflow.compat.v1 as tf1
import tensorflow_estimator as tfe
import tensorflow.contrib.slim as slim
from tensorflow.contrib import tpu as contrib_tpu
from tensorflow.python.estimator import estimator
from tensorflow.compat.v1 import estimator as tf_estimator
import numpy as np
FLAGS = tf.flags.FLAGS

def model_fn(features, labels, mode):
  if mode == tf.estimator.ModeKeys.TRAIN:
    opt = contrib_tpu.CrossShardOptimizer(tf1.train.AdamOptimizer())
  net = slim.conv2d(features, 4, 3)
  return tf_estimator.tpu.TPUEstimatorSpec(mode, loss=np.sum(net))
est = tfe.estimator.Estimator(model_fn)
estimator._load_global_step_from_checkpoint_dir(FLAGS.model_dir)
''')
  for expected in ('tensorflow.estimator.ModeKeys.TRAIN',
                   'tensorflow.compat.v1.train.AdamOptimizer',
                   'tensorflow.contrib.tpu', 'tensorflow.contrib.tpu.CrossShardOptimizer',
                   'tensorflow.contrib.slim', 'tensorflow.contrib.slim.conv2d',
                   'tensorflow_estimator.estimator.Estimator',
                   'tensorflow.python.estimator.estimator',
                   'tensorflow.python.estimator.estimator._load_global_step_from_checkpoint_dir',
                   'tensorflow.compat.v1.estimator.tpu.TPUEstimatorSpec',
                   'tensorflow.flags.FLAGS', 'tensorflow.flags.FLAGS.model_dir'):
    assert expected in names, (expected, sorted(names))
  assert not any(n.startswith('numpy') for n in names)


def test_scan_follows_local_modules_only(tmp_path):
  names, read, refs = _scan_text(
      tmp_path, 'import modeling\nfrom utils import helpers\nimport os\nmodeling.build()\n',
      **{'modeling.py': 'import tensorflow as tf\nx = tf.contrib.layers.layer_norm\n',
         'utils/__init__.py': '',
         'utils/helpers.py': 'from . import deeper\n',
         'utils/deeper.py': 'import tensorflow as tf\ny = tf.estimator.tpu.TPUEstimator\n',
         'unused.py': 'import tensorflow as tf\nz = tf.contrib.gan\n'})
  assert read == ['prog.py', 'modeling.py', '__init__.py', 'helpers.py', 'deeper.py']
  assert 'tensorflow.contrib.layers.layer_norm' in names
  assert 'tensorflow.estimator.tpu.TPUEstimator' in names
  assert 'tensorflow.contrib.gan' not in names  # not imported by the program
  where = {'.'.join(r.parts()): (os.path.basename(r.file), r.line) for r in refs}
  assert where['tensorflow.estimator.tpu.TPUEstimator'] == ('deeper.py', 2)


def test_scan_leaves_out_a_name_bound_to_another_module_too(tmp_path):
  names, _, _ = _scan_text(tmp_path, '''
import sys
import tensorflow as tf
if sys.argv[1] == 'orig':
  E = tf.estimator
else:
  import tpu_estimator as E
E.RunConfig = E.EstimatorRunConfig
''')
  assert 'tensorflow.estimator.EstimatorRunConfig' not in names


def test_module_mode_finds_the_file_and_its_package(tmp_path):
  (tmp_path / 'pkg').mkdir()
  (tmp_path / 'pkg' / '__init__.py').write_text('')
  (tmp_path / 'pkg' / 'main.py').write_text('from . import model\n')
  (tmp_path / 'pkg' / 'model.py').write_text('import tensorflow as tf\nx = tf.contrib.tpu\n')
  path, root, name = doctor.program_file(module='pkg.main', cwd=str(tmp_path))
  refs, read = doctor.scan(path, root, name)
  assert [os.path.basename(f) for f in read] == ['main.py', '__init__.py', 'model.py']
  assert ['.'.join(r.parts()) for r in refs if not r.package] == ['tensorflow',
                                                                  'tensorflow.contrib.tpu']
  with pytest.raises(FileNotFoundError, match='no module named'):
    doctor.program_file(module='pkg.absent', cwd=str(tmp_path))


def test_missing_extras_are_their_own_verdict(monkeypatch):
  assert issubclass(extras.MissingExtraError, AttributeError)  # what programs caught before
  ref = doctor.Ref('tensorflow.compat.v1', None, ('layers', 'dense'), 'p.py', 3)
  error = extras.MissingExtraError('tf.compat.v1.layers.dense needs the tf_keras package',
                                   'tf_keras')
  assert doctor._verdict(ref, ref.parts(), None, False, error) == ('extra', str(error))
  hub = doctor.Ref('tensorflow_hub', None, (), 'p.py', 1)
  monkeypatch.setattr(extras, 'installed', lambda package: False)
  verdict, message = doctor._verdict(hub, hub.parts(), None, False, None)
  assert verdict == 'extra' and 'pip install tensorflow-hub' in message


def test_packages_the_program_imports_must_be_installed(tmp_path):
  _, _, refs = _scan_text(tmp_path, '''
import os
import numpy as np
import no_such_package_for_doctor.sub
from helper import x
try:
  import optional_missing_package
except ImportError:
  optional_missing_package = None
''', **{'helper.py': 'x = 1\n'})
  packages = [r.module for r in refs if r.package]
  assert packages == ['os', 'numpy', 'no_such_package_for_doctor']  # helper is local
  judged = list(doctor._verdicts(refs, tf1_mode=False))
  assert [(name, verdict) for _, name, verdict, _ in judged] == [
      ('no_such_package_for_doctor', 'extra')]


def test_unreadable_program_exits_2(tmp_path, capsys):
  py2 = tmp_path / 'py2.py'
  py2.write_text('import tensorflow as tf\nprint "hello"\n')
  from tpu_estimator.tools import cli  # pylint: disable=import-outside-toplevel
  # cli.main prepares run's environment (TF_USE_LEGACY_KERAS=1) in this process: put back after,
  # or every later test's child processes would load tf_keras as tf.keras.
  before = os.environ.get('TF_USE_LEGACY_KERAS')
  try:
    assert cli.main(['doctor', str(py2)]) == 2
    assert 'cannot read the program' in capsys.readouterr().err
    assert cli.main(['doctor', str(tmp_path / 'absent.py')]) == 2
    assert cli.main(['doctor']) == 2
  finally:
    if before is None:
      os.environ.pop('TF_USE_LEGACY_KERAS', None)
    else:
      os.environ['TF_USE_LEGACY_KERAS'] = before


# ---------------------------------------------------------------------------------------------
# Verdicts (one subprocess)

PROGRAMS = ('legacy_programs/tf1_contrib_classifier.py', 'legacy_programs/layers_estimator.py',
            'legacy_programs/contrib_tf115_classifier.py', 'legacy_programs/tf1_probe.py',
            'legacy_programs/tpu_resolver_program.py', 'differential/program.py',
            'multiworker/ps_program.py')


@pytest.fixture(scope='module')
def probe(tmp_path_factory):
  work = tmp_path_factory.mktemp('doctor')
  out = work / 'out.json'
  subprocess.run([sys.executable, os.path.join(LEGACY, 'doctor_probe.py'), str(out), str(work)]
                 + [os.path.join(HERE, p) for p in PROGRAMS], check=True, timeout=600)
  result = json.loads(out.read_text())
  result['work'] = str(work)
  return result


def _report(probe, name):
  return probe['json'][next(p for p in probe['json'] if p.endswith(name))]


def _verdicts(report):
  return {n['name']: n['verdict'] for n in report['names']}


def test_json_shape_and_exit_codes(probe):
  for program, report in probe['json'].items():
    assert set(report) == {'program', 'files', 'names', 'counts', 'covered', 'run_with'}
    assert report['counts'] == {v: sum(n['verdict'] == v for n in report['names'])
                                for v, _ in doctor.VERDICTS}
    for entry in report['names']:
      assert set(entry) == {'name', 'verdict', 'message', 'locations'}
      assert entry['locations'] and all(set(w) == {'file', 'line'} for w in entry['locations'])
    assert probe['exit'][program] == (0 if report['covered'] else 1)
    assert report['covered'] == all(n['verdict'] in doctor.COVERED for n in report['names'])


def test_programs_of_each_style(probe):
  tf1 = _report(probe, 'tf1_contrib_classifier.py')
  verdicts = _verdicts(tf1)
  assert verdicts['tf.flags'] == 'tf1' and verdicts['tf.train.AdamOptimizer'] == 'tf1'
  # Under --tf1, tf.metrics is tf.compat.v1.metrics: not Keras's, not "not provided".
  assert verdicts['tf.metrics.accuracy'] == 'tf1'
  assert verdicts['tf.contrib.tpu.TPUEstimator'] == 'run'
  assert verdicts['tf.contrib.cluster_resolver.TPUClusterResolver'] == 'run'
  assert tf1['run_with'] == 'tpu-estimator run --tf1' and not tf1['covered']

  layers = _report(probe, 'layers_estimator.py')
  verdicts = _verdicts(layers)
  assert layers['covered'] and layers['run_with'] == 'tpu-estimator run'
  assert verdicts['tf.compat.v1.layers.dense'] == 'run'  # routed to tf_keras by run
  assert verdicts['tf.estimator.train_and_evaluate'] == 'run'
  assert verdicts['tf.compat.v1.train.MomentumOptimizer'] == 'as_is'

  contrib115 = _verdicts(_report(probe, 'contrib_tf115_classifier.py'))
  assert contrib115['tensorflow.contrib.tpu'] == 'run'  # from tensorflow.contrib import tpu
  assert contrib115['tf.contrib.tpu.TPUEstimator'] == 'run'  # contrib_tpu.TPUEstimator
  assert contrib115['tf.contrib.data.map_and_batch'] == 'run'

  probe_names = _report(probe, 'tf1_probe.py')['names']
  missing = {n['name']: n['message'] for n in probe_names if n['verdict'] == 'missing'}
  assert 'tf.contrib.seq2seq' in missing
  assert 'tensorflow_addons.seq2seq' in missing['tf.contrib.seq2seq']  # the runtime's hint

  resolver = _verdicts(_report(probe, 'tpu_resolver_program.py'))
  assert resolver['tensorflow.python.estimator.estimator'] == 'run'
  assert resolver['tf.compat.v1.tpu.CrossShardOptimizer'] == 'run'  # ours replaces TF's


def test_human_output(probe):
  assert probe['human_exit'] == 1
  text = probe['human']
  assert 'needs `tpu-estimator run --tf1`' in text and 'works under `tpu-estimator run`' in text
  assert 'tf.contrib.tpu.TPUEstimator  tf1_contrib_classifier.py:' in text
  assert text.rstrip().splitlines()[-1].endswith('Run it with `tpu-estimator run --tf1`.')


def test_verdicts_match_what_the_runtime_does_for_every_table_name(probe):
  checked = 0
  for program in ('tables_program.py', 'tf1_program.py'):
    report = _report(probe, program)
    for entry in report['names']:
      for where in entry['locations']:
        outcome = probe['executed']['%s:%d' % (program, where['line'])]
        if entry['verdict'] in doctor.COVERED:
          assert outcome == 'ok', (entry, outcome)
        elif entry['verdict'] == 'tf1':  # fails without --tf1 (tf_only: v1 has it)
          assert outcome == 'tf1' or outcome.startswith('raised'), (entry, outcome)
        else:
          assert outcome.startswith('raised'), (entry, outcome)
          if entry['verdict'] == 'missing':
            assert entry['message'] in outcome or entry['name'] in outcome, (entry, outcome)
        checked += 1
  # Every statement of the table program got a verdict (none was left out).
  lines = sum(1 for key in probe['executed'] if key.startswith('tables_program.py:'))
  covered = {w['line'] for e in _report(probe, 'tables_program.py')['names']
             for w in e['locations']}
  assert len(covered) == lines and checked >= lines
  tables = _verdicts(_report(probe, 'tables_program.py'))
  assert tables['tf.contrib.gan'] == 'missing' and tables['tf.contrib.layers'] == 'run'
  assert tables['tf.estimator.BoostedTreesClassifier'] == 'missing'


def test_rich_tables_on_a_terminal():
  import io  # pylint: disable=import-outside-toplevel
  result = doctor.report('p.py', ['/x/p.py'], [
      {'name': 'tf.flags', 'verdict': 'tf1', 'message': 'm', 'locations': [{'file': 'p.py',
                                                                             'line': 3}]},
      {'name': 'tf.contrib.gan', 'verdict': 'missing', 'message': 'use tensorflow_gan',
       'locations': [{'file': 'p.py', 'line': 4}]}], root='/x')
  assert result['counts']['missing'] == 1 and not result['covered']
  assert result['run_with'] is None  # something is missing: no command runs it as is
  out = io.StringIO()
  doctor.print_report(result, out, rich_tables=True)
  text = out.getvalue()
  assert 'not provided (1)' in text and 'use tensorflow_gan' in text and 'p.py:4' in text
  assert 'Not everything is covered' in text
