"""`RNNEstimator` and `RNNClassifier`: a recurrent network over `tf.feature_column` sequence
columns (`tf.estimator.experimental.RNN*` of tensorflow-estimator 2.15).

The original's network, by the names its checkpoints hold: the sequence columns read as
`[batch, time, depth]` (variables `sequence_features/<column>/...`), the context columns
(`dense_features/<column>/...`) repeated at every step after them, one recurrent layer
(`rnn_model/<layer>/<cell>/...`: `lstm`, `gru` or `simple_rnn` for an int `units`, `rnn` for a
list, its cells under `stacked_rnn_cells/` when there are several) masked by the sequence
lengths, and a Dense layer to the head's logits (`rnn_model/logits/{kernel,bias}`), on every
step with `return_sequences`.  An optimizer given by name is made with learning rate 0.05 and
each gradient clipped to norm 5, as the original did.
"""
import tensorflow as tf

from tpu_estimator.canned import canned_estimator
from tpu_estimator.canned import classification_heads
from tpu_estimator.canned import dnn
from tpu_estimator.canned import head_base
from tpu_estimator.canned import optimizers
from tpu_estimator.canned import rnn_cells
from tpu_estimator.canned import sequence_input
from tpu_estimator.canned import sequential_head
from tpu_estimator import errors

_v1 = tf.compat.v1
LEARNING_RATE = 0.05  # the original's for an optimizer given by name
CLIP_NORM = 5.0  # ... and its per-gradient norm clipping
CELL_TYPES = ('simple_rnn', 'lstm', 'gru')
_KERAS_CELLS = {'SimpleRNNCell': 'simple_rnn', 'LSTMCell': 'lstm', 'GRUCell': 'gru'}
# What a Keras cell must keep at its default for the network here to compute what it would.
_CELL_DEFAULTS = {'activation': 'tanh', 'recurrent_activation': 'sigmoid', 'use_bias': True,
                  'dropout': 0., 'recurrent_dropout': 0., 'unit_forget_bias': True,
                  'reset_after': True, 'kernel_regularizer': None,
                  'recurrent_regularizer': None, 'bias_regularizer': None,
                  'activity_regularizer': None, 'kernel_constraint': None,
                  'recurrent_constraint': None, 'bias_constraint': None}


class _UseDefault(object):
  """The default of `cell_type`: not given (simple_rnn unless `rnn_cell_fn` is given)."""

  def __repr__(self):
    return 'USE_DEFAULT'


USE_DEFAULT = _UseDefault()


def _keras_cell_type(cls):
  """'lstm' for Keras' (3 or 2) LSTMCell class, ...; None for other classes."""
  module = getattr(cls, '__module__', '') or ''
  if isinstance(cls, type) and module.startswith(('keras', 'tf_keras')):
    return _KERAS_CELLS.get(cls.__name__)
  return None


def _cell_from_keras(cell):
  """(cell type, units) of a Keras SimpleRNNCell/LSTMCell/GRUCell whose settings the network
  here computes; a clear error for any other cell."""
  cell_type = _keras_cell_type(type(cell))
  if cell_type is None:
    raise errors.type_error(
        'rnn_cell_fn must return Keras SimpleRNNCell, LSTMCell or GRUCell cells (or a list or '
        'StackedRNNCells of them): tpu_estimator runs these cells as tf.compat.v1 graph '
        'variables with the original\'s checkpoint names, and runs no other cell class.',
        'Use units=[...] and cell_type=..., or write a model_fn.', cell=cell)
  config = cell.get_config()
  for key, default in _CELL_DEFAULTS.items():
    if key in config and not _same_setting(config[key], default):
      raise errors.value_error(
          'The RNN estimators here run Keras cells with their default %s only.' % key,
          'Leave %s at its default, or write a model_fn.' % key, **{key: config[key]})
  return cell_type, int(config['units'])


def _same_setting(value, default):
  return value == default


