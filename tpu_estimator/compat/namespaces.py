"""The legacy estimator namespaces and the import machinery every compat part shares.

`Namespace` is a module object standing for a legacy API namespace (`tf.estimator`,
`tensorflow_estimator.python.estimator.model_fn`, `tf.contrib.layers`, ...): it holds our
objects under the original's names, and a name it does not hold raises an AttributeError that
says what to use instead.  `LegacyFinder` (one per process, first on `sys.meta_path`) makes
modules on demand for import paths under registered prefixes, and turns imports of legacy
modules nobody provides into a ModuleNotFoundError that says why.  `build()` makes the
estimator namespaces, by the `sys.modules` name each is registered under.
"""
import importlib.abc
import importlib.machinery
import sys
import types

import tpu_estimator as _te
from tpu_estimator import canned as _canned
from tpu_estimator.canned import logit_fns as _logit_fns
from tpu_estimator.canned import optimizers as _canned_optimizers
from tpu_estimator.canned import rnn as _canned_rnn
from tpu_estimator.canned import sequential_head as _canned_sequential_head
from tpu_estimator.canned import v1 as _canned_v1
from tpu_estimator.canned import v1_estimators as _v1_estimators
from tpu_estimator.canned import v1_heads as _v1_heads
from tpu_estimator.compat import tf_modules
from tpu_estimator.distribute import tpu_embedding as _tpu_embedding
from tpu_estimator import errors as _errors
from tpu_estimator import estimator as _estimator_lib
from tpu_estimator import export as _export
from tpu_estimator import keras_models as _keras_models

from tensorflow.python.saved_model.model_utils import export_output as _export_output

README_SECTION = "See docs/guides/legacy-programs.md, 'Running legacy programs'."

# ---------------------------------------------------------------------------------------------
# What each legacy namespace holds: the original's public names (tensorflow-estimator 2.15).

HOOK_NAMES = (
    'CheckpointSaverHook', 'CheckpointSaverListener', 'FeedFnHook', 'FinalOpsHook',
    'GlobalStepWaiterHook', 'LoggingTensorHook', 'NanTensorHook', 'ProfilerHook',
    'SecondOrStepTimer', 'SessionRunArgs', 'SessionRunContext', 'SessionRunHook',
    'SessionRunValues', 'StepCounterHook', 'StopAtStepHook', 'SummarySaverHook', 'VocabInfo')
ESTIMATOR_NAMES = (
    'BestExporter', 'Estimator', 'EstimatorSpec', 'EvalSpec', 'Exporter', 'FinalExporter',
    'LatestExporter', 'ModeKeys', 'NanLossDuringTrainingError', 'RunConfig', 'TrainSpec',
    'WarmStartSettings', 'add_metrics', 'train_and_evaluate') + HOOK_NAMES
EXPORT_NAMES = (
    'ClassificationOutput', 'EvalOutput', 'ExportOutput', 'PredictOutput', 'RegressionOutput',
    'ServingInputReceiver', 'TensorServingInputReceiver',
    'build_parsing_serving_input_receiver_fn', 'build_raw_serving_input_receiver_fn')
EXPERIMENTAL_NAMES = (
    'InMemoryEvaluatorHook', 'LinearSDCA', 'build_raw_supervised_input_receiver_fn',
    'make_early_stopping_hook', 'make_stop_at_checkpoint_step_hook', 'stop_if_higher_hook',
    'stop_if_lower_hook', 'stop_if_no_decrease_hook', 'stop_if_no_increase_hook')
INPUTS_NAMES = ('numpy_input_fn', 'pandas_input_fn')
# The experimental logit_fn API: all of it in tf.compat.v1.estimator.experimental,
# call_logit_fn alone in tf.estimator.experimental (as the original).
V1_EXPERIMENTAL = {n: getattr(_logit_fns, n) for n in _logit_fns.NAMES}
V2_EXPERIMENTAL = {'call_logit_fn': _logit_fns.call_logit_fn}
EARLY_STOPPING_NAMES = ('make_early_stopping_hook', 'read_eval_metrics', 'stop_if_higher_hook',
                        'stop_if_lower_hook', 'stop_if_no_decrease_hook',
                        'stop_if_no_increase_hook')
