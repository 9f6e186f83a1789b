"""tf.contrib.distribute: TF 1.x's strategies (XLNet's `MirroredStrategy(num_gpus=N)`) given to
an Estimator directly or in a `DistributeConfig`, on this machine's logical CPUs."""
import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from tpu_estimator.compat.contrib import distribute

v1 = tf.compat.v1
X = np.random.RandomState(0).randn(64, 4).astype(np.float32)
Y = X.sum(1, keepdims=True)


def _input_fn():
  return tf.data.Dataset.from_tensor_slices(({'x': X}, Y)).repeat().batch(8)


def _model_fn(seen):
  def model_fn(features, labels, mode):
    seen.append(distribute.get_replica_context().num_replicas_in_sync)
    kernel = v1.get_variable('kernel', [4, 1], initializer=v1.zeros_initializer())
    loss = v1.losses.mean_squared_error(labels, tf.matmul(features['x'], kernel))
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss, v1.train.get_global_step())
    return te.EstimatorSpec(mode, loss=loss, train_op=train_op)
  return model_fn


def test_mirrored_num_gpus_without_gpus_is_that_many_cpu_replicas(tmp_path):
  """TF 1.x soft-placed the N 'GPU' replicas on a machine without GPUs; here they are N
  logical CPUs.  Given in a DistributeConfig, the original's RunConfig used it for training."""
  strategy = distribute.MirroredStrategy(num_gpus=2)
  assert isinstance(strategy, tf.compat.v1.distribute.MirroredStrategy)
  assert len(strategy.extended.worker_devices) == 2
  assert all('CPU' in d for d in strategy.extended.worker_devices)
  one = distribute.MirroredStrategy(num_gpus=0).extended.worker_devices
  assert len(one) == 1 and one[0].endswith('device:CPU:0')
  config = te.RunConfig(model_dir=str(tmp_path), experimental_distribute=(
      distribute.DistributeConfig(train_distribute=strategy)))
  assert config.train_distribute is strategy and config.eval_distribute is None
  assert config.replace(save_summary_steps=5).train_distribute is strategy
  seen = []
  est = te.Estimator(_model_fn(seen), config=config)
  est.train(_input_fn, max_steps=3)
  assert seen == [2, 2] and est.get_variable_value('global_step') == 3


@pytest.mark.parametrize('make,error,words', [
    (lambda: distribute.MirroredStrategy(num_gpus=-1), ValueError, ['num_gpus=-1']),
    (lambda: distribute.MirroredStrategy(num_gpus='2'), TypeError, ["num_gpus='2'"]),
    (lambda: distribute.MirroredStrategy(['/cpu:0'], num_gpus=1), ValueError,
     ['devices', 'num_gpus=1']),
    (lambda: te.RunConfig(train_distribute=distribute.OneDeviceStrategy('/cpu:0'),
                          experimental_distribute=distribute.DistributeConfig(
                              train_distribute=distribute.OneDeviceStrategy('/cpu:0'))),
     ValueError, ['Either `train_distribute`']),
    (lambda: te.RunConfig(experimental_distribute=distribute.DistributeConfig(
        remote_cluster={'worker': ['host:2222']})), ValueError, ['remote_cluster', 'TF_CONFIG']),
])
def test_misuse_is_refused_naming_the_argument(make, error, words):
  with pytest.raises(error) as info:
    make()
  assert all(w in str(info.value) for w in words), str(info.value)
