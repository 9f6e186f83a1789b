"""`tf.contrib.rnn`: the names TF 1.x's `tf.contrib.rnn` shared with core TensorFlow, the v1
RNN cells and wrappers (`tf.compat.v1.nn.rnn_cell.*`: tf_keras's, so the `[legacy]` extra) and
the static RNN functions (`tf.compat.v1.nn.static_rnn`, ...), resolved on access: the cells
would import tf_keras for every program.  The cells only contrib had (`LayerNormBasicLSTMCell`,
`LSTMBlockCell`, `AttentionCellWrapper`, ...) are not provided."""
import tensorflow as tf

__all__ = []  # every name is resolved on access (below)

_CELLS = ('RNNCell', 'BasicRNNCell', 'BasicLSTMCell', 'LSTMCell', 'GRUCell', 'LSTMStateTuple',
          'MultiRNNCell', 'DropoutWrapper', 'ResidualWrapper', 'DeviceWrapper')
_FUNCTIONS = ('static_rnn', 'static_state_saving_rnn', 'static_bidirectional_rnn')


def __getattr__(name):
  if name in _CELLS:
    return getattr(tf.compat.v1.nn.rnn_cell, name)
  if name in _FUNCTIONS:
    return getattr(tf.compat.v1.nn, name)
  raise AttributeError(
      'tf.contrib.rnn.%s is not provided by tpu_estimator, whose tf.contrib.rnn holds the '
      'names TF 1.x shared with core TensorFlow (%s); use tf.keras.layers (LSTM, GRU, RNN) or '
      'tf.compat.v1.nn.rnn_cell instead.' % (name, ', '.join(_CELLS + _FUNCTIONS)))


def __dir__():
  return sorted(_CELLS + _FUNCTIONS)
