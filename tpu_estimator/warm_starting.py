"""`WarmStartSettings` and applying them (TensorFlow's `tf.compat.v1.train.warm_start`) when a
model_dir has no checkpoint yet."""
import collections
import os

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.checkpoints import state as checkpoint_state
from tpu_estimator import errors

_v1 = tf.compat.v1


class WarmStartSettings(
    collections.namedtuple('WarmStartSettings', [
        'ckpt_to_initialize_from', 'vars_to_warm_start', 'var_name_to_vocab_info',
        'var_name_to_prev_var_name'
    ])):
  """Which variables to initialise from which checkpoint (or SavedModel) before training."""

  def __new__(cls, ckpt_to_initialize_from, vars_to_warm_start='.*',
              var_name_to_vocab_info=None, var_name_to_prev_var_name=None):
    if not ckpt_to_initialize_from:
      raise errors.value_error('`ckpt_to_initialize_from` must be set.',
                               ckpt_to_initialize_from=ckpt_to_initialize_from)
    return super().__new__(cls, os.fspath(ckpt_to_initialize_from), vars_to_warm_start,
                           var_name_to_vocab_info or {}, var_name_to_prev_var_name or {})


def settings_from(warm_start_from):
  """None, a checkpoint path/dir, a SavedModel dir, or `WarmStartSettings`."""
  if warm_start_from is None:
    return None
  if isinstance(warm_start_from, WarmStartSettings):
    return warm_start_from
  if isinstance(warm_start_from, (str, bytes, os.PathLike)):
    path = os.fsdecode(os.fspath(warm_start_from))
    variables = os.path.join(path, 'variables', 'variables')
    if tf.io.gfile.exists(variables + '.index'):
      return WarmStartSettings(ckpt_to_initialize_from=variables)
    return WarmStartSettings(ckpt_to_initialize_from=path)
  raise errors.type_error('`warm_start_from` must be a path or a WarmStartSettings.',
                          warm_start_from=warm_start_from)


def apply(settings):
  """Adds the warm-start initialisation to the graph being built (call before the session)."""
  if settings is None:
    return
  source = settings.ckpt_to_initialize_from
  if tf.io.gfile.isdir(source):  # its latest complete checkpoint, as train would resume from
    source = checkpoint_state.latest(source) or source
  _v1.train.warm_start(source, settings.vars_to_warm_start,
                       settings.var_name_to_vocab_info, settings.var_name_to_prev_var_name)
  _replica_copies_follow_first()


def _replica_copies_follow_first():
  """Under a strategy's replicas (RunConfig.train_distribute), TensorFlow's warm start gives a
  mirrored variable an initializer that assigns the checkpoint's value to every copy.  Keras 3
  layers also list the copies on their own, with their random initializers still theirs: run
  with the others, one could overwrite the warm-started value.  Each copy listed on its own is
  given its mirrored variable's initializer."""
  variables = _v1.global_variables()
  mirrored_of = {}
  for variable in variables:
    for copy in getattr(variable, 'values', None) or ():
      mirrored_of[id(copy)] = variable
  for variable in variables:
    mirrored = mirrored_of.get(id(variable))
    if mirrored is not None:
      _tf_internals.set_initializer(variable, mirrored.initializer)
