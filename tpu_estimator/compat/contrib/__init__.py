"""`tensorflow.contrib` for legacy programs: the registry of what is provided, and the import
machinery that makes it importable in every form programs used.

TensorFlow 2 removed `tf.contrib`.  TPUEstimator-era programs import from it next to the
estimator; `install()` (called by `tpu_estimator.compat.install()`) makes these work:

    import tensorflow.contrib                      tf.contrib.X   (on tensorflow and tf.compat.v1)
    from tensorflow.contrib import X               import tensorflow.contrib.X as Y
    from tensorflow.contrib.X.python.<...> import name    (deep module paths, see _deep_module)

The implementations live beside this file, one module per contrib module (`layers.py`,
`data.py`, ...; each lists its names in `__all__`); `tpu` and `cluster_resolver` are ours and
TensorFlow's.  `tensorflow.contrib.X` is a `Namespace` holding the implementation's names, so a
name it does not hold raises an AttributeError naming `tf.contrib.X.name` and what to use; a
module X not provided raises an error naming its TensorFlow 2 replacement.
"""
import importlib
import types

from tpu_estimator.compat import namespaces
from tpu_estimator.compat import tf_modules
from tpu_estimator.compat.contrib import slim_loader

# The contrib modules implemented beside this file (`tpu_estimator.compat.contrib.<name>`).
IMPLEMENTED = ('layers', 'data', 'metrics', 'training', 'summary', 'image', 'opt', 'slim',
               'framework', 'lookup', 'estimator', 'distribute', 'rnn', 'stateless', 'learn')

# tf.contrib modules and what replaced them in TensorFlow 2 (also the hint for a name that a
# provided module does not hold).
REPLACEMENTS = {
    'bayesflow': 'tensorflow_probability',
    'checkpoint': 'tf.train.Checkpoint',
    'cluster_resolver': 'tf.distribute.cluster_resolver',
    'compiler': 'tf.function(jit_compile=True)',
    'crf': 'tensorflow_addons.text.crf',
    'cudnn_rnn': 'tf.keras.layers.LSTM / tf.keras.layers.GRU',
    'data': 'tf.data.experimental and tf.data.Dataset methods (e.g. map_and_batch -> '
            'Dataset.map(...).batch(...), parallel_interleave -> '
            'Dataset.interleave(..., num_parallel_calls=...))',
    'distribute': 'tf.distribute',
    'distributions': 'tensorflow_probability.distributions',
    'eager': 'TF2 eager execution and tf.function',
    'estimator': 'tf.estimator (tpu_estimator): a canned estimator with a head '
                 '(tf.estimator.DNNEstimator, LinearEstimator, ...) in place of the logit_fn '
                 'builders, RNN and layer-annotation estimators, or your own model_fn',
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
    'tpu': 'tf.compat.v1.tpu and tf.compat.v1.estimator.tpu (tpu_estimator)',
    'training': 'tf.compat.v1.train (HParams: a dict or absl flags)',
    'util': 'tf.make_tensor_proto / tf.make_ndarray',
}

# tf.contrib.X whose submodules (`tensorflow.contrib.slim.nets.resnet_v1`) are this package's.
SUBMODULES_FROM = {'slim': 'tf_slim'}

# tpu_estimator's objects in tf.contrib.tpu (the rest comes from tf.compat.v1.tpu).
TPU_NAMES = ('CrossShardOptimizer', 'InputPipelineConfig', 'RunConfig', 'TPUConfig',
             'TPUEstimator', 'TPUEstimatorSpec', 'ExportSavedModelApiVersion')


class _State:
  modules = None   # 'tensorflow.contrib[.X]' -> module object, once built
  errors = {}      # X -> why its implementation could not be imported
  provided = ()    # the X of tf.contrib.X that resolve, sorted


# ---------------------------------------------------------------------------------------------
# Messages

def _provided_list():
  return ', '.join('tf.contrib.' + name for name in _State.provided)


def module_message(name):
  """Why `tf.contrib.<name>` is not available, and what to use."""
  if name in _State.errors:
    return 'tf.contrib.%s is not available: %s' % (name, _State.errors[name])
  text = ('tf.contrib.%s is not provided by tpu_estimator (tf.contrib was removed in '
          'TensorFlow 2; tpu_estimator provides %s)' % (name, _provided_list()))
  replacement = REPLACEMENTS.get(name)
  return text + ('; use %s instead.' % replacement if replacement else '.')


def _name_message(module_name):
  """The AttributeError text for a name that `tf.contrib.<module_name>` does not hold."""
  def message(qualname, name):
    del qualname
    hint = namespaces.hint_for(name)  # a name the estimator namespaces explain (BoostedTrees*)
    if hint is not None:
      return 'tf.contrib.%s.%s is not provided by tpu_estimator: %s. %s' % (
          module_name, name, hint, namespaces.README_SECTION)
    text = ('tf.contrib.%s.%s is not provided by tpu_estimator, whose tf.contrib.%s holds '
            'only the names TPUEstimator-era programs used' % (module_name, name, module_name))
    replacement = REPLACEMENTS.get(module_name)
    return text + ('; use %s instead. ' % replacement if replacement else '. ') + (
        namespaces.README_SECTION)
  return message


