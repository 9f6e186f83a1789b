"""Which Keras a model belongs to, and the few things that differ between them.

tf_keras (Keras 2, what `tf.keras` was before TensorFlow 2.16 and is under
`TF_USE_LEGACY_KERAS=1`) and Keras 3 both build their layers inside our v1 graphs; they differ
in how a model is re-created there, in their names (`input_names`), and in how a metric's
update is returned.  `Backend` holds those differences; `backend_of(model)` picks one.
"""
import collections
import contextlib
import sys

import tensorflow as tf  # at import: under `run --tf1` a later import is tf.compat.v1

from tpu_estimator import _tf_internals
from tpu_estimator import errors

TF_KERAS = 'tf_keras'
KERAS3 = 'keras3'


class Backend(collections.namedtuple('Backend', ['kind', 'keras'])):
  """`kind` (TF_KERAS or KERAS3) and the `keras` module object of that kind."""

  @property
  def is_tf_keras(self):
    return self.kind == TF_KERAS

  def custom_scope(self, custom_objects):
    """Within: `custom_objects` resolve by name while configs are read."""
    if not custom_objects:
      return contextlib.nullcontext()
    return self.keras.utils.custom_object_scope(custom_objects)


def _tf_keras_module():
  module = sys.modules.get('tf_keras')
  if module is None:
    try:
      import tf_keras as module  # pylint: disable=import-outside-toplevel
    except ImportError:
      return None
  return module


def _keras3_module():
  try:
    import keras  # pylint: disable=import-outside-toplevel
  except ImportError:
    return None
  return keras if keras.__version__.split('.')[0] >= '3' else None


def backend_of(model, argument='keras_model'):
  """The Backend of `model`, or a TypeError naming `argument` when it is no Keras model."""
  tf_keras = _tf_keras_module()
  if tf_keras is not None and isinstance(model, tf_keras.Model):
    return Backend(TF_KERAS, tf_keras)
  keras = _keras3_module()
  if keras is not None and isinstance(model, keras.Model):
    return Backend(KERAS3, keras)
  raise errors.type_error(
      '`%s` must be a compiled tf_keras (tf.keras with TF_USE_LEGACY_KERAS=1) or Keras 3 '
      'Model.' % argument, 'Build and compile a Keras model and pass it.',
      **{argument: model})


def is_graph_network(backend, model):
  """Whether `model` is Sequential or functional (re-creatable from its config)."""
  keras = backend.keras
  if isinstance(model, keras.Sequential):
    return True
  functional = getattr(getattr(keras, 'src', None), 'models', None)
  functional = getattr(functional, 'Functional', None)
  if functional is not None and isinstance(model, functional):
    return True
  return bool(getattr(model, '_is_graph_network', False))


def input_names(backend, model):
  """The model's input names, in the order it takes its inputs."""
  names = getattr(model, 'input_names', None)
  if names:
    return list(names)
  return [getattr(t, 'name', 'input_%d' % (i + 1)) for i, t in enumerate(model.inputs or ())]


def output_names(backend, model):
  """The model's output names, in the order it returns its outputs (the names of the layers
  that produce them)."""
  names = getattr(model, 'output_names', None) if backend.is_tf_keras or not isinstance(
      model, backend.keras.Sequential) else None
  if names:
    return list(names)
  if isinstance(model, backend.keras.Sequential):
    return [model.layers[-1].name]
  return ['output_%d' % (i + 1) for i in range(len(model.outputs or ()) or 1)]


def _keras_classes(model):
  classes = {type(model)}
  for module in list(getattr(model, 'submodules', ())) + list(getattr(model, 'metrics', ())):
    classes.add(type(module))
  return classes


@contextlib.contextmanager
def eager_classes_kept(backend, model):
  """Within: building tf_keras objects in a v1 graph; after: `model`'s classes are the eager
  ones again.  tf_keras switches a class's bases between its graph (v1) and eager
  implementations whenever an instance is made, so a model re-created in our graph leaves
  the user's eager model of the same classes running graph code (`get_weights` fails); making
  one instance of each class eagerly switches them back."""
  try:
    yield
  finally:
    if backend.is_tf_keras:
      with _tf_internals.eager_mode():
        for cls in _keras_classes(model):
          try:
            cls.__new__(cls)
          except Exception:  # pylint: disable=broad-except
            pass  # a class that cannot be made bare was not switched by its own __new__


def graph_variables(weights):
  """The tf.Variables behind Keras weights (tf_keras: the weights; Keras 3: their `.value`)."""
  return [w if isinstance(w, tf.Variable) else w.value for w in weights]


def compile_args(model):
  """The arguments `model` was compiled with (`loss_weights`, `metrics`, `weighted_metrics`,
  ...), as given (metric objects included)."""
  raw = getattr(getattr(model, '_compile_config', None), 'config', None)
  if isinstance(raw, dict):  # unserialized: a tf.compat.v1.train optimizer has no config
    return raw
  config = model.get_compile_config() if hasattr(model, 'get_compile_config') else None
  if config:
    return config
  if hasattr(model, '_compile_metrics'):  # tf_keras compiled in v1 graph mode keeps no config
    return {'metrics': _v1_metric_names(model._compile_metrics),  # pylint: disable=protected-access
            'weighted_metrics': _v1_metric_names(
                getattr(model, '_compile_weighted_metrics', None)),
            'loss_weights': getattr(model, 'loss_weights', None)}
  return {}


_NAMED_AS_GIVEN = ('accuracy', 'acc', 'crossentropy', 'ce')


def _v1_metric_names(metrics):
  """Metric names as Keras's v1 graph-mode compile reported them: a string names its function
  (`'mae'` is `mean_absolute_error`), except accuracy and crossentropy, named as given."""
  if isinstance(metrics, dict):
    return {key: _v1_metric_names(value) for key, value in metrics.items()}
  if isinstance(metrics, (list, tuple)):
    return [_v1_metric_names(m) for m in metrics]
  if isinstance(metrics, str) and metrics not in _NAMED_AS_GIVEN:
    import tf_keras  # pylint: disable=import-outside-toplevel
    return getattr(tf_keras.metrics.get(metrics), '__name__', metrics)
  return metrics
