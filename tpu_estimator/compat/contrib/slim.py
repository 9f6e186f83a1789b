"""`tf.contrib.slim`: the maintained `tf_slim` package (the `[legacy]` extra, loaded by
`slim_loader`), with the layers this package implements itself
(`tpu_estimator.compat.contrib.layers`: conv2d, fully_connected, batch_norm, layer_norm, ...)
in front, so `slim.conv2d` is `tf.contrib.layers.conv2d` as in TF 1.x and works without Keras.

Every other name (`arg_scope`, `repeat`, `stack`, `separable_conv2d`, `losses`, `learning`,
`get_variables_to_restore`, ...) is `tf_slim`'s.  Without tf_slim, any name raises an
AttributeError naming the extra to install.
"""
from tpu_estimator.compat.contrib.slim_loader import load_tf_slim

__all__ = ['load_tf_slim']  # everything else: tf_slim's names, resolved on access


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
