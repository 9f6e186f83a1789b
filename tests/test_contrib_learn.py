"""tf.contrib.learn's RunConfig and monitors.replace_monitors_with_hooks, what tf.estimator-era
programs (tensor2tensor's trainer) kept from contrib.learn: the config drives a tf.estimator
Estimator as TF 1.x's did."""
import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from tpu_estimator.compat.contrib import learn

_v1 = tf.compat.v1


def _model_fn(features, labels, mode):
  w = _v1.get_variable('w', [1, 1])
  loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
  train_op = _v1.train.GradientDescentOptimizer(0.1).minimize(loss, _v1.train.get_global_step())
  return te.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _input_fn():
  x = np.ones([4, 1], np.float32)
  return tf.data.Dataset.from_tensor_slices((x, 2 * x)).repeat().batch(2)


def test_learn_run_config_drives_an_estimator(tmp_path):
  config = learn.RunConfig(master='', evaluation_master='', model_dir=str(tmp_path),
                           save_checkpoints_steps=2, keep_checkpoint_max=10, num_cores=2,
                           gpu_memory_fraction=0.5, tf_random_seed=1)
  assert config.tf_config.inter_op_parallelism_threads == 2
  assert config.tf_config.gpu_options.per_process_gpu_memory_fraction == 0.5
  est = te.Estimator(_model_fn, config=config)
  hook = _v1.train.StopAtStepHook(last_step=4)
  est.train(_input_fn, hooks=learn.monitors.replace_monitors_with_hooks([hook], est))
  assert est.get_variable_value('global_step') == 4
  assert len(tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths) == 3
  changed = config.replace(save_checkpoints_steps=5)
  assert isinstance(changed, learn.RunConfig) and changed.save_checkpoints_steps == 5
  assert changed.tf_config.inter_op_parallelism_threads == 2


def test_learn_run_config_refuses_a_remote_master_and_monitors_name_themselves():
  with pytest.raises(ValueError, match=r"master.*grpc://10.0.0.1:8470.*TF_CONFIG"):
    learn.RunConfig(master='grpc://10.0.0.1:8470')
  with pytest.raises(TypeError, match=r'monitors are not provided.*SessionRunHook'):
    learn.monitors.replace_monitors_with_hooks([object()], None)
  assert learn.monitors.replace_monitors_with_hooks(None, None) == []
