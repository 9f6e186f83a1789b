"""`tf.contrib.layers`: the TF 1.x graph-mode layers, initializers and regularizers.

Own implementations on `tf.compat.v1` (no Keras), with TF 1.15's documented arguments,
defaults, formulas and variable names, so TF 1.x checkpoints load into them:
- `layer_norm`: `LayerNorm/{beta,gamma}`, moments over axes `begin_norm_axis..`, parameters
  of shape `inputs.shape[begin_params_axis:]`, variance epsilon 1e-12;
- `batch_norm`: `BatchNorm/{beta,gamma,moving_mean,moving_variance}` (gamma only with
  `scale=True`), moving averages `m -= (1 - decay) * (m - batch)` added to `updates_collections`
  (None: applied with the output); on rank-2/4 inputs TensorFlow's fused kernel, as TF 1.15
  used, so the moving variance gets the unbiased (n / (n - 1)) batch variance;
- `fully_connected`: `fully_connected/{weights,biases}`, relu by default; `conv2d`:
  `Conv/{weights,biases}`; `embed_sequence`: `EmbedSequence/embeddings`;
- default scopes are uniquified as TF 1.x did (`fully_connected`, `fully_connected_1`, ...);
  variables go to the global, model and trainable collections.
With the `tf_slim` package installed, every layer accepts `arg_scope` defaults.
"""
import functools
import importlib
import math
import numbers

import tensorflow as tf
from tensorflow.python.framework import smart_cond as _smart_cond

from tpu_estimator.compat.contrib import slim_loader
from tpu_estimator import errors

try:  # arg_scope support when tf_slim (the `[legacy]` extra) is installed.
  from tf_slim.ops.arg_scope import add_arg_scope as _add_arg_scope
  from tf_slim.layers import layers as _slim_layers
except ImportError:  # pragma: no cover - depends on the environment
  _slim_layers = None

  def _add_arg_scope(func):
    return func


def add_arg_scope(func):
  """tf_slim's `add_arg_scope`, keyed as tf_slim's layer of the same name.  TF 1.x had one
  function for `tf.contrib.layers.conv2d`, `slim.conv2d` and the layer tf.contrib.slim's nets
  call, so an `arg_scope` over any of them set the defaults of all: a program's
  `slim.arg_scope([slim.conv2d], normalizer_fn=slim.batch_norm)` around an Inception of
  `slim.nets` (tf_slim's layers), and a net's own arg_scope around the program's layers."""
  twin = getattr(_slim_layers, func.__name__, None)
  key = getattr(twin, '_key_op', None)
  if key is not None:
    func._key_op = key  # pylint: disable=protected-access  (read by tf_slim's arg_scope)
  return _add_arg_scope(func)

_v1 = tf.compat.v1
_keys = _v1.GraphKeys

__all__ = [
    'apply_regularization', 'avg_pool2d', 'batch_norm', 'conv2d', 'convolution',
    'convolution2d', 'dropout', 'embed_sequence', 'flatten', 'fully_connected',
    'l1_l2_regularizer', 'l1_regularizer', 'l2_regularizer', 'layer_norm', 'linear',
    'max_pool2d', 'one_hot_encoding', 'softmax', 'sum_regularizer',
    'variance_scaling_initializer', 'xavier_initializer', 'xavier_initializer_conv2d',
]

# ---------------------------------------------------------------------------------------------
# Initializers


def variance_scaling_initializer(factor=2.0, mode='FAN_IN', uniform=False, seed=None,
                                 dtype=tf.float32):
  """Random values with variance `factor / n`, n = fan_in, fan_out or their mean (`mode`):
  uniform in [-sqrt(3 factor / n), +...] or truncated normal with stddev sqrt(1.3 factor / n).
  For a kernel [..., in, out], fan_in = in * prod(...), fan_out = out * prod(...)."""
  if not tf.as_dtype(dtype).is_floating:
    raise errors.type_error('variance_scaling_initializer needs a floating `dtype`.',
                            'Pass e.g. tf.float32.', dtype=dtype)
  if mode not in ('FAN_IN', 'FAN_OUT', 'FAN_AVG'):
    raise errors.type_error('Unknown `mode` for variance_scaling_initializer.',
                            "Pass 'FAN_IN', 'FAN_OUT' or 'FAN_AVG'.", mode=mode)

  def _initializer(shape, dtype=dtype, partition_info=None):
    if partition_info is not None:
      shape = partition_info.full_shape
    shape = list(shape)
    if shape:
      fan_in = float(shape[-2]) if len(shape) > 1 else float(shape[-1])
      fan_out = float(shape[-1])
    else:
      fan_in = fan_out = 1.0
    for dim in shape[:-2]:
      fan_in *= dim
      fan_out *= dim
    n = {'FAN_IN': fan_in, 'FAN_OUT': fan_out, 'FAN_AVG': (fan_in + fan_out) / 2.0}[mode]
    if uniform:
      limit = math.sqrt(3.0 * factor / n)
      return tf.random.uniform(shape, -limit, limit, dtype, seed=seed)
    return tf.random.truncated_normal(shape, 0.0, math.sqrt(1.3 * factor / n), dtype,
                                      seed=seed)
  return _initializer


