"""`tf.contrib.training`: `HParams` and the checkpoint-polling helpers TPU-era programs used.

`HParams` is a typed bag of hyperparameters with TF 1.15's documented behaviour: each
hyperparameter keeps the type of the value it was added with (a list: the type of its first
element); `set_hparam`, `parse('a=1,b=[2,3]')`, `override_from_dict` and `parse_json` convert
new values to that type where that loses nothing (int -> float) and raise ValueError
otherwise (float -> int, number <-> bool, number -> str, list <-> scalar).
`checkpoints_iterator` / `wait_for_new_checkpoint` are TensorFlow's own, still shipped.
"""
import json
import numbers
import re

import tensorflow as tf
from tensorflow.python.training import checkpoint_utils as _checkpoint_utils

__all__ = ['HParams', 'checkpoints_iterator', 'wait_for_new_checkpoint']

checkpoints_iterator = tf.compat.v1.train.checkpoints_iterator
wait_for_new_checkpoint = _checkpoint_utils.wait_for_new_checkpoint

# One `name=value`, `name[index]=value` or `name=[v1,v2]` assignment, then a comma or the end.
_ASSIGNMENT = re.compile(
    r'\s*(?P<name>[a-zA-Z][\w.]*)\s*(\[\s*(?P<index>\d+)\s*\])?\s*=\s*'
    r'((?P<list>\[[^\]]*\])|(?P<scalar>[^,\[]*))\s*(,|$)')


def _convert(name, param_type, value):
  """`value` as `param_type`, or ValueError when that would change its kind."""
  if isinstance(value, param_type) or param_type is type(None):
    return value
  bad = ValueError(
      "Could not cast hparam '%s' of type %s from value %r: the hyperparameter keeps the type "
      'it was added with. Pass a %s.' % (name, param_type.__name__, value, param_type.__name__))
  text_types = (str, bytes)
  if issubclass(param_type, text_types) and not isinstance(value, text_types):
    raise bad
  if issubclass(param_type, bool) != isinstance(value, bool):
    raise bad
  if issubclass(param_type, numbers.Integral) and not isinstance(value, numbers.Integral):
    raise bad
  if issubclass(param_type, numbers.Number) and not isinstance(value, numbers.Number):
    raise bad
  return param_type(value)


def _parse_scalar(name, param_type, text, source):
  """The string `text` of hyperparameter `name` parsed as `param_type`."""
  text = text.strip()
  try:
    if param_type is bool:
      if text in ('true', 'True'):
        return True
      if text in ('false', 'False'):
        return False
      return bool(int(text))
    if param_type is str:
      return text
    return param_type(text)
  except ValueError:
    raise ValueError(
        "Could not parse hparam '%s' of type %s from %r in %r." % (
            name, param_type.__name__, text, source)) from None


