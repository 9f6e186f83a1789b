"""numpy_input_fn / pandas_input_fn: what the model sees, with Estimator and sharded
TPUEstimator (params['batch_size']), and their argument errors.  Order, epochs and the final
short batch against the original: tests/test_early_stopping.py (the differential program)."""
import logging
import sys

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te

v1 = tf.compat.v1


def _elements(input_fn, params=None):
  """What input_fn's dataset yields, as numpy."""
  dataset = input_fn(params) if params is not None else input_fn()
  return [tf.nest.map_structure(lambda t: t.numpy(), e) for e in dataset]


def test_numpy_dict_features_array_labels_in_order():
  x = {'b': np.arange(5, dtype=np.float32), 'a': np.arange(5, 10, dtype=np.int64)}
  y = np.arange(100, 105)
  got = _elements(te.inputs.numpy_input_fn(x, y, batch_size=2, shuffle=False))
  assert len(got) == 3
  features, labels = got[-1]
  assert sorted(features) == ['a', 'b']
  np.testing.assert_array_equal(features['a'], [9])
  np.testing.assert_array_equal(labels, [104])
  assert np.concatenate([e[0]['b'] for e in got]).tolist() == [0, 1, 2, 3, 4]


def test_numpy_single_array_no_labels_and_label_dicts():
  x = np.arange(12, dtype=np.float32).reshape(6, 2)
  (only,) = _elements(te.inputs.numpy_input_fn(x, batch_size=8, shuffle=False))
  np.testing.assert_array_equal(only, x)  # features alone, the array itself
  y = {'t1': np.arange(6), 't2': np.ones(6)}
  features, labels = _elements(te.numpy_input_fn(x, y, batch_size=6, shuffle=False))[0]
  np.testing.assert_array_equal(features, x)
  assert sorted(labels) == ['t1', 't2']


def test_numpy_forever_has_only_full_batches():
  input_fn = te.numpy_input_fn({'x': np.arange(5)}, batch_size=3, num_epochs=None,
                               shuffle=False)
  batches = list(input_fn().take(6).as_numpy_iterator())
  assert [b['x'].tolist() for b in batches[:3]] == [[0, 1, 2], [3, 4, 0], [1, 2, 3]]
  assert input_fn().element_spec['x'].shape.as_list() == [3]


@pytest.mark.parametrize('call, error, words', [
    (lambda: te.numpy_input_fn({'x': np.arange(3)}), ValueError, ['shuffle', 'None']),
    (lambda: te.numpy_input_fn({'x': np.arange(3)}, shuffle=1), ValueError, ['shuffle=1']),
    (lambda: te.numpy_input_fn([1, 2], shuffle=False), TypeError, ['x', 'list']),
    (lambda: te.numpy_input_fn({}, shuffle=False), ValueError, ['empty']),
    (lambda: te.numpy_input_fn({'x': np.arange(3)}, np.arange(4), shuffle=False), ValueError,
     ['same length', '(3,)', '(4,)']),
    (lambda: te.numpy_input_fn({'x': np.arange(3)}, {'x': np.arange(3)}, shuffle=False),
     ValueError, ['both', "['x']"]),
    (lambda: te.numpy_input_fn({'x': np.arange(3)}, batch_size=0, shuffle=False), ValueError,
     ['batch_size=0']),
    (lambda: te.numpy_input_fn({'x': np.arange(3)}, num_epochs=0, shuffle=False), ValueError,
     ['num_epochs=0']),
])
def test_numpy_bad_arguments(call, error, words):
  with pytest.raises(error) as info:
    call()
  for word in words:
    assert word in str(info.value)


def _model_fn(features, labels, mode, params):
  del params
  kernel = v1.get_variable('w', [2, 1], initializer=tf.zeros_initializer())
  logits = tf.matmul(features['x'], kernel)[:, 0]
  if mode == te.ModeKeys.PREDICT:
    return te.TPUEstimatorSpec(mode, predictions={'logits': logits, 'x0': features['x'][:, 0]})
  loss = tf.reduce_mean(tf.square(logits - labels))
  train_op = te.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.01)).minimize(
      loss, v1.train.get_global_step())
  return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                             eval_metrics=(lambda l: {'n': v1.metrics.mean(l)}, [labels]))


@pytest.mark.parametrize('hparams', [False, True])
def test_numpy_under_sharded_tpu_estimator_uses_params_batch_size(tmp_path, caplog, hparams):
  """With params a dict or an HParams (the original TPUEstimator took both)."""
  from tpu_estimator.compat.contrib import training  # pylint: disable=import-outside-toplevel
  x = {'x': np.arange(40, dtype=np.float32).reshape(20, 2) / 40.0}
  y = np.arange(20, dtype=np.float32) / 20.0
  config = te.RunConfig(model_dir=str(tmp_path), tpu_config=te.TPUConfig(
      iterations_per_loop=2, num_shards=2))
  est = te.TPUEstimator(_model_fn, config=config, train_batch_size=8, eval_batch_size=6,
                        predict_batch_size=6,
                        params=training.HParams(learning_rate=0.01) if hparams else None)
  with caplog.at_level(logging.WARNING):
    est.train(te.numpy_input_fn(x, y, batch_size=128, num_epochs=None, shuffle=True),
              max_steps=4)
  assert 'params["batch_size"]=8' in caplog.text and 'batch_size=128' in caplog.text
  assert est.get_variable_value('global_step') == 4
  # Evaluation reads each row once (20 rows in batches of 6, the last short).
  result = est.evaluate(te.numpy_input_fn(x, y, batch_size=6, shuffle=False), steps=None)
  assert result['n'] == pytest.approx(y.mean())
  rows = list(est.predict(te.numpy_input_fn(x, batch_size=6, shuffle=False)))
  assert [r['x0'] for r in rows] == pytest.approx(x['x'][:, 0].tolist())


