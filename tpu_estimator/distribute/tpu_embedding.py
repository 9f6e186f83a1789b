"""TPU embedding's configuration: `tf.compat.v1.estimator.tpu.experimental.EmbeddingConfigSpec`
and the embedding optimizers' parameters (`tf.compat.v1.tpu.experimental.AdagradParameters`,
`AdamParameters`, `FtrlParameters`, `StochasticGradientDescentParameters`, which TensorFlow
2.16+ no longer has).

A TPU looked its embedding tables up on a separate engine, trained by `optimization_parameters`.
There is no such engine here: as the original did with `use_tpu=False`, the columns
(`tf.compat.v1.tpu.experimental.embedding_column`, `shared_embedding_columns`) look up ordinary
embedding variables in `model_fn`, trained by `model_fn`'s optimizer, on every shard
(`check_for_estimator` says so once). The spec is checked as the original checked it.
"""
import collections

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import errors
from tpu_estimator.config import InputPipelineConfig

_log = tf.get_logger()


class _OptimizationParameters:
  """What every embedding optimizer's parameters hold."""

  def __init__(self, learning_rate, use_gradient_accumulation, clip_weight_min,
               clip_weight_max, weight_decay_factor,
               multiply_weight_decay_factor_by_learning_rate, clip_gradient_min=None,
               clip_gradient_max=None):
    self.learning_rate = learning_rate
    self.use_gradient_accumulation = use_gradient_accumulation
    self.clip_weight_min = clip_weight_min
    self.clip_weight_max = clip_weight_max
    self.weight_decay_factor = weight_decay_factor
    self.multiply_weight_decay_factor_by_learning_rate = (
        multiply_weight_decay_factor_by_learning_rate)
    self.clip_gradient_min = clip_gradient_min
    self.clip_gradient_max = clip_gradient_max
    if not use_gradient_accumulation and (clip_gradient_min is not None or
                                          clip_gradient_max is not None):
      raise errors.value_error('Gradient clipping limits need use_gradient_accumulation=True.',
                               use_gradient_accumulation=use_gradient_accumulation,
                               clip_gradient_min=clip_gradient_min,
                               clip_gradient_max=clip_gradient_max)

  def __repr__(self):
    return '%s(%s)' % (type(self).__name__, ', '.join(
        '%s=%r' % item for item in sorted(vars(self).items())))


_SHARED = ('learning_rate', 'use_gradient_accumulation', 'clip_weight_min', 'clip_weight_max',
           'weight_decay_factor', 'multiply_weight_decay_factor_by_learning_rate',
           'clip_gradient_min', 'clip_gradient_max')


def _shared(arguments):
  """The arguments every optimizer's parameters take, from a constructor's `locals()`."""
  return {name: arguments[name] for name in _SHARED}


def _at_least(name, value, low, inclusive=True):
  if value < low or (not inclusive and value == low):
    raise errors.value_error('%s must be %s %s.' % (name, '>=' if inclusive else '>', low),
                             **{name: value})


class AdagradParameters(_OptimizationParameters):
  """Adagrad for the embedding tables (`tf.compat.v1.tpu.experimental.AdagradParameters`)."""

  def __init__(self, learning_rate, initial_accumulator=0.1, use_gradient_accumulation=True,
               clip_weight_min=None, clip_weight_max=None, weight_decay_factor=None,
               multiply_weight_decay_factor_by_learning_rate=None, clip_gradient_min=None,
               clip_gradient_max=None):
    super().__init__(**_shared(locals()))
    _at_least('initial_accumulator', initial_accumulator, 0., inclusive=False)
    self.initial_accumulator = initial_accumulator


class AdamParameters(_OptimizationParameters):
  """Adam for the embedding tables (`tf.compat.v1.tpu.experimental.AdamParameters`)."""

  def __init__(self, learning_rate, beta1=0.9, beta2=0.999, epsilon=1e-08, lazy_adam=True,
               sum_inside_sqrt=True, use_gradient_accumulation=True, clip_weight_min=None,
               clip_weight_max=None, weight_decay_factor=None,
               multiply_weight_decay_factor_by_learning_rate=None, clip_gradient_min=None,
               clip_gradient_max=None):
    super().__init__(**_shared(locals()))
    for name, value in (('beta1', beta1), ('beta2', beta2)):
      if not 0. <= value < 1.:
        raise errors.value_error('%s must be in [0, 1).' % name, **{name: value})
    _at_least('epsilon', epsilon, 0., inclusive=False)
    if not use_gradient_accumulation and not lazy_adam:
      raise errors.value_error('use_gradient_accumulation=False needs lazy_adam=True.',
                               lazy_adam=lazy_adam)
    self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
    self.lazy_adam, self.sum_inside_sqrt = lazy_adam, sum_inside_sqrt


