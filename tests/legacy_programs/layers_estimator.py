"""A plain `tf.estimator` program of the TF 1.x / early 2.x era: `tf.compat.v1.layers`
(dense, batch normalization, dropout), `train_and_evaluate` with a `FinalExporter`, argparse
flags.  Runs unchanged on the original (TF 2.15) and through `tpu-estimator run` with tf_keras
installed (tests/test_compat.py).

    python layers_estimator.py --model_dir DIR --output_json OUT [--max_steps N]
"""
import argparse
import json
import os
import sys

import numpy as np
import tensorflow as tf

NUM_FEATURES, NUM_CLASSES = 4, 3


def make_data(n, seed):
  rng = np.random.RandomState(seed)
  x = rng.randn(n, NUM_FEATURES).astype(np.float32)
  w = np.array([[1.0, -1.0, 0.5], [-0.5, 1.0, 0.0], [0.3, 0.2, -1.0], [0.0, -0.4, 0.8]],
               np.float32)
  return x, np.argmax(x @ w, axis=1).astype(np.int64)


TRAIN, EVAL, PREDICT = make_data(96, 0), make_data(72, 1), make_data(40, 2)
FEATURE_SPEC = {'x': tf.io.FixedLenFeature([NUM_FEATURES], tf.float32)}


def train_input_fn():
  ds = tf.data.Dataset.from_tensor_slices(({'x': TRAIN[0]}, TRAIN[1]))
  return ds.repeat().batch(16)


def eval_input_fn():
  return tf.data.Dataset.from_tensor_slices(({'x': EVAL[0]}, EVAL[1])).batch(16)


def model_fn(features, labels, mode, params):
  training = mode == tf.estimator.ModeKeys.TRAIN
  const = lambda lo, hi, shape: tf.compat.v1.constant_initializer(
      np.linspace(lo, hi, int(np.prod(shape))).reshape(shape))
  net = tf.compat.v1.layers.dense(features['x'], params['hidden'], activation=tf.nn.relu,
                                  kernel_initializer=const(-0.6, 0.7, [NUM_FEATURES, 8]),
                                  bias_initializer=tf.compat.v1.constant_initializer(0.05))
  net = tf.compat.v1.layers.batch_normalization(net, training=training)
  net = tf.compat.v1.layers.dropout(net, rate=0.0, training=training)
  logits = tf.compat.v1.layers.dense(net, NUM_CLASSES,
                                     kernel_initializer=const(0.4, -0.4, [8, NUM_CLASSES]))
  probabilities = tf.nn.softmax(logits)
  classes = tf.argmax(logits, 1)
  if mode == tf.estimator.ModeKeys.PREDICT:
    predictions = {'classes': classes, 'probabilities': probabilities}
    return tf.estimator.EstimatorSpec(mode, predictions=predictions, export_outputs={
        'serving_default': tf.estimator.export.ClassificationOutput(scores=probabilities),
        'predict': tf.estimator.export.PredictOutput(predictions)})
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
  train_op = None
  if training:
    optimizer = tf.compat.v1.train.MomentumOptimizer(params['learning_rate'], momentum=0.9)
    update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
      train_op = optimizer.minimize(loss, tf.compat.v1.train.get_global_step())
  metrics = {'accuracy': tf.compat.v1.metrics.accuracy(labels, classes),
             'auc_class0': tf.compat.v1.metrics.auc(tf.equal(labels, 0), probabilities[:, 0])}
  return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                    eval_metric_ops=metrics)


def jsonable(value):
  if isinstance(value, dict):
    return {str(k): jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [jsonable(v) for v in value]
  if isinstance(value, np.ndarray):
    return jsonable(value.tolist())
  if isinstance(value, np.generic):
    return value.item()
  if isinstance(value, bytes):
    return value.decode('utf-8')
  return value


def classify_with_export(export_path):
  """Feeds serialized tf.Examples to the exported default (classification) signature."""
  examples = [tf.train.Example(features=tf.train.Features(feature={
      'x': tf.train.Feature(float_list=tf.train.FloatList(value=row))})).SerializeToString()
              for row in PREDICT[0]]
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    meta = tf.compat.v1.saved_model.loader.load(session, ['serve'], export_path)
    signature = meta.signature_def['serving_default']
    fetches = {k: v.name for k, v in signature.outputs.items()}
    outputs = session.run(fetches, {signature.inputs['inputs'].name: examples})
  return {'signatures': sorted(meta.signature_def), 'scores': outputs['scores']}


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--model_dir', required=True)
  parser.add_argument('--output_json', required=True)
  parser.add_argument('--max_steps', type=int, default=12)
  parser.add_argument('--learning_rate', type=float, default=0.05)
  args = parser.parse_args(argv)

  config = tf.estimator.RunConfig(model_dir=args.model_dir, save_checkpoints_steps=6,
                                  tf_random_seed=1)
  estimator = tf.estimator.Estimator(model_fn, config=config,
                                     params={'hidden': 8, 'learning_rate': args.learning_rate})
  serving_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn(FEATURE_SPEC)
  train_spec = tf.estimator.TrainSpec(train_input_fn, max_steps=args.max_steps)
  eval_spec = tf.estimator.EvalSpec(eval_input_fn, steps=None, throttle_secs=0,
                                    exporters=[tf.estimator.FinalExporter('final', serving_fn)])
  metrics, export_results = tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
  export_path = export_results[-1]  # the final evaluation's FinalExporter export
  export_path = export_path.decode() if isinstance(export_path, bytes) else export_path
  predictions = list(estimator.predict(
      lambda: tf.data.Dataset.from_tensor_slices({'x': PREDICT[0]}).batch(16)))
  names = sorted(estimator.get_variable_names())
  report = {
      'tf_version': tf.__version__,
      'estimator_module': type(estimator).__module__,
      'layers_module': tf.compat.v1.layers.dense.__module__,
      'metrics': metrics,
      'export_results': [p is not None for p in export_results],
      'export_dir': os.path.relpath(os.path.dirname(export_path), args.model_dir),
      'export': classify_with_export(export_path),
      'predictions': predictions,
      'variable_names': names,
      'variables': {n: estimator.get_variable_value(n) for n in names},
  }
  with open(args.output_json, 'w') as f:
    json.dump(jsonable(report), f)


if __name__ == '__main__':
  main(sys.argv[1:])
