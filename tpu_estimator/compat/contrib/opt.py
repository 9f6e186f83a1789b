"""`tf.contrib.opt`: the TF 1.x optimizers BERT/ALBERT-era programs used, as subclasses of
`tf.compat.v1.train` optimizers (same slots and slot names, so checkpoints carry over).

- `AdamWOptimizer`, `MomentumWOptimizer` and `extend_with_decoupled_weight_decay`: decoupled
  weight decay (Loshchilov & Hutter): each step first does `var -= weight_decay * var`, then
  the base optimizer's update; the gradient is always that of the weights before the decay.  `weight_decay` is NOT multiplied by the learning rate (scale
  it yourself along a schedule, as TF 1.15 documented).  `decay_var_list` in `minimize` /
  `apply_gradients` limits the decay to those variables.  Sparse gradients decay only the
  rows they touch.
- `LazyAdamOptimizer`: Adam whose sparse updates (embedding lookups) read and write only the
  rows in the gradient: their `m`/`v` moments and values; other rows stay as they are.
  Dense updates are Adam's.
"""
import tensorflow as tf

_v1 = tf.compat.v1

__all__ = ['AdamWOptimizer', 'LazyAdamOptimizer', 'MomentumWOptimizer',
           'DecoupledWeightDecayExtension', 'extend_with_decoupled_weight_decay']


class DecoupledWeightDecayExtension:
  """Mixin for a `tf.compat.v1.train.Optimizer` subclass: decays weights by `weight_decay *
  var` before the base update.  Put it first in the bases."""
  APPLIES_THROUGH_BASE = True  # its apply_gradients ends in the base class's (shard_sum.py)

  def __init__(self, weight_decay, *args, **kwargs):
    self._decay_var_list = None
    self._weight_decay = weight_decay
    self._weight_decay_tensor = None
    super().__init__(*args, **kwargs)

  def minimize(self, loss, global_step=None, var_list=None,
               gate_gradients=_v1.train.Optimizer.GATE_OP, aggregation_method=None,
               colocate_gradients_with_ops=False, name=None, grad_loss=None,
               decay_var_list=None):
    self._decay_var_list = set(_ref(v) for v in decay_var_list) if decay_var_list else None
    return super().minimize(loss, global_step=global_step, var_list=var_list,
                            gate_gradients=gate_gradients,
                            aggregation_method=aggregation_method,
                            colocate_gradients_with_ops=colocate_gradients_with_ops,
                            name=name, grad_loss=grad_loss)

  def apply_gradients(self, grads_and_vars, global_step=None, name=None,
                      decay_var_list=None):
    if decay_var_list:
      self._decay_var_list = set(_ref(v) for v in decay_var_list)
    return super().apply_gradients(grads_and_vars, global_step=global_step, name=name)

  def _prepare(self):
    decay = self._weight_decay() if callable(self._weight_decay) else self._weight_decay
    self._weight_decay_tensor = tf.convert_to_tensor(decay, name='weight_decay')
    super()._prepare()

  def _decays(self, var):
    return self._decay_var_list is None or _ref(var) in self._decay_var_list

  # The decay waits for the gradient (as the base update does, taking it as input): it has no
  # data input that orders it after the forward pass, which could otherwise read the already
  # decayed weights, in an order that changes from run to run (a loaded machine, replicas on
  # several devices: their gradients are reduced, so the decay waits for every replica).
  def _decay_dense(self, grad, var):
    if not self._decays(var):
      return tf.no_op()
    with tf.control_dependencies([grad]):
      decay = tf.cast(self._weight_decay_tensor, var.dtype.base_dtype)
      return _v1.assign_sub(var, decay * var, use_locking=self._use_locking)

  def _decay_rows(self, grad, var, indices):
    if not self._decays(var):
      return tf.no_op()
    with tf.control_dependencies([grad, indices]):
      decay = tf.cast(self._weight_decay_tensor, var.dtype.base_dtype)
      return _v1.scatter_add(var, indices, -decay * tf.gather(var, indices),
                             use_locking=self._use_locking)

  def _apply_dense(self, grad, var):
    with tf.control_dependencies([self._decay_dense(grad, var)]):
      return super()._apply_dense(grad, var)

  def _resource_apply_dense(self, grad, var):
    with tf.control_dependencies([self._decay_dense(grad, var)]):
      return super()._resource_apply_dense(grad, var)

  def _apply_sparse(self, grad, var):
    with tf.control_dependencies([self._decay_rows(grad.values, var, grad.indices)]):
      return super()._apply_sparse(grad, var)

  def _resource_apply_sparse(self, grad, var, indices):
    with tf.control_dependencies([self._decay_rows(grad, var, indices)]):
      return super()._resource_apply_sparse(grad, var, indices)