class HParams:
  """Hyperparameters as attributes: `HParams(learning_rate=0.1, layers=[64, 32])`,
  then `hparams.learning_rate`, `hparams.parse('learning_rate=0.3')`, `hparams.values()`."""

  _HAS_DYNAMIC_ATTRIBUTES = True  # pytype: attributes are the hyperparameters

  def __init__(self, hparam_def=None, model_structure=None, **kwargs):
    self._hparam_types = {}
    self._model_structure = model_structure
    if hparam_def is not None:
      raise ValueError(
          'HParams(hparam_def=...) (HParamDef protocol buffers) is not supported. '
          'Received: hparam_def=%r. Pass the hyperparameters as keyword arguments.' % (
              hparam_def,))
    for name, value in kwargs.items():
      self.add_hparam(name, value)

  def add_hparam(self, name, value):
    """Adds hyperparameter `name` with `value`; its type is that of `value` (of its first
    element for a list or tuple, which must not be empty)."""
    if getattr(self, name, None) is not None:
      raise ValueError('Hyperparameter name is reserved or already used: %s. Received: '
                       'name=%r. Use set_hparam to change a value.' % (name, name))
    if isinstance(value, (list, tuple)):
      if not value:
        raise ValueError('Multi-valued hyperparameters cannot be empty: %s. Received: '
                         'value=%r.' % (name, value))
      self._hparam_types[name] = (type(value[0]), True)
    else:
      self._hparam_types[name] = (type(value), False)
    setattr(self, name, value)

  def set_hparam(self, name, value):
    """Sets existing hyperparameter `name` to `value` converted to its type."""
    if name not in self._hparam_types:
      raise KeyError('Unknown hyperparameter %r; add it with add_hparam first.' % (name,))
    param_type, is_list = self._hparam_types[name]
    if isinstance(value, list):
      if not is_list:
        raise ValueError('Must not pass a list for single-valued parameter: %s. Received: '
                         'value=%r.' % (name, value))
      setattr(self, name, [_convert(name, param_type, v) for v in value])
    else:
      if is_list:
        raise ValueError('Must pass a list for multi-valued parameter: %s. Received: '
                         'value=%r.' % (name, value))
      setattr(self, name, _convert(name, param_type, value))

  def del_hparam(self, name):
    """Removes hyperparameter `name` (nothing if it does not exist)."""
    if name in self._hparam_types:
      delattr(self, name)
      del self._hparam_types[name]

  def parse(self, values):
    """Overrides hyperparameters from a string `'a=1,b=[1,2],c=text,b[0]=3'`; returns self.
    Every name must exist; values are parsed as the hyperparameter's type."""
    assignments = {}
    pos = 0
    values = values or ''
    while pos < len(values):
      match = _ASSIGNMENT.match(values, pos)
      if not match or match.end() == pos:
        raise ValueError('Malformed hyperparameter value at %r in %r. Write name=value pairs '
                         'separated by commas, lists as name=[v1,v2].' % (values[pos:], values))
      pos = match.end()
      name = match.group('name')
      if name not in self._hparam_types:
        raise ValueError('Unknown hyperparameter type for %s. Received: %r. Add it with '
                         'add_hparam first.' % (name, values))
      param_type, is_list = self._hparam_types[name]
      index = match.group('index')
      if match.group('list') is not None:
        if not is_list or index is not None:
          raise ValueError('Must not pass a list for single-valued parameter: %s. Received: '
                           '%r.' % (name, values))
        items = match.group('list')[1:-1]
        parsed = [_parse_scalar(name, param_type, item, values)
                  for item in items.split(',')] if items.strip() else []
        key = name
      else:
        parsed = _parse_scalar(name, param_type, match.group('scalar'), values)
        if is_list and index is None:
          raise ValueError('Must pass a list for multi-valued parameter: %s. Received: %r.' % (
              name, values))
        key = (name, int(index)) if index is not None else name
        if index is not None and not is_list:
          raise ValueError('Index given for single-valued parameter: %s. Received: %r.' % (
              name, values))
      if key in assignments or (isinstance(key, tuple) and name in assignments):
        raise ValueError('Multiple assignments to variable %r in %r.' % (name, values))
      assignments[key] = parsed
    overrides = {}
    for key, value in assignments.items():
      if isinstance(key, tuple):
        name, index = key
        current = list(overrides.get(name, getattr(self, name)))
        if index >= len(current):
          raise ValueError('Index %d out of range for %s (length %d). Received: %r.' % (
              index, name, len(current), values))
        current[index] = value
        overrides[name] = current
      else:
        overrides[key] = value
    return self.override_from_dict(overrides)

  def override_from_dict(self, values_dict):
    """`set_hparam(name, value)` for each item; returns self."""
    for name, value in values_dict.items():
      self.set_hparam(name, value)
    return self

  def set_model_structure(self, model_structure):
    self._model_structure = model_structure

  def get_model_structure(self):
    return self._model_structure

  def to_json(self, indent=None, separators=None, sort_keys=False):
    """The hyperparameters as a JSON object (callables left out)."""

    def drop_callables(x):
      if isinstance(x, dict):
        return {k: drop_callables(v) for k, v in x.items() if not callable(v)}
      if isinstance(x, list):
        return [drop_callables(v) for v in x if not callable(v)]
      return x
    return json.dumps(drop_callables(self.values()), indent=indent, separators=separators,
                      sort_keys=sort_keys)

  def parse_json(self, values_json):
    """Overrides hyperparameters from a JSON object string; returns self."""
    return self.override_from_dict(json.loads(values_json))

  def values(self):
    """{name: value} of every hyperparameter."""
    return {name: getattr(self, name) for name in self._hparam_types}

  def get(self, key, default=None):
    """The value of `key`, else `default`; a `default` whose type does not fit the
    hyperparameter's raises ValueError."""
    if key not in self._hparam_types:
      return default
    if default is not None:
      param_type, is_list = self._hparam_types[key]
      if is_list != isinstance(default, list):
        raise ValueError('Hparam %r of type %s%s is incompatible with default=%r.' % (
            key, 'list of ' if is_list else '', param_type.__name__, default))
      for value in (default if is_list else [default]):
        _convert(key, param_type, value)
    return getattr(self, key)

  def __contains__(self, key):
    return key in self._hparam_types

  def __str__(self):
    return str(sorted(self.values().items()))

  def __repr__(self):
    return '%s(%s)' % (type(self).__name__, self)
