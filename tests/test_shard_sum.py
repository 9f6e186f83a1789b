"""CrossShardOptimizer around an optimizer with its own apply_gradients (BERT's
AdamWeightDecayOptimizer, SimCLR's LARS): on several shards the update is the one of one shard
on the whole batch, its variables named as on one shard."""
import os

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from helpers import dataset_input_fn, make_data

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
_v1 = tf.compat.v1


class _OwnApply(_v1.train.Optimizer):
  """Momentum written out in apply_gradients; its slot named after the variable as `naming`
  says: 'op' (param.op.name, SimCLR's LARS), 'name' (param.name, BERT) or None (no slot)."""

  def __init__(self, naming):
    super().__init__(False, 'OwnApply')
    self._naming = naming

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    updates = []
    for grad, param in grads_and_vars:
      if self._naming is None:
        updates.append(param.assign_sub(0.05 * grad))
        continue
      base = param.op.name if self._naming == 'op' else param.name.split(':')[0]
      slot = _v1.get_variable(base + '/Momentum', shape=param.shape, trainable=False,
                              initializer=_v1.zeros_initializer())
      velocity = 0.9 * slot + grad
      updates += [param.assign_sub(0.05 * velocity), slot.assign(velocity)]
    if global_step is not None:
      updates.append(global_step.assign_add(1))
    return tf.group(*updates, name=name)


class _DoubledThenBase(_v1.train.MomentumOptimizer):
  """Changes the gradients, then updates through the base class's apply_gradients."""

  def __init__(self):
    super().__init__(0.05, 0.9)

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    doubled = [(2.0 * g, v) for g, v in grads_and_vars]
    return super().apply_gradients(doubled, global_step=global_step, name=name)


def _model_fn(make_optimizer):
  def model_fn(features, labels, mode, params):
    del params
    kernel = _v1.get_variable('kernel', [features['x'].shape[1], 1],
                              initializer=_v1.zeros_initializer())
    loss = _v1.losses.mean_squared_error(labels, tf.matmul(features['x'], kernel))
    optimizer = te.CrossShardOptimizer(make_optimizer())
    return te.TPUEstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(
        loss, _v1.train.get_global_step()))
  return model_fn


def _trained(tmp_path, make_optimizer, shards, accumulation=1):
  x, _ = make_data(64)
  y = (x[:, :1] * 2.0).astype(np.float32)
  model_dir = str(tmp_path / str(shards))
  config = te.RunConfig(model_dir=model_dir, tpu_config=te.TPUConfig(
      iterations_per_loop=2, num_shards=shards, gradient_accumulation_steps=accumulation))
  est = te.TPUEstimator(_model_fn(make_optimizer), train_batch_size=16, config=config)
  est.train(dataset_input_fn(x, y), steps=5)
  return dict((name, est.get_variable_value(name)) for name, _ in
              tf.train.list_variables(model_dir))


def _loss_scaled(optimizer):
  """TensorFlow's own v1 loss-scale optimizer (it wants a replica context) around `optimizer`."""
  return lambda: _v1.mixed_precision.MixedPrecisionLossScaleOptimizer(optimizer(), 'dynamic')


@pytest.mark.parametrize('make_optimizer', [
    lambda: _OwnApply(None), lambda: _OwnApply('op'), lambda: _OwnApply('name'),
    _DoubledThenBase, _loss_scaled(lambda: _v1.train.MomentumOptimizer(0.05, 0.9)),
    _loss_scaled(lambda: _OwnApply('op')), _loss_scaled(_DoubledThenBase)],
                         ids=['assign', 'slot_by_op_name', 'slot_by_name', 'super',
                              'tf_loss_scale_over_base', 'tf_loss_scale_over_own',
                              'tf_loss_scale_over_super'])
def test_two_shards_update_as_one_shard_on_the_whole_batch(tmp_path, make_optimizer):
  _check_as_one_shard(_trained(tmp_path, make_optimizer, 1), _trained(tmp_path, make_optimizer, 2))


def test_with_accumulation_a_base_update_reached_from_its_own_sums_each_shard_once(tmp_path):
  # With another layer on the update, the optimizer's apply_gradients runs in each replica on
  # the summed gradients, and the base class's, reached from it, must not sum them again.
  _check_as_one_shard(_trained(tmp_path, _DoubledThenBase, 1, accumulation=2),
                      _trained(tmp_path, _DoubledThenBase, 2, accumulation=2))


def _check_as_one_shard(one, two):
  assert sorted(two) == sorted(one)  # no variable named after a replica's copy
  assert two['global_step'] == one['global_step'] == 5
  for name in one:
    np.testing.assert_allclose(two[name], one[name], rtol=1e-5, atol=1e-6, err_msg=name)
  assert np.abs(one['kernel']).max() > 0.1  # it trained


@pytest.mark.parametrize('shards', [1, 2])
def test_accumulation_over_an_update_it_cannot_reach_is_refused_alike_on_two_shards(
    tmp_path, shards):
  # Per replica, LARS's slot under param.op.name is looked up under the variable's own name:
  # the second shard reaches the same clear refusal as one shard, not a missing variable.
  with pytest.raises(ValueError, match='found no tf.compat.v1.train.Optimizer update'):
    _trained(tmp_path, lambda: _OwnApply('op'), shards, accumulation=2)
