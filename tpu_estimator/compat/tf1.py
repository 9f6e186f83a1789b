"""The `--tf1` mode (`install(tf1=True)`), and the hint that sends TF 1.x programs there.

`install_tf1()` turns v2 behaviour off and puts a `TF1Module` under `sys.modules['tensorflow']`,
so `import tensorflow as tf` gives the TF1 API (`tf.compat.v1`, with `tf.contrib`) for the rest
of the process.  Modules imported before (tpu_estimator, tf_keras, the contrib
implementations) keep TensorFlow 2.

`tf1_hint(error)` recognises the error a TF 1.x program run without `--tf1` stops on (a name
that TensorFlow 2 dropped from `tf` but `tf.compat.v1` still has: `tf.flags`, `tf.gfile`,
`tf.placeholder`, `tf.train.AdamOptimizer`, ...) and says to rerun with `--tf1`.
"""
import os
import sys
import types

from tpu_estimator.compat import legacy_keras
from tpu_estimator.compat import namespaces
from tpu_estimator.compat import tf_modules


class TF1Module(types.ModuleType):
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


class _State:
  on = False


def install_tf1(contrib, estimator_v1):
  """Switches the process to TF1 (idempotent); `contrib` and `estimator_v1` become
  `tf.contrib` and `tf.estimator` of the TF1 `tensorflow` module."""
  real = tf_modules.real_tf()
  if not _State.on:
    real.compat.v1.disable_v2_behavior()
    if os.environ.get('TF_USE_LEGACY_KERAS') == '1' and legacy_keras.legacy_keras_available():
      # Load tf_keras while `import tensorflow` still gives TensorFlow 2 (it expects that).
      real.compat.v1.layers.Layer  # pylint: disable=pointless-statement
      real.keras.layers  # pylint: disable=pointless-statement
  if not isinstance(sys.modules.get('tensorflow'), TF1Module):
    tf1_module = TF1Module(real, real.compat.v1)
    tf1_module.contrib = contrib
    tf1_module.estimator = estimator_v1
    sys.modules['tensorflow'] = tf1_module
    namespaces.finder().makers['tensorflow.'] = _v1_submodule(real.compat.v1)
  _State.on = True


# TensorFlow's own packages under `tensorflow.` (and `compat`, `contrib`: found elsewhere),
# never one of the v1 API's modules.
_NOT_API = frozenset(['compat', 'contrib', 'python', 'core', 'compiler', 'lite', 'tools',
                      'include', 'dtensor', 'tsl', 'xla_aot_runtime_src'])


def _v1_submodule(v1):
  """`import tensorflow.gfile`, `from tensorflow.train import AdamOptimizer`: TF 1.x's API
  modules were importable by name, and the v1 one is what `tf.<name>` gives here (the name's
  own files are TensorFlow 2's, `tensorflow.train` without `AdamOptimizer`, or none at all,
  `tensorflow.gfile`)."""
  def make(fullname):
    parts = fullname.split('.')[1:]
    if not parts or parts[0] in _NOT_API or parts[0].startswith('_'):
      return None
    found = v1
    for part in parts:
      try:  # a lazily loaded module (keras) can fail to load: then Python's finders decide
        found = getattr(found, part, None)
      except Exception:  # pylint: disable=broad-except
        return None
      if not isinstance(found, types.ModuleType):
        return None
    return found
  return make


# ---------------------------------------------------------------------------------------------
# The hint

_TF2_PREFIX = 'tensorflow._api.v2.'


def _v1_path(module):
  """The dotted path under `tf.` of one of TensorFlow 2's API modules ('' for `tensorflow`
  itself), or None for anything else."""
  name = getattr(module, '__name__', None)
  if not isinstance(name, str):
    return None
  if module is tf_modules.real_tf() or name == 'tensorflow':
    return ''
  if name.startswith(_TF2_PREFIX) and not name.startswith(_TF2_PREFIX + 'compat'):
    return name[len(_TF2_PREFIX):]
  return None


def _resolves(obj, parts):
  for part in parts:
    try:
      obj = getattr(obj, part)
    except Exception:  # pylint: disable=broad-except
      return False
  return True


def _in_v1(path, name):
  return _resolves(tf_modules.real_tf().compat.v1, (path.split('.') if path else []) + [name])


def tf1_only(parts):
  """Whether `tf.<parts...>` is TensorFlow 1.x API that TensorFlow 2 dropped from `tensorflow`
  but `tf.compat.v1` still has (`('flags',)`, `('train', 'AdamOptimizer')`): the names behind
  `tf1_hint`'s advice, also read by `tpu-estimator doctor`."""
  real = tf_modules.real_tf()
  return not _resolves(real, parts) and _resolves(real.compat.v1, parts)


def tf1_hint(error):
  """The `--tf1` advice for `error`, or None when it is not a TF 1.x program's error."""
  if _State.on:
    return None
  if isinstance(error, AttributeError):
    name, obj = getattr(error, 'name', None), getattr(error, 'obj', None)
    # (`obj` itself, or only the message where tf.data/autograph raised the error anew)
    if (name == 'value' and (obj is None or isinstance(obj, int))) or any(
        "'%s' object has no attribute 'value'" % kind in str(error)
        for kind in ('NoneType', 'int')):
      return ('TensorFlow 1.x gave a shape\'s dimensions as `Dimension`s with a `.value`; '
              'TensorFlow 2 gives ints or None. This looks like a TensorFlow 1.x program: rerun '
              'it with `tpu-estimator run --tf1 ...` (or call '
              'tf.compat.v1.disable_v2_behavior() at its start).')
    path = _v1_path(obj) if name else None
    if path is None or not _in_v1(path, name):
      return None
    qualname = 'tf.%s%s' % (path + '.' if path else '', name)
    return ('%s is TensorFlow 1.x API, which TensorFlow 2 dropped from `tensorflow` (it is '
            'tf.compat.v1.%s%s now). This looks like a TensorFlow 1.x program: rerun it with '
            '`tpu-estimator run --tf1 ...`, which makes `import tensorflow as tf` give the TF1 '
            'API.' % (qualname, path + '.' if path else '', name))
  if isinstance(error, RuntimeError) and 'not compatible with eager execution' in str(error):
    return ('This TensorFlow 1.x code needs graph mode: rerun it with `tpu-estimator run '
            '--tf1 ...` (or call tf.compat.v1.disable_v2_behavior() at its start).')
  return None
