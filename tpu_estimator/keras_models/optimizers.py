"""The optimizer a Keras model was compiled with, as one that runs in our v1 graphs.

- A `tf.compat.v1.train` optimizer given to `compile` (tf_keras wraps it) is used as is.
- tf_keras (one device, the original's path): a fresh legacy Keras optimizer of the same
  configuration, its `iterations` the global step, its variables under `training/<Name>/`:
  the original's graph and checkpoint names.
- Keras 3, and every sharded model: the `tf.compat.v1.train` optimizer with the same
  hyper-parameters (`V1_NAMES`); others are refused, naming what is supported.
"""
import collections

import tensorflow as tf

from tpu_estimator import cross_shard_optimizer
from tpu_estimator.distribute import replication
from tpu_estimator import errors

_v1 = tf.compat.v1

V1_NAMES = ('SGD', 'Adam', 'Adagrad', 'RMSprop', 'Adadelta', 'Ftrl')
# Options that change the update beyond the v1 optimizers' hyper-parameters.
_UNSUPPORTED_OPTIONS = ('weight_decay', 'clipnorm', 'clipvalue', 'global_clipnorm', 'use_ema',
                        'gradient_accumulation_steps', 'amsgrad', 'decay', 'loss_scale_factor')


def wrapped_v1_optimizer(optimizer):
  """The `tf.compat.v1.train.Optimizer` inside a Keras optimizer, or None."""
  if isinstance(optimizer, _v1.train.Optimizer):
    return optimizer
  inner = getattr(optimizer, 'optimizer', None)
  return inner if isinstance(inner, _v1.train.Optimizer) else None


def _config(optimizer):
  config = dict(optimizer.get_config())
  learning_rate = config.get('learning_rate')
  if isinstance(learning_rate, dict):
    raise errors.value_error(
        'model_to_estimator maps the Keras optimizer to a tf.compat.v1.train optimizer, '
        'which takes a constant learning rate, not a schedule.',
        'Compile with a float learning_rate, or compile with a tf.compat.v1.train optimizer '
        'built on tf.compat.v1.train.get_global_step().',
        learning_rate=learning_rate)
  for option in _UNSUPPORTED_OPTIONS:
    value = config.get(option)
    if value not in (None, False, 0, 0.0):
      raise errors.value_error(
          'The Keras optimizer option `%s` has no tf.compat.v1.train equivalent.' % option,
          'Compile without it (supported: %s with their plain hyper-parameters), or with a '
          'tf.compat.v1.train optimizer.' % ', '.join(V1_NAMES),
          **{option: value})
  return config


def _v1_equivalent(name, c):
  lr = float(c.get('learning_rate', 0.01))
  if name == 'SGD':
    if not c.get('momentum'):
      return _v1.train.GradientDescentOptimizer(lr)
    return _v1.train.MomentumOptimizer(lr, float(c['momentum']),
                                       use_nesterov=bool(c.get('nesterov')))
  if name == 'Adam':
    return _v1.train.AdamOptimizer(lr, c.get('beta_1', 0.9), c.get('beta_2', 0.999),
                                   c.get('epsilon', 1e-7))
  if name == 'Adagrad':
    return _v1.train.AdagradOptimizer(lr, c.get('initial_accumulator_value', 0.1))
  if name == 'RMSprop':
    return _v1.train.RMSPropOptimizer(lr, decay=c.get('rho', 0.9),
                                      momentum=c.get('momentum', 0.0),
                                      epsilon=c.get('epsilon', 1e-7),
                                      centered=bool(c.get('centered')))
  if name == 'Adadelta':
    return _v1.train.AdadeltaOptimizer(lr, c.get('rho', 0.95), c.get('epsilon', 1e-7))
  return _v1.train.FtrlOptimizer(
      lr, learning_rate_power=c.get('learning_rate_power', -0.5),
      initial_accumulator_value=c.get('initial_accumulator_value', 0.1),
      l1_regularization_strength=c.get('l1_regularization_strength', 0.0),
      l2_regularization_strength=c.get('l2_regularization_strength', 0.0),
      l2_shrinkage_regularization_strength=c.get('l2_shrinkage_regularization_strength',
                                                 0.0))


def _class_name(optimizer):
  name = type(optimizer).__name__
  return {'RMSProp': 'RMSprop'}.get(name, name)


def check(optimizer, argument='keras_model.optimizer'):
  """Raises unless `optimizer` is a v1 optimizer or one `v1_optimizer` maps."""
  if optimizer is None:
    raise errors.value_error('The Keras model has not been compiled.',
                             'Call model.compile(optimizer=..., loss=...) first.',
                             **{argument: None})
  if wrapped_v1_optimizer(optimizer) is None and _class_name(optimizer) not in V1_NAMES:
    raise errors.value_error(
        'The Keras optimizer %s has no tf.compat.v1.train equivalent.' % type(
            optimizer).__name__,
        'Compile with one of %s, or with a tf.compat.v1.train optimizer.' % ', '.join(
            V1_NAMES), **{argument: optimizer})
  if wrapped_v1_optimizer(optimizer) is None:
    _config(optimizer)


class Plan(collections.namedtuple('Plan', ['kind', 'cls', 'config', 'v1'])):
  """How the compiled optimizer runs, read eagerly at conversion (a Keras optimizer's
  configuration cannot be read inside a graph): `kind` 'v1' (`v1`, a tf.compat.v1.train
  optimizer, as given), 'mapped' (`config` of the Keras optimizer named `cls`, mapped to its
  v1 equivalent in each graph) or 'tf_keras' (a legacy tf_keras optimizer class `cls` and its
  `config`)."""


def plan(backend, optimizer, sharded):
  """The Plan of `optimizer` (see `Plan`); refuses what cannot run."""
  inner = wrapped_v1_optimizer(optimizer)
  if inner is not None:
    return Plan('v1', None, None, inner)
  if backend.is_tf_keras and not sharded:
    legacy = tf_keras_legacy(backend, optimizer)
    return Plan('tf_keras', type(legacy), legacy.get_config(), None)
  check(optimizer)
  return Plan('mapped', _class_name(optimizer), _config(optimizer), None)


def tf_keras_legacy(backend, optimizer):
  """The tf_keras legacy optimizer configured as `optimizer` (a tf_keras optimizer)."""
  keras = backend.keras
  if isinstance(optimizer, keras.optimizers.legacy.Optimizer):
    return optimizer
  return keras.__internal__.optimizers.convert_to_legacy_optimizer(optimizer)


def train_op(optimizer_plan, loss, variables, global_step, sharded):
  """(the update op of `loss` over `variables`, advancing `global_step` once; the Keras
  optimizer object that made it, or None)."""
  if optimizer_plan.kind == 'tf_keras':
    legacy = optimizer_plan.cls.from_config(optimizer_plan.config)
    legacy.iterations = global_step
    # It sums the replicas' gradients (RunConfig.train_distribute): the mean loss is divided
    # by their number, as Keras's compiled loss was in the original.
    loss = replication.replica_share(loss)
    with tf.name_scope('training'):
      return tf.group(*legacy.get_updates(loss, variables)), legacy
  if optimizer_plan.kind == 'v1':
    update = optimizer_plan.v1
  else:
    update = _v1_equivalent(optimizer_plan.cls, optimizer_plan.config)
  if sharded:
    update = cross_shard_optimizer.CrossShardOptimizer(update)
  return update.minimize(loss, global_step=global_step, var_list=variables), None
