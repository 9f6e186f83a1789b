"""A parameter-server Estimator program as the original's users wrote it: `tf.estimator` names
only, `train_and_evaluate` on every task of whatever cluster TF_CONFIG describes (chief, workers,
ps tasks, an evaluator), run on the original (TF 2.15, IMPL 'orig') and on ours ('ours', through
`compat.install()`).

Usage: ps_program.py IMPL KIND MODEL_DIR OUT_DIR MAX_STEPS [STEP_SLEEP_SECS]
(MAX_STEPS 'predict': predict from MODEL_DIR in this one process, into OUT_DIR/predict.json.)
KIND: 'wide_deep' (the v1 canned DNNLinearCombinedClassifier: a hashed crossed column on the
linear side, an embedding of 1000 hash buckets on the DNN side, both partitioned in 2),
'custom' (a model_fn with a partitioned embedding and a dense layer), 'sync' (custom with
SyncReplicasOptimizer over 2 replicas) or 'strategy' (custom with
`RunConfig(train_distribute=ParameterServerStrategy())`).  Each training task writes OUT_DIR/<task>.json: every
global variable's device and shape when its session starts, its config, the steps it ran
itself and the final global step; the chief adds the final checkpoint's variables, the evaluator its last result.
"""
import json
import os
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=wrong-import-position
import tensorflow as tf  # pylint: disable=wrong-import-position

IMPL, KIND, MODEL_DIR, OUT_DIR, MAX_STEPS = sys.argv[1:6]
STEP_SLEEP = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
if IMPL == 'ours':
  from tpu_estimator import compat  # pylint: disable=import-error,wrong-import-position
  compat.install()
v1 = tf.compat.v1

RNG = np.random.RandomState(0)
ROWS = 256
FEATURES = {'a': RNG.randint(0, 50, ROWS).astype(str), 'b': RNG.randint(0, 20, ROWS).astype(str),
            'x': RNG.randn(ROWS).astype(np.float32)}
LABELS = ((FEATURES['x'] > 0) ^ (FEATURES['a'] < '25')).astype(np.int64)


def input_fn():
  ds = tf.data.Dataset.from_tensor_slices((FEATURES, LABELS))
  return ds.repeat().batch(16)


def eval_input_fn():
  return tf.data.Dataset.from_tensor_slices((FEATURES, LABELS)).batch(64)


def custom_model_fn(features, labels, mode, params, config):
  ids = tf.strings.to_hash_bucket_fast(features['a'], 100)
  embedding = v1.get_variable('embedding', [100, 8], partitioner=v1.fixed_size_partitioner(2),
                              initializer=v1.glorot_uniform_initializer(seed=1))
  hidden = tf.concat([tf.nn.embedding_lookup(embedding, ids),
                      tf.reshape(features['x'], [-1, 1])], axis=1)
  kernel = v1.get_variable('kernel', [9, 1], initializer=v1.glorot_uniform_initializer(seed=2))
  bias = v1.get_variable('bias', [1], initializer=v1.zeros_initializer())
  logits = tf.squeeze(tf.matmul(hidden, kernel) + bias, 1)
  if mode == tf.estimator.ModeKeys.PREDICT:
    return tf.estimator.EstimatorSpec(mode, predictions={'logits': logits})
  loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.float32), logits=logits))
  optimizer = v1.train.GradientDescentOptimizer(0.1)
  hooks = []
  if params.get('sync'):
    optimizer = v1.train.SyncReplicasOptimizer(optimizer, replicas_to_aggregate=2,
                                               total_num_replicas=2)
    hooks.append(optimizer.make_session_run_hook(config.is_chief))
  train_op = optimizer.minimize(loss, global_step=v1.train.get_global_step())
  return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=hooks)


def make_estimator(config):
  if KIND.startswith('wide_deep'):
    fc = tf.feature_column
    a = fc.categorical_column_with_hash_bucket('a', 1000)
    columns = dict(linear_feature_columns=[a, fc.crossed_column(['a', 'b'], 1000)],
                   dnn_feature_columns=[fc.embedding_column(a, 8), fc.numeric_column('x')],
                   dnn_hidden_units=[8, 4])
    if KIND == 'wide_deep_v2':  # the TF 2 class: no partitioner argument
      return tf.estimator.DNNLinearCombinedClassifier(config=config, **columns)
    return tf.compat.v1.estimator.DNNLinearCombinedClassifier(
        config=config, input_layer_partitioner=v1.fixed_size_partitioner(2), **columns)
  if KIND == 'strategy':  # as TF 2.0-2.3 programs wrote it (tf.distribute.experimental there)
    config = config.replace(
        train_distribute=tf.compat.v1.distribute.experimental.ParameterServerStrategy())
  return tf.estimator.Estimator(custom_model_fn, config=config,
                                params={'sync': KIND == 'sync'})


