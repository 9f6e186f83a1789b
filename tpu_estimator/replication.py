"""Replicas: the one wrapper over `tf.distribute`.

`make_replicas` picks the devices: TPU cores (see below), else every local GPU, else
`num_shards` logical CPU devices (a session `device_count`), so the sharded path runs on any
machine.  With one replica no strategy is built at all (it would only add overhead); with more,
a `MirroredStrategy` in graph mode mirrors the variables, runs the per-replica function once per
device (`call_for_each_replica`) and averages gradients: v1 optimizers see the loss scaled by
1/replicas (the strategy's Estimator loss scaling), so N replicas on a global batch B give the
update one device would on B.

TPU: this build has no access to TPU hardware to test on, so it does not drive TPU cores; when
TPU devices are visible it says so instead of silently using the CPU.
"""
import contextlib

import tensorflow as tf
from tensorflow.python.distribute import distribute_utils

from tpu_estimator import errors

_v1 = tf.compat.v1


class Replicas:
  """The devices one call runs on and how to run a function once per device."""

  def __init__(self, devices, kind):
    self.devices = tuple(devices)
    self.kind = kind  # 'single', 'cpu' or 'gpu'
    self.strategy = None
    if len(self.devices) > 1:
      self.strategy = tf.distribute.MirroredStrategy(devices=list(self.devices))

  @property
  def num_replicas(self):
    return len(self.devices)

  def scope(self):
    """Variables created here (global step, model variables) are mirrored on every replica."""
    return self.strategy.scope() if self.strategy else contextlib.nullcontext()

  def session_config(self, base=None):
    """`base` (the user's ConfigProto) plus what these replicas need."""
    config = _v1.ConfigProto()
    if base is not None:
      config.CopyFrom(base)
    else:
      config.allow_soft_placement = True
    if self.kind == 'cpu' and self.num_replicas > 1:
      config.device_count['CPU'] = max(config.device_count.get('CPU', 1), self.num_replicas)
    return config

  def run(self, fn, per_replica_args):
    """Calls `fn(*per_replica_args[i])` once per replica; returns the list of its results.

    With one replica this is a plain call.  With several, the calls run under the strategy's
    replica contexts, so optimizers aggregate gradients and variables are shared.
    """
    if self.strategy is None:
      return [fn(*per_replica_args[0])]
    values = self.strategy.experimental_distribute_values_from_function(
        lambda ctx: tuple(per_replica_args[ctx.replica_id_in_sync_group]))
    with self.strategy._scale_loss_for_estimator_enabled():  # pylint: disable=protected-access
      out = self.strategy.extended.call_for_each_replica(lambda args: fn(*args), args=(values,))
    return [distribute_utils.select_replica(i, out) for i in range(self.num_replicas)]

  def primary(self, variable):
    """The first replica's copy of a (possibly mirrored) variable."""
    if self.strategy is None or not hasattr(variable, 'values'):
      return variable
    return variable.values[0]


def _tpu_devices():
  try:
    return tf.config.list_logical_devices('TPU')
  except (RuntimeError, ValueError):
    return []


def make_replicas(num_shards):
  """Replicas for `use_tpu=True`: `num_shards=None` means every local accelerator (1 on a
  CPU-only machine)."""
  if _tpu_devices():
    raise errors.value_error(
        'TPU devices are visible, but this build of tpu_estimator does not drive TPU cores.',
        'Run with use_tpu=False, or on a machine with GPUs or CPUs only.',
        tpu_devices=[d.name for d in _tpu_devices()])
  gpus = tf.config.list_physical_devices('GPU')
  if gpus:
    count = len(gpus) if num_shards is None else num_shards
    if count > len(gpus):
      raise errors.value_error(
          'TPUConfig.num_shards asks for more GPUs than this machine has (%d found).' % len(gpus),
          'Set num_shards <= %d or None (all GPUs).' % len(gpus), num_shards=num_shards)
    return Replicas(['/gpu:%d' % i for i in range(count)], 'gpu')
  count = num_shards or 1
  if count == 1:
    return Replicas(['/cpu:0'], 'single')
  return Replicas(['/cpu:%d' % i for i in range(count)], 'cpu')


def single_device():
  """One replica, no strategy: `use_tpu=False` and the plain Estimator."""
  return Replicas(['/cpu:0'], 'single')


def reject_distribute_config(config):
  """The Estimator's `train_distribute`/`eval_distribute` are not driven by this build."""
  for name in ('train_distribute', 'eval_distribute'):
    value = getattr(config, name, None)
    if value is not None:
      raise errors.value_error(
          'RunConfig.%s is not supported by tpu_estimator.' % name,
          'Use TPUEstimator(use_tpu=True) with TPUConfig(num_shards=N): it replicates over '
          'GPUs or logical CPU devices.', **{name: value})
