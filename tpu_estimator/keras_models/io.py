"""What `input_fn` gives, turned into what the Keras model takes, as the original did.

Features: one tensor for a one-input model, a dict keyed by the model's input names, or a list
in input order; `{'features': ..., 'sample_weights': ...}` carries sample weights.  Labels: one
tensor for a one-output model, a dict keyed by the output names, or a list in output order.
"""
import tensorflow as tf

from tpu_estimator import errors

SAMPLE_WEIGHT_KEYS = frozenset(('features', 'sample_weights'))


def split_sample_weights(features):
  """(features, sample_weights or None)."""
  if isinstance(features, dict) and set(features) == SAMPLE_WEIGHT_KEYS:
    return features['features'], features['sample_weights']
  return features, None


def _as_tensor(value):
  if tf.is_tensor(value) or isinstance(value, tf.SparseTensor):
    return value
  return tf.compat.v1.convert_to_tensor_or_sparse_tensor(value)


def ordered(value, names, what, argument):
  """`value` (None, a tensor, a list or a dict keyed by `names`) as a list in `names`' order,
  or None.  A dict missing one of `names` is a ValueError naming them."""
  if value is None:
    return None
  if isinstance(value, dict):
    missing = [n for n in names if n not in value]
    if missing:
      raise errors.value_error(
          'The %s dict does not hold every %s of the Keras model: missing %s.' % (
              argument, what, sorted(missing)),
          'Key %s by the model\'s %s names %s.' % (argument, what, list(names)),
          **{argument + '_keys': sorted(value)})
    return [_as_tensor(value[n]) for n in names]
  if isinstance(value, (list, tuple)):
    return [_as_tensor(v) for v in value]
  return [_as_tensor(value)]


def model_inputs(model_inputs_spec, names, features):
  """What to call the model on: a dict when the model was built on a dict of inputs, else a
  single tensor (one input) or a list (several)."""
  if isinstance(model_inputs_spec, dict):
    return {k: _as_tensor(features[k]) for k in model_inputs_spec}
  if names is None:  # a subclassed model: it takes what it was given
    return features
  inputs = ordered(features, names, 'input', 'features')
  return inputs[0] if len(inputs) == 1 else inputs


def sample_weights_for(weights, names):
  """One sample-weight tensor (or None) per output name."""
  if weights is None:
    return [None] * len(names)
  if isinstance(weights, dict):
    unknown = sorted(set(weights) - set(names))
    if unknown:
      raise errors.value_error(
          'Unknown outputs in sample_weights: %s.' % unknown,
          'Key sample_weights by the model\'s output names %s.' % list(names),
          sample_weights_keys=sorted(weights))
    return [weights.get(n) for n in names]
  if isinstance(weights, (list, tuple)):
    if len(weights) != len(names):
      raise errors.value_error(
          'sample_weights must hold one tensor per model output.',
          'Pass %d tensors or a dict keyed by %s.' % (len(names), list(names)),
          sample_weights_count=len(weights))
    return list(weights)
  if len(names) == 1:
    return [weights]
  raise errors.type_error(
      'The model has several outputs, so sample_weights must be a list or a dict.',
      'Key sample_weights by the output names %s.' % list(names), sample_weights=weights)
