"""One Estimator program with `RunConfig(train_distribute=..., eval_distribute=...)` run on the
original (`tf.estimator`, TF 2.15) and on ours (TF 2.21) by tests/test_distribute_differential.py.

Usage: distribute_program.py IMPL SPEC_JSON OUT_JSON, IMPL in {orig, ours}.  SPEC is a list of
tasks {'name': N, 'strategy': S, 'replicas': R, 'context': bool, 'model': 'custom'|'dnn',
'eval_rows': E}: train 4 steps (per-replica batches of 16 rows, or with `context` an
input_fn(input_context) of 8 rows per replica: the global batch is 16 either way), then
evaluate the whole input of E rows in batches of 16.  Reports the
variables, the evaluation (keys in order, values) and the first predictions.
"""
import json
import os
import sys
import tempfile

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=wrong-import-position
import tensorflow as tf  # pylint: disable=wrong-import-position

IMPL = sys.argv[1]
# Two logical CPUs for the replicas; the original's graph sessions also need them in their
# session config (ours adds them itself).
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices('CPU')[0], [tf.config.LogicalDeviceConfiguration()] * 2)
if IMPL == 'orig':
  E = tf.estimator
  SESSION = tf.compat.v1.ConfigProto(device_count={'CPU': 2}, allow_soft_placement=True)
else:
  import tpu_estimator as E  # pylint: disable=import-error
  from tpu_estimator import canned  # pylint: disable=import-error
  E.DNNClassifier = canned.DNNClassifier
  E.RunConfig = E.EstimatorRunConfig
  SESSION = None

RNG = np.random.RandomState(0)
X = RNG.randn(96, 4).astype(np.float32)
Y = (X @ np.array([1.0, -2.0, 0.5, 1.5], np.float32) > 0).astype(np.int64)


def strategy_of(task):
  devices = ['/cpu:%d' % i for i in range(task['replicas'])]
  kind = task['strategy']
  if kind == 'mirrored':
    return tf.distribute.MirroredStrategy(devices)
  if kind == 'mirrored_v1':
    return tf.compat.v1.distribute.MirroredStrategy(devices)
  if kind == 'central':
    return tf.compat.v1.distribute.experimental.CentralStorageStrategy(devices)
  if kind == 'one_device':
    return tf.distribute.OneDeviceStrategy(devices[0])
  return None


def input_fn_of(rows, repeat, context):
  def data(batch):
    ds = tf.data.Dataset.from_tensor_slices(({'x': X[:rows]}, Y[:rows]))
    return (ds.repeat() if repeat else ds).batch(batch)
  if context:
    return lambda input_context=None: data(
        input_context.get_per_replica_batch_size(16) if input_context else 16)
  return lambda: data(16)


def dense(inputs, units, name, seed):
  kernel = tf.compat.v1.get_variable(
      name + '/kernel', [inputs.shape[-1], units],
      initializer=tf.compat.v1.glorot_uniform_initializer(seed))
  bias = tf.compat.v1.get_variable(name + '/bias', [units],
                                   initializer=tf.compat.v1.zeros_initializer())
  return tf.matmul(inputs, kernel) + bias


def model_fn(features, labels, mode):
  logits = dense(tf.nn.relu(dense(features['x'], 8, 'hidden', 1)), 2, 'logits', 2)
  classes = tf.argmax(logits, 1)
  if mode == 'infer':
    return E.EstimatorSpec(mode, predictions={'classes': classes, 'logits': logits})
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
  train_op = tf.compat.v1.train.AdagradOptimizer(0.3).minimize(
      loss, tf.compat.v1.train.get_global_step())
  metrics = {'accuracy': tf.compat.v1.metrics.accuracy(labels, classes),
             'auc': tf.compat.v1.metrics.auc(labels, tf.nn.softmax(logits)[:, 1]),
             'mean_logit': tf.compat.v1.metrics.mean(logits)}
  return E.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)


def estimator_of(task, model_dir):
  strategy = strategy_of(task)
  config = E.RunConfig(model_dir=model_dir, train_distribute=strategy, eval_distribute=strategy,
                       session_config=SESSION, tf_random_seed=3)
  if task['model'] == 'dnn':
    return E.DNNClassifier(
        hidden_units=[8], feature_columns=[tf.feature_column.numeric_column('x', [4])],
        optimizer='Adagrad', config=config)
  return E.Estimator(model_fn, config=config)


def run(task):
  est = estimator_of(task, tempfile.mkdtemp())
  est.train(input_fn_of(96, True, task['context']), steps=4)
  result = est.evaluate(input_fn_of(task['eval_rows'], False, False))
  predictions = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices(
      {'x': X[:4]}).batch(2)))
  return {
      'variables': {name: est.get_variable_value(name).tolist()
                    for name in est.get_variable_names() if 'Adagrad' not in name},
      'eval_keys': list(result),
      'eval': {k: float(v) for k, v in result.items()},
      'predictions': [float(p['logits'][-1]) for p in predictions],
  }


def main():
  with open(sys.argv[2]) as f:
    tasks = json.load(f)
  out = {task['name']: run(task) for task in tasks}
  # Whole or not at all: the test reads the file as soon as it exists (reference.py).
  with open(sys.argv[3] + '.partial', 'w') as f:
    json.dump(out, f)
  os.replace(sys.argv[3] + '.partial', sys.argv[3])


if __name__ == '__main__':
  main()
