"""`tf.contrib.distribute`: the strategies TF 1.12-1.15 Estimator programs passed as
`RunConfig(train_distribute=...)` or in a `DistributeConfig` (`experimental_distribute=`), as
TensorFlow's v1 strategies (subclasses, so `isinstance` against TensorFlow's holds).

- `MirroredStrategy(devices=None, num_gpus=None, num_gpus_per_worker=None,
  cross_device_ops=None, auto_shard_dataset=False, cross_tower_ops=None)`: `num_gpus=N`
  replicas on the first N GPUs (0: the CPU).  On a machine without GPUs, TF 1.x placed the N
  "GPU" replicas on its CPU (soft placement); here they are N logical CPU devices, as
  `TPUConfig(num_shards=N)` gives, with one INFO line.  A machine with some GPUs but fewer
  than N is refused (which replica would go where is not knowable from TF 1.x's behaviour).
  `auto_shard_dataset` (sharding across the workers of a cluster) is not needed by a local
  strategy and is ignored.
- `CollectiveAllReduceStrategy(num_gpus_per_worker=0, communication=AUTO)`: the v1
  `MultiWorkerMirroredStrategy` of the `TF_CONFIG` cluster (every local GPU of each worker,
  else its CPU).
- `ParameterServerStrategy(num_gpus_per_worker=0)`, `OneDeviceStrategy(device)`.
- `DistributeConfig(train_distribute=None, eval_distribute=None, remote_cluster=None)`.
- `AllReduceCrossDeviceOps(all_reduce_alg='nccl', num_packs=1)`, `ReductionToOneDevice`,
  `CrossDeviceOps`, and the context functions (`get_replica_context`, `get_strategy`, ...).
"""
import collections

import tensorflow as tf

from tpu_estimator import errors
from tpu_estimator.distribute import replication

_v1 = tf.compat.v1
_log = tf.get_logger()

__all__ = ['MirroredStrategy', 'CollectiveAllReduceStrategy', 'ParameterServerStrategy',
           'OneDeviceStrategy', 'DistributeConfig', 'DistributionStrategy',
           'AllReduceCrossDeviceOps', 'ReductionToOneDevice', 'CrossDeviceOps',
           'ReplicaContext', 'get_replica_context', 'in_cross_replica_context', 'get_strategy',
           'has_strategy', 'get_distribution_strategy', 'has_distribution_strategy',
           'get_loss_reduction']

DistributionStrategy = _v1.distribute.Strategy
ReplicaContext = tf.distribute.ReplicaContext
ReductionToOneDevice = tf.distribute.ReductionToOneDevice
CrossDeviceOps = tf.distribute.CrossDeviceOps
get_replica_context = _v1.distribute.get_replica_context
in_cross_replica_context = _v1.distribute.in_cross_replica_context
get_strategy = get_distribution_strategy = _v1.distribute.get_strategy
has_strategy = has_distribution_strategy = _v1.distribute.has_strategy
get_loss_reduction = _v1.distribute.get_loss_reduction


class DistributeConfig(collections.namedtuple(
    'DistributeConfig', ['train_distribute', 'eval_distribute', 'remote_cluster'])):
  """`RunConfig(experimental_distribute=...)`: the strategies for training and evaluation."""

  def __new__(cls, train_distribute=None, eval_distribute=None, remote_cluster=None):
    return super().__new__(cls, train_distribute, eval_distribute, remote_cluster)


def _check_count(name, value):
  if not errors.is_int(value):
    raise errors.type_error('`%s` must be an int.' % name, 'Pass an integer >= 0.',
                            **{name: value})
  if value < 0:
    raise errors.value_error('`%s` must be >= 0.' % name, 'Pass an integer >= 0.',
                             **{name: value})