def xavier_initializer(uniform=True, seed=None, dtype=tf.float32):
  """Glorot's initializer: variance 1 / mean(fan_in, fan_out)."""
  return variance_scaling_initializer(1.0, 'FAN_AVG', uniform, seed, dtype)


xavier_initializer_conv2d = xavier_initializer

# ---------------------------------------------------------------------------------------------
# Regularizers


def _check_scale(name, scale):
  if isinstance(scale, numbers.Integral):
    raise errors.value_error('`scale` of %s cannot be an integer.' % name,
                             'Pass a float, e.g. %s.0.' % scale, scale=scale)
  if isinstance(scale, numbers.Real):
    if scale < 0.0:
      raise errors.value_error('`scale` of %s must be >= 0.' % name, scale=scale)
    return scale != 0.0
  return True


def l1_regularizer(scale, scope=None):
  """weights -> scale * sum(|weights|) (None when scale is 0)."""
  if not _check_scale('l1_regularizer', scale):
    return lambda _: None

  def l1(weights):
    with tf.name_scope(scope or 'l1_regularizer') as name:
      factor = tf.convert_to_tensor(scale, weights.dtype.base_dtype, name='scale')
      return tf.multiply(factor, tf.reduce_sum(tf.abs(weights)), name=name)
  return l1


def l2_regularizer(scale, scope=None):
  """weights -> scale * sum(weights ** 2) / 2 (None when scale is 0)."""
  if not _check_scale('l2_regularizer', scale):
    return lambda _: None

  def l2(weights):
    with tf.name_scope(scope or 'l2_regularizer') as name:
      factor = tf.convert_to_tensor(scale, weights.dtype.base_dtype, name='scale')
      return tf.multiply(factor, tf.nn.l2_loss(weights), name=name)
  return l2


def sum_regularizer(regularizer_list, scope=None):
  """weights -> the sum of each regularizer's penalty (those returning None left out)."""
  regularizer_list = [r for r in regularizer_list if r]
  if not regularizer_list:
    return None

  def summed(weights):
    with tf.name_scope(scope or 'sum_regularizer'):
      penalties = [p for p in (r(weights) for r in regularizer_list) if p is not None]
      return tf.add_n(penalties) if penalties else None
  return summed


def l1_l2_regularizer(scale_l1=1.0, scale_l2=1.0, scope=None):
  """weights -> l1 + l2 penalties."""
  if isinstance(scale_l1, numbers.Real) and isinstance(scale_l2, numbers.Real) and (
      scale_l1 == 0.0 and scale_l2 == 0.0):
    return lambda _: None
  return sum_regularizer([l1_regularizer(scale_l1), l2_regularizer(scale_l2)],
                         scope=scope or 'l1_l2_regularizer')


def apply_regularization(regularizer, weights_list=None):
  """The sum of `regularizer` over `weights_list` (default: the WEIGHTS collection), also
  added to the REGULARIZATION_LOSSES collection."""
  if not weights_list:
    weights_list = _v1.get_collection(_keys.WEIGHTS)
  if not weights_list:
    raise errors.value_error('No weights to regularize.',
                             'Pass weights_list or add variables to GraphKeys.WEIGHTS.',
                             weights_list=weights_list)
  with tf.name_scope('get_regularization_penalty') as scope:
    penalties = []
    for weights in weights_list:
      penalty = regularizer(weights)
      penalty = tf.constant(0.0) if penalty is None else penalty
      if penalty.shape.rank != 0:
        raise errors.value_error('The regularizer must return a scalar.', penalty=penalty)
      penalties.append(penalty)
    total = tf.add_n(penalties, name=scope)
  _v1.add_to_collection(_keys.REGULARIZATION_LOSSES, total)
  return total

