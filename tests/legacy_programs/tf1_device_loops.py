"""Run as `tpu-estimator run --tf1 tf1_device_loops.py OUT_JSON` (tests/test_tf1_device_loops.py):
a TF 1.x program's device loops under `disable_v2_behavior()`, where a shape's dimensions are
`Dimension`s and variables are references.  Trains on 2 shards from batches of unknown size
(the short last one ends the input), trains/evaluates/predicts on one replica's loop, compiled
too, and reports what a plain Estimator gives for the same model and data."""
import json
import sys
import tempfile

import numpy as np
import tensorflow as tf

ROWS, BATCH = 90, 16
rng = np.random.RandomState(0)
x = rng.randn(ROWS, 4).astype(np.float32)
y = (x.sum(axis=1) > 0).astype(np.int64)


def input_fn(params):
  dataset = tf.data.Dataset.from_tensor_slices(({'x': x}, y))
  return dataset.batch(params.get('batch_size', BATCH))  # batches of unknown size


def predict_input_fn(params):
  return tf.data.Dataset.from_tensor_slices({'x': x}).batch(params.get('batch_size', BATCH))


def model_fn(features, labels, mode, params):
  logits = tf.layers.dense(features['x'], 2, kernel_initializer=tf.zeros_initializer())
  if mode == tf.estimator.ModeKeys.PREDICT:
    return tf.contrib.tpu.TPUEstimatorSpec(mode, predictions={'logits': logits})
  loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
  optimizer = tf.contrib.tpu.CrossShardOptimizer(tf.train.GradientDescentOptimizer(0.5))
  train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())

  def metric_fn(labels, logits):
    return {'accuracy': tf.metrics.accuracy(labels, tf.argmax(logits, 1))}

  return tf.contrib.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                         eval_metrics=(metric_fn, [labels, logits]))


def estimator(use_tpu, shards=None, xla=None):
  config = tf.contrib.tpu.RunConfig(
      model_dir=tempfile.mkdtemp(), tpu_config=tf.contrib.tpu.TPUConfig(
          iterations_per_loop=4, num_shards=shards, xla=xla))
  return tf.contrib.tpu.TPUEstimator(model_fn, config=config, use_tpu=use_tpu,
                                     train_batch_size=BATCH, eval_batch_size=BATCH,
                                     predict_batch_size=BATCH)


def run(est, train=True):
  if train:
    est.train(input_fn, max_steps=100)
  metrics = est.evaluate(input_fn)
  logits = [p['logits'].tolist() for p in est.predict(predict_input_fn)]
  return {'global_step': int(est.get_variable_value('global_step')),
          'accuracy': float(metrics['accuracy']), 'logits': logits}


sharded = estimator(True, shards=2)
sharded.train(input_fn, max_steps=100)
report = {
    'sharded_train_steps': int(sharded.get_variable_value('global_step')),
    'plain': run(estimator(False)),
    'one_replica': run(estimator(True, shards=1)),
    'one_replica_compiled': run(estimator(True, shards=1, xla=True)),
}
with open(sys.argv[1], 'w') as f:
  json.dump(report, f)
