"""Legacy drop-in: TensorFlow's removed estimator namespaces, resolved to tpu_estimator.

TensorFlow 2.16 removed `tf.estimator` and `tf.compat.v1.estimator`.  `install()` puts them
back, backed by this package, so a program written against them runs unchanged;
`tpu-estimator run` calls it before running a program.  Nothing here runs on import: a program
that never calls `install()` sees TensorFlow exactly as shipped.

`install()` (idempotent) sets, on TensorFlow's module objects:
- `tf.estimator`, `tf.compat.v2.estimator`: the v2 namespace (plus `.tpu`, as in TF 1.x);
- `tf.compat.v1.estimator`: the v1 namespace, with `.tpu`, `.export`, `.experimental`;
- `tf.compat.v1.tpu.CrossShardOptimizer`: ours (TensorFlow's calls a TPU-only op);
and registers in `sys.modules` the import paths legacy code used: `tensorflow.estimator[.*]`,
`tensorflow.compat.v1.estimator[.*]`, `tensorflow.compat.v2.estimator[.*]`,
`tensorflow_estimator`, `tensorflow_estimator.estimator[.*]` and the common
`tensorflow_estimator.python.estimator.*` modules (see `_legacy_modules`), plus
`tensorflow.compat[.v1|.v2]` (the patched objects: a later `import tensorflow.compat.v1 as tf`
would otherwise load fresh, unpatched copies).
`install(tf1=True)` also turns v2 behaviour off and makes `import tensorflow` give the TF1 API
with `tf.contrib.tpu` and `tf.contrib.cluster_resolver`.

Names the original had but this package does not provide (canned estimators, heads,
`inputs.numpy_input_fn`, TPU embedding) raise an `AttributeError` saying so.
"""
import importlib.abc
import importlib.util
import os
import sys
import types

import tensorflow as tf
from tensorflow.python.saved_model.model_utils import export_output as _export_output

import tpu_estimator as _te
from tpu_estimator import export as _export

_LEGACY_EXTRA = 'tpu-estimator[legacy]'

# ---------------------------------------------------------------------------------------------
# What each legacy namespace holds: the original's public names (tensorflow-estimator 2.15).

_HOOK_NAMES = (
    'CheckpointSaverHook', 'CheckpointSaverListener', 'FeedFnHook', 'FinalOpsHook',
    'GlobalStepWaiterHook', 'LoggingTensorHook', 'NanTensorHook', 'ProfilerHook',
    'SecondOrStepTimer', 'SessionRunArgs', 'SessionRunContext', 'SessionRunHook',
    'SessionRunValues', 'StepCounterHook', 'StopAtStepHook', 'SummarySaverHook', 'VocabInfo')
_ESTIMATOR_NAMES = (
    'BestExporter', 'Estimator', 'EstimatorSpec', 'EvalSpec', 'Exporter', 'FinalExporter',
    'LatestExporter', 'ModeKeys', 'NanLossDuringTrainingError', 'RunConfig', 'TrainSpec',
    'WarmStartSettings', 'train_and_evaluate') + _HOOK_NAMES
_EXPORT_NAMES = (
    'ClassificationOutput', 'EvalOutput', 'ExportOutput', 'PredictOutput', 'RegressionOutput',
    'ServingInputReceiver', 'TensorServingInputReceiver',
    'build_parsing_serving_input_receiver_fn', 'build_raw_serving_input_receiver_fn')
_EXPERIMENTAL_NAMES = (
    'InMemoryEvaluatorHook', 'build_raw_supervised_input_receiver_fn',
    'make_early_stopping_hook', 'make_stop_at_checkpoint_step_hook', 'stop_if_higher_hook',
    'stop_if_lower_hook', 'stop_if_no_decrease_hook', 'stop_if_no_increase_hook')
_TPU_NAMES = ('InputPipelineConfig', 'RunConfig', 'TPUConfig', 'TPUEstimator',
              'TPUEstimatorSpec', 'ExportSavedModelApiVersion')
_CONTRIB_TPU_NAMES = ('CrossShardOptimizer', 'InputPipelineConfig', 'RunConfig', 'TPUConfig',
                      'TPUEstimator', 'TPUEstimatorSpec', 'ExportSavedModelApiVersion')