# ---------------------------------------------------------------------------------------------
# Helpers shared by the layers


def _collections(variables_collections, name):
  if isinstance(variables_collections, dict):
    extra = variables_collections.get(name)
  else:
    extra = variables_collections
  if isinstance(extra, str):
    extra = [extra]
  return [_keys.GLOBAL_VARIABLES, _keys.MODEL_VARIABLES] + list(extra or [])


def _variable(name, shape, dtype, initializer, regularizer=None, trainable=True,
              variables_collections=None):
  """A model variable as TF 1.x's contrib created it (global + model + trainable)."""
  return _v1.get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                          regularizer=regularizer, trainable=trainable,
                          collections=_collections(variables_collections, name))


def _collect(outputs_collections, outputs):
  if isinstance(outputs_collections, str):
    outputs_collections = [outputs_collections]
  for collection in outputs_collections or ():
    _v1.add_to_collection(collection, outputs)
  return outputs


def _rank(inputs, what, minimum=1):
  rank = inputs.shape.rank
  if rank is None or rank < minimum:
    raise errors.value_error('%s needs inputs of known rank >= %d.' % (what, minimum),
                             inputs=inputs)
  return rank


def _finish(outputs, normalizer_fn, normalizer_params, biases, activation_fn, channel_axis):
  if normalizer_fn is not None:
    outputs = normalizer_fn(outputs, **(normalizer_params or {}))
  elif biases is not None:
    data_format = 'NCHW' if channel_axis == 1 and outputs.shape.rank >= 3 else None
    outputs = tf.nn.bias_add(outputs, biases, data_format=data_format) if data_format else (
        tf.nn.bias_add(outputs, biases))
  if activation_fn is not None:
    outputs = activation_fn(outputs)
  return outputs

# ---------------------------------------------------------------------------------------------
# Layers


@add_arg_scope
def fully_connected(inputs, num_outputs, activation_fn=tf.nn.relu, normalizer_fn=None,
                    normalizer_params=None, weights_initializer=None,
                    weights_regularizer=None, biases_initializer=tf.zeros_initializer(),
                    biases_regularizer=None, reuse=None, variables_collections=None,
                    outputs_collections=None, trainable=True, scope=None):
  """activation_fn(inputs @ weights + biases) over the last axis; `weights` [in, out]
  (Glorot uniform by default), `biases` [out] (none with a normalizer_fn or
  biases_initializer=None)."""
  if not isinstance(num_outputs, numbers.Integral) or isinstance(num_outputs, bool):
    raise errors.type_error('`num_outputs` of fully_connected must be an int.',
                            num_outputs=num_outputs)
  with _v1.variable_scope(scope, 'fully_connected', [inputs], reuse=reuse):
    inputs = tf.convert_to_tensor(inputs)
    rank = _rank(inputs, 'fully_connected', 2)
    depth = inputs.shape[-1]
    if depth is None:
      raise errors.value_error('fully_connected needs a static last dimension.',
                               inputs=inputs)
    dtype = inputs.dtype.base_dtype
    weights = _variable('weights', [depth, num_outputs], dtype,
                        weights_initializer or xavier_initializer(), weights_regularizer,
                        trainable, variables_collections)
    if rank == 2:
      outputs = tf.matmul(inputs, weights)
    else:
      outputs = tf.tensordot(inputs, weights, [[rank - 1], [0]])
      outputs.set_shape(inputs.shape[:-1].concatenate([num_outputs]))
    biases = None
    if normalizer_fn is None and biases_initializer is not None:
      biases = _variable('biases', [num_outputs], dtype, biases_initializer,
                         biases_regularizer, trainable, variables_collections)
    outputs = _finish(outputs, normalizer_fn, normalizer_params, biases, activation_fn, -1)
    return _collect(outputs_collections, outputs)


def linear(inputs, num_outputs, **kwargs):
  """`fully_connected` without activation."""
  return fully_connected(inputs, num_outputs, activation_fn=None, **kwargs)


