"""`tf.compat.v1.estimator.experimental.KMeans`: k-means clustering as an Estimator, on
TensorFlow's own k-means graph (`tensorflow.python.ops.clustering_ops`, reached through
`_tf_internals.kmeans_graph`), so the variables (`clusters`, `initialized`, ...), the
initializations (random, k-means++ and KMC2 on TensorFlow's `KmeansPlusPlusInitialization`,
`KMC2ChainInitialization` and `NearestNeighbors` kernels) and the Lloyd updates are
TensorFlow's, and a model_dir of tensorflow-estimator 2.15's KMeans restores here.

What this module adds is the estimator around that graph, as tensorflow-estimator 2.15
documented it: the argument checks, the hook that chooses the initial centers before the
first step, the relative-tolerance stop, the metric, prediction and export keys, and the
`cluster_centers`/`predict_cluster_index`/`score`/`transform` helpers.
"""
import random
import time

import numpy as np
import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import errors
from tpu_estimator.estimator import Estimator
from tpu_estimator import export
from tpu_estimator.specs import EstimatorSpec
from tpu_estimator.specs import ModeKeys

_v1 = tf.compat.v1


def _features_as_points(features, feature_columns):
  """The input points, a [batch, dimensions] Tensor: `features` itself when it is not a dict;
  `feature_columns` through `input_layer`; else the dict's columns concatenated in sorted key
  order (each [batch, d])."""
  if not isinstance(features, dict):
    return features
  if feature_columns:
    return _v1.feature_column.input_layer(features, list(feature_columns))
  if not features:
    raise errors.value_error('KMeans got an empty features dict.',
                             'Return the points (a [batch, dimensions] Tensor, or a dict of '
                             '[batch, d] Tensors) from input_fn.', features=features)
  keys = sorted(features)
  with tf.compat.v1.colocate_with(features[keys[0]]):
    return tf.concat([features[key] for key in keys], axis=1)


class _ChooseInitialCenters(_v1.train.SessionRunHook):
  """Runs the initialization op on the chief, before the first step of each new session,
  until every center is chosen (RANDOM_INIT may need several batches); other workers wait
  for the chief.  The original ran it right after the session was made; here the input's
  iterators are initialized by hooks that come after the model's, so it waits for the first
  step, when every hook has set up the session (the initialization reads input batches)."""

  def __init__(self, init_op, initialized, is_chief):
    self._init_op, self._initialized, self._is_chief = init_op, initialized, is_chief
    self._pending = False

  def after_create_session(self, session, coord):
    del session, coord
    self._pending = True

  def before_run(self, run_context):
    if self._pending:
      session = run_context.session
      while not session.run(self._initialized):
        if self._is_chief:
          session.run(self._init_op)
        else:
          time.sleep(1)
      self._pending = False
    return None


class _StopOnRelativeLossChange(_v1.train.SessionRunHook):
  """Stops training once |loss - previous| / (1 + |previous|) falls below `tolerance`."""

  def __init__(self, loss, tolerance):
    self._loss, self._tolerance, self._previous = loss, tolerance, None

  def before_run(self, run_context):
    del run_context
    return _v1.train.SessionRunArgs(self._loss)

  def after_run(self, run_context, run_values):
    loss = run_values.results
    if self._previous and \
        abs(loss - self._previous) / (1 + abs(self._previous)) < self._tolerance:
      run_context.request_stop()
    self._previous = loss


def _op_seed(seed):
  """The seed of the k-means++/KMC2 sampling ops, which need one: `seed`, else the graph's op
  seed when the graph has a seed, else a fresh random one (the original failed without a seed;
  the centers are chosen once and then live in the checkpoint)."""
  if seed is not None:
    return seed
  graph_seed, op_seed = _v1.get_seed(None)
  if graph_seed is not None and op_seed is not None:
    return op_seed
  return random.SystemRandom().randrange(2 ** 31 - 1)


