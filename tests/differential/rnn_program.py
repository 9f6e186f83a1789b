"""The RNN estimators on the original (`tf.estimator.experimental`, TF 2.15) and on ours
(`tpu_estimator.canned`, TF 2.21), run by tests/test_rnn_differential.py.

Usage: rnn_program.py IMPL SPEC_JSON OUT_JSON..., IMPL in {orig, ours}.  SPEC is a list of tasks:
  {'task': 'write', 'model': M, 'dir': D, 'steps': N, 'more': K}: train M for N steps in D;
      report its variables (names and shapes), evaluation, predictions and export signatures;
      then train K more steps in a copy (D + '_more') and evaluate again.
  {'task': 'resume', 'model': M, 'dir': D, 'steps': K}: D is a copy of a model_dir (either
      side's): evaluate and predict it, train K more steps, evaluate again.
Data, columns and input_fns are identical on both sides, so one checkpoint gives one result.
"""
import os
import shutil
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=wrong-import-position
import tensorflow as tf  # pylint: disable=wrong-import-position
from program_results import jsonable, run_tasks  # pylint: disable=wrong-import-position

IMPL = sys.argv[1]
if IMPL == 'orig':
  E = tf.estimator
  X = tf.estimator.experimental
  from tensorflow_estimator.python.estimator.head import sequential_head as S  # pylint: disable=import-error
  EXPORT = tf.estimator.export
  RUN_CONFIG = tf.estimator.RunConfig
else:
  import tpu_estimator  # pylint: disable=import-error
  from tpu_estimator import canned as E  # pylint: disable=import-error
  X = E
  from tpu_estimator.canned import sequential_head as S  # pylint: disable=import-error
  EXPORT = tpu_estimator.export
  RUN_CONFIG = tpu_estimator.EstimatorRunConfig

fc = tf.feature_column
N, T, BATCH = 24, 5, 8
WORDS = ['a', 'b', 'c', 'd']


def data():
  rng = np.random.RandomState(11)
  lengths = rng.randint(1, T + 1, N).astype(np.int64)
  lengths[::BATCH] = T  # every batch has a full-length sequence
  price = rng.normal(size=(N, T)).astype(np.float32)
  words = rng.choice(WORDS, size=(N, T))
  context = rng.normal(size=(N, 1)).astype(np.float32)
  kind = rng.randint(0, 3, size=(N, 1)).astype(np.int64)
  weight = rng.uniform(0.5, 2., size=(N, 1)).astype(np.float32)
  steps = np.arange(T)[None, :] < lengths[:, None]
  total = (price * steps).sum(1) + (words == 'a').sum(1) * 0.3 + context[:, 0]
  labels = {
      'binary': np.where(total > 0.5, 'pos', 'neg'),
      'value': (0.5 * total).astype(np.float32),
      'per_step': ((price > 0).astype(np.int64) + (words == 'b')).astype(np.int64),
  }
  features = {'price': price, 'word': words, 'length': lengths, 'context': context,
              'kind': kind, 'weight': weight}
  return features, labels


def sequence_columns():
  return [fc.sequence_numeric_column('price'),
          fc.embedding_column(fc.sequence_categorical_column_with_vocabulary_list('word', WORDS),
                              3)]


def build(model, model_dir):
  config = RUN_CONFIG(tf_random_seed=3)
  if model == 'lstm_classifier':
    return X.RNNClassifier(sequence_columns(), [fc.numeric_column('context')], units=[4],
                           cell_type='lstm', model_dir=model_dir, weight_column='weight',
                           label_vocabulary=['neg', 'pos'], config=config)
  if model == 'gru_regressor':
    return X.RNNEstimator(E.RegressionHead(), sequence_columns(), units=4, cell_type='gru',
                          model_dir=model_dir, optimizer='Adam', config=config)
  if model == 'sequence_multiclass':
    kind = fc.embedding_column(fc.categorical_column_with_identity('kind', 3), 2)
    return X.RNNClassifier(sequence_columns(), [kind], units=[4, 3], cell_type='simple_rnn',
                           return_sequences=True, n_classes=3, model_dir=model_dir,
                           config=config)
  raise ValueError(model)


def _sparse(dense, lengths):
  index = tf.where(tf.sequence_mask(lengths, T))
  return tf.SparseTensor(index, tf.gather_nd(dense, index), tf.shape(dense, out_type=tf.int64))


def input_fn(model, with_labels=True):
  features, labels = data()
  label = labels[{'lstm_classifier': 'binary', 'gru_regressor': 'value',
                  'sequence_multiclass': 'per_step'}[model]]

  def to_model(batch, label_batch=None):
    out = {'price': _sparse(batch['price'], batch['length']),
           'word': _sparse(batch['word'], batch['length']),
           'context': batch['context'], 'kind': batch['kind'], 'weight': batch['weight']}
    return out if label_batch is None else (out, label_batch)

  def fn():
    if with_labels:
      return tf.data.Dataset.from_tensor_slices((features, label)).batch(BATCH).map(to_model)
    return tf.data.Dataset.from_tensor_slices(features).batch(BATCH).map(to_model)
  return fn


def signatures(est, model_dir):
  spec = fc.make_parse_example_spec(sequence_columns() + [
      fc.numeric_column('context'), fc.categorical_column_with_identity('kind', 3)])
  export_dir = est.export_saved_model(os.path.join(model_dir, 'export'),
                                      EXPORT.build_parsing_serving_input_receiver_fn(spec))
  from tensorflow.python.tools import saved_model_utils  # pylint: disable=import-outside-toplevel
  meta = saved_model_utils.get_meta_graph_def(os.fsdecode(export_dir), 'serve')
  return {key: {'method': sig.method_name, 'inputs': sorted(sig.inputs),
                'outputs': sorted(sig.outputs)} for key, sig in meta.signature_def.items()}


def report(est, model, predictions=True):
  result = {'evaluation': jsonable(est.evaluate(input_fn(model)))}
  if predictions:
    result['predictions'] = [jsonable(p) for p in est.predict(input_fn(model, False))][:6]
  return result


def write(task):
  est = build(task['model'], task['dir'])
  est.train(input_fn(task['model']), steps=task['steps'])
  result = report(est, task['model'])
  result['variables'] = {name: list(est.get_variable_value(name).shape)
                         for name in est.get_variable_names()}
  result['signatures'] = signatures(est, task['dir'])
  more_dir = task['dir'] + '_more'
  shutil.copytree(task['dir'], more_dir, ignore=shutil.ignore_patterns('export'))
  more = build(task['model'], more_dir)
  more.train(input_fn(task['model']), steps=task['more'])
  result['more'] = report(more, task['model'], predictions=False)
  return result


def resume(task):
  est = build(task['model'], task['dir'])
  loaded = report(est, task['model'])
  est.train(input_fn(task['model']), steps=task['steps'])
  return {'loaded': loaded, 'more': report(est, task['model'], predictions=False)}


if __name__ == '__main__':
  run_tasks(write, resume)
