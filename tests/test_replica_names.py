"""tf_keras objects named by tf_keras inside a sharded model_fn (distribute/replica_names.py):
every replica names them as the first does.  The v1 `DenseFeatures` of
`tf.compat.v1.keras` (what `tensorflow.compat.v1` programs get, tensorflow/tpu's embedding
sample among them) makes its variables with `get_variable`, so a second replica numbering
its layers after the first's looked up variables that did not exist."""
import os

import numpy as np
import tensorflow as tf

import helpers as h
import tpu_estimator as te

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
_v1 = tf.compat.v1


def _input_fn(params):
  rng = np.random.RandomState(0)
  a, b = rng.randint(0, 20, size=(64, 1)), rng.randint(0, 30, size=(64, 3))
  data = tf.data.Dataset.from_tensor_slices(({'a': a, 'b': b}, (a[:, 0] + b[:, 0]) % 3))
  return data.repeat().batch(params['batch_size'], drop_remainder=True)


def _model_fn(features, labels, mode, params):
  from tf_keras.api._v1 import keras  # pylint: disable=import-outside-toplevel
  init = _v1.truncated_normal_initializer(0., 0.5, seed=1)
  columns = [_v1.feature_column.embedding_column(
      _v1.feature_column.categorical_column_with_identity(key, size), 4, initializer=init)
             for key, size in (('a', 20), ('b', 30))]
  # One layer per column, none named: dense_features, dense_features_1.
  net = tf.concat([keras.layers.DenseFeatures([c])(features) for c in columns], 1)
  logits = keras.layers.Dense(3, kernel_initializer=keras.initializers.glorot_uniform(2))(net)
  return h.adagrad_classifier_spec(mode, labels, logits)


def test_v1_dense_features_on_two_shards_train_as_one_device(tmp_path):
  results = []
  for shards in (None, 2):
    config = h.tpu_config(num_shards=shards, iterations_per_loop=5, tf_random_seed=3,
                          model_dir=str(tmp_path / str(shards)))
    est = te.TPUEstimator(_model_fn, config=config, use_tpu=bool(shards),
                          train_batch_size=16, eval_batch_size=16)
    est.train(_input_fn, max_steps=10)
    results.append((est.evaluate(_input_fn, steps=4), est.get_variable_names()))
  (one, names), (two, sharded_names) = results
  assert sorted(sharded_names) == sorted(names)
  assert 'dense_features_1/b_embedding/embedding_weights' in names
  np.testing.assert_allclose(two['loss'], one['loss'], rtol=1e-5)
  assert two['acc'] == one['acc'] and two['global_step'] == 10


def _scoped_adam_model_fn(features, labels, mode, params):
  del params
  w = _v1.get_variable('w', [2, 1])
  loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
  with _v1.variable_scope('training'):  # as tf_slim's optimize_loss(name='training')
    optimizer = te.CrossShardOptimizer(_v1.train.AdamOptimizer(0.1))
    train_op = optimizer.minimize(loss, _v1.train.get_global_step())
  return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def _ones_input_fn(params):
  x = np.ones([8, 2], np.float32)
  return tf.data.Dataset.from_tensor_slices((x, x[:, :1])).repeat().batch(
      params['batch_size'], drop_remainder=True)


def test_optimizer_variables_are_named_as_on_one_device_and_resume_on_other_shards(tmp_path):
  """An Adam built under a variable scope on 2 shards names its non-slot variables as on one
  device (TensorFlow's merge_call re-entered the scope: `training/training/beta1_power`), so the
  model_dir goes on with 1 shard."""
  for shards, steps in ((2, 1), (1, 2)):
    config = h.tpu_config(num_shards=shards, iterations_per_loop=1, model_dir=str(tmp_path))
    est = te.TPUEstimator(_scoped_adam_model_fn, config=config, use_tpu=True,
                          train_batch_size=8)
    est.train(_ones_input_fn, max_steps=steps)
    assert sorted(est.get_variable_names()) == [
        'global_step', 'training/beta1_power', 'training/beta2_power', 'training/w/Adam',
        'training/w/Adam_1', 'w']
  np.testing.assert_allclose(est.get_variable_value('training/beta1_power'), 0.9 ** 3,
                             rtol=1e-6)
