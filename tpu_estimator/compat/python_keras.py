"""`tensorflow.python.keras[.*]`: the Keras TF 1.x programs imported by module path, resolved to
`tf_keras` when `tf.keras` is tf_keras, so a program does not mix two Keras copies.

TensorFlow 2.16+ still ships, under `tensorflow.python.keras`, a frozen internal Keras 2 copy of
its own, distinct from both `tf_keras` and Keras 3: `from tensorflow.python.keras.layers import
Dense` next to `tf.keras.Model` put layers of one Keras in a model of another.  When `tf.keras`
is `tf_keras` (`tpu-estimator run` with tf_keras installed, or `TF_USE_LEGACY_KERAS=1`), after
`install()` every import under that path resolves to the same module of tf_keras's internal
tree, which has TF 1.x's layout (`tensorflow.python.keras.engine.training` ->
`tf_keras.src.engine.training`, `.layers` -> `tf_keras.src.layers`, `.backend`,
`.utils.generic_utils`, ...), and `tensorflow.python.layers.base` (TensorFlow's TF1 layer base,
imported from its copy at start) gives tf_keras's legacy names, as its sibling modules
(`core`, `convolutional`, ...) already do.  A path tf_keras has no module for raises
ModuleNotFoundError saying so.

With Keras 3 as `tf.keras` nothing changes: TensorFlow's TF1 layers (`tensorflow.python.layers`,
and tf_slim's layers on them) are built on its internal copy, whose modules import
`tensorflow.python.keras.<public module>.<internal module>`; routing those paths to Keras 3
breaks them (measured: tf_slim's fully_connected, max_pool2d and dropout), so they stay
TensorFlow's.  Install tf_keras for one Keras.
"""

import importlib
import importlib.util
import os
import sys

from tpu_estimator.compat import namespaces

PREFIX = 'tensorflow.python.keras'
_ROOT = 'tf_keras.src'
_LAYERS_BASE = 'tensorflow.python.layers.base'
_LAYERS_BASE_NAMES = ('InputSpec', 'Layer', 'keras_style_scope', 'set_keras_style')


class _State:
  installed = False


def legacy_keras_in_use():
  """Whether TensorFlow's tf.keras is tf_keras (TF_USE_LEGACY_KERAS set true and tf_keras
  installed: TensorFlow's own rule), without importing either Keras."""
  return (os.environ.get('TF_USE_LEGACY_KERAS') in ('true', 'True', '1')
          and importlib.util.find_spec('tf_keras') is not None)


def _make(fullname):
  if fullname != PREFIX and not fullname.startswith(PREFIX + '.'):
    return None
  try:
    return importlib.import_module(_ROOT + fullname[len(PREFIX):])
  except ModuleNotFoundError:
    return None


def _missing(fullname):
  return ('No module named %r: tensorflow.python.keras is tf.keras\'s Keras (tf_keras, as '
          '%s), which has no such module. %s' % (fullname, _ROOT, namespaces.README_SECTION))


def _route_layers_base():
  """`tensorflow.python.layers.base`'s names are tf_keras's legacy ones from now on, so a
  layer on `base.Layer` accepts the `InputSpec` of `tensorflow.python.keras.engine.input_spec`
  (tf_slim's GDN uses both).  Resolved on first access: tf_keras is imported only when used."""
  base = sys.modules.get(_LAYERS_BASE)
  if base is None:
    return
  for name in _LAYERS_BASE_NAMES:
    base.__dict__.pop(name, None)

  def __getattr__(name):  # PEP 562: only names the module no longer holds
    if name in _LAYERS_BASE_NAMES:
      return getattr(importlib.import_module(_ROOT + '.legacy_tf_layers.base'), name)
    raise AttributeError('module %r has no attribute %r' % (_LAYERS_BASE, name))
  base.__getattr__ = __getattr__


def install():
  """When tf.keras is tf_keras (decided now: `tpu-estimator run` sets TF_USE_LEGACY_KERAS
  before), routes `tensorflow.python.keras[.*]` imports to it (see the module doc); returns
  whether it did.  TensorFlow's copy leaves `sys.modules` (the TensorFlow modules that imported
  it keep it).  Idempotent."""
  if _State.installed or not legacy_keras_in_use():
    return _State.installed
  _State.installed = True
  for name in [n for n in sys.modules if n == PREFIX or n.startswith(PREFIX + '.')]:
    del sys.modules[name]
  python = sys.modules.get('tensorflow.python')
  if python is not None and 'keras' in python.__dict__:
    del python.__dict__['keras']
  finder = namespaces.finder()
  finder.makers[PREFIX] = _make
  finder.missing[PREFIX + '.'] = _missing
  _route_layers_base()
  return True