class Record(v1.train.SessionRunHook):
  """Writes where each variable lives (at begin) and the final global step (at end)."""

  def __init__(self, config, path):
    self._config = config
    self._path = path
    self._result = {}

  def begin(self):
    self._result['variables'] = {
        v.op.name: {'device': tf.DeviceSpec.from_string(v.device).to_string(),
                    'shape': v.shape.as_list()} for v in v1.global_variables()}
    config = self._config
    self._result['config'] = {
        'is_chief': config.is_chief, 'num_ps_replicas': config.num_ps_replicas,
        'num_worker_replicas': config.num_worker_replicas,
        'global_id_in_cluster': config.global_id_in_cluster}
    self._step = v1.train.get_global_step()

  def after_create_session(self, session, coord):
    # The step each session starts at (a lost task makes a new one), written at once: a killed
    # task never reaches end().
    self._result.setdefault('session_steps', []).append(int(session.run(self._step)))
    self._write()

  def _write(self):
    with open(self._path, 'w') as f:
      json.dump(self._result, f)

  def after_run(self, run_context, run_values):
    self._result['local_steps'] = self._result.get('local_steps', 0) + 1
    if STEP_SLEEP:
      time.sleep(STEP_SLEEP)

  def end(self, session):
    self._result['global_step'] = int(session.run(self._step))
    self._write()


def predict():
  """One process, no cluster: the model in MODEL_DIR restored, its first predictions."""
  os.environ.pop('TF_CONFIG', None)
  estimator = make_estimator(tf.estimator.RunConfig(model_dir=MODEL_DIR))
  rows = list(estimator.predict(lambda: tf.data.Dataset.from_tensor_slices(
      {k: v[:8] for k, v in FEATURES.items()}).batch(8)))
  with open(os.path.join(OUT_DIR, 'predict.json'), 'w') as f:
    json.dump({'rows': len(rows), 'keys': sorted(rows[0])}, f)


def main():
  if MAX_STEPS == 'predict':
    return predict()
  tf_config = json.loads(os.environ.get('TF_CONFIG') or '{}')
  task = tf_config.get('task', {'type': 'local', 'index': 0})
  name = '%s%d' % (task['type'], task['index'])
  config = tf.estimator.RunConfig(
      model_dir=MODEL_DIR, save_checkpoints_steps=10, tf_random_seed=1, log_step_count_steps=20,
      save_summary_steps=10,
      session_creation_timeout_secs=float(os.environ.get('SESSION_TIMEOUT_SECS', 7200)),
      session_config=v1.ConfigProto(
          operation_timeout_in_ms=int(os.environ['OPERATION_TIMEOUT_MS']),
          allow_soft_placement=True) if 'OPERATION_TIMEOUT_MS' in os.environ else None)
  estimator = make_estimator(config)
  train_spec = tf.estimator.TrainSpec(
      input_fn, max_steps=int(MAX_STEPS),
      hooks=[Record(config, os.path.join(OUT_DIR, name + '.json'))])
  eval_spec = tf.estimator.EvalSpec(eval_input_fn, steps=None, start_delay_secs=0,
                                    throttle_secs=1)
  result = tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
  if task['type'] in ('chief', 'local'):
    path = os.path.join(OUT_DIR, name + '.json')
    with open(path) as f:
      recorded = json.load(f)
    recorded['checkpoint'] = {n: s for n, s in tf.train.list_variables(MODEL_DIR)}
    with open(path, 'w') as f:
      json.dump(recorded, f)
  if task['type'] == 'evaluator' and result and result[0]:
    with open(os.path.join(OUT_DIR, name + '.json'), 'w') as f:
      json.dump({k: float(v) for k, v in result[0].items()}, f)


if __name__ == '__main__':
  main()
