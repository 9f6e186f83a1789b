"""`tensorflow.contrib` and TF 1.x's estimator import paths under `tpu-estimator run`, with and
without `--tf1` (tests/legacy_programs/contrib_import_probe.py, one process each: install()
patches TensorFlow for a whole process), and the hint that sends a TF 1.x program run without
`--tf1` there.  What the contrib functions compute is tested beside them; programs that train
with them are in test_legacy_contrib_programs.py."""
import json
import logging
import os
import subprocess
import sys
import tempfile

import pytest
import tensorflow as tf

from tpu_estimator import compat

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(REPO, 'tests', 'legacy_programs')
TIMEOUT = 300
PROVIDED = ('layers', 'data', 'metrics', 'training', 'summary', 'image', 'opt', 'lookup',
            'estimator')

TF1_PROGRAM = '''
import tensorflow as tf
tf.logging.set_verbosity(tf.logging.INFO)
'''


def _env():
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONPATH=REPO)
  for name in ('TF_CONFIG', 'TF_USE_LEGACY_KERAS'):
    env.pop(name, None)
  return env


@pytest.fixture(scope='module')
def runs():
  """The probe under `run` and `run --tf1`, and a TF 1.x program under plain `run`, started
  together; {name: (returncode, output, report or None)}."""
  workdir = tempfile.mkdtemp(prefix='tpu_estimator_contrib_')
  with open(os.path.join(workdir, 'tf1_program.py'), 'w') as f:
    f.write(TF1_PROGRAM)
  run = [sys.executable, '-m', 'tpu_estimator', 'run']
  commands = {
      'tf2': run + ['contrib_import_probe.py', os.path.join(workdir, 'tf2.json')],
      'tf1': run + ['--tf1', 'contrib_import_probe.py', os.path.join(workdir, 'tf1.json')],
      'hint': run + [os.path.join(workdir, 'tf1_program.py')],
  }
  procs = {name: subprocess.Popen(argv, cwd=PROGRAMS, env=_env(), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
           for name, argv in commands.items()}
  results = {}
  for name, proc in procs.items():
    output, _ = proc.communicate(timeout=TIMEOUT)
    path = os.path.join(workdir, name + '.json')
    report = None
    if os.path.isfile(path):
      with open(path) as f:
        report = json.load(f)
    results[name] = (proc.returncode, output, report)
  return results


def _report(runs, mode):
  rc, output, report = runs[mode]
  assert rc == 0 and report is not None, output[-4000:]
  return report


@pytest.mark.parametrize('mode', ['tf2', 'tf1'])
def test_every_import_form_gives_the_same_objects(runs, mode):
  """`import tensorflow.contrib`, `from tensorflow.contrib import X`,
  `import tensorflow.contrib.X as Y`, `tf.contrib.X` and `tf.compat.v1.contrib.X` all give
  the implementation's objects, with and without --tf1."""
  report = _report(runs, mode)
  assert report['tf_module'] == ('TF1Module' if mode == 'tf1' else 'module')
  assert report['executing_eagerly'] is (mode == 'tf2')
  forms = {k: v for k, v in report.items() if k.startswith('form/')}
  for name in PROVIDED:
    for form in ('from tensorflow.contrib import %s', 'import tensorflow.contrib.%s as',
                 'tf.contrib.%s', 'tf.compat.v1.contrib.%s'):
      assert 'form/' + form % name in forms
  assert forms.pop('form/cluster_resolver') == 'TPUClusterResolver'
  assert {k: v for k, v in forms.items() if v is not True} == {}


@pytest.mark.parametrize('mode', ['tf2', 'tf1'])
def test_deep_contrib_module_paths_resolve(runs, mode):
  """The tensorflow.contrib.X.python... paths programs imported from: ours for the estimator
  names, TensorFlow's own modules for tpu_function / tpu_ops."""
  report = _report(runs, mode)
  deep = {k[len('deep/'):]: v for k, v in report.items() if k.startswith('deep/')}
  assert deep.pop('tpu_function') == 'tensorflow.python.tpu.tpu_function'
  assert deep.pop('tpu_ops') == 'tensorflow.python.tpu.ops.tpu_ops'
  assert deep.pop('cluster_resolver') == 'TPUClusterResolver'
  assert deep.pop('hparam') == 3
  assert deep.pop('slim.nets') == 'tf_slim.nets.resnet_v1'  # tf_slim's, as slim is
  assert deep.pop('slim.python.slim.nets') == 'tf_slim.nets.inception_v3'
  assert len(deep) >= 9 and {k: v for k, v in deep.items() if v is not True} == {}


@pytest.mark.parametrize('mode', ['tf2', 'tf1'])
def test_tf1_internal_estimator_paths_map_to_ours(runs, mode):
  report = _report(runs, mode)
  paths = {k: v for k, v in report.items() if k.startswith('estimator/')}
  missing = paths.pop('estimator/missing')
  assert len(paths) == 8 and {k: v for k, v in paths.items() if v is not True} == {}
  assert missing.startswith('ERROR ModuleNotFoundError')
  assert 'tensorflow.python.estimator.canned.boosted_trees' in missing
  assert 'not among them' in missing and 'Running legacy programs' in missing
  assert report['real/tensorflow.python.ops'] == 'tensorflow.python.ops.array_ops'
  assert report['real/tensorflow.python.tpu'] == 'tensorflow.python.tpu.tpu_function'


@pytest.mark.parametrize('mode', ['tf2', 'tf1'])
def test_what_contrib_does_not_provide_names_itself_and_the_replacement(runs, mode):
  report = _report(runs, mode)
  for key in ('missing/tf.contrib.seq2seq', 'missing/from tensorflow.contrib import seq2seq'):
    assert 'tf.contrib.seq2seq is not provided' in report[key], key
    assert 'tensorflow_addons.seq2seq' in report[key], key
    assert 'tf.contrib.layers' in report[key]  # says what is provided
  assert report['missing/tf.contrib.seq2seq'].startswith('ERROR AttributeError')
  gan = report['missing/import tensorflow.contrib.gan']
  assert gan.startswith('ERROR ModuleNotFoundError') and 'tensorflow_gan' in gan
  for key in ('missing/tf.contrib.layers name',
              'missing/from tensorflow.contrib.layers import name'):
    assert 'tf.contrib.layers.no_such_layer is not provided' in report[key], key
    assert 'tf.keras.layers' in report[key], key
  assert report['missing/tf.contrib.layers name'].startswith('ERROR AttributeError')
  assert 'tensorflow.contrib.tpu.python.tpu.no_such_module' in report['missing/deep path']
  # a name a deep module lacks is an import error, not a stand-in module of that name
  assert report['missing/name from a deep path'].startswith('ERROR ModuleNotFoundError')
  assert 'no_such_name' in report['missing/name from a deep path']


@pytest.mark.parametrize('mode', ['tf2', 'tf1'])
def test_tensorflow_python_keras_is_tf_keras_and_tf_slim_imported_directly_runs(runs, mode):
  """Under run (tf_keras installed), TF 1.x's tensorflow.python.keras paths give tf.keras's
  objects, not TensorFlow's internal Keras copy; a program's own `import tf_slim` gets the
  TensorFlow names tf-slim 1.1.0 calls (gdn, batch_norm and smart_cond on a tensor run)."""
  report = _report(runs, mode)
  assert report['python_keras/same objects'] is True
  missing = report['python_keras/missing']
  assert missing.startswith('ERROR ModuleNotFoundError') and 'tf_keras' in missing
  assert report['tf_slim/direct import'] is True


@pytest.mark.parametrize('mode', ['tf2', 'tf1'])
def test_tensorflow_hub_imports_under_run(runs, mode):
  """Programs of this era import tensorflow_hub at module level (scripts/test.sh installs it
  with --no-deps, as tf_keras). Under --tf1 the probe first makes `pkg_resources` unimportable,
  as setuptools 82+ left it (tensorflow_hub 0.16.1 reads its `parse_version` at import): the
  import works, and leaves no `pkg_resources` behind."""
  report = _report(runs, mode)
  assert report['third_party/tensorflow_hub'] is True
  if mode == 'tf1':
    after = report['third_party/pkg_resources after tensorflow_hub']
    assert after.startswith('ERROR ModuleNotFoundError'), after


@pytest.mark.parametrize('mode', ['tf2', 'tf1'])
def test_tf2_eager_profiler_imports_under_run(runs, mode):
  """TF 2.0's `tensorflow.python.eager.profiler`, which TensorFlow 2.21 dropped (ours there;
  TensorFlow's own on 2.16): tensorflow/models' keras_utils imports it at module level, and
  its trace is saved where asked."""
  assert _report(runs, mode)['third_party/eager profiler'] is True


@pytest.mark.parametrize('mode', ['tf2', 'tf1'])
def test_contrib_rnn_and_stateless_are_core_tensorflows(runs, mode):
  """show_and_tell imports both: TF 1.x's tf.contrib.rnn cells that core TensorFlow also had,
  and the stateless random ops; a contrib-only cell names what there is instead."""
  report = _report(runs, mode)
  assert report['rnn/core cells'] is True and report['stateless'] is True
  missing = report['rnn/contrib-only cell']
  assert missing.startswith('ERROR AttributeError') and 'tf.keras.layers' in missing


def test_tf1_api_modules_import_by_name_under_tf1(runs):
  """TF 1.x programs imported its API modules by name (`from tensorflow.gfile import Exists`,
  transformer-xl's vocabulary.py): under --tf1 they are the v1 modules `tf.` gives."""
  report = _report(runs, 'tf1')
  checks = {k: v for k, v in report.items() if k.startswith('v1_module/')}
  assert len(checks) == 4 and all(v is True for v in checks.values()), checks


def test_tf1_program_without_tf1_is_told_to_rerun_with_it(runs):
  rc, output, _ = runs['hint']
  assert rc == 1
  assert "AttributeError: module 'tensorflow' has no attribute 'logging'" in output
  assert 'tpu-estimator run: tf.logging is TensorFlow 1.x API' in output
  assert 'tf.compat.v1.logging' in output and 'tpu-estimator run --tf1' in output


def _error(fn):
  try:
    fn()
  except (AttributeError, RuntimeError) as e:
    return e
  raise AssertionError('no error')


@pytest.mark.parametrize('expression', [
    'tf.flags', 'tf.gfile', 'tf.app', 'tf.placeholder', 'tf.Session', 'tf.train.AdamOptimizer',
    'tf.contrib_no', 'tf.nn.no_such_op', 'tf.compat.v1.no_such_name'])
def test_tf1_hint_recognises_tf1_only_names(expression):
  """The hint names the TF1 name and `--tf1` for names tf.compat.v1 has and TensorFlow 2
  dropped (also in submodules, e.g. tf.train.AdamOptimizer); nothing for unknown names."""
  error = _error(lambda: eval(expression, {'tf': tf}))  # pylint: disable=eval-used
  hint = compat.tf1_hint(error)
  tf1_only = expression in ('tf.flags', 'tf.gfile', 'tf.app', 'tf.placeholder', 'tf.Session',
                            'tf.train.AdamOptimizer')
  if not tf1_only:
    assert hint is None
    return
  path = expression[len('tf.'):]
  assert hint.startswith('%s is TensorFlow 1.x API' % expression)
  assert 'tf.compat.v1.' + path in hint and 'tpu-estimator run --tf1' in hint


def test_tf1_hint_for_graph_only_code_in_eager_mode():
  error = _error(lambda: tf.compat.v1.placeholder(tf.float32, [None]))
  assert 'tpu-estimator run --tf1' in compat.tf1_hint(error)
  assert compat.tf1_hint(RuntimeError('something else')) is None
  assert compat.tf1_hint(ValueError('module tensorflow')) is None


def test_tf1_hint_for_a_dimension_value_read_from_a_tf2_shape():
  """tensorflow/tpu's RetinaNet (compat.v1 + contrib, no --tf1) reads
  `get_shape()[0].value`, TF 1.x's `Dimension`; TF 2 shapes give ints or None.  The error can
  come raised anew by tf.data's tracing, which keeps only the message."""
  unknown = _error(lambda: tf.TensorShape([None, 4])[0].value)
  known = _error(lambda: tf.TensorShape([3, 4])[0].value)
  retraced = AttributeError("in user code:\n\n    AttributeError: 'NoneType' object has no "
                            "attribute 'value'")
  for error in (unknown, known, retraced):
    assert 'tpu-estimator run --tf1' in compat.tf1_hint(error)
  assert compat.tf1_hint(_error(lambda: object().value)) is None


# ---------------------------------------------------------------------------------------------
# TPUClusterResolver with no TPU named, and the private estimator helper tensorflow/tpu calls

@pytest.fixture(scope='module')
def resolver_runs():
  """tests/legacy_programs/tpu_resolver_program.py (tensorflow/tpu's mnist/resnet pattern)
  with no --tpu: compat.v1 + tf.distribute resolver sharded over 2 CPUs without --tf1, and
  tf.contrib.cluster_resolver on one device with --tf1; {name: (rc, output, report)}."""
  workdir = tempfile.mkdtemp(prefix='tpu_estimator_resolver_')
  run = [sys.executable, '-m', 'tpu_estimator', 'run']
  commands = {
      'distribute_sharded': run + ['tpu_resolver_program.py', '--resolver=distribute',
                                   '--use_tpu', '--num_shards=2'],
      'contrib_tf1': run + ['--tf1', 'tpu_resolver_program.py', '--resolver=contrib'],
  }
  procs = {}
  for name, argv in commands.items():
    argv = argv + ['--model_dir=' + os.path.join(workdir, name),
                   '--output_json=' + os.path.join(workdir, name + '.json')]
    procs[name] = subprocess.Popen(argv, cwd=PROGRAMS, env=_env(), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
  results = {}
  for name, proc in procs.items():
    output, _ = proc.communicate(timeout=TIMEOUT)
    path = os.path.join(workdir, name + '.json')
    report = None
    if os.path.isfile(path):
      with open(path) as f:
        report = json.load(f)
    results[name] = (proc.returncode, output, report)
  return results


@pytest.mark.parametrize('mode', ['distribute_sharded', 'contrib_tf1'])
def test_unnamed_tpu_resolver_runs_the_program_on_this_machine(resolver_runs, mode):
  """TPUClusterResolver('') (TensorFlow 2 raises 'Please provide a TPU Name') resolves to the
  local master with no cluster; RunConfig(cluster=resolver) trains and evaluates; the private
  _load_global_step_from_checkpoint_dir reads 0 before training and the last step after."""
  report = _report(resolver_runs, mode)
  assert report['resolver_class'] == (
      'tpu_estimator.compat.cluster_resolver.TPUClusterResolver')
  assert report['is_tensorflow_resolver'] is True
  assert (report['master'], report['cluster_spec'], report['config_master']) == ('', {}, '')
  assert (report['step_before'], report['step_after'], report['eval_global_step']) == (0, 4, 4)
  assert 0.0 < report['eval_loss'] < 5.0


def _resolver_env(monkeypatch, **values):
  from tpu_estimator.compat import cluster_resolver  # pylint: disable=import-outside-toplevel
  for name in cluster_resolver.TPU_ENV_VARIABLES:
    monkeypatch.delenv(name, raising=False)
  for name, value in values.items():
    monkeypatch.setenv(name, value)
  return cluster_resolver


@pytest.mark.parametrize('tpu', [None, '', b'', [None]])  # a list of one: as TF 1.x took it
def test_resolver_with_no_tpu_logs_once_and_resolves_locally(monkeypatch, tpu):
  cluster_resolver = _resolver_env(monkeypatch)
  records = []
  handler = logging.Handler()
  handler.emit = records.append
  logger = tf.get_logger()
  logger.addHandler(handler)
  level = logger.level
  logger.setLevel(logging.INFO)
  try:
    resolver = cluster_resolver.TPUClusterResolver(tpu)
  finally:
    logger.removeHandler(handler)
    logger.setLevel(level)
  assert resolver.resolved_locally
  assert resolver.master() == '' and resolver.cluster_spec().as_dict() == {}
  assert resolver.get_job_name() == 'worker'
  messages = [r.getMessage() for r in records]
  assert len(messages) == 1 and 'resolving to the local machine' in messages[0]


def test_resolver_with_no_tpu_starts_no_coordinator(monkeypatch):
  """tensorflow/tpu's ncf passes coordinator_name; TF 1.x started a coordinator only for a
  Cloud TPU it resolved, so locally there is none (TensorFlow's 'local' resolver cannot
  start one: it failed with an AttributeError)."""
  cluster_resolver = _resolver_env(monkeypatch)
  for resolver in (cluster_resolver.TPUClusterResolver(None, coordinator_name='coordinator'),
                   cluster_resolver.TPUClusterResolver(None, None, None, 'worker',
                                                       'coordinator')):
    assert resolver.resolved_locally
    assert resolver.master() == '' and resolver.cluster_spec().as_dict() == {}


def test_resolver_with_a_tpu_named_or_configured_goes_to_tensorflow(monkeypatch):
  """A named TPU (or one named in the environment) is TensorFlow's to resolve, and fails as
  TensorFlow's does; zone and project given, so nothing asks GCE metadata here."""
  cluster_resolver = _resolver_env(monkeypatch)
  named = cluster_resolver.TPUClusterResolver('my-tpu', zone='z', project='p')
  assert not named.resolved_locally
  with pytest.raises(Exception) as raised:  # no TPU API client / no network here
    named.master()
  assert 'local' not in str(raised.value)
  cluster_resolver = _resolver_env(monkeypatch, TPU_NAME='env-tpu')
  from_env = cluster_resolver.TPUClusterResolver('', zone='z', project='p')
  assert not from_env.resolved_locally


def test_load_global_step_from_checkpoint_dir(tmp_path):
  """0 for a directory without checkpoints (or none at all), else the latest one's step."""
  from tpu_estimator.compat import namespaces  # pylint: disable=import-outside-toplevel
  load = namespaces.load_global_step_from_checkpoint_dir
  assert load(str(tmp_path / 'missing')) == 0 and load(str(tmp_path)) == 0
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      saver = tf.compat.v1.train.Saver()
      sess.run(step.assign(7))
      saver.save(sess, str(tmp_path / 'model.ckpt'), global_step=7)
      sess.run(step.assign(12))
      saver.save(sess, str(tmp_path / 'model.ckpt'), global_step=12)
  assert load(str(tmp_path)) == 12