TPU_NAMES = ('InputPipelineConfig', 'RunConfig', 'TPUConfig', 'TPUEstimator',
             'TPUEstimatorSpec', 'ExportSavedModelApiVersion')

_CANNED = ('tpu_estimator provides the canned estimators DNN*, Linear*, DNNLinearCombined* '
           'and Baseline* (tf.estimator and the TF1-semantics tf.compat.v1.estimator ones) and '
           'the tf.estimator heads (BinaryClassHead, ...; tpu_estimator.canned), the v1 '
           '*Estimator classes taking a head and the experimental logit_fn builders, not '
           'BoostedTrees: write a model_fn, or use tf.estimator.<name> with a '
           'tf.estimator head')
_MISSING_HINTS = {
    'KMeans': 'as in the original, KMeans is tf.compat.v1.estimator.experimental.KMeans',
    'inputs': 'as in the original, the input helpers are in tf.compat.v1.estimator.inputs',
    # As in the original, the RNN estimators are TF2-only experimental names (issue 30).
    'RNNClassifier': 'as in the original, it is tf.estimator.experimental.RNNClassifier',
    'RNNEstimator': 'as in the original, it is tf.estimator.experimental.RNNEstimator',
}
# Boosted trees (issue 30): tensorflow-estimator dropped them after 2.8 and TensorFlow 2.15+
# registers their ops without kernels, so nothing could train or serve them here.
_BOOSTED_TREES = ('the canned estimators BoostedTrees* left tensorflow-estimator after 2.8 '
                  '(2.15 has none), and TensorFlow 2.15+ has no kernels for their '
                  'BoostedTrees* ops (op registrations only), so neither the original nor '
                  'tpu_estimator can train or serve them on this TensorFlow; use a '
                  'gradient-boosting library (TensorFlow Decision Forests, XGBoost, LightGBM)')
_MISSING_HINTS.update({name: _BOOSTED_TREES for name in (
    'BoostedTreesClassifier', 'BoostedTreesRegressor', 'BoostedTreesEstimator',
    'boosted_trees_classifier_train_in_memory', 'boosted_trees_regressor_train_in_memory')})
_CANNED_MARKERS = ('Classifier', 'Regressor', 'Head', 'DNN', 'Linear', 'Baseline', 'KMeans',
                   'RNN', 'BoostedTrees', 'logit_fn')


def hint_for(name):
  """What to use instead of `name`, where the estimator namespaces explain its absence."""
  return _MISSING_HINTS.get(name)


def missing_message(qualname, name):
  """The AttributeError text for a name an estimator namespace does not hold."""
  hint = _MISSING_HINTS.get(name)
  if hint is None and any(marker in name for marker in _CANNED_MARKERS):
    hint = _CANNED
  text = '%s.%s is not provided by tpu_estimator' % (qualname, name)
  return text + (': %s.' % hint if hint else '.') + ' ' + README_SECTION


class Namespace(types.ModuleType):
  """A module object standing for a legacy API namespace.  A name it does not hold is looked
  up in `fallback` (a module or None), else raises an AttributeError with
  `missing(qualname, name)`."""

  def __init__(self, name, qualname, values, fallback=None, missing=missing_message):
    super().__init__(name, 'tpu_estimator stand-in for `%s`.' % qualname)
    self.__dict__.update(values)
    self.__dict__['_legacy_qualname'] = qualname
    self.__dict__['_legacy_fallback'] = fallback
    self.__dict__['_legacy_missing'] = missing
    self.__path__ = []  # a package: submodules are registered in sys.modules
    self.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)

  def __getattr__(self, name):
    if name.startswith('_'):
      raise AttributeError(name)
    fallback = self.__dict__['_legacy_fallback']
    if fallback is not None and hasattr(fallback, name):
      return getattr(fallback, name)
    raise AttributeError(self.__dict__['_legacy_missing'](self.__dict__['_legacy_qualname'],
                                                          name))

  def __dir__(self):
    names = set(k for k in self.__dict__ if not k.startswith('_'))
    fallback = self.__dict__['_legacy_fallback']
    if fallback is not None:
      names.update(k for k in dir(fallback) if not k.startswith('_'))
    return sorted(names)


