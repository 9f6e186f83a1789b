"""The optional packages legacy programs may need, and the error for a name that needs one.

`EXTRAS` is the one table of them: the runtime raises `MissingExtraError` (an AttributeError,
as before) naming what to install when a legacy name needs a package that is not installed
(`tf.compat.v1.layers` without tf_keras, `tf.contrib.slim` without tf_slim), and
`tpu-estimator doctor` reads the same table and error type to say which names need an extra.
Importing this module imports nothing else.
"""
import importlib.util

LEGACY_EXTRA = 'tpu-estimator[legacy]'

# import name -> (what to install, what it provides to legacy programs)
EXTRAS = {
    'tf_keras': (LEGACY_EXTRA + ' (or tf_keras)',
                 'tf.compat.v1.layers and Keras 2 as tf.keras'),
    'tf_slim': (LEGACY_EXTRA + ' (or tf-slim)', 'tf.contrib.slim, tf.contrib.framework'),
    'tensorflow_hub': ('tensorflow-hub', 'hub.Module / hub.KerasLayer (not part of '
                       'tpu-estimator: programs import it themselves)'),
}


class MissingExtraError(AttributeError):
  """A legacy name needs `package` (a key of EXTRAS), which is not installed."""

  def __init__(self, message, package):
    super().__init__(message)
    self.package = package


def installed(package):
  """Whether `package` can be imported (found on the path; nothing is imported)."""
  try:
    return importlib.util.find_spec(package) is not None
  except (ImportError, ValueError):
    return False