def _cells_of(rnn_cell_fn):
  """[(cell type, units)] of the cells `rnn_cell_fn()` returns (one, a list, or a
  StackedRNNCells), and whether they are stacked."""
  made = rnn_cell_fn()
  stacked = isinstance(made, (list, tuple)) or hasattr(made, 'cells')
  cells = list(made) if isinstance(made, (list, tuple)) else list(getattr(made, 'cells', [made]))
  if not cells:
    raise errors.value_error('rnn_cell_fn returned no cell.', rnn_cell_fn=rnn_cell_fn)
  specs = [_cell_from_keras(cell) for cell in cells]
  return specs, stacked or len(specs) > 1


class _Layers(object):
  """The recurrent layer: its name and its cells' types and units (or `rnn_cell_fn`, called
  in each graph as the original did)."""

  def __init__(self, units, cell_type, rnn_cell_fn):
    if rnn_cell_fn is not None and (units or cell_type is not USE_DEFAULT):
      raise errors.value_error('units and cell_type must not be specified when using '
                               'rnn_cell_fn.', units=units, cell_type=cell_type)
    self.rnn_cell_fn = rnn_cell_fn
    if rnn_cell_fn is not None:
      if not callable(rnn_cell_fn):
        raise errors.type_error('rnn_cell_fn must be a function returning a RNN cell.',
                                rnn_cell_fn=rnn_cell_fn)
      return
    if cell_type is USE_DEFAULT:
      cell_type = 'simple_rnn'
    if not isinstance(cell_type, str):
      cell_type = _keras_cell_type(cell_type) or cell_type
    if cell_type not in CELL_TYPES:
      raise errors.value_error(
          'cell_type must be one of %s, or Keras\' SimpleRNNCell, LSTMCell or GRUCell class.'
          % ', '.join(repr(c) for c in CELL_TYPES), cell_type=cell_type)
    self.cell_type = cell_type
    if errors.is_int(units) and units > 0:
      self.single_layer = True  # tf.keras.layers.LSTM(units): `lstm/lstm_cell/...`
      self.units = [int(units)]
    elif not isinstance(units, (str, bytes)) and hasattr(units, '__iter__') and list(units) \
        and all(errors.is_int(u) and u > 0 for u in units):
      self.single_layer = False  # tf.keras.layers.RNN(cells): `rnn/...`
      self.units = [int(u) for u in units]
    else:
      raise errors.value_error('units must be a positive int or a non-empty list of positive '
                               'ints (the hidden units of each RNN layer).',
                               'E.g. units=[32, 16].', units=units)

  def build(self):
    """(layer name, cells, stacked) for a new graph."""
    if self.rnn_cell_fn is not None:
      specs, stacked = _cells_of(self.rnn_cell_fn)
      cells, counts = [], {}
      for cell_type, units in specs:
        base, index = rnn_cells.CELL_NAMES[cell_type], counts.get(cell_type, 0)
        counts[cell_type] = index + 1
        cells.append(rnn_cells.Cell(cell_type, units, base if not index else
                                    '%s_%d' % (base, index)))
      return 'rnn', cells, stacked
    cells = rnn_cells.make_cells(self.cell_type, self.units)
    if self.single_layer:
      return rnn_cells.LAYER_NAMES[self.cell_type], cells, False
    return 'rnn', cells, len(cells) > 1


def _logits(net, logits_dimension):
  """The `logits` Dense layer, on the last axis of [batch, units] or [batch, time, units]."""
  if net.shape.rank == 2:
    return dnn.dense(net, logits_dimension, None)
  shape = tf.shape(net)
  flat = dnn.dense(tf.reshape(net, [-1, net.shape[-1]]), logits_dimension, None)
  return tf.reshape(flat, tf.stack([shape[0], shape[1], logits_dimension]))