def test_numpy_under_estimator_keeps_its_batch_size(tmp_path):
  """Estimator's params are the user's: a 'batch_size' there is not ours to use."""
  sizes = []

  def model_fn(features, labels, mode, params):
    del labels
    sizes.append(features['x'].shape[0])
    step = v1.train.get_global_step()
    return te.EstimatorSpec(mode, loss=tf.constant(0.0), train_op=v1.assign_add(step, 1))

  est = te.Estimator(model_fn, model_dir=str(tmp_path), params={'batch_size': 3})
  est.train(te.numpy_input_fn({'x': np.arange(10.0)}, np.arange(10.0), batch_size=4,
                              num_epochs=None, shuffle=False), max_steps=2)
  assert sizes == [4]


def test_numpy_called_by_another_input_fn_gives_the_batch_tensors(tmp_path):
  """The original's input_fn returned the next batch's tensors, and programs' own input_fns
  indexed them (TF-GAN's StarGAN test: `numpy_input_fn(...)()['x']`); called by the
  estimator itself it gives a dataset, which reads the same batches."""
  x = np.arange(40, dtype=np.float32).reshape(20, 2)
  y = x.sum(axis=1, keepdims=True) * 0.5
  returned = []

  def model_fn(features, labels, mode):
    features = features['x'] if isinstance(features, dict) else features  # (direct: a dict)
    kernel = v1.get_variable('kernel', [2, 1], initializer=v1.zeros_initializer())
    loss = v1.losses.mean_squared_error(labels, tf.matmul(features, kernel))
    train_op = v1.train.GradientDescentOptimizer(0.001).minimize(loss,
                                                                 v1.train.get_global_step())
    return te.EstimatorSpec(mode, loss=loss, train_op=train_op)

  def unwrapped(features, labels):
    return features['x'], labels

  def wrapping_input_fn():
    features, labels = te.numpy_input_fn({'x': x}, y, batch_size=5, shuffle=False)()
    returned.append(type(features))
    return unwrapped(features, labels)

  results = []
  for name, input_fn in (('wrapped', wrapping_input_fn),
                         ('direct', te.numpy_input_fn({'x': x}, y, batch_size=5,
                                                      shuffle=False))):
    est = te.Estimator(model_fn, model_dir=str(tmp_path / name),
                       config=te.EstimatorRunConfig(tf_random_seed=1))
    est.train(input_fn)  # one epoch: 4 steps, then the end of the input
    results.append((est.get_variable_value('global_step'),
                    est.get_variable_value('kernel'), est.evaluate(input_fn)['loss']))
  assert returned == [dict, dict]
  assert results[0][0] == results[1][0] == 4
  np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
  np.testing.assert_allclose(results[0][2], results[1][2], rtol=1e-6)


def test_numpy_several_pipelines_read_their_own_rows():
  class Context:
    input_context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)

  x = {'x': np.arange(8)}
  got = _elements(te.numpy_input_fn(x, batch_size=2, shuffle=False),
                  {'batch_size': 2, 'context': Context()})
  assert [e['x'].tolist() for e in got] == [[1, 3], [5, 7]]


def test_pandas_input_fn():
  import pandas as pd  # pylint: disable=import-outside-toplevel  (the `test` extra has it)
  x = pd.DataFrame({'a': np.arange(5, dtype=np.float32), 'b': list('vwxyz')},
                   index=np.arange(10, 15))
  y = pd.Series(np.arange(5) * 10, index=x.index)
  got = _elements(te.inputs.pandas_input_fn(x, y, batch_size=2, shuffle=False))
  assert [len(e[1]) for e in got] == [2, 2, 1]
  features, labels = got[0]
  assert sorted(features) == ['a', 'b'] and features['b'].tolist() == [b'v', b'w']
  assert labels.tolist() == [0, 10]
  y_frame = pd.DataFrame({'t': np.arange(5), 'a': np.arange(5)}, index=x.index)
  features, labels = _elements(te.pandas_input_fn(x, y_frame, batch_size=5, shuffle=False))[0]
  assert sorted(labels) == ['a', 't'] and sorted(features) == ['a', 'b']
  only = _elements(te.pandas_input_fn(x, batch_size=5, shuffle=False))[0]
  assert sorted(only) == ['a', 'b']
  with pytest.raises(ValueError, match='indexes'):
    te.pandas_input_fn(x, pd.Series(np.arange(5)), shuffle=False)
  with pytest.raises(ValueError, match="'a'"):
    te.pandas_input_fn(x, y, shuffle=False, target_column='a')
  with pytest.raises(ValueError, match='shuffle'):
    te.pandas_input_fn(x, y)


def test_pandas_missing_says_how_to_install(monkeypatch):
  monkeypatch.setitem(sys.modules, 'pandas', None)
  with pytest.raises(ImportError, match='pip install pandas'):
    te.pandas_input_fn(object(), shuffle=False)