def _root_message(qualname, name):
  del qualname
  return module_message(name)


# ---------------------------------------------------------------------------------------------
# Building the modules

def _public_names(module):
  names = getattr(module, '__all__', None)
  if names is None:
    names = [n for n in vars(module) if not n.startswith('_')]
  return {n: getattr(module, n) for n in names if hasattr(module, n)}


def _import_implementations():
  """X -> the module implementing tf.contrib.X, for those that import; records why the others
  did not (a module not written at all is simply not provided)."""
  found = {}
  for name in IMPLEMENTED:
    full = '%s.%s' % (__name__, name)
    try:
      found[name] = importlib.import_module(full)
    except ModuleNotFoundError as e:
      if e.name != full:
        _State.errors[name] = str(e)
    except ImportError as e:
      _State.errors[name] = str(e)
  return found


class _Contrib(namespaces.Namespace):
  """`tensorflow.contrib.X`: the implementation's `__all__` names; any other name goes to the
  implementation's module-level `__getattr__` when it has one (names it resolves lazily, e.g.
  from tf_slim, and its own error for the rest), imported with TensorFlow 2 as `tensorflow`."""

  def __init__(self, name, impl):
    super().__init__(name, 'tf.contrib.' + name.split('.')[2], _public_names(impl),
                     missing=_name_message(name.split('.')[2]))
    self.__dict__['_legacy_impl'] = impl

  def __getattr__(self, name):
    lazy = self.__dict__['_legacy_impl'].__dict__.get('__getattr__')
    if lazy is None or name.startswith('_'):
      return super().__getattr__(name)
    with tf_modules.importing_tf2():
      return lazy(name)


class _Deep(namespaces.Namespace):
  """`tensorflow.contrib.X.python[...]`: every name of tf.contrib.X except modules, so
  `from ...python.layers import layers` imports the submodule (another _Deep) rather than an
  attribute of that name."""

  def __getattr__(self, name):
    value = super().__getattr__(name)
    if isinstance(value, types.ModuleType):
      raise AttributeError(name)
    return value


def _ns(name, values, fallback=None, module_name=None):
  module_name = module_name or name.split('.')[2]
  return namespaces.Namespace(name, 'tf.contrib.' + module_name, values, fallback=fallback,
                              missing=_name_message(module_name))


def _tpu_modules(real):
  """tf.contrib.tpu and the deep module paths under tensorflow.contrib.tpu.python."""
  import tpu_estimator as te  # pylint: disable=import-outside-toplevel
  base = 'tensorflow.contrib.tpu'
  tpu = _ns(base, namespaces.pick(TPU_NAMES, lambda n: getattr(te, n, None)),
            fallback=real.compat.v1.tpu)
  pick = lambda *names: {n: getattr(tpu, n) for n in names}
  mods = {base: tpu}
  for sub in ('.python', '.python.tpu', '.python.ops'):
    mods[base + sub] = _ns(base + sub, {}, fallback=tpu)
  mods[base + '.python.tpu.tpu_estimator'] = _ns(
      base + '.python.tpu.tpu_estimator',
      pick('TPUEstimator', 'TPUEstimatorSpec', 'ExportSavedModelApiVersion', 'RunConfig',
           'TPUConfig', 'InputPipelineConfig'), fallback=tpu)
  mods[base + '.python.tpu.tpu_config'] = _ns(
      base + '.python.tpu.tpu_config', pick('TPUConfig', 'RunConfig', 'InputPipelineConfig'))
  mods[base + '.python.tpu.tpu_optimizer'] = _ns(
      base + '.python.tpu.tpu_optimizer', pick('CrossShardOptimizer'))
  # Asynchronous checkpointing was a TPU speed-up; saving synchronously writes the same files.
  mods[base + '.python.tpu.async_checkpoint'] = _ns(
      base + '.python.tpu.async_checkpoint',
      {'AsyncCheckpointSaverHook': real.compat.v1.train.CheckpointSaverHook})
  return mods


def _build(real):
  if _State.modules is not None:
    return _State.modules
  implementations = _import_implementations()
  mods = _tpu_modules(real)
  cluster_resolver = real.compat.v1.distribute.cluster_resolver
  mods['tensorflow.contrib.cluster_resolver'] = cluster_resolver
  for name, module in implementations.items():
    mods['tensorflow.contrib.' + name] = _Contrib('tensorflow.contrib.' + name, module)
  children = {name.split('.')[2]: module for name, module in mods.items()
              if name.count('.') == 2}
  _State.provided = tuple(sorted(children))
  mods['tensorflow.contrib'] = namespaces.Namespace(
      'tensorflow.contrib', 'tf.contrib', children, missing=_root_message)
  _State.modules = mods
  return mods