_CANNED = ('canned estimators and heads are not part of tpu_estimator, which re-implements the '
           'model_fn core: write a model_fn (e.g. with tf.compat.v1.layers or Keras layers)')
_MISSING_HINTS = {
    'inputs': 'build the input in input_fn with tf.data.Dataset.from_tensor_slices',
    'numpy_input_fn': 'build the input in input_fn with tf.data.Dataset.from_tensor_slices',
    'pandas_input_fn': 'build the input in input_fn with '
                       'tf.data.Dataset.from_tensor_slices(dict(dataframe))',
    'add_metrics': "return the metrics from model_fn (EstimatorSpec.eval_metric_ops or "
                   "TPUEstimatorSpec.eval_metrics)",
    'EmbeddingConfigSpec': 'TPU embedding needs TPU hardware, which tpu_estimator does not '
                           'drive; use tf.nn.embedding_lookup in model_fn',
    'classifier_parse_example_spec': 'build the feature spec with tf.io.FixedLenFeature',
    'regressor_parse_example_spec': 'build the feature spec with tf.io.FixedLenFeature',
}
_CANNED_MARKERS = ('Classifier', 'Regressor', 'Head', 'DNN', 'Linear', 'Baseline', 'KMeans',
                   'RNN', 'BoostedTrees', 'logit_fn')

# tf.contrib modules and what replaced them in TensorFlow 2.
_CONTRIB_REPLACEMENTS = {
    'bayesflow': 'tensorflow_probability',
    'checkpoint': 'tf.train.Checkpoint',
    'compiler': 'tf.function(jit_compile=True)',
    'crf': 'tensorflow_addons.text.crf',
    'cudnn_rnn': 'tf.keras.layers.LSTM / tf.keras.layers.GRU',
    'data': 'tf.data.experimental (e.g. map_and_batch -> Dataset.map(...).batch(...), '
            'parallel_interleave -> Dataset.interleave(..., num_parallel_calls=...))',
    'distribute': 'tf.distribute',
    'distributions': 'tensorflow_probability.distributions',
    'eager': 'TF2 eager execution and tf.function',
    'estimator': 'tf.compat.v1.estimator (tpu_estimator)',
    'feature_column': 'tf.feature_column',
    'framework': 'tf.compat.v1 (e.g. tf.compat.v1.train.get_or_create_global_step) and the '
                 'tf_slim package (arg_scope)',
    'gan': 'the tensorflow_gan package',
    'graph_editor': 'nothing: edit the tf.Graph / GraphDef directly',
    'image': 'tf.image (tensorflow_addons.image for the rest)',
    'integrate': 'tensorflow_probability.math.ode',
    'keras': 'tf.keras',
    'layers': 'tf.compat.v1.layers / tf.keras.layers (the tf_slim package for slim layers)',
    'learn': 'tf.compat.v1.estimator (tpu_estimator)',
    'lookup': 'tf.lookup',
    'losses': 'tf.compat.v1.losses',
    'memory_stats': 'tf.config.experimental.get_memory_info',
    'metrics': 'tf.compat.v1.metrics',
    'nccl': 'tf.distribute (MirroredStrategy all-reduce)',
    'opt': 'tf.compat.v1.train optimizers or tf.keras.optimizers',
    'predictor': 'tf.saved_model.load',
    'quantize': 'the tensorflow_model_optimization package',
    'rnn': 'tf.keras.layers (LSTM, GRU, RNN) or tf.compat.v1.nn.rnn_cell',
    'saved_model': 'tf.saved_model',
    'seq2seq': 'tensorflow_addons.seq2seq',
    'slim': 'the tf_slim package (import tf_slim as slim)',
    'stateless': 'tf.random.stateless_*',
    'summary': 'tf.summary (TF2 summaries: tf.summary.create_file_writer, '
               'tf.summary.scalar(..., step=...))',
    'tensorboard': 'tf.summary and the tensorboard package',
    'tfprof': 'tf.profiler',
    'training': 'tf.compat.v1.train (HParams: a dict or absl flags)',
    'util': 'tf.make_tensor_proto / tf.make_ndarray',
}


