"""`tpu_estimator.canned.KMeans` (`tf.compat.v1.estimator.experimental.KMeans`) on its own:
argument checks, the initializations the original lacked, export, and where compat puts it.
Its agreement with the original is tests/test_kmeans_differential.py."""
import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator.canned import KMeans
from tpu_estimator.compat import namespaces
from tpu_estimator import export

TRUE_CENTERS = np.array([[0., 0.], [10., 10.], [-10., 10.]], np.float32)


def _points():
  rng = np.random.RandomState(0)
  return np.concatenate([c + rng.normal(0, 0.3, (10, 2)) for c in TRUE_CENTERS]).astype(
      np.float32)


POINTS = _points()


def _whole():
  return tf.data.Dataset.from_tensors(POINTS).repeat()


def _batches():
  return tf.data.Dataset.from_tensor_slices(POINTS).batch(10)


def _matched(centers):
  """Each true center's distance to the nearest learned one."""
  return np.min(np.linalg.norm(TRUE_CENTERS[:, None] - centers[None], axis=2), axis=1)


@pytest.mark.parametrize('kwargs, error, words', [
    (dict(initial_clusters='kmc3'), ValueError, ['initial_clusters', "'kmc3'", 'RANDOM_INIT']),
    (dict(distance_metric='l1'), ValueError, ['distance_metric', "'l1'", 'COSINE_DISTANCE']),
    (dict(num_clusters='three'), TypeError, ['num_clusters', "'three'"]),
    (dict(num_clusters=0), ValueError, ['num_clusters=0', 'at least 1']),
    (dict(seed='x'), TypeError, ['seed', "'x'"]),
    (dict(initial_clusters='kmeans_plus_plus', kmeans_plus_plus_num_retries='2'), TypeError,
     ['kmeans_plus_plus_num_retries', "'2'"]),
    (dict(initial_clusters=5), ValueError, ['initial_clusters=5', '[num_clusters, dimensions]']),
    (dict(initial_clusters=np.zeros([3])), ValueError, ['initial_clusters', '2-D']),
    (dict(relative_tolerance='small'), TypeError, ['relative_tolerance', "'small'"]),
])
def test_bad_arguments_name_the_argument_the_value_and_the_fix(kwargs, error, words, tmp_path):
  kwargs = dict(dict(num_clusters=3), **kwargs)
  with pytest.raises(error) as raised:
    KMeans(model_dir=str(tmp_path), **kwargs)
  for word in words:
    assert word in str(raised.value)


def test_what_the_original_accepted_is_accepted(tmp_path):
  # num_clusters is ignored when centers are given; these the original took as they are.
  KMeans(num_clusters=None, initial_clusters=TRUE_CENTERS, model_dir=str(tmp_path))
  KMeans(num_clusters=tf.constant(3), model_dir=str(tmp_path))
  KMeans(3, initial_clusters=lambda inputs, k: inputs[:k], model_dir=str(tmp_path),
         mini_batch_steps_per_iteration=0, relative_tolerance=-1, use_mini_batch='yes')
  assert (KMeans.RANDOM_INIT, KMeans.KMEANS_PLUS_PLUS_INIT, KMeans.SQUARED_EUCLIDEAN_DISTANCE,
          KMeans.COSINE_DISTANCE, KMeans.CLUSTER_CENTERS_VAR_NAME) == (
              'random', 'kmeans_plus_plus', 'squared_euclidean', 'cosine', 'clusters')
  assert (KMeans.SCORE, KMeans.CLUSTER_INDEX, KMeans.ALL_DISTANCES) == (
      'score', 'cluster_index', 'all_distances')


@pytest.mark.parametrize('init', ['kmc2', 'kmeans_plus_plus'])
def test_sampling_initializations_train_without_a_seed(init, tmp_path):
  """KMC2 (TensorFlow's KMC2ChainInitialization; the original refused 'kmc2') and k-means++
  without a seed (the original failed: its op needs one) find the three clusters."""
  kmeans = KMeans(3, model_dir=str(tmp_path), initial_clusters=init, use_mini_batch=False)
  kmeans.train(_whole, steps=4)
  assert kmeans.cluster_centers().shape == (3, 2)
  # The clusters are far apart next to their spread: both samplers pick one point of each.
  assert np.max(_matched(kmeans.cluster_centers())) < 0.5


def test_callable_initialization_chooses_the_centers_it_returns(tmp_path):
  """initial_clusters=f(inputs, k), `inputs` the list of input Tensors as the original passed
  it: here one point of each cluster (POINTS holds 10 a cluster), so training settles on the
  three true centers."""
  def choose(inputs, k):
    assert isinstance(inputs, list) and k.dtype.is_integer
    return tf.gather(inputs[0], [0, 10, 20])

  kmeans = KMeans(3, model_dir=str(tmp_path), use_mini_batch=False, initial_clusters=choose)
  kmeans.train(_whole, steps=3)
  assert np.max(_matched(kmeans.cluster_centers())) < 0.3


def test_export_serves_the_originals_signatures(tmp_path):
  kmeans = KMeans(3, model_dir=str(tmp_path / 'model'), initial_clusters=TRUE_CENTERS + 0.5,
                  use_mini_batch=False)
  kmeans.train(_whole, steps=2)
  assert np.max(_matched(kmeans.cluster_centers())) < 0.3

  def serving_input_fn():
    points = tf.compat.v1.placeholder(tf.float32, [None, 2], name='points')
    return export.TensorServingInputReceiver(points, {'points': points})

  path = kmeans.export_saved_model(str(tmp_path / 'export'), serving_input_fn)
  loaded = tf.saved_model.load(path.decode() if isinstance(path, bytes) else path)
  assert sorted(loaded.signatures) == ['all_distances', 'cluster_index', 'serving_default']
  expected = list(kmeans.predict_cluster_index(_batches))
  for key in ('serving_default', 'cluster_index'):
    served = loaded.signatures[key](points=tf.constant(POINTS))['output'].numpy()
    assert served.tolist() == expected
  distances = loaded.signatures['all_distances'](points=tf.constant(POINTS))['output'].numpy()
  np.testing.assert_allclose(np.sqrt(np.maximum(distances, 0)),
                             np.array(list(kmeans.transform(_batches))), rtol=1e-4, atol=1e-3)


def test_compat_puts_kmeans_at_the_originals_paths_and_only_there():
  mods = namespaces.build()
  assert mods['tensorflow.compat.v1.estimator.experimental'].KMeans is KMeans
  assert mods['tensorflow_estimator.python.estimator.canned.kmeans'].KMeansClustering is KMeans
  with pytest.raises(AttributeError) as raised:  # the original had it in v1 only
    getattr(mods['tensorflow.estimator.experimental'], 'KMeans')
  assert 'tf.compat.v1.estimator.experimental.KMeans' in str(raised.value)
