"""Loading the `tf_slim` package (the `[legacy]` extra) for `tf.contrib.slim`,
`tf.contrib.layers` and `tf.contrib.framework`: some of tf_slim's own layers are built on
TensorFlow's `tensorflow.python.layers`, which load the legacy TF layers from `tf_keras` under a
module path tf_keras 2.16+ moved; `load_tf_slim()` registers that path when tf_keras is
installed.  Without tf_slim, it raises an AttributeError naming the extra to install.

tf-slim 1.1.0 (the last release) calls TensorFlow-internal names that TensorFlow has since moved
to other modules and removed from the old ones (`control_flow_ops.cond`, `array_ops.stack`,
`ops.Tensor`, ...), so `slim.metrics`, `slim.evaluation`, the image decoders and several layers
die with an AttributeError on TensorFlow 2.15+.  `prepare()` puts each such name back on the
module tf_slim reads it from, as the public TensorFlow object of the same meaning (`cond` is
`tf.compat.v1.cond`, ...), only where that module no longer has it; nothing that exists is
replaced.  It runs when tf_slim is loaded through this package (`tf.contrib.slim`,
`tf.contrib.framework`, ...), and from `install()` on: at once when tf_slim is already imported
(the contrib layers import it), else before a program's own `import tf_slim`
(`install_import_hooks`, which also routes `tf_keras.legacy_tf_layers` lazily).
"""
import importlib
import importlib.util
import pkgutil
import sys

from tpu_estimator.compat.extras import LEGACY_EXTRA as _EXTRA
from tpu_estimator.compat.extras import MissingExtraError
_MOVED = 'tf_keras.legacy_tf_layers'


def _route_legacy_tf_layers():
  """`tf_keras.legacy_tf_layers[.*]` -> `tf_keras.src.legacy_tf_layers[.*]`, where
  `tensorflow.python.layers` looks for them, when tf_keras is installed."""
  if _MOVED in sys.modules:
    return
  if importlib.util.find_spec('tf_keras') is None:
    return
  try:
    real = importlib.import_module('tf_keras.src.legacy_tf_layers')
  except ImportError:
    return
  sys.modules['tf_keras.legacy_tf_layers'] = real
  for info in pkgutil.iter_modules(real.__path__):
    sys.modules.setdefault('tf_keras.legacy_tf_layers.' + info.name, importlib.import_module(
        'tf_keras.src.legacy_tf_layers.' + info.name))


def _removed_names(tf):
  """(TensorFlow module tf_slim 1.1.0 reads, name, the public object it stood for)."""
  v1 = tf.compat.v1
  return (
      ('tensorflow.python.ops.control_flow_ops', 'cond', v1.cond),
      ('tensorflow.python.ops.control_flow_ops', 'case', v1.case),
      ('tensorflow.python.ops.control_flow_ops', 'while_loop', v1.while_loop),
      ('tensorflow.python.ops.control_flow_ops', 'Assert', v1.Assert),
      ('tensorflow.python.ops.array_ops', 'stack', tf.stack),
      ('tensorflow.python.ops.array_ops', 'unstack', tf.unstack),
      ('tensorflow.python.framework.ops', 'Tensor', tf.Tensor),
      ('tensorflow.python.framework.ops', 'IndexedSlices', tf.IndexedSlices),
      ('tensorflow.python.ops.variable_scope', 'variable', v1.Variable),
  )


class _State:
  done = False


def prepare():
  """Makes TensorFlow hold the names tf_slim reads (see the module docstring); idempotent.
  Returns the `module.name`s it supplied (on the first call)."""
  if _State.done:
    return []
  from tpu_estimator.compat import tf_modules  # pylint: disable=import-outside-toplevel
  tf = tf_modules.real_tf()
  supplied = []
  for module_name, name, value in _removed_names(tf):
    module = importlib.import_module(module_name)
    if name not in module.__dict__:
      setattr(module, name, value)
      supplied.append('%s.%s' % (module_name, name))
  _State.done = True
  return supplied


def _legacy_tf_layers(fullname):
  """`tf_keras.legacy_tf_layers[.*]` (where `tensorflow.python.layers` looks) as tf_keras's
  `tf_keras.src.legacy_tf_layers[.*]`, imported when first asked for."""
  if fullname != _MOVED and not fullname.startswith(_MOVED + '.'):
    return None
  try:
    return importlib.import_module('tf_keras.src' + fullname[len('tf_keras'):])
  except ImportError:
    return None


def install_import_hooks(finder):
  """After `install()`: `prepare()` now if tf_slim is imported already (the contrib layers
  import it), else when a program first imports it; `tf_keras.legacy_tf_layers` routed lazily
  (so tf_keras is imported only when TensorFlow's TF1 layers need it)."""
  def before_tf_slim(fullname):
    if fullname == 'tf_slim' or fullname.startswith('tf_slim.'):
      prepare()
    return None  # the import itself goes on as usual
  finder.makers['tf_slim'] = before_tf_slim
  finder.makers[_MOVED] = _legacy_tf_layers
  if 'tf_slim' in sys.modules:
    prepare()


def load_tf_slim(qualname='tf.contrib.slim', name=None):
  """The `tf_slim` module; an AttributeError naming `qualname.name` and the extra to install
  when it is missing."""
  try:
    import tf_slim  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise MissingExtraError(
        '%s%s needs the tf_slim package, which is not installed. Install it with: '
        "pip install '%s' (or pip install tf-slim)." % (
            qualname, '.' + name if name else '', _EXTRA), 'tf_slim') from None
  _route_legacy_tf_layers()
  prepare()
  return tf_slim
