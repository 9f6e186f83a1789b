"""`tf.contrib.learn`: what programs of the tf.estimator era still took from it.

TF 1.x deprecated contrib.learn for `tf.estimator`, and programs that moved kept two names:
`RunConfig` (contrib.learn's subclass of the Estimator's `RunConfig`, with `master`,
`evaluation_master`, `num_cores`, `gpu_memory_fraction` and `log_device_placement`), given to a
`tf.estimator.Estimator`, and `monitors.replace_monitors_with_hooks` (tensor2tensor's trainer
calls both).  Its own estimators, `Experiment` and `learn_runner` are not provided: a name
that is not here raises an error naming tf.estimator.
"""
import types

import tensorflow as tf

from tpu_estimator import config as config_lib
from tpu_estimator import errors

__all__ = ['RunConfig', 'monitors']


class RunConfig(config_lib.RunConfig):
  """The Estimator's `RunConfig` taking contrib.learn's arguments too.  `tf_config` is the
  `ConfigProto` contrib.learn built from `num_cores`, `gpu_memory_fraction` and
  `log_device_placement`; the Estimator's sessions use `session_config`, as TF 1.x's
  `tf.estimator.Estimator` did with this config.  `master` must be local ('' or None): a remote
  one is refused rather than ignored (describe a cluster with TF_CONFIG)."""

  def __init__(self, master=None, num_cores=0, log_device_placement=False,
               gpu_memory_fraction=1, evaluation_master='', **kwargs):
    for name, value in (('master', master), ('evaluation_master', evaluation_master)):
      if value:
        raise errors.value_error(
            'tf.contrib.learn.RunConfig(%s=...) names a remote TensorFlow server, which the '
            'Estimator here does not connect to.' % name,
            "Leave it '' (this machine), or describe the cluster in the TF_CONFIG environment "
            'variable.', **{name: value})
    super().__init__(**kwargs)
    self._tf_config = tf.compat.v1.ConfigProto(
        log_device_placement=log_device_placement, inter_op_parallelism_threads=num_cores,
        intra_op_parallelism_threads=num_cores,
        gpu_options=tf.compat.v1.GPUOptions(per_process_gpu_memory_fraction=gpu_memory_fraction))

  tf_config = property(lambda self: self._tf_config)


def _replace_monitors_with_hooks(monitors_or_hooks, estimator):
  """The hooks among `monitors_or_hooks` (TF 1.x also turned contrib.learn monitors into hooks;
  there are no monitors here, so anything else is an error)."""
  del estimator
  hooks = list(monitors_or_hooks or [])
  for hook in hooks:
    if not isinstance(hook, tf.compat.v1.train.SessionRunHook):
      raise errors.type_error(
          'contrib.learn monitors are not provided: pass tf.estimator.SessionRunHook objects.',
          'Write the monitor as a SessionRunHook.', monitor=hook)
  return hooks


monitors = types.SimpleNamespace(replace_monitors_with_hooks=_replace_monitors_with_hooks)
