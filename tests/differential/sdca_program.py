"""Linear models trained with `LinearSDCA`, run on the original (`tf.estimator`, TF 2.15) and on
ours (TF 2.21) by tests/test_sdca_differential.py.

Usage: sdca_program.py IMPL SPEC_JSON OUT_JSON..., IMPL in {orig, ours}.  SPEC is a list of tasks:
  {'task': 'write', 'model': M, 'dir': D, 'steps': N}: train M for N steps in D; report the
      training losses, every checkpoint variable (names, values), evaluation and predictions.
  {'task': 'resume', 'model': M, 'dir': D, 'steps': K}: D holds the other implementation's
      model_dir: report it as loaded, train K more steps and report the checkpoint again.
"""
import sys

import os
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=wrong-import-position
import tensorflow as tf  # pylint: disable=wrong-import-position
from program_results import jsonable, run_tasks  # pylint: disable=wrong-import-position

IMPL = sys.argv[1]
if IMPL == 'orig':
  E, E1 = tf.estimator, tf.compat.v1.estimator
  SDCA = tf.estimator.experimental.LinearSDCA
  RUN_CONFIG = tf.estimator.RunConfig
else:
  import tpu_estimator  # pylint: disable=import-error
  from tpu_estimator import canned as E  # pylint: disable=import-error
  from tpu_estimator.canned import v1 as E1  # pylint: disable=import-error
  SDCA = E.LinearSDCA
  RUN_CONFIG = tpu_estimator.EstimatorRunConfig

fc = tf.feature_column
N_EXAMPLES, BATCH = 48, 24
COLORS = ['red', 'green', 'blue', 'black']


def data():
  rng = np.random.RandomState(3)
  x = rng.uniform(-1, 1, N_EXAMPLES).astype(np.float32)
  pair = rng.uniform(-1, 1, (N_EXAMPLES, 2)).astype(np.float32)
  color = rng.choice(COLORS + ['purple'], N_EXAMPLES)  # purple: out of vocabulary
  city = rng.choice(['a', 'b', 'c', 'd', 'e', 'f'], N_EXAMPLES)
  weight = rng.uniform(0.5, 2.0, N_EXAMPLES).astype(np.float32)
  ids = np.array(['id%d' % i for i in range(N_EXAMPLES)])
  score = 1.5 * x - pair[:, 1] + np.isin(color, ['red', 'blue']) - 0.5
  label = (score + rng.normal(0, 0.3, N_EXAMPLES) > 0).astype(np.int64)
  value = (2. * x + pair[:, 0] + np.isin(city, ['a', 'b']) +
           rng.normal(0, 0.1, N_EXAMPLES)).astype(np.float32)
  features = {'x': x, 'pair': pair, 'color': color, 'city': city, 'weight': weight,
              'example_id': ids}
  return features, label, value


def columns():
  return [fc.numeric_column('x'), fc.numeric_column('pair', shape=[2]),
          fc.categorical_column_with_vocabulary_list('color', COLORS),
          fc.categorical_column_with_hash_bucket('city', 10),
          fc.bucketized_column(fc.numeric_column('x'), [-0.5, 0., 0.5])]


def build(model, model_dir):
  config = RUN_CONFIG(tf_random_seed=1, save_summary_steps=1)
  if model.endswith('classifier'):
    optimizer = SDCA('example_id', symmetric_l2_regularization=0.5)
  else:
    optimizer = SDCA('example_id', symmetric_l1_regularization=0.05,
                     symmetric_l2_regularization=1.0, num_table_shards=2)
  family = E1 if model.startswith('v1_') else E
  if model.endswith('classifier'):
    return family.LinearClassifier(columns(), model_dir=model_dir, weight_column='weight',
                                   optimizer=optimizer, config=config)
  return family.LinearRegressor(columns(), model_dir=model_dir, optimizer=optimizer,
                                config=config)


def input_fns(model):
  features, label, value = data()
  labels = value if model.endswith('regressor') else label

  def train_input_fn():
    return tf.data.Dataset.from_tensor_slices((dict(features), labels)).batch(BATCH).repeat()

  def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices((dict(features), labels)).batch(BATCH)

  def predict_input_fn():
    return tf.data.Dataset.from_tensor_slices(dict(features)).batch(BATCH)

  return train_input_fn, eval_input_fn, predict_input_fn


def train(est, model, steps):
  """Trains `steps` steps; returns the training loss of each (the `loss` summaries, written at
  every step)."""
  import glob  # pylint: disable=import-outside-toplevel
  before = set(glob.glob(os.path.join(est.model_dir, 'events.out.tfevents.*')))
  est.train(input_fns(model)[0], steps=steps)
  losses = {}
  for path in sorted(set(glob.glob(os.path.join(est.model_dir, 'events.out.tfevents.*'))) -
                     before):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == 'loss':
          losses[event.step] = float(tf.make_ndarray(value.tensor)) if value.HasField(
              'tensor') else value.simple_value
  return [losses[step] for step in sorted(losses)]


def report(est, model, run=True):
  """Every checkpoint value (the state table as {hashed example id: state}, without its empty
  buckets), and with `run` the evaluation and predictions."""
  _, eval_input_fn, predict_input_fn = input_fns(model)
  variables, shapes, tables = {}, {}, {}
  for name, shape in tf.train.list_variables(est.model_dir):
    value = tf.train.load_variable(est.model_dir, name)
    shapes[name] = [list(shape), str(value.dtype)]
    if name.startswith('ShardedMutableHashTable') and name.endswith('-keys'):
      values = tf.train.load_variable(est.model_dir, name[:-len('keys')] + 'values')
      tables[name[:-len('-keys')]] = {'%d,%d' % tuple(k): jsonable(v)
                                      for k, v in zip(value.tolist(), values)
                                      if tuple(k) != (0, 0)}
    elif not name.startswith('ShardedMutableHashTable'):
      variables[name] = jsonable(value)
  result = {'variable_names': est.get_variable_names(), 'shapes': shapes,
            'variables': variables, 'state_tables': tables}
  if run:
    result['evaluation'] = jsonable(est.evaluate(eval_input_fn))
    result['predictions'] = [jsonable(p) for p in est.predict(predict_input_fn)][:6]
  return result


def write(task):
  est = build(task['model'], task['dir'])
  losses = train(est, task['model'], task['steps'])
  return {'losses': losses, 'trained': report(est, task['model'])}


def resume(task):
  est = build(task['model'], task['dir'])
  loaded = report(est, task['model'])
  losses = train(est, task['model'], task['steps'])
  return {'loaded': loaded, 'losses': losses, 'more': report(est, task['model'], run=False)}


if __name__ == '__main__':
  run_tasks(write, resume)