def _channels_first(data_format):
  if data_format is None:
    return False
  if data_format not in ('NHWC', 'NCHW', 'NWC', 'NCW', 'NDHWC', 'NCDHW'):
    raise errors.value_error('Unknown `data_format`.', "Pass 'NHWC' or 'NCHW'.",
                             data_format=data_format)
  return data_format.startswith('NC')


def _tuple(value, n, name):
  if isinstance(value, numbers.Integral):
    return [int(value)] * n
  value = list(value)
  if len(value) != n:
    raise errors.value_error('`%s` must be an int or a list of %d ints.' % (name, n),
                             **{name: value})
  return value


@add_arg_scope
def convolution(inputs, num_outputs, kernel_size, stride=1, padding='SAME', data_format=None,
                rate=1, activation_fn=tf.nn.relu, normalizer_fn=None, normalizer_params=None,
                weights_initializer=None, weights_regularizer=None,
                biases_initializer=tf.zeros_initializer(), biases_regularizer=None,
                reuse=None, variables_collections=None, outputs_collections=None,
                trainable=True, scope=None):
  """An N-d convolution (N = rank - 2): `weights` kernel_size + [in, out], then biases (or
  normalizer_fn) and activation_fn.  `rate` > 1 is an atrous convolution."""
  with _v1.variable_scope(scope, 'Conv', [inputs], reuse=reuse):
    inputs = tf.convert_to_tensor(inputs)
    rank = _rank(inputs, 'convolution', 3)
    spatial = rank - 2
    channels_first = _channels_first(data_format)
    channel_axis = 1 if channels_first else -1
    depth = inputs.shape[channel_axis]
    if depth is None:
      raise errors.value_error('convolution needs a static channel dimension.',
                               inputs=inputs, data_format=data_format)
    dtype = inputs.dtype.base_dtype
    weights = _variable('weights', _tuple(kernel_size, spatial, 'kernel_size') +
                        [depth, num_outputs], dtype,
                        weights_initializer or xavier_initializer(), weights_regularizer,
                        trainable, variables_collections)
    outputs = tf.nn.convolution(
        inputs, weights, strides=_tuple(stride, spatial, 'stride'), padding=padding.upper(),
        dilations=_tuple(rate, spatial, 'rate'),
        data_format=data_format if channels_first else None)
    biases = None
    if normalizer_fn is None and biases_initializer is not None:
      biases = _variable('biases', [num_outputs], dtype, biases_initializer,
                         biases_regularizer, trainable, variables_collections)
    outputs = _finish(outputs, normalizer_fn, normalizer_params, biases, activation_fn,
                      channel_axis)
    return _collect(outputs_collections, outputs)


@add_arg_scope
def convolution2d(inputs, num_outputs, kernel_size, *args, **kwargs):
  """`convolution` on 4-D inputs ([batch, height, width, channels] or NCHW)."""
  inputs = tf.convert_to_tensor(inputs)
  if inputs.shape.rank != 4:
    raise errors.value_error('conv2d needs 4-D inputs.', inputs=inputs)
  return convolution(inputs, num_outputs, kernel_size, *args, **kwargs)


conv2d = convolution2d


def _pool(pool, default_scope, inputs, kernel_size, stride, padding, data_format,
          outputs_collections, scope):
  with tf.name_scope(scope or default_scope):
    inputs = tf.convert_to_tensor(inputs)
    channels_first = _channels_first(data_format)
    window = [1, 1] + _tuple(kernel_size, 2, 'kernel_size') if channels_first else (
        [1] + _tuple(kernel_size, 2, 'kernel_size') + [1])
    strides = [1, 1] + _tuple(stride, 2, 'stride') if channels_first else (
        [1] + _tuple(stride, 2, 'stride') + [1])
    outputs = pool(inputs, window, strides, padding.upper(),
                   data_format='NCHW' if channels_first else 'NHWC')
    return _collect(outputs_collections, outputs)


@add_arg_scope
def max_pool2d(inputs, kernel_size, stride=2, padding='VALID', data_format='NHWC',
               outputs_collections=None, scope=None):
  """2-D max pooling (no variables)."""
  return _pool(tf.nn.max_pool2d, 'MaxPool2D', inputs, kernel_size, stride, padding,
               data_format, outputs_collections, scope)


