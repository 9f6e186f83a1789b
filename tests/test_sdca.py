"""`LinearSDCA` (tpu_estimator/canned/sdca.py): what it and the linear estimators refuse, with
messages naming the argument; the example id missing from the features at train time; the
names `compat.install()` gives it.  Training itself is compared with the original in
tests/test_sdca_differential.py."""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator import canned
from tpu_estimator.canned import v1

fc = tf.feature_column
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _columns():
  return [fc.numeric_column('x'),
          fc.categorical_column_with_vocabulary_list('color', ['red', 'blue'])]


@pytest.mark.parametrize('kwargs, error, words', [
    (dict(example_id_column=None), TypeError, 'example_id_column'),
    (dict(example_id_column=3), TypeError, 'example_id_column'),
    (dict(num_loss_partitions=0), ValueError, 'num_loss_partitions'),
    (dict(num_loss_partitions=1.5), TypeError, 'num_loss_partitions'),
    (dict(num_table_shards=0), ValueError, 'num_table_shards'),
    (dict(symmetric_l1_regularization=-0.1), ValueError, 'symmetric_l1_regularization'),
    (dict(symmetric_l2_regularization=0.), ValueError, 'symmetric_l2_regularization'),
    (dict(symmetric_l2_regularization='1'), TypeError, 'symmetric_l2_regularization'),
    (dict(adaptive='yes'), TypeError, 'adaptive'),
])
def test_bad_linear_sdca_arguments(kwargs, error, words):
  kwargs = dict(dict(example_id_column='id'), **kwargs)
  with pytest.raises(error, match=words):
    canned.LinearSDCA(**kwargs)


def test_linear_sdca_keeps_its_settings():
  sdca = canned.LinearSDCA('id', num_loss_partitions=2, num_table_shards=3,
                           symmetric_l1_regularization=0.5, symmetric_l2_regularization=2.,
                           adaptive=True)
  assert (sdca.example_id_column, sdca.num_loss_partitions, sdca.num_table_shards,
          sdca.symmetric_l1_regularization, sdca.symmetric_l2_regularization,
          sdca.adaptive) == ('id', 2, 3, 0.5, 2., True)
  assert 'num_table_shards=3' in repr(sdca)


def test_experimental_module_holds_it():
  import tpu_estimator.experimental  # pylint: disable=import-outside-toplevel
  assert tpu_estimator.experimental.LinearSDCA is canned.LinearSDCA
  assert 'LinearSDCA' in tpu_estimator.experimental.__all__
  with pytest.raises(AttributeError):
    tpu_estimator.experimental.NotAThing  # pylint: disable=pointless-statement


class _NotAV2Column(object):
  name = 'x'
  parse_example_spec = {}


@pytest.mark.parametrize('make, words', [
    (lambda s: canned.LinearClassifier(_columns(), n_classes=3, optimizer=s), 'multi-class'),
    (lambda s: v1.LinearClassifier(_columns(), n_classes=4, optimizer=s), 'multi-class'),
    (lambda s: canned.LinearRegressor(_columns(), label_dimension=2, optimizer=s),
     'one-dimensional'),
    (lambda s: v1.LinearRegressor(_columns(), label_dimension=3, optimizer=s),
     'one-dimensional'),
    (lambda s: canned.LinearClassifier(_columns(), optimizer=s, sparse_combiner='mean'),
     'sparse_combiner'),
    (lambda s: canned.LinearRegressor([_NotAV2Column()], optimizer=s), 'V2 feature columns'),
    (lambda s: canned.LinearRegressor(
        [fc.embedding_column(fc.categorical_column_with_hash_bucket('c', 5), 2)],
        optimizer=s), 'embedding'),
    (lambda s: canned.LinearRegressor([fc.numeric_column('m', shape=[2, 2])], optimizer=s),
     'rank 1'),
    (lambda s: canned.LinearEstimator(canned.PoissonRegressionHead(), _columns(), optimizer=s),
     'head'),
])
def test_estimators_refuse_what_the_original_refused(make, words):
  with pytest.raises(ValueError, match=words):
    make(canned.LinearSDCA('id'))


def test_missing_example_id_is_named_when_training(tmp_path):
  est = canned.LinearClassifier(_columns(), model_dir=str(tmp_path),
                                optimizer=canned.LinearSDCA('example_id'))

  def input_fn():
    features = {'x': np.array([1., 2.], np.float32), 'color': np.array(['red', 'blue'])}
    return tf.data.Dataset.from_tensor_slices((features, np.array([0, 1]))).batch(2)

  with pytest.raises(ValueError, match="example_id_column.*'example_id'"):
    est.train(input_fn, steps=1)


def test_install_gives_the_original_names():
  """tf.estimator.experimental, tf.compat.v1.estimator.experimental and the original's
  canned.linear module hold our LinearSDCA after compat.install()."""
  code = '\n'.join([
      'import tpu_estimator.compat as compat', 'compat.install()', 'import tensorflow as tf',
      'from tpu_estimator.canned import LinearSDCA',
      'from tensorflow_estimator.python.estimator.canned.linear import LinearSDCA as L',
      'from tensorflow_estimator.python.estimator.canned import linear',
      'assert tf.estimator.experimental.LinearSDCA is LinearSDCA',
      'assert tf.compat.v1.estimator.experimental.LinearSDCA is LinearSDCA',
      'assert L is LinearSDCA and linear.LinearClassifierV2 is not None',
      'print("ok")'])
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2',
             PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get('PYTHONPATH')) if p))
  proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env,
                        timeout=300)
  assert proc.returncode == 0 and proc.stdout.strip() == 'ok', proc.stderr[-3000:]