class KMeans(Estimator):
  """K-means clustering (`tf.compat.v1.estimator.experimental.KMeans`, tensorflow-estimator
  2.15's `KMeansClustering`).

  Each `train` step runs one Lloyd iteration over the batch `input_fn` gives
  (`use_mini_batch=False`: the batch must be the whole data set), or adds one mini-batch to
  the running update, applied to the centers every `mini_batch_steps_per_iteration` steps.
  `input_fn` returns the points: a [batch, dimensions] float Tensor, or a dict of [batch, d]
  Tensors (concatenated in sorted key order, or read through `feature_columns`); labels are
  ignored.  `cluster_centers()` reads the centers from the latest checkpoint.
  """

  SQUARED_EUCLIDEAN_DISTANCE = 'squared_euclidean'
  COSINE_DISTANCE = 'cosine'
  RANDOM_INIT = 'random'
  KMEANS_PLUS_PLUS_INIT = 'kmeans_plus_plus'
  KMC2_INIT = 'kmc2'  # not on the original's class (it refused 'kmc2'); TensorFlow has it
  SCORE = 'score'
  CLUSTER_INDEX = 'cluster_index'
  ALL_DISTANCES = 'all_distances'
  CLUSTER_CENTERS_VAR_NAME = 'clusters'

  def __init__(self, num_clusters, model_dir=None, initial_clusters=RANDOM_INIT,
               distance_metric=SQUARED_EUCLIDEAN_DISTANCE, seed=None, use_mini_batch=True,
               mini_batch_steps_per_iteration=1, kmeans_plus_plus_num_retries=2,
               relative_tolerance=None, config=None, feature_columns=None):
    _check_arguments(num_clusters, initial_clusters, distance_metric, seed,
                     kmeans_plus_plus_num_retries, relative_tolerance)
    self._distance_metric = distance_metric
    settings = dict(num_clusters=num_clusters, initial_clusters=initial_clusters,
                    distance_metric=distance_metric, seed=seed, use_mini_batch=use_mini_batch,
                    mini_batch_steps_per_iteration=mini_batch_steps_per_iteration,
                    kmeans_plus_plus_num_retries=kmeans_plus_plus_num_retries,
                    relative_tolerance=relative_tolerance, feature_columns=feature_columns)

    def model_fn(features, labels, mode, config):
      del labels  # clustering has none; input_fn may return (features, None) or features
      return _model_spec(features, mode, config, **settings)

    super().__init__(model_fn=model_fn, model_dir=model_dir, config=config)

  def _one_key(self, input_fn, key):
    for prediction in self.predict(input_fn=input_fn, predict_keys=[key]):
      yield prediction[key]

  def predict_cluster_index(self, input_fn):
    """Yields, for each input point, the index of its nearest cluster center."""
    yield from self._one_key(input_fn, KMeans.CLUSTER_INDEX)

  def score(self, input_fn):
    """The sum of the distances from each point of `input_fn`'s first batch to its nearest
    center (squared distances for SQUARED_EUCLIDEAN_DISTANCE; sklearn's is the negative)."""
    return self.evaluate(input_fn=input_fn, steps=1)[KMeans.SCORE]

  def transform(self, input_fn):
    """Yields, for each input point, its distances to every center: Euclidean (the square
    root of the squared distances the model computes) for SQUARED_EUCLIDEAN_DISTANCE, cosine
    distances for COSINE_DISTANCE."""
    for distances in self._one_key(input_fn, KMeans.ALL_DISTANCES):
      if self._distance_metric == KMeans.SQUARED_EUCLIDEAN_DISTANCE:
        yield np.sqrt(distances)
      else:
        yield distances

  def cluster_centers(self):
    """The cluster centers, [num_clusters, dimensions], from the latest checkpoint."""
    return self.get_variable_value(KMeans.CLUSTER_CENTERS_VAR_NAME)


KMeansClustering = KMeans  # the original's class name in its module


def _model_spec(features, mode, config, num_clusters, initial_clusters, distance_metric, seed,
                use_mini_batch, mini_batch_steps_per_iteration, kmeans_plus_plus_num_retries,
                relative_tolerance, feature_columns):
  points = _features_as_points(features, feature_columns)
  samples = initial_clusters in (KMeans.KMEANS_PLUS_PLUS_INIT, KMeans.KMC2_INIT) \
      if isinstance(initial_clusters, str) else False
  graph = _tf_internals.kmeans_graph(
      inputs=points, num_clusters=num_clusters, initial_clusters=initial_clusters,
      distance_metric=distance_metric, use_mini_batch=use_mini_batch,
      mini_batch_steps_per_iteration=mini_batch_steps_per_iteration,
      random_seed=_op_seed(seed) if samples else seed,
      kmeans_plus_plus_num_retries=kmeans_plus_plus_num_retries)
  all_distances, nearest, distances, initialized, init_op, update = graph.training_graph()
  all_distances, nearest = all_distances[0], nearest[0]

  loss = tf.reduce_sum(distances)
  _v1.summary.scalar('loss/raw', loss)
  step = _v1.assign_add(_v1.train.get_global_step(), 1)
  with tf.control_dependencies([update, step]):
    train_op = tf.identity(loss)

  hooks = [_ChooseInitialCenters(init_op, initialized, config.is_chief)]
  if relative_tolerance is not None:
    hooks.append(_StopOnRelativeLossChange(loss, relative_tolerance))
  return EstimatorSpec(
      mode=mode,
      predictions={KMeans.ALL_DISTANCES: all_distances, KMeans.CLUSTER_INDEX: nearest},
      loss=loss, train_op=train_op,
      # Only in EVAL: the metric means nothing elsewhere, and an export refuses metrics.
      eval_metric_ops={KMeans.SCORE: _v1.metrics.mean(loss)} if mode == ModeKeys.EVAL else None,
      training_hooks=hooks,
      export_outputs={
          KMeans.ALL_DISTANCES: export.PredictOutput(all_distances),
          KMeans.CLUSTER_INDEX: export.PredictOutput(nearest),
          tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: export.PredictOutput(nearest)})