@add_arg_scope
def avg_pool2d(inputs, kernel_size, stride=2, padding='VALID', data_format='NHWC',
               outputs_collections=None, scope=None):
  """2-D average pooling (no variables)."""
  return _pool(tf.nn.avg_pool2d, 'AvgPool2D', inputs, kernel_size, stride, padding,
               data_format, outputs_collections, scope)


@add_arg_scope
def flatten(inputs, outputs_collections=None, scope=None):
  """[batch, d1, d2, ...] -> [batch, d1 * d2 * ...]."""
  with tf.name_scope(scope or 'Flatten'):
    inputs = tf.convert_to_tensor(inputs)
    _rank(inputs, 'flatten', 2)
    rest = inputs.shape[1:].num_elements()
    if rest is not None:
      outputs = tf.reshape(inputs, [-1, rest])
    else:
      outputs = tf.reshape(inputs, tf.stack([tf.shape(inputs)[0], -1]))
    return _collect(outputs_collections, outputs)


@add_arg_scope
def dropout(inputs, keep_prob=0.5, noise_shape=None, is_training=True,
            outputs_collections=None, scope=None, seed=None):
  """Drops entries with probability 1 - keep_prob and scales the rest by 1 / keep_prob while
  `is_training` (a bool or a bool tensor); the identity otherwise."""
  with tf.name_scope(scope or 'Dropout'):
    inputs = tf.convert_to_tensor(inputs)
    outputs = _smart_cond.smart_cond(
        is_training,
        lambda: tf.nn.dropout(inputs, rate=1.0 - keep_prob, noise_shape=noise_shape,
                              seed=seed),
        lambda: tf.identity(inputs))
    return _collect(outputs_collections, outputs)


@add_arg_scope
def softmax(logits, scope=None):
  """Softmax over the last axis, for inputs of any rank."""
  with tf.name_scope(scope or 'softmax'):
    return tf.nn.softmax(logits, axis=-1)


@add_arg_scope
def one_hot_encoding(labels, num_classes, on_value=1.0, off_value=0.0,
                     outputs_collections=None, scope=None):
  """`tf.one_hot` of int labels."""
  with tf.name_scope(scope or 'OneHotEncoding'):
    labels = tf.convert_to_tensor(labels)
    if labels.dtype == tf.int32:
      labels = tf.cast(labels, tf.int64)
    return _collect(outputs_collections,
                    tf.one_hot(labels, num_classes, on_value=on_value, off_value=off_value))


@add_arg_scope
def layer_norm(inputs, center=True, scale=True, activation_fn=None, reuse=None,
               variables_collections=None, outputs_collections=None, trainable=True,
               begin_norm_axis=1, begin_params_axis=-1, scope=None):
  """(x - mean) / sqrt(var + 1e-12) * gamma + beta, mean and var over the axes from
  `begin_norm_axis` on, `beta`/`gamma` of shape inputs.shape[begin_params_axis:]."""
  with _v1.variable_scope(scope, 'LayerNorm', [inputs], reuse=reuse):
    inputs = tf.convert_to_tensor(inputs)
    rank = _rank(inputs, 'layer_norm')
    norm_axis = begin_norm_axis + rank if begin_norm_axis < 0 else begin_norm_axis
    params_axis = begin_params_axis + rank if begin_params_axis < 0 else begin_params_axis
    if not 0 <= norm_axis < rank or not 0 <= params_axis < rank:
      raise errors.value_error(
          'layer_norm: begin_norm_axis and begin_params_axis must be < rank(inputs).',
          begin_norm_axis=begin_norm_axis, begin_params_axis=begin_params_axis,
          rank=rank)
    params_shape = inputs.shape[params_axis:]
    if not params_shape.is_fully_defined():
      raise errors.value_error('layer_norm needs static sizes from begin_params_axis on.',
                               inputs=inputs, begin_params_axis=begin_params_axis)
    dtype = inputs.dtype.base_dtype
    beta = gamma = None
    if center:
      beta = _variable('beta', params_shape, dtype, tf.zeros_initializer(),
                       trainable=trainable, variables_collections=variables_collections)
    if scale:
      gamma = _variable('gamma', params_shape, dtype, tf.ones_initializer(),
                        trainable=trainable, variables_collections=variables_collections)
    mean, variance = tf.nn.moments(inputs, list(range(norm_axis, rank)), keepdims=True)
    outputs = tf.nn.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma,
                                        variance_epsilon=1e-12)
    outputs.set_shape(inputs.shape)
    if activation_fn is not None:
      outputs = activation_fn(outputs)
    return _collect(outputs_collections, outputs)


