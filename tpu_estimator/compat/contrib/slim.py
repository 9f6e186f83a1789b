"""`tf.contrib.slim`: the maintained `tf_slim` package (the `[legacy]` extra), with the layers
this package implements itself (`tpu_estimator.compat.contrib.layers`: conv2d,
fully_connected, batch_norm, layer_norm, ...) in front, so `slim.conv2d` is
`tf.contrib.layers.conv2d` as in TF 1.x and works without Keras.

Every other name (`arg_scope`, `repeat`, `stack`, `separable_conv2d`, `losses`, `learning`,
`get_variables_to_restore`, ...) is `tf_slim`'s.  Some of tf_slim's own layers are built on
TensorFlow's `tensorflow.python.layers`, which load the legacy TF layers from `tf_keras` under
a module path tf_keras 2.16+ moved; `load_tf_slim()` registers that path when tf_keras is
installed.  Without tf_slim, any name raises an AttributeError naming the extra to install.
"""
import importlib
import importlib.util
import pkgutil
import sys

__all__ = ['load_tf_slim']  # everything else: tf_slim's names, resolved on access

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


def __getattr__(name):
  if name.startswith('__'):
    raise AttributeError(name)
  from tpu_estimator.compat.contrib import layers  # pylint: disable=import-outside-toplevel
  if name in layers.__all__:
    return getattr(layers, name)
  tf_slim = load_tf_slim('tf.contrib.slim', name)
  if name == 'layers':
    return layers
  try:
    return getattr(tf_slim, name)
  except AttributeError:
    raise AttributeError(
        'tf.contrib.slim.%s is not in the tf_slim package (%s) either.' % (
            name, getattr(tf_slim, '__version__', 'installed'))) from None


def __dir__():
  try:
    import tf_slim  # pylint: disable=import-outside-toplevel
    names = set(n for n in dir(tf_slim) if not n.startswith('_'))
  except ImportError:
    names = set()
  return sorted(names | set(__all__))
