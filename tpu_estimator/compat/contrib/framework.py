"""`tf.contrib.framework`: variable and arg_scope helpers of TF 1.x.

Names TensorFlow still ships are served from it (global step helpers, checkpoint reading,
`nest`, `sort`, the `deprecated` decorators); the variable-collection and `arg_scope` helpers
(`arg_scope`, `add_arg_scope`, `get_variables_to_restore`, `assign_from_checkpoint_fn`,
`model_variable`, `get_variables`, ...) come from the maintained `tf_slim` package (the
`[legacy]` extra), where they live on.  Without tf_slim those raise an AttributeError naming
the extra.
"""
import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.compat.contrib import slim_loader

_v1 = tf.compat.v1

# From TensorFlow itself.
argsort = tf.argsort
assert_global_step = _v1.train.assert_global_step
create_global_step = _v1.train.create_global_step
get_global_step = _v1.train.get_global_step
get_or_create_global_step = _v1.train.get_or_create_global_step
init_from_checkpoint = _v1.train.init_from_checkpoint
is_tensor = tf.is_tensor
list_variables = tf.train.list_variables
load_checkpoint = tf.train.load_checkpoint
load_variable = tf.train.load_variable
nest = tf.nest
sort = tf.sort
globals().update(_tf_internals.deprecation_decorators())  # deprecated, deprecated_args, ...

# From tf_slim, on access.
_TF_SLIM_NAMES = (
    'add_arg_scope', 'add_model_variable', 'arg_scope', 'arg_scope_func_key',
    'arg_scoped_arguments', 'assert_or_get_global_step', 'assign_from_checkpoint',
    'assign_from_checkpoint_fn', 'assign_from_values', 'assign_from_values_fn',
    'current_arg_scope', 'filter_variables', 'get_local_variables', 'get_model_variables',
    'get_trainable_variables', 'get_unique_variable', 'get_variable_full_name',
    'get_variables', 'get_variables_by_name', 'get_variables_by_suffix',
    'get_variables_to_restore', 'global_variable', 'has_arg_scope', 'local_variable',
    'model_variable', 'variable', 'VariableDeviceChooser')

__all__ = ['argsort', 'assert_global_step', 'create_global_step', 'get_global_step',
           'get_or_create_global_step', 'init_from_checkpoint', 'is_tensor', 'list_variables',
           'load_checkpoint', 'load_variable', 'nest', 'sort', 'get_name_scope', 'deprecated',
           'deprecated_args', 'deprecated_arg_values']
# The tf_slim names are resolved on access (module `__getattr__`), not listed in `__all__`:
# listing them would import tf_slim (~0.5 s) whenever the contrib namespace is installed.


def get_name_scope():
  """The current name scope of the default graph."""
  return _v1.get_default_graph().get_name_scope()


def __getattr__(name):
  if name in _TF_SLIM_NAMES:
    return getattr(slim_loader.load_tf_slim('tf.contrib.framework', name), name)
  raise AttributeError(
      'tf.contrib.framework.%s is not provided by tpu_estimator: use tf.compat.v1 or the '
      'tf_slim package.' % name)


def __dir__():
  return sorted(set(__all__) | set(_TF_SLIM_NAMES))