@add_arg_scope
def batch_norm(inputs, decay=0.999, center=True, scale=False, epsilon=0.001,
               activation_fn=None, param_initializers=None, param_regularizers=None,
               updates_collections=_keys.UPDATE_OPS, is_training=True, reuse=None,
               variables_collections=None, outputs_collections=None, trainable=True,
               batch_weights=None, fused=None, data_format='NHWC',
               zero_debias_moving_mean=False, scope=None, renorm=False,
               renorm_clipping=None, renorm_decay=0.99, adjustment=None):
  """Batch normalization over every axis but the channel one (last for NHWC, 1 for NCHW).

  While `is_training` (bool or bool tensor) it normalises with the batch's statistics and
  updates the moving ones; otherwise it normalises with `moving_mean`/`moving_variance`."""
  del renorm_clipping, renorm_decay
  for arg, value, default in (('batch_weights', batch_weights, None), ('renorm', renorm, False),
                              ('zero_debias_moving_mean', zero_debias_moving_mean, False),
                              ('adjustment', adjustment, None)):
    if value is not default:
      raise errors.value_error(
          'batch_norm(%s=...) is not supported by tpu_estimator\'s tf.contrib.layers.' % arg,
          'Leave it at its default (%r).' % (default,), **{arg: value})
  with _v1.variable_scope(scope, 'BatchNorm', [inputs], reuse=reuse):
    inputs = tf.convert_to_tensor(inputs)
    rank = _rank(inputs, 'batch_norm', 2)
    channels_first = _channels_first(data_format) and rank > 2
    axis = 1 if channels_first else rank - 1
    params_shape = inputs.shape[axis:axis + 1]
    if not params_shape.is_fully_defined():
      raise errors.value_error('batch_norm needs a static channel dimension.', inputs=inputs)
    dtype = tf.float32 if inputs.dtype.base_dtype == tf.float16 else inputs.dtype.base_dtype
    beta, gamma, moving_mean, moving_variance = _batch_norm_variables(
        params_shape, dtype, center, scale, param_initializers or {}, param_regularizers or {},
        trainable, variables_collections)
    use_fused = fused is not False and rank in (2, 4)
    normalize = functools.partial(_normalize, inputs, beta, gamma, epsilon, axis, use_fused,
                                  'NCHW' if channels_first else 'NHWC')
    training_value = _smart_cond.smart_constant_value(is_training)
    if training_value is False:
      outputs = normalize(moving_mean, moving_variance)[0]
    else:
      outputs, mean, variance = _smart_cond.smart_cond(
          is_training, lambda: normalize(None, None),
          lambda: normalize(moving_mean, moving_variance))
      momentum = _smart_cond.smart_cond(is_training, lambda: tf.constant(decay, dtype),
                                        lambda: tf.constant(1.0, dtype))
      updates = [_v1.assign_sub(moving, (moving - value) * (1.0 - momentum))
                 for moving, value in ((moving_mean, mean), (moving_variance, variance))]
      if updates_collections is None:
        with tf.control_dependencies(updates):
          outputs = tf.identity(outputs)
      else:
        for update in updates:
          _v1.add_to_collections(updates_collections, update)
    outputs.set_shape(inputs.shape)
    if activation_fn is not None:
      outputs = activation_fn(outputs)
    return _collect(outputs_collections, outputs)


def _batch_norm_variables(shape, dtype, center, scale, inits, regs, trainable, collections):
  """(beta or None, gamma or None, moving_mean, moving_variance), created in this order (the
  order, names and initializers TF 1.x's batch_norm used)."""
  beta = gamma = None
  if center:
    beta = _variable('beta', shape, dtype, inits.get('beta', tf.zeros_initializer()),
                     regs.get('beta'), trainable, collections)
  if scale:
    gamma = _variable('gamma', shape, dtype, inits.get('gamma', tf.ones_initializer()),
                      regs.get('gamma'), trainable, collections)
  moving_mean = _variable('moving_mean', shape, dtype,
                          inits.get('moving_mean', tf.zeros_initializer()),
                          trainable=False, variables_collections=collections)
  moving_variance = _variable('moving_variance', shape, dtype,
                              inits.get('moving_variance', tf.ones_initializer()),
                              trainable=False, variables_collections=collections)
  return beta, gamma, moving_mean, moving_variance


