"""Optimizers for the canned estimators: Keras 2 (`tf_keras.optimizers.legacy`) optimizers run
in the graph, as tensorflow-estimator 2.15's `tf.estimator.*` estimators ran them.

Keras 2 optimizers name their variables `training/<Name>/<variable>/<slot>` and
`training/<Name>/<hyperparameter>` in a graph: the checkpoint names of the original, so a
model_dir it wrote resumes here.  Keras 3 has no graph-mode optimizers, so an optimizer given as
a Keras 3 (or new-style `tf_keras`) instance is rebuilt as the Keras 2 class of the same name
from its config; a `tf.compat.v1.train.Optimizer` is used as it is (its slots are named the TF1
way, `<variable>/<Name>`).
"""
import inspect

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import errors

_v1 = tf.compat.v1
_NAMES = ('Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD')
_CLASS_OF = {'Adagrad': 'Adagrad', 'Adam': 'Adam', 'Ftrl': 'Ftrl', 'RMSProp': 'RMSprop',
             'RMSprop': 'RMSprop', 'SGD': 'SGD'}


def legacy_keras_optimizers():
  """`tf_keras.optimizers.legacy`, or an ImportError naming the package to install."""
  try:
    import tf_keras  # pylint: disable=import-outside-toplevel
  except ImportError as exc:
    raise ImportError(
        'The canned estimators train with Keras 2 optimizers (as the original did, so that its '
        'checkpoints resume here), which need the tf_keras package. Install it with: '
        "pip install 'tpu-estimator[legacy]' (or pip install tf_keras).") from exc
  return tf_keras.optimizers.legacy


def _from_keras_config(optimizer):
  """A Keras 2 optimizer with the class name and settings of a Keras 3 / new tf_keras one."""
  legacy = legacy_keras_optimizers()
  cls = getattr(legacy, _CLASS_OF.get(type(optimizer).__name__, type(optimizer).__name__), None)
  if cls is None:
    raise errors.type_error(
        'Unsupported Keras optimizer class for a canned estimator.',
        'Use one of %s (by name or instance).' % ', '.join(_NAMES), optimizer=optimizer)
  with _tf_internals.eager_mode():  # a Keras 3 optimizer reads its variables eagerly
    config = optimizer.get_config()
  if not isinstance(config.get('learning_rate'), float):
    raise errors.type_error(
        'A canned estimator needs a float learning_rate in a Keras 3 optimizer.',
        'Pass a tf_keras.optimizers.legacy optimizer for schedules.',
        learning_rate=config.get('learning_rate'))
  accepted = set(inspect.signature(cls.__init__).parameters) - {'self', 'name', 'kwargs'}
  kwargs = {k: v for k, v in config.items() if k in accepted}
  for key in ('clipnorm', 'clipvalue', 'global_clipnorm'):
    if config.get(key) is not None:
      kwargs[key] = config[key]
  return cls(**kwargs)


def _is_v1(optimizer):
  return isinstance(optimizer, _v1.train.Optimizer)


def _is_keras(optimizer):
  module = type(optimizer).__module__
  return (module.startswith('keras') or module.startswith('tf_keras')) and \
      hasattr(optimizer, 'get_config')


def get_optimizer(optimizer, learning_rate, argument='optimizer'):
  """A fresh optimizer for one graph: `optimizer` is a name ('Adagrad', 'Adam', 'Ftrl',
  'RMSProp', 'SGD', made with `learning_rate`), a Keras optimizer instance (its config is
  copied), a `tf.compat.v1.train.Optimizer`, or a callable returning one of these (called
  eagerly, once per graph)."""
  if isinstance(optimizer, str):
    if optimizer not in _CLASS_OF:
      raise errors.value_error('Unsupported optimizer name.', 'Use one of %s.' % ', '.join(_NAMES),
                               **{argument: optimizer})
    return getattr(legacy_keras_optimizers(), _CLASS_OF[optimizer])(learning_rate=learning_rate)
  if callable(optimizer) and not _is_keras(optimizer) and not _is_v1(optimizer):
    # Eagerly, as the user's program made optimizers: Keras 3 ones cannot live in a TF1 graph.
    with _tf_internals.eager_mode():
      optimizer = optimizer()
  if _is_v1(optimizer):
    return optimizer
  if _is_keras(optimizer):
    legacy = legacy_keras_optimizers()
    if isinstance(optimizer, legacy.Optimizer):  # a copy: its variables belong to one graph
      with _tf_internals.eager_mode():
        return type(optimizer).from_config(optimizer.get_config())
    return _from_keras_config(optimizer)
  raise errors.type_error(
      'The optimizer must be a name, a Keras optimizer, a tf.compat.v1.train.Optimizer, or a '
      'callable returning one.', 'E.g. optimizer=\'Adagrad\'.', **{argument: optimizer})


def minimize(optimizer, loss, variables, global_step, increment_global_step=True,
             scope='training'):
  """The op applying `optimizer` to `variables` for `loss`.  With `increment_global_step`, the
  global step is the optimizer's iteration counter (advanced once by this op); otherwise a
  Keras optimizer keeps its own (`training/<Name>/iter`), as the original's wide-and-deep
  linear part did.  Keras optimizer variables are made under `scope`."""
  if _is_v1(optimizer):
    return optimizer.minimize(loss, global_step=global_step if increment_global_step else None,
                              var_list=variables)
  if increment_global_step:
    optimizer.iterations = global_step
  with tf.name_scope(scope + '/'):  # the same scope for every optimizer (not training_1)
    grads = tf.gradients(loss, variables)
    return optimizer.apply_gradients(
        [(g, v) for g, v in zip(grads, variables) if g is not None])