def _ref(var):
  return var.ref() if hasattr(var, 'ref') else var


def extend_with_decoupled_weight_decay(base_optimizer):
  """A subclass of `base_optimizer` (a tf.compat.v1 optimizer class) taking `weight_decay`
  as its first argument, then `base_optimizer`'s."""
  return type(base_optimizer.__name__ + 'W',
              (DecoupledWeightDecayExtension, base_optimizer),
              {'__doc__': '%s with decoupled weight decay.' % base_optimizer.__name__})


class AdamWOptimizer(DecoupledWeightDecayExtension, _v1.train.AdamOptimizer):
  """Adam with decoupled weight decay: var -= weight_decay * var, then Adam's update."""

  def __init__(self, weight_decay, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
               use_locking=False, name='AdamW'):
    super().__init__(weight_decay, learning_rate=learning_rate, beta1=beta1, beta2=beta2,
                     epsilon=epsilon, use_locking=use_locking, name=name)


class MomentumWOptimizer(DecoupledWeightDecayExtension, _v1.train.MomentumOptimizer):
  """Momentum with decoupled weight decay: var -= weight_decay * var, then momentum's
  update."""

  def __init__(self, weight_decay, learning_rate, momentum, use_locking=False,
               name='MomentumW', use_nesterov=False):
    super().__init__(weight_decay, learning_rate=learning_rate, momentum=momentum,
                     use_locking=use_locking, name=name, use_nesterov=use_nesterov)


class LazyAdamOptimizer(_v1.train.AdamOptimizer):
  """Adam whose sparse updates touch only the gradient's rows (of var, m and v)."""

  def _lazy_rows(self, grad, var, indices, scatter_update, scatter_sub):
    dtype = var.dtype.base_dtype
    beta1_power, beta2_power = self._get_beta_accumulators()
    beta1_power = tf.cast(beta1_power, dtype)
    beta2_power = tf.cast(beta2_power, dtype)
    lr = tf.cast(self._lr_t, dtype)
    beta1 = tf.cast(self._beta1_t, dtype)
    beta2 = tf.cast(self._beta2_t, dtype)
    epsilon = tf.cast(self._epsilon_t, dtype)
    lr = lr * tf.sqrt(1.0 - beta2_power) / (1.0 - beta1_power)
    m, v = self.get_slot(var, 'm'), self.get_slot(var, 'v')
    m_rows = beta1 * tf.gather(m, indices) + (1.0 - beta1) * grad
    v_rows = beta2 * tf.gather(v, indices) + (1.0 - beta2) * tf.square(grad)
    m_update = scatter_update(m, indices, m_rows)
    v_update = scatter_update(v, indices, v_rows)
    var_update = scatter_sub(var, indices, lr * m_rows / (tf.sqrt(v_rows) + epsilon))
    return tf.group(var_update, m_update, v_update)

  def _apply_sparse(self, grad, var):
    return self._lazy_rows(grad.values, var, grad.indices, self._scatter_update,
                           self._scatter_sub)

  def _resource_apply_sparse(self, grad, var, indices):
    return self._lazy_rows(grad, var, indices, self._scatter_update, self._scatter_sub)

  def _scatter_update(self, ref, indices, updates):
    return _v1.scatter_update(ref, indices, updates, use_locking=self._use_locking)

  def _scatter_sub(self, ref, indices, updates):
    return _v1.scatter_sub(ref, indices, updates, use_locking=self._use_locking)
