"""The recurrent layers of the RNN estimators: Keras 2's `SimpleRNNCell`, `LSTMCell` and
`GRUCell` (their defaults: tanh, sigmoid gates, LSTM forget bias 1, GRU `reset_after`) as
`tf.compat.v1` graph variables named as the original's Keras 2 layers named them
(`<layer>/<cell>/{kernel,recurrent_kernel,bias}`, cells of a stack under
`<layer>/stacked_rnn_cells/`), run over time in one `tf.scan` with Keras' masking: a padded
step keeps the previous output and state.

Written here rather than taken from Keras: Keras 3's layers make no `tf.compat.v1` graph
variables, and tf_keras (Keras 2) is optional; the math is a few lines per cell.
"""
import contextlib

import tensorflow as tf

_v1 = tf.compat.v1
CELL_NAMES = {'simple_rnn': 'simple_rnn_cell', 'lstm': 'lstm_cell', 'gru': 'gru_cell'}
LAYER_NAMES = {'simple_rnn': 'simple_rnn', 'lstm': 'lstm', 'gru': 'gru'}
_GATES = {'simple_rnn': 1, 'lstm': 4, 'gru': 3}


def _lstm_bias_initializer(units):
  """Keras' `unit_forget_bias`: zeros, but ones for the forget gate (the second quarter)."""
  def initializer(shape, dtype=tf.float32, partition_info=None):
    del shape, partition_info
    return tf.concat([tf.zeros([units], dtype), tf.ones([units], dtype),
                      tf.zeros([2 * units], dtype)], axis=0)
  return initializer


class Cell(object):
  """One cell's variables (made in `build`, in the current variable scope) and step."""

  def __init__(self, cell_type, units, name):
    self.cell_type, self.units, self.name = cell_type, units, name

  @property
  def state_count(self):
    return 2 if self.cell_type == 'lstm' else 1

  def build(self, depth):
    width = _GATES[self.cell_type] * self.units
    with _v1.variable_scope(self.name):
      self.kernel = _v1.get_variable('kernel', [depth, width], tf.float32,
                                     initializer=_v1.glorot_uniform_initializer())
      self.recurrent_kernel = _v1.get_variable('recurrent_kernel', [self.units, width],
                                               tf.float32,
                                               initializer=_v1.orthogonal_initializer())
      if self.cell_type == 'lstm':
        self.bias = _v1.get_variable('bias', [width], tf.float32,
                                     initializer=_lstm_bias_initializer(self.units))
      elif self.cell_type == 'gru':
        self.bias = _v1.get_variable('bias', [2, width], tf.float32,
                                     initializer=_v1.zeros_initializer())
      else:
        self.bias = _v1.get_variable('bias', [width], tf.float32,
                                     initializer=_v1.zeros_initializer())

  def step(self, inputs, states):
    """(output, new states) for one time step."""
    kernel = tf.convert_to_tensor(self.kernel)
    recurrent = tf.convert_to_tensor(self.recurrent_kernel)
    bias = tf.convert_to_tensor(self.bias)
    if self.cell_type == 'simple_rnn':
      output = tf.tanh(tf.matmul(inputs, kernel) + bias + tf.matmul(states[0], recurrent))
      return output, [output]
    if self.cell_type == 'lstm':
      h, c = states
      z = tf.matmul(inputs, kernel) + tf.matmul(h, recurrent) + bias
      i, f, g, o = tf.split(z, 4, axis=1)
      c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
      h = tf.sigmoid(o) * tf.tanh(c)
      return h, [h, c]
    h = states[0]  # GRU, reset gate after the recurrent matmul (Keras 2's default)
    x_z, x_r, x_h = tf.split(tf.matmul(inputs, kernel) + bias[0], 3, axis=1)
    r_z, r_r, r_h = tf.split(tf.matmul(h, recurrent) + bias[1], 3, axis=1)
    z = tf.sigmoid(x_z + r_z)
    r = tf.sigmoid(x_r + r_r)
    candidate = tf.tanh(x_h + r * r_h)
    h = z * h + (1. - z) * candidate
    return h, [h]


def make_cells(cell_type, units):
  """The cells of a stack of `units` (Keras' per-graph names: lstm_cell, lstm_cell_1, ...)."""
  base = CELL_NAMES[cell_type]
  return [Cell(cell_type, n, base if i == 0 else '%s_%d' % (base, i))
          for i, n in enumerate(units)]


def run(cells, inputs, mask, return_sequences, stacked):
  """Runs `cells` (built here, in the current variable scope; under `stacked_rnn_cells` when
  `stacked`) over `inputs` [batch, time, depth] where `mask` [batch, time] is True.
  Returns the last unmasked output [batch, units], or every step's [batch, time, units]."""
  depth = inputs.shape[-1]
  with (_v1.variable_scope('stacked_rnn_cells') if stacked else contextlib.nullcontext()):
    for cell in cells:
      cell.build(depth)
      depth = cell.units
  batch = tf.shape(inputs)[0]
  zeros = lambda units: tf.zeros(tf.stack([batch, units]), tf.float32)
  initial = (zeros(cells[-1].units),
             tuple(zeros(cell.units) for cell in cells for _ in range(cell.state_count)))

  def step(carried, elems):
    previous_output, previous_states = carried
    x, keep = elems
    states, new_states = list(previous_states), []
    for cell in cells:
      mine, states = states[:cell.state_count], states[cell.state_count:]
      x, updated = cell.step(x, mine)
      new_states.extend(updated)
    keep = tf.expand_dims(keep, -1)
    output = tf.where(keep, x, previous_output)
    return output, tuple(tf.where(keep, new, old)
                         for new, old in zip(new_states, previous_states))

  time_major = (tf.transpose(inputs, [1, 0, 2]), tf.transpose(mask, [1, 0]))
  outputs, _ = tf.scan(step, time_major, initializer=initial)
  if return_sequences:
    return tf.transpose(outputs, [1, 0, 2])
  return outputs[-1]
