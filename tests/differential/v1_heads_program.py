"""A TF 2.x-era legacy program of the head-taking `tf.compat.v1.estimator` classes, run
unchanged on the original (TF 2.15 + tensorflow-estimator 2.15) and on ours (TF 2.21, after
`tpu_estimator.compat.install()`) by tests/test_v1_heads_differential.py.

Usage: v1_heads_program.py IMPL SPEC_JSON OUT_JSON..., IMPL in {orig, ours}.  SPEC is a list of
tasks:
  {'task': 'write', 'model': M, 'dir': D, 'steps': N}: train M for N steps in D; report the
      checkpoint's variables and shapes, evaluation, predictions, export signatures.
  {'task': 'resume', 'model': M, 'dir': D}: D holds the other implementation's model_dir:
      evaluate it (every variable is read: a restore that differs shows).
Both sides run at once on the test machine's cores, so each model is trained, evaluated,
predicted once, and exported where its head's signatures are not already another model's.
The heads are the original's v1 heads, made by its v1 head factories (the module
`tensorflow_estimator.python.estimator.canned.head`); `logit_fn` is a model_fn of the
experimental logit_fn API with such a head.
"""
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

if sys.argv[1] == 'ours':
  import tpu_estimator.compat  # pylint: disable=import-error
  tpu_estimator.compat.install()

import numpy as np  # pylint: disable=wrong-import-position
import tensorflow as tf  # pylint: disable=wrong-import-position
from program_results import jsonable, run_tasks  # pylint: disable=wrong-import-position
# pylint: disable=wrong-import-position,protected-access
from tensorflow_estimator.python.estimator.canned import head as head_lib

E1 = tf.compat.v1.estimator
fc = tf.feature_column
N_EXAMPLES = 48
BATCH = 16
COLORS = ['red', 'green', 'blue']


def data():
  rng = np.random.RandomState(3)
  x = rng.uniform(-1, 1, (N_EXAMPLES, 2)).astype(np.float32)
  color = rng.choice(COLORS, N_EXAMPLES)
  w = rng.uniform(0.5, 2., N_EXAMPLES).astype(np.float32)
  score = x[:, 0] - 0.5 * x[:, 1] + (color == 'red') + rng.normal(0, 0.3, N_EXAMPLES)
  classes = np.searchsorted([-0.3, 0.6], score)
  labels = {
      'dnn': np.array(['a', 'b', 'c'])[classes],
      'linear': np.stack([score, 0.5 * score + x[:, 1]], 1).astype(np.float32),
      'wide_deep': np.where(score > 0.2, 'yes', 'no'),
      'baseline': classes.astype(np.int64),
      'logit_fn': (score > 0.2).astype(np.int64)[:, None],
  }
  return {'x': x, 'color': color, 'w': w}, labels


def columns():
  x = fc.numeric_column('x', shape=[2])
  color = fc.categorical_column_with_vocabulary_list('color', COLORS)
  return [x, fc.indicator_column(color)], [x, color, fc.bucketized_column(x, [-0.5, 0., 0.5])]


def logit_fn_model_fn(features, labels, mode, params, config):
  deep, wide = columns()
  head = params['head']
  with tf.compat.v1.variable_scope('dnn'):
    dnn_logits = E1.experimental.call_logit_fn(
        E1.experimental.dnn_logit_fn_builder(head.logits_dimension, [4], deep, tf.nn.relu, None,
                                             None, False), features, mode, params, config)
  with tf.compat.v1.variable_scope('linear'):
    linear_logits = tf.estimator.experimental.call_logit_fn(
        E1.experimental.linear_logit_fn_builder(head.logits_dimension, wide, 'sqrtn'),
        features, mode, params, config)
  return head.create_estimator_spec(
      features=features, mode=mode, labels=labels, logits=dnn_logits + linear_logits,
      optimizer=tf.compat.v1.train.AdagradOptimizer(0.2))


