"""The RNN estimators (tpu_estimator.canned.rnn): argument errors, masking, Keras cells from
`rnn_cell_fn`, training without tf_keras, and the legacy names under compat.install().  The
comparison with the original is tests/test_rnn_differential.py."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator
from tpu_estimator import canned
from tpu_estimator.canned import sequential_head

fc = tf.feature_column
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = tpu_estimator.EstimatorRunConfig(tf_random_seed=3)


def _columns():
  return [fc.sequence_numeric_column('x')]


# ---------------------------------------------------------------------------------------------
# Argument errors: each names the argument and the value received.

@pytest.mark.parametrize('kwargs, error, words', [
    (dict(units=[4], rnn_cell_fn=lambda: None), ValueError, 'units and cell_type'),
    (dict(cell_type='lstm', rnn_cell_fn=lambda: None), ValueError, 'units and cell_type'),
    (dict(units=[4], cell_type='transformer'), ValueError, "cell_type='transformer'"),
    (dict(units=None), ValueError, 'units=None'),
    (dict(units=[4, 0]), ValueError, 'units=[4, 0]'),
    (dict(units='4'), ValueError, "units='4'"),
    (dict(units=[4], rnn_cell_fn=None, optimizer='Nope'), ValueError, "optimizer='Nope'"),
    (dict(units=[4], n_classes=1), ValueError, 'n_classes=1'),
    (dict(units=[4], return_sequences=True, sequence_mask=3), TypeError, 'sequence_mask=3'),
    (dict(units=[4], return_sequences=True, weight_column=fc.numeric_column('w')), TypeError,
     'weight_column'),
])
def test_bad_arguments(kwargs, error, words):
  with pytest.raises(error, match='Received') as info:
    canned.RNNClassifier(_columns(), **kwargs)
  assert words in str(info.value)


def test_rnn_cell_fn_cannot_be_combined_with_units():
  with pytest.raises(ValueError, match='units=4'):
    canned.RNNEstimator(canned.RegressionHead(), _columns(), units=4,
                        rnn_cell_fn=lambda: tf.keras.layers.LSTMCell(4))


@pytest.mark.parametrize('columns, words', [
    ([], 'must not be empty'),
    ([fc.numeric_column('x')], 'sequence dense columns'),
    ('x', 'list of sequence feature columns'),
])
def test_bad_sequence_columns(columns, words):
  with pytest.raises((ValueError, TypeError), match=words):
    canned.RNNClassifier(columns, units=[4])


def test_sequence_column_as_context_column():
  with pytest.raises(ValueError, match='context_feature_columns must be dense, non-sequence'):
    canned.RNNClassifier(_columns(), [fc.sequence_numeric_column('c')], units=[4])


def test_return_sequences_needs_a_sequential_head():
  with pytest.raises(ValueError, match='sequential head'):
    canned.RNNEstimator(canned.RegressionHead(), _columns(), units=[4], return_sequences=True)
  head = sequential_head.SequentialHeadWrapper(canned.RegressionHead(), 'mask')
  assert canned.RNNEstimator(head, _columns(), units=[4], return_sequences=True).head is head


def test_sequential_head_refuses_multi_head():
  multi = canned.MultiHead([canned.RegressionHead(name='a'), canned.RegressionHead(name='b')])
  with pytest.raises(ValueError, match='MultiHead'):
    sequential_head.SequentialHeadWrapper(multi)


# ---------------------------------------------------------------------------------------------
# Training and predicting.

STEPS = 4


def _sparse(dense, lengths):
  index = tf.where(tf.sequence_mask(lengths, STEPS))
  return tf.SparseTensor(index, tf.gather_nd(dense, index), tf.shape(dense, out_type=tf.int64))


def _input_fn(values, lengths, labels=None):
  def fn():
    data = tf.data.Dataset.from_tensor_slices(
        {'x': np.asarray(values, np.float32), 'n': np.asarray(lengths, np.int64)})
    if labels is not None:
      data = tf.data.Dataset.zip((data, tf.data.Dataset.from_tensor_slices(
          np.asarray(labels))))
    data = data.batch(len(values))
    if labels is None:
      return data.map(lambda f: {'x': _sparse(f['x'], f['n'])})
    return data.map(lambda f, y: ({'x': _sparse(f['x'], f['n'])}, y))
  return fn


X = [[0.5, -1., 2., 0.3], [1., 0.2, -0.4, 0.], [-0.3, 0.8, 0., 0.]]
LENGTHS = [4, 3, 2]


def test_masked_steps_leave_the_output_unchanged(tmp_path):
  """An example's prediction is its network's output at its last real step: the same whether
  the batch is padded past its length or not (Keras' masking, as the original)."""
  est = canned.RNNEstimator(canned.RegressionHead(), _columns(), units=[3], cell_type='lstm',
                            model_dir=str(tmp_path), config=CONFIG)
  est.train(_input_fn(X, LENGTHS, np.array([[1.], [0.], [2.]], np.float32)), steps=1)
  padded = [p['predictions'] for p in est.predict(_input_fn(X, LENGTHS))]
  short = [p['predictions'] for p in est.predict(_input_fn([X[2][:2] + [0., 0.]], [2]))]
  longer = [p['predictions'] for p in est.predict(_input_fn([X[2][:2] + [5., 5.]], [2]))]
  np.testing.assert_allclose(padded[2], short[0], rtol=1e-6)
  np.testing.assert_allclose(longer[0], short[0], rtol=1e-6)  # values past the length unread
  assert not np.allclose(padded[0], padded[2])


def test_return_sequences_predicts_every_step_with_the_mask(tmp_path):
  est = canned.RNNClassifier(_columns(), units=[3], cell_type='gru', return_sequences=True,
                             n_classes=3, model_dir=str(tmp_path), config=CONFIG)
  labels = np.array([[0, 1, 2, 0], [1, 1, 0, 0], [2, 0, 0, 0]], np.int64)
  est.train(_input_fn(X, LENGTHS, labels), steps=2)
  first, _, last = est.predict(_input_fn(X, LENGTHS))
  assert np.asarray(first['logits']).shape == (4, 3)
  assert first['class_ids'].shape == (4, 1)
  assert last['sequence_mask'].tolist() == [True, True, False, False]
  # A padded step repeats the output of the last real one.
  np.testing.assert_allclose(last['logits'][2], last['logits'][1])
  metrics = est.evaluate(_input_fn(X, LENGTHS, labels), steps=1)
  assert {'accuracy', 'average_loss', 'loss', 'global_step'} <= set(metrics)


def test_rnn_cell_fn_takes_keras_cells(tmp_path):
  """Keras 3 cells (one, a list, or StackedRNNCells) become the same graph variables as the
  original's Keras 2 cells: `rnn_model/rnn/[stacked_rnn_cells/]<cell>/...`."""
  def cells():
    return tf.keras.layers.StackedRNNCells([tf.keras.layers.LSTMCell(3),
                                            tf.keras.layers.LSTMCell(2)])
  est = canned.RNNEstimator(canned.RegressionHead(), _columns(), rnn_cell_fn=cells,
                            model_dir=str(tmp_path), config=CONFIG)
  est.train(_input_fn(X, LENGTHS, np.ones((3, 1), np.float32)), steps=1)
  names = est.get_variable_names()
  assert est.get_variable_value(
      'rnn_model/rnn/stacked_rnn_cells/lstm_cell_1/recurrent_kernel').shape == (2, 8)
  assert 'rnn_model/rnn/stacked_rnn_cells/lstm_cell/kernel' in names
  single = canned.RNNEstimator(canned.RegressionHead(), _columns(),
                               cell_type=tf.keras.layers.GRUCell, units=[2],
                               model_dir=str(tmp_path / 'gru'), config=CONFIG)
  single.train(_input_fn(X, LENGTHS, np.ones((3, 1), np.float32)), steps=1)
  assert single.get_variable_value('rnn_model/rnn/gru_cell/bias').shape == (2, 6)


def test_rnn_cell_fn_with_settings_not_run_here(tmp_path):
  est = canned.RNNEstimator(canned.RegressionHead(), _columns(),
                            rnn_cell_fn=lambda: tf.keras.layers.LSTMCell(3, dropout=0.5),
                            model_dir=str(tmp_path), config=CONFIG)
  with pytest.raises(ValueError, match='dropout=0.5'):
    est.train(_input_fn(X, LENGTHS, np.ones((3, 1), np.float32)), steps=1)


# ---------------------------------------------------------------------------------------------
# In a fresh process: without tf_keras, and under compat.install().

_PROBE = textwrap.dedent('''
    import json, sys
    sys.modules['tf_keras'] = None  # as if tf_keras were not installed
    import numpy as np
    import tensorflow as tf
    import tpu_estimator.compat
    tpu_estimator.compat.install()
    from tpu_estimator import canned
    result = {}
    result['v2'] = tf.estimator.experimental.RNNClassifier is canned.RNNClassifier
    result['v2 estimator'] = tf.estimator.experimental.RNNEstimator is canned.RNNEstimator
    from tensorflow_estimator.python.estimator.canned import rnn
    result['module'] = rnn.RNNClassifier is canned.RNNClassifier
    from tensorflow_estimator.python.estimator.head import sequential_head
    result['head module'] = sequential_head.SequentialHeadWrapper is \\
        canned.SequentialHeadWrapper
    try:
      tf.compat.v1.estimator.experimental.RNNClassifier
    except AttributeError as e:
      result['v1'] = str(e)
    fc = tf.feature_column
    cols = [fc.sequence_numeric_column('x')]
    def input_fn():
      x = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], [1., 2., 3.], [2, 2])
      return {'x': x}, tf.constant([[1.], [0.]])
    est = canned.RNNEstimator(canned.RegressionHead(), cols, units=[2], model_dir=sys.argv[1],
                              optimizer=tf.compat.v1.train.AdagradOptimizer(0.1))
    est.train(input_fn, steps=2)
    result['trained'] = int(est.get_variable_value('global_step'))
    result['predicted'] = len(list(est.predict(
        lambda: tf.data.Dataset.from_tensors(input_fn()[0]))))
    try:
      canned.RNNClassifier(cols, units=[2])
    except ImportError as e:
      result['default optimizer'] = str(e)
    print(json.dumps(result))
''')


def test_compat_names_and_training_without_tf_keras(tmp_path):
  """tf.estimator.experimental.RNN* and the original's module paths are ours; the network
  needs no Keras at all (a tf.compat.v1.train optimizer trains it without tf_keras), and the
  default optimizer, a Keras 2 one as in the original, names the `[legacy]` extra."""
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      p for p in (REPO, os.environ.get('PYTHONPATH')) if p), TF_CPP_MIN_LOG_LEVEL='2')
  proc = subprocess.run([sys.executable, '-c', _PROBE, str(tmp_path)], capture_output=True,
                        text=True, env=env, timeout=600)
  assert proc.returncode == 0, proc.stderr[-4000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  assert result['v2'] and result['v2 estimator'] and result['module'] and result['head module']
  assert 'tf.estimator.experimental.RNNClassifier' in result['v1']
  assert result['trained'] == 2 and result['predicted'] == 2
  assert 'tpu-estimator[legacy]' in result['default optimizer']