class FtrlParameters(_OptimizationParameters):
  """FTRL for the embedding tables (`tf.compat.v1.tpu.experimental.FtrlParameters`)."""

  def __init__(self, learning_rate, learning_rate_power=-0.5, initial_accumulator_value=0.1,
               l1_regularization_strength=0.0, l2_regularization_strength=0.0,
               use_gradient_accumulation=True, clip_weight_min=None, clip_weight_max=None,
               weight_decay_factor=None, multiply_weight_decay_factor_by_learning_rate=None,
               multiply_linear_by_learning_rate=False, beta=0, allow_zero_accumulator=False,
               clip_gradient_min=None, clip_gradient_max=None):
    super().__init__(**_shared(locals()))
    if learning_rate_power > 0.:
      raise errors.value_error('learning_rate_power must be <= 0.',
                               learning_rate_power=learning_rate_power)
    _at_least('initial_accumulator_value', initial_accumulator_value, 0.)
    _at_least('l1_regularization_strength', l1_regularization_strength, 0.)
    _at_least('l2_regularization_strength', l2_regularization_strength, 0.)
    self.learning_rate_power = learning_rate_power
    self.initial_accumulator_value = initial_accumulator_value
    self.initial_linear_value = 0.0
    self.l1_regularization_strength = l1_regularization_strength
    self.l2_regularization_strength = l2_regularization_strength
    self.multiply_linear_by_learning_rate = multiply_linear_by_learning_rate
    self.beta = beta
    self.allow_zero_accumulator = allow_zero_accumulator


class StochasticGradientDescentParameters(_OptimizationParameters):
  """SGD for the embedding tables
  (`tf.compat.v1.tpu.experimental.StochasticGradientDescentParameters`)."""

  def __init__(self, learning_rate, use_gradient_accumulation=True, clip_weight_min=None,
               clip_weight_max=None, weight_decay_factor=None,
               multiply_weight_decay_factor_by_learning_rate=None, clip_gradient_min=None,
               clip_gradient_max=None):
    super().__init__(**_shared(locals()))


PARAMETERS = (AdagradParameters, AdamParameters, FtrlParameters,
              StochasticGradientDescentParameters)
PARTITION_STRATEGIES = ('div', 'mod')


