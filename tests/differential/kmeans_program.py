"""A k-means program run on the original (`tf.compat.v1.estimator.experimental.KMeans`, TF 2.15
+ tensorflow-estimator 2.15) and on ours (the same name after `tpu_estimator.compat.install()`,
TF 2.21) by tests/test_kmeans_differential.py.

Usage: kmeans_program.py IMPL SPEC_JSON OUT_JSON..., IMPL in {orig, ours}.  SPEC is a list of
tasks:
  {'task': 'write', 'model': M, 'dir': D, 'steps': N, 'export': E, 'more': K}: train M for N
      steps in D; report centers, variables, evaluation and predictions; with E also score,
      predict_cluster_index, transform and the signatures of an export to E; with K the
      centers after K more steps in a copy of D.
  {'task': 'resume', 'model': M, 'dir': D, 'steps': K}: D holds the other implementation's
      model_dir: report its centers and predictions, then train K more steps and report the
      centers again.
Data, seeds and input_fns are identical on both sides.
"""
import os
import shutil
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=wrong-import-position
import tensorflow as tf  # pylint: disable=wrong-import-position
from program_results import run_tasks  # pylint: disable=wrong-import-position

IMPL = sys.argv[1]
PATHS = {}
if IMPL == 'ours':  # the original's names, resolved by compat.install()
  import tpu_estimator.compat  # pylint: disable=import-error
  tpu_estimator.compat.install()
  from tensorflow_estimator.python.estimator.canned import kmeans as kmeans_module  # pylint: disable=import-error
  import tpu_estimator.canned  # pylint: disable=import-error
  PATHS = {
      'v1 path is ours': tf.compat.v1.estimator.experimental.KMeans is
                         tpu_estimator.canned.KMeans,
      'module path is ours': kmeans_module.KMeansClustering is tpu_estimator.canned.KMeans}
KMeans = tf.compat.v1.estimator.experimental.KMeans

N_POINTS, BATCH, DIMS = 60, 20, 3


CENTERS = np.array([[0., 0., 5.], [6., 1., 0.], [-4., 5., 1.], [3., -5., -3.]], np.float32)


def points():
  rng = np.random.RandomState(11)
  labels = rng.randint(0, len(CENTERS), N_POINTS)
  return (CENTERS[labels] + rng.normal(0, 0.6, (N_POINTS, DIMS))).astype(np.float32)


POINTS = points()


def whole(repeat=True):
  def input_fn():
    dataset = tf.data.Dataset.from_tensors(POINTS)
    return dataset.repeat() if repeat else dataset
  return input_fn


def batches(repeat=True):
  def input_fn():
    dataset = tf.data.Dataset.from_tensor_slices(POINTS).batch(BATCH)
    return dataset.repeat() if repeat else dataset
  return input_fn


def dict_batches(repeat=True):  # columns 'a' (2) and 'b' (1): concatenated in key order
  def input_fn():
    dataset = tf.data.Dataset.from_tensor_slices(
        {'b': POINTS[:, 2:], 'a': POINTS[:, :2]}).batch(BATCH)
    return dataset.repeat() if repeat else dataset
  return input_fn


# model -> (constructor arguments, training input_fn, prediction input_fn)
MODELS = {
    'random_full_euclidean': (dict(num_clusters=4, seed=3, use_mini_batch=False), whole,
                              batches),
    'kmeanspp_full_cosine': (dict(num_clusters=4, seed=7, use_mini_batch=False,
                                  initial_clusters='kmeans_plus_plus',
                                  distance_metric='cosine'), whole, batches),
    'random_mini_cosine': (dict(num_clusters=4, seed=5, distance_metric='cosine',
                                mini_batch_steps_per_iteration=2), batches, batches),
    'kmeanspp_mini_dict_euclidean': (dict(num_clusters=4, seed=9,
                                          initial_clusters='kmeans_plus_plus',
                                          kmeans_plus_plus_num_retries=-1), dict_batches,
                                     dict_batches),
    'given_centers_tolerance': (dict(num_clusters=None, use_mini_batch=False,
                                     initial_clusters=POINTS[:4] + 0.5,
                                     relative_tolerance=1e-3), whole, batches),
}