class _Alias(importlib.abc.Loader):
  """Loads a module name as an object that already exists (importlib keeps whatever
  `sys.modules[name]` holds after `exec_module`, and the target's own `__spec__` is kept)."""

  def __init__(self, target):
    self.target = target

  def create_module(self, spec):
    return None

  def exec_module(self, module):
    sys.modules[module.__name__] = self.target


class LegacyFinder(importlib.abc.MetaPathFinder):
  """Imports under registered prefixes: `makers[prefix](fullname)` returns the module object
  for that name (or None); names no maker provides under a `missing` prefix raise
  ModuleNotFoundError(`missing[prefix](fullname)`).  Other names are left to Python."""

  def __init__(self):
    self.makers = {}   # prefix -> make(fullname) -> module or None
    self.missing = {}  # prefix -> message(fullname)

  def find_spec(self, fullname, path=None, target=None):
    del path, target
    if fullname in sys.modules:
      return None
    for prefix, make in list(self.makers.items()):
      if fullname.startswith(prefix):
        module = make(fullname)
        if module is not None:
          return importlib.machinery.ModuleSpec(fullname, _Alias(module), is_package=True)
    for prefix, message in list(self.missing.items()):
      if fullname.startswith(prefix):
        # No `name=`: `from package import X` swallows the error of a module named X and
        # raises a bare "cannot import name", losing what this one says.
        raise ModuleNotFoundError(message(fullname))
    return None


_FINDER = []


def finder():
  """The process's LegacyFinder, first on sys.meta_path (added on first call)."""
  if not _FINDER:
    _FINDER.append(LegacyFinder())
    sys.meta_path.insert(0, _FINDER[0])
  return _FINDER[0]


def register(mods):
  """Puts `mods` (name -> module) in sys.modules, each child also an attribute of its parent
  when the parent is one of ours or already imported."""
  for name, module in mods.items():
    sys.modules[name] = module
  for name, module in mods.items():
    parent, _, child = name.rpartition('.')
    holder = mods.get(parent, sys.modules.get(parent))
    if holder is not None and child not in holder.__dict__:
      setattr(holder, child, module)


# ---------------------------------------------------------------------------------------------
# Building the estimator namespaces (once per process).

def _ours(name):
  """Our object for one of the original's public names, or None."""
  special = {'RunConfig': _te.EstimatorRunConfig}
  if name in special:
    return special[name]
  if hasattr(_te, name):
    return getattr(_te, name)
  if name in HOOK_NAMES:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    return getattr(tf.compat.v1.train, name, None)
  return None


def pick(names, lookup):
  """{name: lookup(name)} for the names whose lookup is not None."""
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


def _experimental_values(experimental, v1):
  """What `tf.estimator.experimental` holds (the RNN estimators and `call_logit_fn` too), or the
  v1 one (`KMeans` and the logit_fn builders, not the RNN estimators), as in the original."""
  if v1:
    return dict(experimental, KMeans=_canned.KMeans, **V1_EXPERIMENTAL)
  return dict(experimental, **V2_EXPERIMENTAL,
              **{n: getattr(_canned, n) for n in _canned.EXPERIMENTAL_NAMES})


_BUILT = {}