def _missing_message(qualname, name):
  hint = _MISSING_HINTS.get(name)
  if hint is None and any(marker in name for marker in _CANNED_MARKERS):
    hint = _CANNED
  text = '%s.%s is not provided by tpu_estimator' % (qualname, name)
  return text + (': %s.' % hint if hint else '.') + (
      " See README.md, 'Running legacy programs'.")


def _contrib_message(qualname, name):
  del qualname  # always tf.contrib
  replacement = _CONTRIB_REPLACEMENTS.get(name)
  text = 'tf.contrib.%s is not available: tf.contrib was removed in TensorFlow 2' % name
  if replacement:
    text += '; use %s instead' % replacement
  return text + ('. `tpu-estimator run --tf1` provides only tf.contrib.tpu and '
                 'tf.contrib.cluster_resolver.')


class _Namespace(types.ModuleType):
  """A module object standing for a legacy API namespace.  A name it does not hold is looked
  up in `fallback` (a module or None), else raises an AttributeError with
  `missing(qualname, name)`."""

  def __init__(self, name, qualname, values, fallback=None, missing=_missing_message):
    super().__init__(name, 'tpu_estimator stand-in for `%s`.' % qualname)
    self.__dict__.update(values)
    self.__dict__['_legacy_qualname'] = qualname
    self.__dict__['_legacy_fallback'] = fallback
    self.__dict__['_legacy_missing'] = missing
    self.__path__ = []  # a package: submodules are registered in sys.modules

  def __getattr__(self, name):
    if name.startswith('_'):
      raise AttributeError(name)
    fallback = self.__dict__['_legacy_fallback']
    if fallback is not None and hasattr(fallback, name):
      return getattr(fallback, name)
    raise AttributeError(self.__dict__['_legacy_missing'](self.__dict__['_legacy_qualname'],
                                                          name))

  def __dir__(self):
    return sorted(k for k in self.__dict__ if not k.startswith('_'))


class _MissingModuleFinder(importlib.abc.MetaPathFinder):
  """Turns imports of unprovided legacy modules into a ModuleNotFoundError that says why."""

  def __init__(self):
    self.prefixes = {}  # prefix -> message(fullname)

  def find_spec(self, fullname, path=None, target=None):
    for prefix, message in self.prefixes.items():
      if fullname.startswith(prefix) and fullname not in sys.modules:
        raise ModuleNotFoundError(message(fullname), name=fullname)
    return None


class _TF1Module(types.ModuleType):
  """`import tensorflow` under `install(tf1=True)`: the v1 API (`tf.compat.v1`) plus
  `tf.contrib`; submodule imports (`tensorflow.python...`) still find TensorFlow's files."""

  def __init__(self, real, v1):
    super().__init__('tensorflow', v1.__doc__)
    self.__dict__['_legacy_v1'] = v1
    for key in ('__path__', '__file__', '__spec__', '__loader__', '__package__'):
      if hasattr(real, key):
        self.__dict__[key] = getattr(real, key)

  def __getattr__(self, name):
    return getattr(self.__dict__['_legacy_v1'], name)

  def __dir__(self):
    return sorted(set(dir(self.__dict__['_legacy_v1'])) | set(self.__dict__))


# ---------------------------------------------------------------------------------------------
# Building the namespaces (once per process).

def _ours(name):
  """Our object for one of the original's public names, or None."""
  special = {'RunConfig': _te.EstimatorRunConfig}
  if name in special:
    return special[name]
  if hasattr(_te, name):
    return getattr(_te, name)
  if name in _HOOK_NAMES:
    return getattr(tf.compat.v1.train, name, None)
  return None


def _pick(names, lookup):
  values = {}
  for name in names:
    value = lookup(name)
    if value is not None:
      values[name] = value
  return values


def _export_object(name):
  value = getattr(_export, name, None)
  return value if value is not None else getattr(_export_output, name, None)


def _tpu_object(name):
  return getattr(_te, name, None)  # RunConfig here is the TPU one


def _experimental_object(name):
  experimental = getattr(_te, 'experimental', None)
  if experimental is not None and hasattr(experimental, name):
    return getattr(experimental, name)
  return getattr(_te, name, None)


class _State:
  built = None      # dict: sys.modules name -> namespace module
  real_tf = None    # the `tensorflow` module as imported, before any tf1 switch
  finder = None
  tf1 = False