def build(model, model_dir):
  deep, wide = columns()
  config = tf.estimator.RunConfig(tf_random_seed=1)
  if model == 'dnn':
    head = head_lib._multi_class_head_with_softmax_cross_entropy_loss(
        3, weight_column='w', label_vocabulary=['a', 'b', 'c'])
    return E1.DNNEstimator(head, [4, 3], deep, model_dir=model_dir, config=config)
  if model == 'linear':
    head = head_lib._regression_head(
        weight_column='w', label_dimension=2, loss_reduction=tf.compat.v1.losses.Reduction.MEAN)
    return E1.LinearEstimator(head, wide, model_dir=model_dir, config=config,
                              sparse_combiner='mean')
  if model == 'wide_deep':
    head = head_lib._binary_logistic_head_with_sigmoid_cross_entropy_loss(
        thresholds=[0.3], label_vocabulary=['no', 'yes'], name='buy')
    return E1.DNNLinearCombinedEstimator(
        head, model_dir=model_dir, linear_feature_columns=wide, dnn_feature_columns=deep,
        dnn_hidden_units=[5], dnn_optimizer='Adam', config=config)
  if model == 'baseline':
    head = head_lib._binary_logistic_or_multi_class_head(
        3, None, None, tf.compat.v1.losses.Reduction.SUM_OVER_BATCH_SIZE)
    return E1.BaselineEstimator(head, model_dir=model_dir, optimizer='Adagrad', config=config)
  if model == 'logit_fn':
    head = head_lib._binary_logistic_head_with_sigmoid_cross_entropy_loss()
    return E1.Estimator(logit_fn_model_fn, model_dir=model_dir, config=config,
                        params={'head': head})
  raise ValueError(model)


def input_fns(model):
  features, labels = data()
  labels = labels[model]
  if model == 'baseline':
    # The original's baseline reads one feature and fails on repeated datasets: tiled instead.
    features = {'x': features['x']}

  def train_input_fn():
    if model == 'baseline':
      return tf.data.Dataset.from_tensor_slices(
          ({'x': np.tile(features['x'], (4, 1))}, np.tile(labels, 4))).batch(BATCH)
    return tf.data.Dataset.from_tensor_slices((dict(features), labels)).batch(BATCH).repeat()

  def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices((dict(features), labels)).batch(BATCH)

  def predict_input_fn():
    return tf.data.Dataset.from_tensor_slices(dict(features)).batch(BATCH)

  return train_input_fn, eval_input_fn, predict_input_fn


def signatures(est, model_dir):
  deep, wide = columns()
  spec = fc.make_parse_example_spec(deep + wide + [fc.numeric_column('w')])
  export_dir = est.export_saved_model(
      os.path.join(model_dir, 'export'),
      tf.estimator.export.build_parsing_serving_input_receiver_fn(spec))
  from tensorflow.python.tools import saved_model_utils  # pylint: disable=import-outside-toplevel
  meta = saved_model_utils.get_meta_graph_def(os.fsdecode(export_dir), 'serve')
  return {key: {'method': sig.method_name, 'inputs': sorted(sig.inputs),
                'outputs': sorted(sig.outputs)}
          for key, sig in meta.signature_def.items()}


# One export per head type (the signatures are the head's): multi-class, regression, binary.
EXPORTED = ('dnn', 'linear', 'wide_deep')


def report(est, model, model_dir, export=False, predict=True):
  _, eval_input_fn, predict_input_fn = input_fns(model)
  result = {'variables': [[name, list(shape)]
                          for name, shape in tf.train.list_variables(model_dir)],
            'evaluation': jsonable(est.evaluate(eval_input_fn))}
  if predict:
    result['predictions'] = [jsonable(p) for p in est.predict(predict_input_fn)][:6]
  if export:
    result['signatures'] = signatures(est, model_dir)
  return result


def write(task):
  model, model_dir = task['model'], task['dir']
  est = build(model, model_dir)
  est.train(input_fns(model)[0], steps=task['steps'])
  return report(est, model, model_dir, export=model in EXPORTED)


def resume(task):
  model, model_dir = task['model'], task['dir']
  return report(build(model, model_dir), model, model_dir, predict=False)


if __name__ == '__main__':
  run_tasks(write, resume)