class EmbeddingConfigSpec(collections.namedtuple('EmbeddingConfigSpec', [
    'feature_columns', 'tensor_core_feature_columns', 'optimization_parameters',
    'clipping_limit', 'pipeline_execution_with_tensor_core',
    'experimental_gradient_multiplier_fn', 'feature_to_config_dict', 'table_to_config_dict',
    'partition_strategy', 'profile_data_directory'])):
  """TPUEstimator's `embedding_config_spec`: the embedding feature columns (or the feature and
  table config dicts) and their optimizer's parameters.  Columns looked up on a TPU's tensor
  cores (`embedding_lookup_device='tpu_tensor_core'`) are kept apart in
  `tensor_core_feature_columns`, as the original's."""

  def __new__(cls, feature_columns=None, optimization_parameters=None, clipping_limit=None,
              pipeline_execution_with_tensor_core=False,
              experimental_gradient_multiplier_fn=None, feature_to_config_dict=None,
              table_to_config_dict=None, partition_strategy='div',
              profile_data_directory=None):
    dicts = bool(feature_to_config_dict and table_to_config_dict)
    if bool(feature_columns) == dicts:
      raise errors.value_error(
          'Exactly one of `feature_columns` and the pair `feature_to_config_dict` and '
          '`table_to_config_dict` must be specified.', feature_columns=feature_columns,
          feature_to_config_dict=feature_to_config_dict,
          table_to_config_dict=table_to_config_dict)
    if partition_strategy not in PARTITION_STRATEGIES:
      raise errors.value_error('Invalid partition_strategy.', 'Use "div" or "mod".',
                               partition_strategy=partition_strategy)
    embedding_columns = tensor_core_columns = None
    if feature_columns:
      embedding_columns, tensor_core_columns = _split_columns(feature_columns)
      if not isinstance(optimization_parameters, PARAMETERS):
        raise errors.value_error(
            'optimization_parameters must be one of %s.' % ', '.join(
                'tf.compat.v1.tpu.experimental.' + c.__name__ for c in PARAMETERS),
            optimization_parameters=optimization_parameters)
    else:
      for feature, config in feature_to_config_dict.items():
        if getattr(config, 'table_id', None) not in table_to_config_dict:
          raise errors.value_error('A feature refers to a table not in table_to_config_dict.',
                                   feature=feature, table=getattr(config, 'table_id', None))
    return super().__new__(
        cls, feature_columns=embedding_columns, tensor_core_feature_columns=tensor_core_columns,
        optimization_parameters=optimization_parameters, clipping_limit=clipping_limit,
        pipeline_execution_with_tensor_core=pipeline_execution_with_tensor_core,
        experimental_gradient_multiplier_fn=experimental_gradient_multiplier_fn,
        feature_to_config_dict=feature_to_config_dict,
        table_to_config_dict=table_to_config_dict, partition_strategy=partition_strategy,
        profile_data_directory=profile_data_directory)


def _split_columns(feature_columns):
  """(columns the embedding engine looks up, columns on the tensor cores), each checked."""
  supported = _tf_internals.embedding_spec_column_classes()
  embedding, tensor_core = [], []
  for column in feature_columns:
    if not isinstance(column, supported):
      raise errors.type_error(
          'All feature columns must be TPU embedding columns '
          '(tf.compat.v1.tpu.experimental.embedding_column, shared_embedding_columns), '
          'embedding columns or numeric columns.', column=column)
    device = getattr(column, '_embedding_lookup_device', None)
    on_tensor_core = getattr(device, 'name', None) == 'TPU_TENSOR_CORE'  # EmbeddingDevice
    (tensor_core if on_tensor_core else embedding).append(column)
  return embedding, tensor_core


def check_for_estimator(spec, use_tpu, eval_on_tpu, tpu_config):
  """TPUEstimator's checks of `embedding_config_spec`, as the original's; logs that the tables
  are ordinary variables here."""
  if not isinstance(spec, EmbeddingConfigSpec):
    raise errors.type_error(
        'embedding_config_spec must be a tf.compat.v1.estimator.tpu.experimental.'
        'EmbeddingConfigSpec.', embedding_config_spec=spec)
  if tpu_config.num_shards == 1 and getattr(tpu_config, 'num_cores_per_replica', None) is None:
    raise errors.value_error(  # the original's one-core path had no embedding support
        'TPUConfig(num_shards=1) is unsupported with embedding_config_spec.',
        'Leave num_shards unset (None: every local device) or use 2 or more shards.',
        num_shards=1)
  if use_tpu and tpu_config.per_host_input_for_training not in (
      InputPipelineConfig.PER_HOST_V1, InputPipelineConfig.PER_HOST_V2):
    raise errors.value_error(
        'Only PER_HOST_V1 and PER_HOST_V2 are supported with TPU embedding.',
        'Set TPUConfig(per_host_input_for_training=InputPipelineConfig.PER_HOST_V2).',
        per_host_input_for_training=tpu_config.per_host_input_for_training)
  if not (use_tpu and eval_on_tpu) and spec.partition_strategy == 'mod':
    raise errors.value_error('Mod sharding of embedding tables is not supported on CPU.',
                             'Use partition_strategy="div".', partition_strategy='mod')
  _log.warning(
      'embedding_config_spec: there is no TPU embedding engine here. The embedding columns look '
      'up ordinary embedding variables in model_fn%s, trained by model_fn\'s optimizer, as the '
      'original ran them with use_tpu=False: optimization_parameters (%s), clipping_limit and '
      'the gradient multiplier are not applied.', ' on every shard' if use_tpu else '',
      type(spec.optimization_parameters).__name__)