def _build():
  """The namespace modules, by the module name each is registered under."""
  if _State.built is not None:
    return _State.built
  export = _pick(_EXPORT_NAMES, _export_object)
  experimental = _pick(_EXPERIMENTAL_NAMES, _experimental_object)
  tpu = _pick(_TPU_NAMES, _tpu_object)
  estimator = _pick(_ESTIMATOR_NAMES, _ours)
  mods = {}

  def ns(name, qualname, values, **kwargs):
    mods[name] = _Namespace(name, qualname, values, **kwargs)
    return mods[name]

  def estimator_tree(name, qualname):
    tpu_ns = ns(name + '.tpu', qualname + '.tpu', tpu)
    tpu_ns.experimental = ns(name + '.tpu.experimental', qualname + '.tpu.experimental', {})
    subs = {'export': ns(name + '.export', qualname + '.export', export),
            'experimental': ns(name + '.experimental', qualname + '.experimental',
                               experimental),
            'tpu': tpu_ns}
    return ns(name, qualname, dict(estimator, **subs))

  v1 = estimator_tree('tensorflow.compat.v1.estimator', 'tf.compat.v1.estimator')
  v2 = estimator_tree('tensorflow.estimator', 'tf.estimator')
  for suffix in ('', '.export', '.experimental', '.tpu', '.tpu.experimental'):
    mods['tensorflow.compat.v2.estimator' + suffix] = mods['tensorflow.estimator' + suffix]

  # tensorflow_estimator: the package, its API namespace and the modules legacy code imported.
  for suffix in ('', '.export', '.experimental', '.tpu', '.tpu.experimental'):
    mods['tensorflow_estimator.estimator' + suffix] = mods['tensorflow.compat.v1.estimator' +
                                                           suffix]
  for name, values in _legacy_modules(estimator, export, tpu).items():
    ns(name, name, values)
  mods['tensorflow_estimator'].estimator = v1
  # Parents hold their registered children as attributes, as imported packages do.
  for name, module in mods.items():
    parent, _, child = name.rpartition('.')
    if parent in mods and child not in mods[parent].__dict__:
      setattr(mods[parent], child, module)
  mods['_v1'], mods['_v2'] = v1, v2
  _State.built = mods
  return mods


def _legacy_modules(estimator, export, tpu):
  """`tensorflow_estimator.python.estimator.*` modules legacy code imported from directly."""
  base = 'tensorflow_estimator.python.estimator'
  pick = lambda *names: {n: estimator[n] for n in names if n in estimator}
  return {
      'tensorflow_estimator': {},
      'tensorflow_estimator.python': {},
      base: {},
      base + '.estimator': pick('Estimator', 'WarmStartSettings', 'VocabInfo'),
      base + '.estimator_lib': dict(estimator),
      base + '.model_fn': pick('EstimatorSpec', 'ModeKeys'),
      base + '.mode_keys': pick('ModeKeys'),
      base + '.run_config': pick('RunConfig'),
      base + '.training': pick('TrainSpec', 'EvalSpec', 'train_and_evaluate'),
      base + '.exporter': pick('Exporter', 'FinalExporter', 'LatestExporter', 'BestExporter'),
      base + '.export': dict(export),
      base + '.export.export': dict(export),
      base + '.export.export_lib': dict(export),
      base + '.export.export_output': {n: export[n] for n in export if n.endswith('Output')},
      base + '.tpu': {},
      base + '.tpu.tpu_estimator': {n: tpu[n] for n in ('TPUEstimator', 'TPUEstimatorSpec',
                                                        'ExportSavedModelApiVersion')},
      base + '.tpu.tpu_config': {n: tpu[n] for n in ('TPUConfig', 'RunConfig',
                                                     'InputPipelineConfig')},
      base + '.tpu.tpu_optimizer': {'CrossShardOptimizer': _te.CrossShardOptimizer},
  }


# ---------------------------------------------------------------------------------------------
# TensorFlow's module objects.  `import tensorflow.compat.v1 as tf` loads fresh copies of the
# compat modules unless `tensorflow.compat[.v1|.v2]` are in sys.modules, so install() registers
# the ones it patched there, and also patches copies that already exist.

def _real_tf():
  """The `tensorflow` module as imported (before any `install(tf1=True)` switch)."""
  if _State.real_tf is None:
    _State.real_tf = sys.modules['tensorflow']
  return _State.real_tf