def _devices_for(num_gpus):
  """The devices of `num_gpus` replicas on this machine (see the module docstring)."""
  _check_count('num_gpus', num_gpus)
  if num_gpus == 0:
    return ['/cpu:0']
  gpus = len(replication.physical_gpus())
  if gpus >= num_gpus:
    return ['/gpu:%d' % i for i in range(num_gpus)]
  if gpus:
    raise errors.value_error(
        'MirroredStrategy(num_gpus=%d) on a machine with %d GPU(s).' % (num_gpus, gpus),
        'Pass num_gpus=%d (or fewer).' % gpus, num_gpus=num_gpus, gpus=gpus)
  _log.info('tf.contrib.distribute.MirroredStrategy(num_gpus=%d) on a machine without GPUs: '
            '%d replicas on logical CPU devices.', num_gpus, num_gpus)
  return ['/cpu:%d' % i for i in range(num_gpus)]


def _in_a_graph(make):
  """`make()` in graph mode: eagerly, a strategy over logical CPU devices would need them
  configured before TensorFlow started; the estimator's sessions configure them."""
  if tf.executing_eagerly():
    with tf.Graph().as_default():
      return make()
  return make()


class MirroredStrategy(_v1.distribute.MirroredStrategy):
  """TF 1.x's `tf.contrib.distribute.MirroredStrategy` (see the module docstring)."""

  def __init__(self, devices=None, num_gpus=None, num_gpus_per_worker=None,
               cross_device_ops=None, auto_shard_dataset=False, cross_tower_ops=None):
    del auto_shard_dataset
    if num_gpus is not None and num_gpus_per_worker is not None:
      raise errors.value_error('Pass only one of num_gpus and num_gpus_per_worker.',
                               num_gpus=num_gpus, num_gpus_per_worker=num_gpus_per_worker)
    count = num_gpus if num_gpus is not None else num_gpus_per_worker
    if devices is not None and count is not None:
      raise errors.value_error('Pass only one of devices and num_gpus.', devices=devices,
                               num_gpus=count)
    if cross_device_ops is not None and cross_tower_ops is not None:
      raise errors.value_error('Pass only one of cross_device_ops and cross_tower_ops.',
                               cross_device_ops=cross_device_ops,
                               cross_tower_ops=cross_tower_ops)
    if count is not None:
      devices = _devices_for(count)
    _in_a_graph(lambda: super(MirroredStrategy, self).__init__(
        devices=devices, cross_device_ops=cross_device_ops or cross_tower_ops))


class CollectiveAllReduceStrategy(_v1.distribute.experimental.MultiWorkerMirroredStrategy):
  """TF 1.x's `tf.contrib.distribute.CollectiveAllReduceStrategy`: all-reduce across the
  workers of the `TF_CONFIG` cluster, over each worker's GPUs (else its CPU)."""

  def __init__(self, num_gpus_per_worker=0,
               communication=tf.distribute.experimental.CommunicationImplementation.AUTO):
    _check_count('num_gpus_per_worker', num_gpus_per_worker)
    super().__init__(communication=communication)


class ParameterServerStrategy(_v1.distribute.experimental.ParameterServerStrategy):
  """TF 1.x's `tf.contrib.distribute.ParameterServerStrategy`: variables on the `ps` tasks of
  the `TF_CONFIG` cluster, computation on each worker."""

  def __init__(self, num_gpus_per_worker=0):
    _check_count('num_gpus_per_worker', num_gpus_per_worker)
    super().__init__()


class OneDeviceStrategy(_v1.distribute.OneDeviceStrategy):
  """TF 1.x's `tf.contrib.distribute.OneDeviceStrategy(device)`."""


def AllReduceCrossDeviceOps(all_reduce_alg='nccl', num_packs=1):  # pylint: disable=invalid-name
  """TF 1.x's all-reduce by NCCL (`'nccl'`) or hierarchical copies (`'hierarchical_copy'`)."""
  algorithms = {'nccl': tf.distribute.NcclAllReduce,
                'hierarchical_copy': tf.distribute.HierarchicalCopyAllReduce}
  if all_reduce_alg not in algorithms:
    raise errors.value_error('Unknown all_reduce_alg.', "Pass 'nccl' or 'hierarchical_copy'.",
                             all_reduce_alg=all_reduce_alg)
  return algorithms[all_reduce_alg](num_packs=num_packs)