def build():
  """The estimator namespace modules, by the module name each is registered under, plus
  '_v1' and '_v2' (the `tf.compat.v1.estimator` and `tf.estimator` objects)."""
  if _BUILT:
    return _BUILT
  export = pick(EXPORT_NAMES, _export_object)
  experimental = pick(EXPERIMENTAL_NAMES, _experimental_object)
  tpu = pick(TPU_NAMES, _tpu_object)
  estimator = pick(ESTIMATOR_NAMES, _ours)
  mods = {}

  def ns(name, qualname, values, **kwargs):
    mods[name] = Namespace(name, qualname, values, **kwargs)
    return mods[name]

  def estimator_tree(name, qualname, with_inputs):
    tpu_ns = ns(name + '.tpu', qualname + '.tpu', tpu)
    tpu_ns.experimental = ns(name + '.tpu.experimental', qualname + '.tpu.experimental',
                             {'EmbeddingConfigSpec': _tpu_embedding.EmbeddingConfigSpec})
    subs = {'export': ns(name + '.export', qualname + '.export', export),
            'experimental': ns(name + '.experimental', qualname + '.experimental',
                               _experimental_values(experimental, v1=with_inputs)),
            'tpu': tpu_ns}
    if with_inputs:  # v1 only, as in the original
      subs['inputs'] = ns(name + '.inputs', qualname + '.inputs', pick(INPUTS_NAMES, _ours))
    # Canned: the v2 estimators in tf.estimator, the TF1-semantics ones in
    # tf.compat.v1.estimator; heads and parse specs in both.
    canned_names = _canned.V2_NAMES if not with_inputs else \
        tuple(n for n in _canned.V2_NAMES if n not in _canned.ESTIMATOR_NAMES)
    subs.update(pick(canned_names, lambda n: getattr(_canned, n)))
    if with_inputs:
      subs.update({n: getattr(_canned_v1, n) for n in _canned_v1.NAMES})
      subs.update({n: getattr(_v1_estimators, n) for n in _v1_estimators.NAMES})
    return ns(name, qualname, dict(estimator, **subs))

  v1 = estimator_tree('tensorflow.compat.v1.estimator', 'tf.compat.v1.estimator', True)
  v2 = estimator_tree('tensorflow.estimator', 'tf.estimator', False)
  for suffix in ('', '.export', '.experimental', '.tpu', '.tpu.experimental'):
    mods['tensorflow.compat.v2.estimator' + suffix] = mods['tensorflow.estimator' + suffix]

  # tensorflow_estimator: the package, its API namespace and the modules legacy code imported;
  # tensorflow.python.estimator: where TF 1.x programs imported the same modules from.
  for suffix in ('', '.export', '.experimental', '.inputs', '.tpu', '.tpu.experimental'):
    mods['tensorflow_estimator.estimator' + suffix] = mods['tensorflow.compat.v1.estimator' +
                                                           suffix]
  for base in ('tensorflow_estimator.python.estimator', 'tensorflow.python.estimator'):
    for name, values in legacy_modules(base, estimator, export, tpu).items():
      ns(name, name, values)
  for name in ('tensorflow_estimator', 'tensorflow_estimator.python'):
    ns(name, name, {})
  _alias_tpu_modules(mods)
  mods['tensorflow_estimator'].estimator = v1
  # Parents hold their registered children as attributes, as imported packages do.
  for name, module in mods.items():
    parent, _, child = name.rpartition('.')
    if parent in mods and child not in mods[parent].__dict__:
      setattr(mods[parent], child, module)
  _BUILT.update(mods)
  _BUILT['_v1'], _BUILT['_v2'] = v1, v2
  return _BUILT


def _alias_tpu_modules(mods):
  """TensorFlow <= 2.15 also served the original's TPU modules under its own package
  (mesh_tensorflow imports `tensorflow.python.tpu.tpu_estimator` at module level)."""
  for name in ('tpu_estimator', 'tpu_config'):
    mods['tensorflow.python.tpu.' + name] = mods[
        'tensorflow_estimator.python.estimator.tpu.' + name]


def load_global_step_from_checkpoint_dir(checkpoint_dir):
  """The global step of the latest checkpoint in `checkpoint_dir`, 0 when there is none or
  it cannot be read: the original's private `estimator._load_global_step_from_checkpoint_dir`,
  which tensorflow/tpu's training loops (resnet, efficientnet, mnasnet) call to find where a
  restarted run resumes."""
  from tpu_estimator.checkpoints import restoring  # pylint: disable=import-outside-toplevel
  try:
    return restoring.global_step_of(restoring.latest_checkpoint(checkpoint_dir))
  except Exception:  # pylint: disable=broad-except
    return 0  # as the original: a missing or unreadable checkpoint means "start at 0"


# Private helpers of the original's modules that public programs called anyway.
PRIVATE_HELPERS = {
    '_load_global_step_from_checkpoint_dir': load_global_step_from_checkpoint_dir,
}


def _optimizer_from(get, opt, learning_rate):
  if isinstance(opt, str) and not learning_rate:
    raise _errors.value_error('learning_rate must be given when opt is a name.',
                              'Pass learning_rate, or an optimizer instance.', opt=opt,
                              learning_rate=learning_rate)
  return get(opt, learning_rate, argument='opt')


def get_optimizer_instance(opt, learning_rate=None):
  """The original's `canned.optimizers.get_optimizer_instance`: a tf.compat.v1.train optimizer
  from a name ('Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD', with `learning_rate`), an
  instance, or a callable returning one."""
  return _optimizer_from(_canned_v1.get_optimizer, opt, learning_rate)