def _api_modules():
  """(v2 module objects, v1 module objects) of the real TensorFlow, deduplicated."""
  real = _real_tf()
  v2, v1, seen = [], [], set()

  def add(module, bucket):
    if module is not None and id(module) not in seen and isinstance(module, types.ModuleType):
      seen.add(id(module))
      bucket.append(module)

  add(real, v2)
  frontier = [(real, v2)]
  for _ in range(2):  # tf.compat.v1, tf.compat.v1.compat.v1, tf.compat.v2.compat.v1, ...
    nxt = []
    for module, _ in frontier:
      compat = getattr(module, 'compat', None)
      for version, bucket in (('v1', v1), ('v2', v2)):
        sub = getattr(compat, version, None) if compat is not None else None
        if sub is not None and id(sub) not in seen:
          add(sub, bucket)
          nxt.append((sub, bucket))
    frontier = nxt
  for name, bucket in (('tensorflow.compat.v1', v1), ('tensorflow._api.v2.compat.v1', v1),
                       ('tensorflow.compat.v2', v2), ('tensorflow._api.v2.compat.v2', v2)):
    add(sys.modules.get(name), bucket)
  copy = sys.modules.get('tensorflow.compat')
  if copy is not None:
    add(getattr(copy, 'v1', None), v1)
    add(getattr(copy, 'v2', None), v2)
  return v2, v1


def _set(module, name, value):
  if module.__dict__.get(name, None) is not value:
    setattr(module, name, value)


def install(tf1=False):
  """Makes the legacy estimator namespaces resolve to tpu_estimator (see the module docstring
  for the list).  Idempotent; call it before the legacy program runs (or at least before it
  imports `tensorflow.compat.v1` or `tensorflow_estimator`).

  `tf1=True` (what `tpu-estimator run --tf1` does) also calls
  `tf.compat.v1.disable_v2_behavior()` and makes `import tensorflow as tf` give the TF1 API
  (`tf.compat.v1` with `tf.contrib.tpu` and `tf.contrib.cluster_resolver`) for the rest of the
  process; modules imported before (tpu_estimator itself, tf_keras) keep TensorFlow 2."""
  real = _real_tf()
  mods = _build()
  for alias, module in (('tensorflow.compat', real.compat),
                        ('tensorflow.compat.v1', real.compat.v1),
                        ('tensorflow.compat.v2', real.compat.v2)):
    sys.modules.setdefault(alias, module)
  for name, module in mods.items():
    if not name.startswith('_'):
      sys.modules[name] = module
  v2_modules, v1_modules = _api_modules()
  for module in v2_modules:
    _set(module, 'estimator', mods['_v2'])
  for module in v1_modules:
    _set(module, 'estimator', mods['_v1'])
    tpu = getattr(module, 'tpu', None)
    if tpu is not None:
      _set(tpu, 'CrossShardOptimizer', _te.CrossShardOptimizer)
  if _State.finder is None:
    _State.finder = _MissingModuleFinder()
    sys.meta_path.insert(0, _State.finder)
  _State.finder.prefixes['tensorflow_estimator.'] = lambda fullname: (
      'No module named %r: tpu_estimator provides only the Estimator/TPUEstimator core of '
      'tensorflow_estimator (see README.md, "Running legacy programs").' % fullname)
  if tf1:
    _install_tf1(v1_modules)


