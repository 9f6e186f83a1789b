"""Loading the `tf_slim` package (the `[legacy]` extra) for `tf.contrib.slim`,
`tf.contrib.layers` and `tf.contrib.framework`: some of tf_slim's own layers are built on
TensorFlow's `tensorflow.python.layers`, which load the legacy TF layers from `tf_keras` under a
module path tf_keras 2.16+ moved; `load_tf_slim()` registers that path when tf_keras is
installed.  Without tf_slim, it raises an AttributeError naming the extra to install.
"""
import importlib
import importlib.util
import pkgutil
import sys

_EXTRA = 'tpu-estimator[legacy]'


def _route_legacy_tf_layers():
  """`tf_keras.legacy_tf_layers[.*]` -> `tf_keras.src.legacy_tf_layers[.*]`, where
  `tensorflow.python.layers` looks for them, when tf_keras is installed."""
  if 'tf_keras.legacy_tf_layers' in sys.modules:
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


def load_tf_slim(qualname='tf.contrib.slim', name=None):
  """The `tf_slim` module; an AttributeError naming `qualname.name` and the extra to install
  when it is missing."""
  try:
    import tf_slim  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise AttributeError(
        '%s%s needs the tf_slim package, which is not installed. Install it with: '
        "pip install '%s' (or pip install tf-slim)." % (
            qualname, '.' + name if name else '', _EXTRA)) from None
  _route_legacy_tf_layers()
  return tf_slim