def get_optimizer_instance_v2(opt, learning_rate=None):
  """The original's `canned.optimizers.get_optimizer_instance_v2` (TF-Lattice's canned
  estimators call it): the Keras optimizer a tf.estimator canned estimator trains with, from a
  name (with `learning_rate`), an instance, or a callable returning one."""
  return _optimizer_from(_canned_optimizers.get_optimizer, opt, learning_rate)


def legacy_modules(base, estimator, export, tpu):
  """The modules under `base` (`tensorflow_estimator.python.estimator`, or TF 1.x's
  `tensorflow.python.estimator`) that legacy code imported from directly."""
  pick_ = lambda *names: {n: estimator[n] for n in names if n in estimator}
  return {
      base: {},
      base + '.estimator': dict(
          pick_('Estimator', 'WarmStartSettings', 'VocabInfo'), EstimatorV2=_te.Estimator,
          maybe_overwrite_model_dir_and_session_config=_estimator_lib.with_model_dir,
          **PRIVATE_HELPERS),
      base + '.estimator_lib': dict(estimator),
      base + '.model_fn': dict(pick_('EstimatorSpec', 'ModeKeys'),
                               call_logit_fn=_logit_fns.call_logit_fn),
      base + '.mode_keys': pick_('ModeKeys'),
      base + '.run_config': pick_('RunConfig'),
      base + '.training': pick_('TrainSpec', 'EvalSpec', 'train_and_evaluate'),
      base + '.exporter': pick_('Exporter', 'FinalExporter', 'LatestExporter', 'BestExporter'),
      base + '.export': dict(export),
      base + '.export.export': dict(export),
      base + '.export.export_lib': dict(
          export, SupervisedInputReceiver=_export.SupervisedInputReceiver,
          UnsupervisedInputReceiver=_export.UnsupervisedInputReceiver,
          build_raw_supervised_input_receiver_fn=(
              _export.build_raw_supervised_input_receiver_fn)),
      base + '.export.export_output': {n: export[n] for n in export if n.endswith('Output')},
      # tf_keras's `tf.keras.estimator.model_to_estimator` imports `keras_lib` (TF 1.x's
      # tf.keras imported the same function from `keras`).
      base + '.keras_lib': {'model_to_estimator': _keras_models.legacy_model_to_estimator},
      base + '.keras': {'model_to_estimator': _keras_models.legacy_model_to_estimator},
      base + '.tpu': {},
      base + '.tpu.tpu_estimator': {n: tpu[n] for n in ('TPUEstimator', 'TPUEstimatorSpec',
                                                        'ExportSavedModelApiVersion')},
      base + '.tpu.tpu_config': {n: tpu[n] for n in ('TPUConfig', 'RunConfig',
                                                     'InputPipelineConfig')},
      base + '.tpu.tpu_optimizer': {'CrossShardOptimizer': _te.CrossShardOptimizer},
      base + '.inputs': pick(INPUTS_NAMES, _ours),
      base + '.inputs.inputs': pick(INPUTS_NAMES, _ours),
      base + '.inputs.numpy_io': pick(('numpy_input_fn',), _ours),
      base + '.inputs.pandas_io': pick(('pandas_input_fn',), _ours),
      base + '.early_stopping': pick(EARLY_STOPPING_NAMES, _experimental_object),
      base + '.hooks': pick(('InMemoryEvaluatorHook', 'make_stop_at_checkpoint_step_hook'),
                            _experimental_object),
      base + '.hooks.hooks': pick(('InMemoryEvaluatorHook', 'make_stop_at_checkpoint_step_hook'),
                                  _experimental_object),
      **canned_modules(base),
  }


def _canned_v2(*names):
  """`{name: v1 class, nameV2: v2 class}`: the original's canned modules held the
  TF1-semantics class under the plain name and the tf.estimator one under `...V2`."""
  values = {name + 'V2': getattr(_canned, name) for name in names}
  for v1_module in (_canned_v1, _v1_estimators):
    values.update({name: getattr(v1_module, name) for name in names if name in v1_module.NAMES})
  return values


