"""A census-style canned-estimator program run on the original (`tf.estimator`, TF 2.15) and on
ours (`tpu_estimator.canned`, TF 2.21) by tests/test_canned_differential.py.

Usage: canned_program.py IMPL SPEC_JSON OUT_JSON..., IMPL in {orig, ours}.  SPEC is a list of
tasks:
  {'task': 'write', 'model': M, 'dir': D, 'steps': N, 'more': K, 'resumed': R}: train M for N
      steps in D and report (variable names, evaluation, predictions, export signatures); if R
      (the other side resumes D), also copy D to D + '_more', train K more steps there and
      report that too.
  {'task': 'resume', 'model': M, 'dir': D, 'steps': K}: D holds the other implementation's
      N-step model_dir: evaluate and predict it, then train K more steps and evaluate again.
Data, feature columns and input_fns are identical on both sides, so evaluations of one
checkpoint, and training continued from one checkpoint, must agree.
"""
import os
import shutil
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=wrong-import-position
import tensorflow as tf  # pylint: disable=wrong-import-position
from program_results import run_tasks  # pylint: disable=wrong-import-position

IMPL = sys.argv[1]
if IMPL == 'orig':
  E = tf.estimator
  E1 = tf.compat.v1.estimator
  EXPORT = tf.estimator.export
  RUN_CONFIG = tf.estimator.RunConfig
else:
  import tpu_estimator  # pylint: disable=import-error
  from tpu_estimator import canned as E  # pylint: disable=import-error
  from tpu_estimator.canned import v1 as E1  # pylint: disable=import-error
  EXPORT = tpu_estimator.export
  RUN_CONFIG = tpu_estimator.EstimatorRunConfig

fc = tf.feature_column
N_EXAMPLES = 96
BATCH = 16
EDUCATION = ['Bachelors', 'HS-grad', 'Masters', 'Doctorate', 'Some-college']
OCCUPATION = ['Tech-support', 'Craft-repair', 'Sales', 'Exec-managerial', 'Farming', 'Other']


def census_data():
  rng = np.random.RandomState(7)
  age = rng.uniform(17, 80, N_EXAMPLES).astype(np.float32)
  hours = rng.uniform(10, 70, N_EXAMPLES).astype(np.float32)
  education = rng.choice(EDUCATION, N_EXAMPLES)
  occupation = rng.choice(OCCUPATION, N_EXAMPLES)
  score = (age - 45) / 15 + (hours - 40) / 15 + np.isin(education, ['Masters', 'Doctorate'])
  income = np.where(score + rng.normal(0, 0.5, N_EXAMPLES) > 0.3, '>50K', '<=50K')
  weight = rng.uniform(0.5, 2.0, N_EXAMPLES).astype(np.float32)
  features = {'age': age, 'hours_per_week': hours, 'education': education,
              'occupation': occupation, 'weight': weight}
  value = (0.05 * age + 0.02 * hours + rng.normal(0, 0.2, N_EXAMPLES)).astype(np.float32)
  return features, income, value


def columns():
  age = fc.numeric_column('age')
  hours = fc.numeric_column('hours_per_week')
  education = fc.categorical_column_with_vocabulary_list('education', EDUCATION)
  occupation = fc.categorical_column_with_hash_bucket('occupation', 50)
  age_buckets = fc.bucketized_column(age, [25., 35., 45., 55., 65.])
  deep = [age, hours, fc.indicator_column(education), fc.embedding_column(occupation, 4)]
  wide = [age_buckets, education, occupation,
          fc.crossed_column([age_buckets, 'education'], hash_bucket_size=40)]
  return deep, wide


def build(model, model_dir):
  deep, wide = columns()
  config = RUN_CONFIG(tf_random_seed=1)
  vocab = ['<=50K', '>50K']
  if model == 'dnn_classifier':
    return E.DNNClassifier([8, 4], deep, model_dir=model_dir, weight_column='weight',
                           label_vocabulary=vocab, config=config)
  if model == 'dnn_batch_norm':
    return E.DNNClassifier([6], deep, model_dir=model_dir, batch_norm=True, n_classes=2,
                           optimizer='Adam', config=config)
  if model == 'dnn_regressor':
    return E.DNNRegressor([8], deep, model_dir=model_dir, weight_column='weight', config=config)
  if model == 'linear_classifier':
    return E.LinearClassifier(wide + [fc.numeric_column('hours_per_week')], model_dir=model_dir,
                              weight_column='weight', label_vocabulary=vocab, config=config)
  if model == 'linear_regressor':
    return E.LinearRegressor(wide, model_dir=model_dir, config=config, optimizer='Ftrl')
  if model == 'dnn_multiclass':
    return E.DNNClassifier([8], deep, model_dir=model_dir, n_classes=3, config=config,
                           loss_reduction='sum')
  if model == 'wide_deep_classifier':
    return E.DNNLinearCombinedClassifier(
        model_dir=model_dir, linear_feature_columns=wide, dnn_feature_columns=deep,
        dnn_hidden_units=[8, 4], weight_column='weight', label_vocabulary=vocab, config=config)
  if model == 'wide_deep_regressor':
    return E.DNNLinearCombinedRegressor(
        model_dir=model_dir, linear_feature_columns=wide, dnn_feature_columns=deep,
        dnn_hidden_units=[6], config=config)
  if model == 'baseline_classifier':
    return E.BaselineClassifier(model_dir=model_dir, n_classes=3, config=config)
  if model == 'baseline_regressor':
    return E.BaselineRegressor(model_dir=model_dir, config=config)
  if model == 'multi_label':
    return E.DNNEstimator(E.MultiLabelHead(3, thresholds=[0.4], weight_column='weight',
                                           classes_for_class_based_metrics=[1]),
                          [6], deep, model_dir=model_dir, config=config)
  if model == 'multi_head':
    head = E.MultiHead([E.BinaryClassHead(name='income', label_vocabulary=vocab),
                        E.PoissonRegressionHead(name='count')], head_weights=[1., 0.5])
    return E.DNNEstimator(head, [6], deep, model_dir=model_dir, config=config)
  # The TF1-semantics classes (summed loss, tf.compat.v1.train optimizers, partitioners).
  if model == 'v1_dnn_classifier':
    return E1.DNNClassifier([8, 4], deep, model_dir=model_dir, weight_column='weight',
                            label_vocabulary=vocab, config=config)
  if model == 'v1_linear_regressor':
    return E1.LinearRegressor(wide, model_dir=model_dir, weight_column='weight', config=config)
  if model == 'v1_wide_deep_classifier':
    return E1.DNNLinearCombinedClassifier(
        model_dir=model_dir, linear_feature_columns=wide, dnn_feature_columns=deep,
        dnn_hidden_units=[8, 4], label_vocabulary=vocab, config=config)
  raise ValueError(model)