# ---------------------------------------------------------------------------------------------
# Deep module paths: tensorflow.contrib.X.python.<...> (and other submodules of X)

def _deep_module(fullname):
  """The module object for `fullname` under tensorflow.contrib, or None (not provided).

  - `tensorflow.contrib.tpu.python.tpu.<m>` / `.python.ops.<m>` not built above:
    TensorFlow's own `tensorflow.python.tpu[.ops].<m>` (tpu_function, bfloat16, tpu_ops, ...);
  - `tensorflow.contrib.slim.python.slim.<m...>`: tf_slim's `<m...>` (nets.inception_v3,
    learning, ...);
  - `tensorflow.contrib.X.python[.<dir>.<module>]` for a provided X: a module holding every
    name of tf.contrib.X (layers.python.layers.layers, training.python.training.evaluation);
  - `tensorflow.contrib.X.<sub>` where X's implementation has a submodule attribute <sub>
    (e.g. slim.nets): that module."""
  parts = fullname.split('.')
  if len(parts) < 4 or _State.modules is None:
    return None
  x = parts[2]
  contrib_x = _State.modules.get('tensorflow.contrib.' + x)
  if contrib_x is None:
    return None
  if x == 'tpu' and len(parts) == 6 and parts[3] == 'python' and parts[4] in ('tpu', 'ops'):
    real_name = 'tensorflow.python.tpu.' + ('ops.' if parts[4] == 'ops' else '') + parts[5]
    try:
      return importlib.import_module(real_name)
    except ImportError:
      return None
  if parts[3] == 'python':
    if x in SUBMODULES_FROM and len(parts) > 5 and parts[4] == x:
      return _package_module(SUBMODULES_FROM[x], parts[5:])
    if len(parts) > 6:  # X.python.<dir>.<module> is as deep as TF 1.x went: a from-import's
      return None       # try of `<module>.<name>` as a submodule, for a name not there
    return _Deep(fullname, 'tf.contrib.' + x, {}, fallback=contrib_x, missing=_name_message(x))
  obj = contrib_x
  for i, part in enumerate(parts[3:]):  # a submodule of what X delegates to (slim.nets, ...)
    if part.startswith('_'):
      return None
    if i == 0 and x in SUBMODULES_FROM:
      with tf_modules.importing_tf2():
        try:
          obj = importlib.import_module(SUBMODULES_FROM[x])
        except ImportError:
          return None
    try:
      sub = getattr(obj, part)
    except AttributeError:
      sub = None
      if isinstance(getattr(obj, '__path__', None), list) and obj.__path__:
        with tf_modules.importing_tf2():
          try:
            sub = importlib.import_module('%s.%s' % (obj.__name__, part))
          except ImportError:
            sub = None
    if not isinstance(sub, types.ModuleType):
      return None
    obj = sub
  return obj


def _package_module(package, parts):
  """`package.<parts>` (TF 1.x's `tensorflow.contrib.slim.python.slim.nets.inception_v3` is
  `tf_slim.nets.inception_v3`), or None where it has no such module."""
  with tf_modules.importing_tf2():
    try:
      module = importlib.import_module('.'.join([package] + list(parts)))
    except ImportError:
      return None
  return module if isinstance(module, types.ModuleType) else None


def _missing_module(fullname):
  parts = fullname.split('.')
  if len(parts) == 3 or parts[2] not in _State.provided:
    return 'No module named %r: %s' % (fullname, module_message(parts[2]))
  if len(parts) == 4:  # `from tensorflow.contrib.X import name` for a name X does not hold
    try:
      getattr(_State.modules['tensorflow.contrib.' + parts[2]], parts[3])
      why = _name_message(parts[2])(None, parts[3])
    except AttributeError as e:
      why = str(e)
    return 'cannot import %r: %s' % (fullname, why)
  return ('No module named %r: tpu_estimator provides tf.contrib.%s (import it as '
          'tensorflow.contrib.%s or from its tensorflow.contrib.%s.python... paths), but not '
          'this module. %s' % (fullname, parts[2], parts[2], parts[2],
                               namespaces.README_SECTION))


# ---------------------------------------------------------------------------------------------

def install(v2_modules, v1_modules):
  """Registers tensorflow.contrib[.X] in sys.modules, sets `contrib` on TensorFlow's v1 and
  v2 API modules, and routes deep contrib import paths.  Call it while `import tensorflow`
  still gives TensorFlow 2 (before the --tf1 switch): the implementations import it."""
  real = tf_modules.real_tf()
  mods = _build(real)
  namespaces.register(mods)
  contrib = mods['tensorflow.contrib']
  for module in list(v2_modules) + list(v1_modules):
    tf_modules.set_attr(module, 'contrib', contrib)
  finder = namespaces.finder()
  finder.makers['tensorflow.contrib.'] = _deep_module
  finder.missing['tensorflow.contrib.'] = _missing_module
  slim_loader.install_import_hooks(finder)
  return contrib


def provided():
  """The X of the tf.contrib.X that resolve (after install())."""
  return _State.provided