def _normalize(inputs, beta, gamma, epsilon, axis, use_fused, data_format, mean, variance):
  """(outputs, mean, variance): with the batch's statistics when mean is None (the variance
  returned is then the one the moving average gets), else with the given ones."""
  channels = inputs.shape[axis]
  dtype = tf.float32 if inputs.dtype.base_dtype == tf.float16 else inputs.dtype.base_dtype
  offset = beta if beta is not None else tf.zeros([channels], dtype)
  factor = gamma if gamma is not None else tf.ones([channels], dtype)
  if use_fused:
    x = inputs if inputs.shape.rank == 4 else tf.reshape(inputs, [-1, 1, 1, channels])
    training = mean is None
    y, batch_mean, batch_variance = _v1.nn.fused_batch_norm(
        x, factor, offset, mean=mean, variance=variance, epsilon=epsilon,
        data_format=data_format, is_training=training)
    y = y if inputs.shape.rank == 4 else tf.reshape(y, tf.shape(inputs))
    if training:
      return y, batch_mean, batch_variance
    return y, mean, variance
  reduce_axes = [i for i in range(inputs.shape.rank) if i != axis]
  broadcast = [1] * inputs.shape.rank
  broadcast[axis] = channels
  if mean is None:
    mean, variance = tf.nn.moments(tf.cast(inputs, dtype), reduce_axes)
  y = tf.nn.batch_normalization(
      inputs, tf.cast(tf.reshape(mean, broadcast), inputs.dtype),
      tf.cast(tf.reshape(variance, broadcast), inputs.dtype),
      tf.cast(tf.reshape(offset, broadcast), inputs.dtype),
      tf.cast(tf.reshape(factor, broadcast), inputs.dtype), epsilon)
  return y, mean, variance


@add_arg_scope
def embed_sequence(ids, vocab_size=None, embed_dim=None, unique=False, initializer=None,
                   regularizer=None, trainable=True, scope=None, reuse=None):
  """Embeds int `ids` [batch, length] into [batch, length, embed_dim] through
  `EmbedSequence/embeddings` [vocab_size, embed_dim]."""
  if vocab_size is None or embed_dim is None:
    raise errors.value_error('embed_sequence needs `vocab_size` and `embed_dim`.',
                             vocab_size=vocab_size, embed_dim=embed_dim)
  with _v1.variable_scope(scope, 'EmbedSequence', [ids], reuse=reuse):
    embeddings = _v1.get_variable('embeddings', shape=[vocab_size, embed_dim],
                                  initializer=initializer, regularizer=regularizer,
                                  trainable=trainable)
    ids = tf.convert_to_tensor(ids)
    if unique:
      flat, index = tf.unique(tf.reshape(ids, [-1]))
      rows = tf.nn.embedding_lookup(embeddings, flat)
      return tf.reshape(tf.gather(rows, index),
                        tf.concat([tf.shape(ids), [embed_dim]], axis=0))
    return tf.nn.embedding_lookup(embeddings, ids)


def __getattr__(name):
  """Other `tf.contrib.layers` names (`separable_conv2d`, `conv2d_transpose`, `repeat`,
  `stack`, `optimize_loss`, `OPTIMIZER_CLS_NAMES`, `summarize_*`, `instance_norm`,
  `rev_block`, ...) from the tf_slim package, which kept them."""
  if name.startswith('__'):
    raise AttributeError(name)
  slim_loader.load_tf_slim('tf.contrib.layers', name)
  # The package: its attribute `tf_slim.layers` is the submodule tf_slim.layers.layers (the
  # package's star import rebinds it), without optimize_loss, summarize_*, rev_block, ...
  package = importlib.import_module('tf_slim.layers')
  try:
    return getattr(package, name)
  except AttributeError:
    raise AttributeError(
        'tf.contrib.layers.%s is not provided by tpu_estimator nor by tf_slim: use '
        'tf.compat.v1.layers / tf.keras.layers (tf.feature_column for feature columns).'
        % name) from None