def labels_for(model, income, value):
  if model.endswith('regressor'):
    return value
  if model in ('dnn_multiclass', 'baseline_classifier'):
    return (np.searchsorted([35., 55.], census_data()[0]['age'])).astype(np.int64)
  if model == 'dnn_batch_norm':
    return (income == '>50K').astype(np.int64)
  if model == 'multi_label':
    age = census_data()[0]['age']
    return np.stack([age > 40, income == '>50K', age < 30], axis=1).astype(np.int64)
  if model == 'multi_head':
    return {'income': income, 'count': np.round(value).astype(np.float32)}
  return income


def input_fns(model):
  features, income, value = census_data()
  labels = labels_for(model, income, value)

  if model.startswith('baseline'):
    # The original's baselines fail ("iterator has not been initialized") with more than one
    # feature and on repeated datasets: one feature, the data set tiled instead of repeated.
    features = {'age': features['age']}

  def train_input_fn():
    if model.startswith('baseline'):
      tiled = {k: np.tile(v, 3) for k, v in features.items()}
      return tf.data.Dataset.from_tensor_slices((tiled, np.tile(labels, 3))).batch(BATCH)
    return tf.data.Dataset.from_tensor_slices((dict(features), labels)).batch(BATCH).repeat()

  def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices((dict(features), labels)).batch(BATCH)

  def predict_input_fn():
    return tf.data.Dataset.from_tensor_slices(dict(features)).batch(BATCH)

  return train_input_fn, eval_input_fn, predict_input_fn


def plain(value):
  if isinstance(value, dict):  # MultiHead predictions are keyed (head name, key)
    return {'/'.join(k) if isinstance(k, tuple) else k: plain(v) for k, v in value.items()}
  if isinstance(value, bytes):
    return value.decode()
  if isinstance(value, (np.ndarray, list, tuple)):
    return [plain(v) for v in np.asarray(value).tolist()]
  if isinstance(value, (np.integer, int)) and not isinstance(value, bool):
    return int(value)
  if isinstance(value, (np.floating, float)):
    return float(value)
  return value


def signatures(est, model_dir):
  deep, wide = columns()
  spec = fc.make_parse_example_spec(deep + wide + [fc.numeric_column('weight')])
  export_dir = est.export_saved_model(os.path.join(model_dir, 'export'),
                                      EXPORT.build_parsing_serving_input_receiver_fn(spec))
  from tensorflow.python.tools import saved_model_utils  # pylint: disable=import-outside-toplevel
  meta = saved_model_utils.get_meta_graph_def(os.fsdecode(export_dir), 'serve')
  return {key: {'method': sig.method_name, 'inputs': sorted(sig.inputs),
                'outputs': sorted(sig.outputs)}
          for key, sig in meta.signature_def.items()}


def report(est, model, model_dir, export=False):
  _, eval_input_fn, predict_input_fn = input_fns(model)
  result = {'variable_names': est.get_variable_names(),
            'evaluation': plain(est.evaluate(eval_input_fn)),
            'predictions': [plain(p) for p in est.predict(predict_input_fn)][:8]}
  if export:
    result['signatures'] = signatures(est, model_dir)
  return result


def write(task):
  model, model_dir = task['model'], task['dir']
  train_input_fn = input_fns(model)[0]
  est = build(model, model_dir)
  est.train(train_input_fn, steps=task['steps'])
  first = report(est, model, model_dir, export=True)
  if not task['resumed']:  # its continued training is compared only where it is resumed
    return {'trained': first}
  more_dir = model_dir + '_more'
  shutil.copytree(model_dir, more_dir)
  more = build(model, more_dir)
  more.train(train_input_fn, steps=task['more'])
  return {'trained': first, 'more': report(more, model, more_dir)}


def resume(task):
  model, model_dir = task['model'], task['dir']
  est = build(model, model_dir)
  loaded = report(est, model, model_dir)
  est.train(input_fns(model)[0], steps=task['steps'])
  return {'loaded': loaded, 'more': report(est, model, model_dir)}


if __name__ == '__main__':
  run_tasks(write, resume)