def _install_tf1(v1_modules):
  real = _real_tf()
  if not _State.tf1:
    tf.compat.v1.disable_v2_behavior()
    if os.environ.get('TF_USE_LEGACY_KERAS') == '1' and legacy_keras_available():
      # Load tf_keras while `import tensorflow` still gives TensorFlow 2 (it expects that).
      real.compat.v1.layers.Layer  # pylint: disable=pointless-statement
      real.keras.layers  # pylint: disable=pointless-statement
  contrib = sys.modules.get('tensorflow.contrib')
  if not isinstance(contrib, _Namespace):
    contrib_tpu = _Namespace('tensorflow.contrib.tpu', 'tf.contrib.tpu',
                             _pick(_CONTRIB_TPU_NAMES, lambda n: getattr(_te, n, None)),
                             fallback=real.compat.v1.tpu)
    resolver = real.compat.v1.distribute.cluster_resolver
    contrib = _Namespace('tensorflow.contrib', 'tf.contrib',
                         {'tpu': contrib_tpu, 'cluster_resolver': resolver},
                         missing=_contrib_message)
    sys.modules['tensorflow.contrib'] = contrib
    sys.modules['tensorflow.contrib.tpu'] = contrib_tpu
    sys.modules['tensorflow.contrib.cluster_resolver'] = resolver
  _State.finder.prefixes['tensorflow.contrib.'] = lambda fullname: _contrib_message(
      'tf.contrib', fullname.split('.')[2])
  for module in v1_modules:
    _set(module, 'contrib', contrib)
  if not isinstance(sys.modules.get('tensorflow'), _TF1Module):
    tf1_module = _TF1Module(real, real.compat.v1)
    tf1_module.contrib = contrib
    tf1_module.estimator = _State.built['_v1']
    sys.modules['tensorflow'] = tf1_module
  _State.tf1 = True


# ---------------------------------------------------------------------------------------------
# Legacy Keras (tf.compat.v1.layers, tf.keras on tf_keras).

def _package_dir(name):
  try:
    spec = importlib.util.find_spec(name)
  except (ImportError, ValueError):
    return None
  if spec is None or not spec.origin:
    return None
  return os.path.dirname(spec.origin)


def legacy_keras_available():
  """Whether the `tf_keras` package (the `[legacy]` extra) is installed.  Does not import it."""
  return _package_dir('tf_keras') is not None


class _NoLegacyKeras(types.ModuleType):
  """Stands for `tf.compat.v1.layers` when `tf_keras` is not installed."""

  def __getattr__(self, name):
    if name.startswith('__'):
      raise AttributeError(name)
    raise AttributeError(
        'tf.compat.v1.layers.%s needs the tf_keras package (Keras 3 has no TF1 layers). '
        "Install it with: pip install '%s' (or pip install tf_keras); `tpu-estimator run` "
        'then routes the legacy layers to it.' % (name, _LEGACY_EXTRA))


def _path_list(module):
  """A module's `__path__` list, read without triggering TensorFlow's lazy loaders."""
  if not isinstance(module, types.ModuleType) or 'LazyLoader' in type(module).__name__:
    return None
  inner = module.__dict__.get('_tfmw_wrapped_module', module)
  path = inner.__dict__.get('__path__') if isinstance(inner, types.ModuleType) else None
  return path if isinstance(path, list) else None


def use_legacy_keras():
  """Routes TensorFlow's legacy Keras entry points (`tf.compat.v1.layers`, `tf.keras`,
  `tf.compat.v1.keras`) to `tf_keras`, as `TF_USE_LEGACY_KERAS=1` does; returns True.

  TensorFlow reads the variable when it first resolves those names, so setting it works until
  then; search paths TensorFlow fixed at its import are re-pointed to tf_keras, so
  `from tensorflow.keras import layers` agrees with `tf.keras.layers`.  Without tf_keras (or
  with TF_USE_LEGACY_KERAS set false by the user) returns False, and `tf.compat.v1.layers.X`
  raises an error naming the package to install."""
  keras_dir, tf_keras_dir = _package_dir('keras'), _package_dir('tf_keras')
  setting = os.environ.get('TF_USE_LEGACY_KERAS')
  if tf_keras_dir is None or (setting is not None and setting not in ('1', 'true', 'True')):
    if tf_keras_dir is None:
      guard = _NoLegacyKeras('tensorflow.compat.v1.layers')
      for module in _api_modules()[1]:
        _set(module, 'layers', guard)
    return False
  os.environ['TF_USE_LEGACY_KERAS'] = '1'
  if keras_dir is not None:  # re-point what TensorFlow's import fixed to Keras 3's API dirs
    old = os.path.join(keras_dir, 'api') + os.sep
    new = os.path.join(tf_keras_dir, 'api') + os.sep
    for name, module in list(sys.modules.items()):
      if not (name == 'tensorflow' or name.startswith('tensorflow.')):
        continue
      path = _path_list(module)
      if path is not None and any(p.startswith(old) for p in path):
        path[:] = [new + p[len(old):] if p.startswith(old) and os.path.isdir(new + p[len(old):])
                   else p for p in path]
  return True
