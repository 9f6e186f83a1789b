"""TPUEstimator's `embedding_config_spec` (tf.compat.v1.estimator.tpu.experimental.
EmbeddingConfigSpec) and the TPU embedding optimizers' parameters: checked as the original
checked them, and trained as the original trained them with use_tpu=False (ordinary embedding
variables, model_fn's optimizer), also on 2 shards.  The names under compat.install() are in
test_compat.py's probe."""
import os

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te
from tpu_estimator.distribute import tpu_embedding as emb

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
_v1 = tf.compat.v1
tpu_fc = _v1.tpu.experimental


def _columns():
  init = _v1.truncated_normal_initializer(0., 0.5, seed=1)
  ids = [_v1.feature_column.categorical_column_with_identity(k, n)
         for k, n in (('f1', 20), ('f2', 20), ('f3', 30))]
  columns = tpu_fc.shared_embedding_columns(ids[:2], dimension=4, combiner=None,
                                            initializer=init)
  return columns + [tpu_fc.embedding_column(ids[2], dimension=3, combiner='sum',
                                            initializer=init)]


def test_spec_splits_tensor_core_columns_and_checks_its_arguments():
  ids = _v1.feature_column.categorical_column_with_identity('a', 10)
  engine = tpu_fc.embedding_column(ids, 4)
  core = tpu_fc.embedding_column(ids, 4, embedding_lookup_device='tpu_tensor_core',
                                 tensor_core_shape=[None, 3])
  spec = emb.EmbeddingConfigSpec([engine, core], emb.AdagradParameters(0.1))
  assert spec.feature_columns == [engine] and spec.tensor_core_feature_columns == [core]
  assert spec.partition_strategy == 'div' and spec.clipping_limit is None
  with pytest.raises(ValueError, match='Exactly one of `feature_columns`'):
    emb.EmbeddingConfigSpec(optimization_parameters=emb.AdagradParameters(0.1))
  with pytest.raises(ValueError, match="partition_strategy='shard'"):
    emb.EmbeddingConfigSpec([engine], emb.AdagradParameters(0.1), partition_strategy='shard')
  with pytest.raises(ValueError, match='optimization_parameters must be one of'):
    emb.EmbeddingConfigSpec([engine], _v1.train.AdagradOptimizer(0.1))
  with pytest.raises(TypeError, match='TPU embedding columns'):
    emb.EmbeddingConfigSpec([ids], emb.AdagradParameters(0.1))
  with pytest.raises(ValueError, match='beta1 must be in'):
    emb.AdamParameters(0.1, beta1=1.0)
  with pytest.raises(ValueError, match='use_gradient_accumulation=True'):
    emb.StochasticGradientDescentParameters(0.1, use_gradient_accumulation=False,
                                            clip_gradient_max=1.)


def _input_fn(params):
  rng = np.random.RandomState(0)
  x, x3 = rng.randint(0, 20, size=(64, 2)), rng.randint(0, 30, size=(64, 3))
  y = (x[:, 0] + x3[:, 0]) % 3
  data = tf.data.Dataset.from_tensor_slices(({'f1': x[:, :1], 'f2': x[:, 1:], 'f3': x3}, y))
  return data.repeat().batch(params['batch_size'], drop_remainder=True)


def _model_fn(features, labels, mode, params):
  import tf_keras  # pylint: disable=import-outside-toplevel
  net = tf_keras.layers.DenseFeatures(params['columns'])(features)
  logits = tf_keras.layers.Dense(3, kernel_initializer=tf_keras.initializers.GlorotUniform(
      seed=2))(net)
  return h.adagrad_classifier_spec(mode, labels, logits)


def _estimator(tmp_path, name, use_tpu, num_shards, **spec_kwargs):
  columns = _columns()
  spec = emb.EmbeddingConfigSpec(columns, emb.AdagradParameters(0.5), **spec_kwargs)
  config = h.tpu_config(num_shards=num_shards, iterations_per_loop=5,
                        model_dir=str(tmp_path / name), tf_random_seed=3,
                        per_host_input_for_training=te.InputPipelineConfig.PER_HOST_V2)
  return te.TPUEstimator(_model_fn, config=config, use_tpu=use_tpu, train_batch_size=16,
                         eval_batch_size=16, params={'columns': columns},
                         embedding_config_spec=spec)


def test_embedding_columns_train_as_the_originals_cpu_path_on_one_device_and_two_shards(
    tmp_path):
  """The TPU embedding columns look up ordinary variables in model_fn (as the original's
  use_tpu=False, also inside each shard's model_fn, where a TPU would have taken the tables'
  activations from its embedding engine), trained by model_fn's optimizer: 2 shards end where
  one device does (the original with use_tpu=False: loss 0.68837, accuracy 0.71875)."""
  results = []
  for name, use_tpu, shards in (('cpu', False, None), ('shards', True, 2)):
    est = _estimator(tmp_path, name, use_tpu, shards)
    est.train(_input_fn, max_steps=20)
    results.append((est.evaluate(_input_fn, steps=4), sorted(
        n for n in est.get_variable_names() if 'Adagrad' not in n)))
  (one, names), (two, sharded_names) = results
  assert names == sharded_names and 'f1_f2_shared_embedding' in names
  assert 'dense_features/f3_embedding/embedding_weights' in names
  np.testing.assert_allclose(two['loss'], one['loss'], rtol=1e-5)
  assert two['acc'] == one['acc'] and one['global_step'] == 20


def test_the_originals_refusals(tmp_path):
  with pytest.raises(ValueError, match='num_shards=1'):
    _estimator(tmp_path, 'one', True, 1)
  with pytest.raises(ValueError, match='Mod sharding'):
    _estimator(tmp_path, 'mod', False, None, partition_strategy='mod')