def make(model, model_dir):
  args = dict(MODELS[model][0])
  if args['num_clusters'] is None:
    args['num_clusters'] = 4  # ignored: the centers are given
  # One thread runs the ops of a step in one order: TensorFlow's mini-batch step reads and
  # updates the centers and counts with no order between the two, so with several threads
  # the original's own runs differ from each other.
  serial = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=1,
                                    intra_op_parallelism_threads=1)
  config = tf.estimator.RunConfig(save_summary_steps=None, log_step_count_steps=None,
                                  session_config=serial)
  return KMeans(model_dir=model_dir, config=config, **args)


def floats(value):
  return np.asarray(value, np.float64).tolist()


def predictions(estimator, model, helpers=False):
  """predict()'s keys, indexes and distances; with `helpers`, predict_cluster_index and
  transform too."""
  predict_fn = MODELS[model][2](repeat=False)
  results = list(estimator.predict(predict_fn))
  result = {'keys': sorted(results[0]),
            'cluster_index': [int(r['cluster_index']) for r in results],
            'all_distances': floats([r['all_distances'] for r in results])}
  if helpers:
    result['predict_cluster_index'] = [int(i) for i in
                                       estimator.predict_cluster_index(predict_fn)]
    result['transform'] = floats(list(estimator.transform(predict_fn)))
  return result


def variables(estimator):
  return {name: list(np.shape(estimator.get_variable_value(name)))
          for name in estimator.get_variable_names()}


def signatures(path):
  loaded = tf.saved_model.load(path)
  result = {}
  for key, function in loaded.signatures.items():
    inputs = function.structured_input_signature[1]
    result[key] = {'inputs': sorted(inputs),
                   'outputs': {k: v.dtype.name for k, v in function.structured_outputs.items()}}
  some = loaded.signatures['serving_default']
  result['serving_default_run'] = [
      int(i) for i in some(**{sorted(some.structured_input_signature[1])[0]:
                              tf.constant(POINTS[:6])})['output'].numpy()]
  return result


def export(estimator, export_dir):
  def serving_input_fn():
    x = tf.compat.v1.placeholder(tf.float32, [None, DIMS], name='points')
    return tf.compat.v1.estimator.export.TensorServingInputReceiver(x, {'points': x})
  path = estimator.export_saved_model(export_dir, serving_input_fn)
  return signatures(path.decode() if isinstance(path, bytes) else path)


def write(task):
  model, steps, helpers = task['model'], task['steps'], bool(task.get('export'))
  estimator = make(model, task['dir'])
  estimator.train(MODELS[model][1](), steps=steps)
  evaluation = estimator.evaluate(MODELS[model][1](), steps=1)
  result = {'centers': floats(estimator.cluster_centers()),
            'global_step': int(estimator.get_variable_value('global_step')),
            'variables': variables(estimator),
            'evaluate': {k: float(v) for k, v in evaluation.items()},
            'predictions': predictions(estimator, model, helpers)}
  if helpers:
    result['score'] = float(estimator.score(MODELS[model][1]()))
    result['export'] = export(estimator, task['export'])
  if task.get('more'):  # K more steps in a copy: what a resumed model_dir must give
    shutil.copytree(task['dir'], task['dir'] + '_more')
    more = make(model, task['dir'] + '_more')
    more.train(MODELS[model][1](), steps=task['more'])
    result['centers_more'] = floats(more.cluster_centers())
  return result


def resume(task):
  model = task['model']
  estimator = make(model, task['dir'])
  before = {'centers': floats(estimator.cluster_centers()),
            'predictions': predictions(estimator, model)}
  estimator.train(MODELS[model][1](), steps=task['steps'])
  return {'before': before, 'centers_after': floats(estimator.cluster_centers()),
          'global_step': int(estimator.get_variable_value('global_step'))}


if __name__ == '__main__':
  run_tasks(write, resume, paths=PATHS)