_INITS = (KMeans.RANDOM_INIT, KMeans.KMEANS_PLUS_PLUS_INIT, KMeans.KMC2_INIT)
_METRICS = (KMeans.SQUARED_EUCLIDEAN_DISTANCE, KMeans.COSINE_DISTANCE)


def _check_arguments(num_clusters, initial_clusters, distance_metric, seed,
                     kmeans_plus_plus_num_retries, relative_tolerance):
  """The checks of the original's constructor, and at construction the mistakes it only
  reported (less clearly) when the first graph was built."""
  if isinstance(initial_clusters, str):
    if initial_clusters not in _INITS:
      raise errors.value_error(
          'Unsupported initialization algorithm %r.' % initial_clusters,
          'Pass KMeans.RANDOM_INIT, KMeans.KMEANS_PLUS_PLUS_INIT, KMeans.KMC2_INIT, a '
          '[num_clusters, dimensions] array or Tensor of initial centers, or a callable '
          'f(inputs, k) returning up to k centers.', initial_clusters=initial_clusters)
    _check_num_clusters(num_clusters)
  elif callable(initial_clusters):
    _check_num_clusters(num_clusters)
  else:
    _check_centers(initial_clusters)
  if distance_metric not in _METRICS:
    raise errors.value_error(
        'Unsupported distance metric %r.' % (distance_metric,),
        'Pass KMeans.SQUARED_EUCLIDEAN_DISTANCE or KMeans.COSINE_DISTANCE.',
        distance_metric=distance_metric)
  if seed is not None and not errors.is_int(seed):
    raise errors.type_error('seed must be a Python integer or None.', seed=seed)
  if isinstance(initial_clusters, str) and initial_clusters == KMeans.KMEANS_PLUS_PLUS_INIT and \
      not errors.is_int(kmeans_plus_plus_num_retries):
    raise errors.type_error('kmeans_plus_plus_num_retries must be an integer (negative: '
                            'O(log(num_clusters)) retries).',
                            kmeans_plus_plus_num_retries=kmeans_plus_plus_num_retries)
  if relative_tolerance is not None and \
      (isinstance(relative_tolerance, bool) or
       not isinstance(relative_tolerance, (int, float, np.integer, np.floating))):
    raise errors.type_error('relative_tolerance must be a number or None.',
                            relative_tolerance=relative_tolerance)


def _check_num_clusters(num_clusters):
  if isinstance(num_clusters, (tf.Tensor, tf.Variable)):
    return
  if not errors.is_int(num_clusters):
    raise errors.type_error(
        'num_clusters must be an integer (or an integer Tensor).',
        'Pass the number of clusters, or initial centers as initial_clusters.',
        num_clusters=num_clusters)
  if num_clusters < 1:
    raise errors.value_error('num_clusters must be at least 1.', num_clusters=num_clusters)


def _check_centers(initial_clusters):
  """Initial centers given as values: a [num_clusters, dimensions] array or Tensor."""
  shape = getattr(initial_clusters, 'shape', None)
  if shape is None:
    try:
      shape = np.shape(initial_clusters)
    except Exception:  # pylint: disable=broad-except
      shape = None
  rank = None if shape is None else getattr(tf.TensorShape(shape), 'rank', None)
  if rank is not None and rank != 2 or isinstance(initial_clusters, (bool, int, float)):
    raise errors.value_error(
        'initial_clusters given as centers must be a [num_clusters, dimensions] array or '
        'Tensor.', 'Pass a 2-D array of centers, or one of KMeans.RANDOM_INIT, '
        'KMeans.KMEANS_PLUS_PLUS_INIT, KMeans.KMC2_INIT, or a callable f(inputs, k).',
        initial_clusters=initial_clusters)