def rnn_part(head, sequence_feature_columns, context_feature_columns, units, cell_type,
             rnn_cell_fn, return_sequences, optimizer):
  """The network as a `canned_estimator.Part`."""
  sequence_columns = sequence_input.check_sequence_columns(sequence_feature_columns)
  context_columns = sequence_input.check_context_columns(context_feature_columns)
  layers = _Layers(units, cell_type, rnn_cell_fn)

  def build(features, mode, logits_dimension):
    del mode  # the cells here have no dropout
    features = canned_estimator.check_features(features)
    with tf.name_scope('sequence_input_layer'):
      inputs, length = sequence_input.sequence_input(features, sequence_columns)
      _v1.summary.histogram('sequence_length', length)
      if context_columns:
        inputs = sequence_input.with_context(
            inputs, sequence_input.context_input(features, context_columns))
    mask = tf.sequence_mask(length, maxlen=tf.shape(inputs)[1])
    name, cells, stacked = layers.build()
    with _v1.variable_scope('rnn_model', reuse=_v1.AUTO_REUSE):
      with _v1.variable_scope(name):
        net = rnn_cells.run(cells, inputs, mask, return_sequences, stacked)
      with _v1.variable_scope('logits'):
        logits = _logits(net, logits_dimension)
    if return_sequences and head.input_sequence_mask_key not in features:
      features[head.input_sequence_mask_key] = mask
    return logits, []

  return canned_estimator.Part('rnn', build, _optimizer(optimizer), LEARNING_RATE, 'optimizer')


def _optimizer(optimizer):
  """An optimizer by name becomes a factory of it with the original's learning rate and
  gradient clipping; others are used as given."""
  if not isinstance(optimizer, str):
    return optimizer
  optimizers.get_optimizer(optimizer, LEARNING_RATE)  # a bad name fails here

  def named_optimizer():
    made = optimizers.get_optimizer(optimizer, LEARNING_RATE)
    made.clipnorm = CLIP_NORM
    return made
  return named_optimizer


class RNNEstimator(canned_estimator.CannedEstimator):
  """A recurrent network with any head (`tf.estimator.experimental.RNNEstimator`)."""

  def __init__(self, head, sequence_feature_columns, context_feature_columns=None, units=None,
               cell_type=USE_DEFAULT, rnn_cell_fn=None, return_sequences=False,
               model_dir=None, optimizer='Adagrad', config=None):
    if return_sequences and not isinstance(head, sequential_head._SequentialHead):  # pylint: disable=protected-access
      raise errors.value_error(
          'With return_sequences=True the head must be a sequential head.',
          'Wrap it: SequentialHeadWrapper(head, sequence_length_mask=...) (module '
          'tpu_estimator.canned.sequential_head).', head=head)
    part = rnn_part(head, sequence_feature_columns, context_feature_columns, units, cell_type,
                    rnn_cell_fn, return_sequences, optimizer)
    super().__init__(head, [part], model_dir, config)


class RNNClassifier(RNNEstimator):
  """Classifies sequences (or, with `return_sequences`, every step) into `n_classes` with a
  recurrent network (`tf.estimator.experimental.RNNClassifier`)."""

  def __init__(self, sequence_feature_columns, context_feature_columns=None, units=None,
               cell_type=USE_DEFAULT, rnn_cell_fn=None, return_sequences=False,
               model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None,
               optimizer='Adagrad', loss_reduction=head_base.SUM_OVER_BATCH_SIZE,
               sequence_mask='sequence_mask', config=None):
    head = classification_heads.classification_head(n_classes, weight_column, label_vocabulary,
                                                    loss_reduction)
    if return_sequences:
      head = sequential_head.SequentialHeadWrapper(head, sequence_length_mask=sequence_mask,
                                                   feature_columns=weight_column)
    super().__init__(head, sequence_feature_columns, context_feature_columns, units, cell_type,
                     rnn_cell_fn, return_sequences, model_dir, optimizer, config)
