"""Legacy Keras: `tf.compat.v1.layers` and `tf.keras` on the `tf_keras` package (Keras 2).

TensorFlow 2.16+ resolves its Keras names to Keras 3, which has no TF1 layers; with
`TF_USE_LEGACY_KERAS=1` it resolves them to `tf_keras` instead.  `use_legacy_keras()` sets that
for programs run by `tpu-estimator run`, or names the package to install when it is missing.
"""
import os
import sys
import types
import importlib.util

from tpu_estimator.compat import tf_modules
from tpu_estimator.compat.extras import LEGACY_EXTRA
from tpu_estimator.compat.extras import MissingExtraError


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
    raise MissingExtraError(
        'tf.compat.v1.layers.%s needs the tf_keras package (Keras 3 has no TF1 layers). '
        "Install it with: pip install '%s' (or pip install tf_keras); `tpu-estimator run` "
        'then routes the legacy layers to it.' % (name, LEGACY_EXTRA), 'tf_keras')


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
      for module in tf_modules.api_modules()[1]:
        tf_modules.set_attr(module, 'layers', guard)
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
