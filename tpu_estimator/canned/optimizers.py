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
  config['learning_rate'] = _legacy_learning_rate(config.get('learning_rate'))
  accepted = set(inspect.signature(cls.__init__).parameters) - {'self', 'name', 'kwargs'}
  kwargs = {k: v for k, v in config.items() if k in accepted}
  for key in ('clipnorm', 'clipvalue', 'global_clipnorm'):
    if config.get(key) is not None:
      kwargs[key] = config[key]
  return cls(**kwargs)


def _legacy_learning_rate(learning_rate):
  """A Keras 3 optimizer config's learning rate for a Keras 2 optimizer: a float, or a
  serialized Keras 3 schedule made again as the tf_keras schedule of the same class (evaluated
  at the optimizer's iterations, which `minimize` makes the global step)."""
  if isinstance(learning_rate, float):
    return learning_rate
  schedules = _tf_keras_schedules()
  if isinstance(learning_rate, dict) and hasattr(schedules, str(learning_rate.get('class_name'))):
    return getattr(schedules, learning_rate['class_name']).from_config(learning_rate['config'])
  raise errors.type_error(
      'A canned estimator needs a float or a built-in schedule as the learning_rate of a Keras '
      '3 optimizer.', 'Pass a tf_keras.optimizers.legacy optimizer for other learning rates.',
      learning_rate=learning_rate)


def _tf_keras_schedules():
  legacy_keras_optimizers()  # the ImportError naming tf_keras when it is missing
  import tf_keras  # pylint: disable=import-outside-toplevel
  return tf_keras.optimizers.schedules


def _is_v1(optimizer):
  return isinstance(optimizer, _v1.train.Optimizer)


def _is_keras(optimizer):
  module = type(optimizer).__module__
  return (module.startswith('keras') or module.startswith('tf_keras')) and \
      hasattr(optimizer, 'get_config')


def _is_legacy_keras(optimizer):
  return _is_keras(optimizer) and isinstance(optimizer, legacy_keras_optimizers().Optimizer)


def _drop_variables_made_since(graph, before):
  """Takes the variables made after the snapshot `before` out of the graph's collections:
  nothing saves, restores or initialises them (a Keras 3 optimizer's own `iteration` and
  `learning_rate`, left by its constructor and never used)."""
  for key in graph.get_all_collection_keys():
    ref = graph.get_collection_ref(key)
    ref[:] = [item for item in ref
              if not isinstance(item, tf.Variable) or any(item is v for v in before)]


def _call_factory(factory, argument):
  """The optimizer an optimizer factory returns, called inside the graph being built as the
  original called it (it may read the graph: a learning rate decayed over
  `tf.compat.v1.train.get_global_step()`).  A Keras 3 (or new tf_keras) optimizer cannot train
  in a graph: the variables its constructor made here are dropped and the factory is called
  again eagerly, so that its config can be read and rebuilt as the Keras 2 class."""
  graph = _v1.get_default_graph()
  before = graph.get_collection(_v1.GraphKeys.GLOBAL_VARIABLES) + \
      graph.get_collection(_v1.GraphKeys.LOCAL_VARIABLES)
  try:
    optimizer = factory()
  except ValueError as exc:
    if 'learning_rate' not in str(exc) or 'Tensor' not in str(exc):
      raise
    raise errors.type_error(
        'The optimizer factory gave a Keras 3 optimizer (tf.keras on TensorFlow 2.16+) a '
        'tensor learning rate, which Keras 3 refuses: %s' % (exc,),
        'In the factory, use tf_keras.optimizers.legacy.<Name>(learning_rate=<tensor>) '
        '(tensorflow-estimator 2.15 also required a legacy optimizer here), or give the Keras '
        '3 optimizer a schedule, e.g. tf.keras.optimizers.schedules.ExponentialDecay(0.1, '
        '10000, 0.96).', **{argument: factory}) from exc
  if not _is_keras(optimizer) or _is_legacy_keras(optimizer):
    return optimizer
  _drop_variables_made_since(graph, before)
  try:
    with _tf_internals.eager_mode():
      return factory()
  except Exception as exc:  # pylint: disable=broad-except
    raise errors.type_error(
        'The optimizer factory returned a Keras 3 optimizer, which cannot run in a graph, and '
        'calling it again eagerly (to copy its settings) failed: %s' % (exc,),
        'Return a tf_keras.optimizers.legacy optimizer from the factory (as '
        'tensorflow-estimator 2.15 required) when its learning rate reads the graph.',
        **{argument: factory}) from exc


def get_optimizer(optimizer, learning_rate, argument='optimizer'):
  """A fresh optimizer for one graph: `optimizer` is a name ('Adagrad', 'Adam', 'Ftrl',
  'RMSProp', 'SGD', made with `learning_rate`), a Keras optimizer instance (its config is
  copied), a `tf.compat.v1.train.Optimizer`, or a callable returning one of these (called in
  the graph being built, once per graph)."""
  if isinstance(optimizer, str):
    if optimizer not in _CLASS_OF:
      raise errors.value_error('Unsupported optimizer name.', 'Use one of %s.' % ', '.join(_NAMES),
                               **{argument: optimizer})
    return getattr(legacy_keras_optimizers(), _CLASS_OF[optimizer])(learning_rate=learning_rate)
  if callable(optimizer) and not _is_keras(optimizer) and not _is_v1(optimizer):
    optimizer = _call_factory(optimizer, argument)
    if _is_legacy_keras(optimizer) and not optimizer.variables():
      return optimizer  # made for this graph (its learning rate may be one of its tensors)
  if _is_v1(optimizer):
    return optimizer
  if _is_keras(optimizer):
    if _is_legacy_keras(optimizer):  # a copy: its variables belong to one graph
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
    try:
      optimizer.iterations = global_step
    except RuntimeError:  # set already (TF-Lattice's model_fn sets it before calling the head)
      if optimizer.iterations is not global_step:
        raise
  with tf.name_scope(scope + '/'):  # the same scope for every optimizer (not training_1)
    grads = tf.gradients(loss, variables)
    return optimizer.apply_gradients(
        [(g, v) for g, v in zip(grads, variables) if g is not None])