def canned_modules(base):
  """The original's canned-estimator and head modules under `base`, holding ours."""
  head = base + '.head'
  return {
      base + '.canned': {},
      base + '.canned.dnn': dict(_canned_v2('DNNClassifier', 'DNNRegressor', 'DNNEstimator'),
                                 dnn_logit_fn_builder=_logit_fns.dnn_logit_fn_builder),
      base + '.canned.linear': dict(_canned_v2('LinearClassifier', 'LinearRegressor',
                                               'LinearEstimator'),
                                    LinearSDCA=_canned.LinearSDCA,
                                    linear_logit_fn_builder=_logit_fns.linear_logit_fn_builder),
      # The v1 heads' factories (private in the original, the only makers of its v1 heads).
      base + '.canned.head': dict(_v1_heads.LEGACY_NAMES),
      base + '.canned.dnn_linear_combined': _canned_v2(
          'DNNLinearCombinedClassifier', 'DNNLinearCombinedRegressor',
          'DNNLinearCombinedEstimator'),
      base + '.canned.baseline': _canned_v2('BaselineClassifier', 'BaselineRegressor',
                                            'BaselineEstimator'),
      base + '.canned.kmeans': {'KMeansClustering': _canned.KMeans},
      base + '.canned.rnn': {'RNNClassifier': _canned.RNNClassifier,
                             'RNNEstimator': _canned.RNNEstimator,
                             'USE_DEFAULT': _canned_rnn.USE_DEFAULT},
      base + '.canned.optimizers': {'get_optimizer_instance': get_optimizer_instance,
                                    'get_optimizer_instance_v2': get_optimizer_instance_v2},
      base + '.canned.metric_keys': {'MetricKeys': _canned.MetricKeys},
      base + '.canned.prediction_keys': {'PredictionKeys': _canned.PredictionKeys},
      base + '.canned.parsing_utils': {
          'classifier_parse_example_spec_v2': _canned.classifier_parse_example_spec,
          'regressor_parse_example_spec_v2': _canned.regressor_parse_example_spec},
      head: {},
      head + '.base_head': {'Head': _canned.Head},
      head + '.binary_class_head': {'BinaryClassHead': _canned.BinaryClassHead},
      head + '.multi_class_head': {'MultiClassHead': _canned.MultiClassHead},
      head + '.multi_label_head': {'MultiLabelHead': _canned.MultiLabelHead},
      head + '.multi_head': {'MultiHead': _canned.MultiHead},
      head + '.sequential_head': {
          'SequentialHeadWrapper': _canned.SequentialHeadWrapper,
          '_SequentialHead': _canned_sequential_head._SequentialHead},  # pylint: disable=protected-access
      head + '.regression_head': {
          'RegressionHead': _canned.RegressionHead,
          'PoissonRegressionHead': _canned.PoissonRegressionHead,
          'LogisticRegressionHead': _canned.LogisticRegressionHead},
  }


def install(v2_modules, v1_modules):
  """Registers the estimator namespaces and sets `estimator` on TensorFlow's API modules."""
  mods = build()
  for name, module in mods.items():
    if not name.startswith('_'):
      sys.modules[name] = module
  python = sys.modules.get('tensorflow.python')
  if python is not None:
    tf_modules.set_attr(python, 'estimator', mods['tensorflow.python.estimator'])
  python_tpu = sys.modules.get('tensorflow.python.tpu')
  if python_tpu is not None:
    for name in ('tpu_estimator', 'tpu_config'):
      tf_modules.set_attr(python_tpu, name, mods['tensorflow.python.tpu.' + name])
  for module in v2_modules:
    tf_modules.set_attr(module, 'estimator', mods['_v2'])
  for module in v1_modules:
    tf_modules.set_attr(module, 'estimator', mods['_v1'])
  found = finder()
  for prefix in ('tensorflow_estimator.', 'tensorflow.python.estimator.'):
    found.missing[prefix] = _missing_module_message


def _missing_module_message(fullname):
  """The ModuleNotFoundError text for a legacy estimator module nobody provides."""
  text = ('No module named %r: tpu_estimator provides the Estimator/TPUEstimator core, the '
          'v2 canned estimators and heads, early stopping and the input helpers of '
          'tensorflow_estimator, from the modules listed in '
          'docs/guides/legacy-programs.md, "Running legacy programs"; this one is not among '
          'them' % fullname)
  return text + (': %s.' % _BOOSTED_TREES if 'boosted_trees' in fullname else '.')
