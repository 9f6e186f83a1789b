"""One user program, run unchanged on the original Estimator (TF 2.15 + tensorflow-estimator)
and on `tpu_estimator` (TF 2.21); only the import switch below differs.

    python program.py {orig|ours} SPEC_JSON OUT_JSON...

SPEC_JSON is a list of tasks ({"task": ..., "model": ..., "dir": ...}); OUT_JSON receives one
result dict per task, in order (a pair per round: program_results.rounds).  Everything is
deterministic: constant initialisers, fixed data (numpy's legacy RandomState, whose streams are
frozen across numpy versions), no shuffling.
"""
import os
import sys

import numpy as np
import tensorflow as tf

from program_results import jsonable, rounds  # pylint: disable=wrong-import-position

IMPL = sys.argv[1]
if IMPL == 'ours':
  import tpu_estimator as estimator  # stands for tf.compat.v1.estimator
  import tpu_estimator as tpu  # stands for tf.compat.v1.estimator.tpu
elif IMPL == 'orig':
  estimator = tf.compat.v1.estimator
  tpu = tf.compat.v1.estimator.tpu
else:
  raise SystemExit('usage: program.py {orig|ours} SPEC_JSON OUT_JSON...')

v1 = tf.compat.v1
NUM_FEATURES = 4
NUM_CLASSES = 3
HIDDEN = 8
BATCH = 16
TRAIN_N = 96  # 6 batches per epoch
EVAL_N = 72  # 4 full batches + one of 8
PREDICT_N = 40  # 2 full batches + one of 8


def make_data(n, seed):
  rng = np.random.RandomState(seed)
  x = rng.randn(n, NUM_FEATURES).astype(np.float32)
  w = np.array([[1.0, -1.0, 0.5], [-0.5, 1.0, 0.0], [0.3, 0.2, -1.0], [0.0, -0.4, 0.8]],
               np.float32)
  y = np.argmax(x @ w, axis=1).astype(np.int64)
  return x, y


TRAIN = make_data(TRAIN_N, 0)
EVAL = make_data(EVAL_N, 1)
PREDICT = make_data(PREDICT_N, 2)


def train_input_fn(params):
  ds = tf.data.Dataset.from_tensor_slices(({'x': TRAIN[0]}, TRAIN[1]))
  return ds.repeat().batch(params['batch_size'])


def eval_input_fn(params):
  ds = tf.data.Dataset.from_tensor_slices(({'x': EVAL[0]}, EVAL[1]))
  return ds.batch(params['batch_size'])


def predict_input_fn(params):
  return tf.data.Dataset.from_tensor_slices({'x': PREDICT[0]}).batch(params['batch_size'])


def _const(shape, lo, hi):
  return tf.constant_initializer(np.linspace(lo, hi, int(np.prod(shape))).reshape(shape))


def linear_logits(x):
  kernel = v1.get_variable('dense/kernel', [NUM_FEATURES, NUM_CLASSES],
                           initializer=_const([NUM_FEATURES, NUM_CLASSES], -0.5, 0.5))
  bias = v1.get_variable('dense/bias', [NUM_CLASSES], initializer=v1.zeros_initializer())
  return tf.matmul(x, kernel) + bias


def mlp_logits(x):
  with v1.variable_scope('hidden'):
    k1 = v1.get_variable('kernel', [NUM_FEATURES, HIDDEN],
                         initializer=_const([NUM_FEATURES, HIDDEN], -0.6, 0.7))
    b1 = v1.get_variable('bias', [HIDDEN], initializer=v1.constant_initializer(0.05))
  h = tf.nn.relu(tf.matmul(x, k1) + b1)
  with v1.variable_scope('output'):
    k2 = v1.get_variable('kernel', [HIDDEN, NUM_CLASSES],
                         initializer=_const([HIDDEN, NUM_CLASSES], 0.4, -0.4))
    b2 = v1.get_variable('bias', [NUM_CLASSES], initializer=v1.zeros_initializer())
  return tf.matmul(h, k2) + b2


def _loss(labels, logits):
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits))


def _predictions(logits):
  return {'classes': tf.argmax(logits, 1), 'probabilities': tf.nn.softmax(logits),
          'logits': logits}


def linear_sgd_model_fn(features, labels, mode, params):
  """Estimator + EstimatorSpec + eval_metric_ops; GradientDescent."""
  logits = linear_logits(features['x'])
  predictions = _predictions(logits)
  if mode == estimator.ModeKeys.PREDICT:
    return estimator.EstimatorSpec(mode, predictions=predictions)
  loss = _loss(labels, logits)
  train_op = None
  if mode == estimator.ModeKeys.TRAIN:
    opt = v1.train.GradientDescentOptimizer(params['learning_rate'])
    train_op = opt.minimize(loss, global_step=v1.train.get_global_step())
  metrics = {'accuracy': v1.metrics.accuracy(labels, predictions['classes']),
             'mean_label': v1.metrics.mean(tf.cast(labels, tf.float32))}
  return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics,
                                 predictions=predictions)


def mlp_adam_model_fn(features, labels, mode, params):
  """Estimator + EstimatorSpec, two layers, Adam (slot variables, beta powers)."""
  logits = mlp_logits(features['x'])
  predictions = _predictions(logits)
  if mode == estimator.ModeKeys.PREDICT:
    return estimator.EstimatorSpec(mode, predictions=predictions)
  loss = _loss(labels, logits)
  train_op = None
  if mode == estimator.ModeKeys.TRAIN:
    opt = v1.train.AdamOptimizer(params['learning_rate'])
    train_op = opt.minimize(loss, global_step=v1.train.get_global_step())
  metrics = {'accuracy': v1.metrics.accuracy(labels, predictions['classes']),
             'mean_max_prob': v1.metrics.mean(tf.reduce_max(predictions['probabilities'], 1))}
  return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics,
                                 predictions=predictions)


def _tpu_model_fn(metrics_as_dict):

  def model_fn(features, labels, mode, params):
    """TPUEstimator + TPUEstimatorSpec with eval_metrics=(metric_fn, list or dict)."""
    logits = linear_logits(features['x'])
    if mode == estimator.ModeKeys.PREDICT:
      return tpu.TPUEstimatorSpec(mode, predictions=_predictions(logits))
    loss = _loss(labels, logits)
    train_op = None
    if mode == estimator.ModeKeys.TRAIN:
      opt = v1.train.GradientDescentOptimizer(params['learning_rate'])
      train_op = opt.minimize(loss, global_step=v1.train.get_global_step())

    def metric_fn(labels, logits):
      classes = tf.argmax(logits, 1)
      return {'accuracy': v1.metrics.accuracy(labels, classes),
              'mean_label': v1.metrics.mean(tf.cast(labels, tf.float32)),
              'recall_class0': v1.metrics.recall(tf.equal(labels, 0), tf.equal(classes, 0))}

    tensors = {'labels': labels, 'logits': logits} if metrics_as_dict else [labels, logits]
    return tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                eval_metrics=(metric_fn, tensors))

  return model_fn


MODELS = {
    'linear_sgd': ('estimator', linear_sgd_model_fn, 0.1),
    'mlp_adam': ('estimator', mlp_adam_model_fn, 0.05),
    'tpu_list': ('tpu', _tpu_model_fn(False), 0.1),
    'tpu_dict': ('tpu', _tpu_model_fn(True), 0.1),
}


def make_estimator(model, model_dir):
  kind, model_fn, lr = MODELS[model]
  if kind == 'estimator':
    config = estimator.RunConfig(model_dir=model_dir, save_checkpoints_steps=10,
                                 keep_checkpoint_max=3)
    return estimator.Estimator(model_fn, config=config,
                               params={'learning_rate': lr, 'batch_size': BATCH})
  config = tpu.RunConfig(model_dir=model_dir, save_checkpoints_steps=10, keep_checkpoint_max=3,
                         tpu_config=tpu.TPUConfig(iterations_per_loop=4))
  return tpu.TPUEstimator(model_fn, config=config, params={'learning_rate': lr}, use_tpu=False,
                          train_batch_size=BATCH, eval_batch_size=BATCH,
                          predict_batch_size=BATCH)


# ---------------------------------------------------------------------------------------------
def checkpoint_state(est):
  """Global step, latest checkpoint's basename, the retained checkpoints, variables."""
  latest = est.latest_checkpoint()
  state = tf.train.get_checkpoint_state(est.model_dir)
  names = sorted(est.get_variable_names())
  return {
      'global_step': int(est.get_variable_value('global_step')),
      'latest': os.path.basename(latest) if latest else None,
      'all_checkpoints': [os.path.basename(p) for p in state.all_model_checkpoint_paths],
      'variable_names': names,
      'variables': {n: est.get_variable_value(n) for n in names},
  }


def layout(model_dir):
  """The files of a model_dir, event files' unique suffixes replaced by '*'."""
  files = []
  for root, _, names in os.walk(model_dir):
    for name in names:
      rel = os.path.relpath(os.path.join(root, name), model_dir)
      if 'tfevents' in name:
        rel = rel[:rel.index('tfevents')] + 'tfevents.*'
      files.append(rel)
  return sorted(files)


def scalar_summaries(model_dir):
  """(event dir, tag, step, value) of every scalar summary in the model_dir's event files;
  timing summaries (global_step/sec, ...) keep their tag and step but not their value."""
  found = []
  for root, _, names in os.walk(model_dir):
    for name in sorted(names):
      if 'tfevents' not in name:
        continue
      rel = os.path.relpath(root, model_dir)
      for event in v1.train.summary_iterator(os.path.join(root, name)):
        for value in event.summary.value:
          if value.HasField('simple_value'):
            timing = '/sec' in value.tag
            found.append([rel, value.tag, int(event.step),
                          None if timing else float(value.simple_value)])
          elif value.HasField('tensor') and value.tensor.dtype == 1 and \
              not value.tensor.tensor_shape.dim:  # TF2-style float scalar summary
            found.append([rel, value.tag, int(event.step),
                          float(tf.make_ndarray(value.tensor))])
  return sorted(found, key=lambda f: (f[0], f[1], f[2]))


def predict_all(est, **kwargs):
  return list(est.predict(predict_input_fn, **kwargs))


def task_scenario(spec):
  """Train(steps), train(max_steps) twice, evaluate(steps=k), evaluate(all), predict."""
  est = make_estimator(spec['model'], spec['dir'])
  out = {}
  est.train(train_input_fn, steps=7)
  out['after_steps'] = checkpoint_state(est)
  est.train(train_input_fn, max_steps=23)
  out['after_max_steps'] = checkpoint_state(est)
  est.train(train_input_fn, max_steps=20)  # already past: must not train
  out['after_noop_max_steps'] = checkpoint_state(est)
  out['eval_steps2'] = est.evaluate(eval_input_fn, steps=2)
  out['eval_all'] = est.evaluate(eval_input_fn)
  out['predict'] = predict_all(est)
  out['predict_classes_batches'] = predict_all(est, predict_keys=['classes'],
                                               yield_single_examples=False)
  out['layout'] = layout(spec['dir'])
  out['summaries'] = scalar_summaries(spec['dir'])
  return out


def task_write(spec):
  """Train `steps` from scratch; evaluate and predict the result (the resume source)."""
  est = make_estimator(spec['model'], spec['dir'])
  est.train(train_input_fn, steps=spec['steps'])
  return {'state': checkpoint_state(est), 'eval': est.evaluate(eval_input_fn),
          'predict': predict_all(est)}


def task_resume(spec):
  """Evaluate/predict a model_dir written by the other implementation, then train on."""
  est = make_estimator(spec['model'], spec['dir'])
  out = {'before': checkpoint_state(est), 'eval_before': est.evaluate(eval_input_fn),
         'predict_before': predict_all(est)}
  est.train(train_input_fn, steps=spec['steps'])
  out['after'] = checkpoint_state(est)
  out['eval_after'] = est.evaluate(eval_input_fn)
  return out


def contract_model_fn(features, labels, mode, params):
  """What the original accepted and a stricter check once refused: a loss of shape (None,),
  a tf.Variable and a Keras Metric as eval_metric_ops values (their names out of order)."""
  logits = linear_logits(features['x'])
  predictions = _predictions(logits)
  if mode == estimator.ModeKeys.PREDICT:
    return estimator.EstimatorSpec(mode, predictions=predictions)
  scalar = _loss(labels, logits)
  loss = v1.placeholder_with_default(tf.reshape(scalar, [1]), [None])
  train_op = None
  if mode == estimator.ModeKeys.TRAIN:
    train_op = v1.train.GradientDescentOptimizer(params['learning_rate']).minimize(
        scalar, global_step=v1.train.get_global_step())
  bias = [v for v in v1.global_variables() if v.name == 'dense/bias:0'][0]
  mean = tf.keras.metrics.Mean(name='keras_mean')
  mean.update_state(tf.reduce_max(predictions['probabilities'], 1))
  metrics = {'zeta_keras': mean, 'bias': (bias, tf.no_op()),
             'accuracy': v1.metrics.accuracy(labels, predictions['classes'])}
  return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics,
                                 predictions=predictions)


def _added_metrics(labels, predictions):
  label_mean = tf.keras.metrics.Mean(name='added')
  label_mean.update_state(tf.cast(labels, tf.float32))
  return {'added_label': label_mean, 'accuracy': (tf.constant(-1.0), tf.no_op()),
          'added_logit': v1.metrics.mean(predictions['logits'])}


def task_contract(spec):
  """Float step counts, the spec values above, evaluate's key order, add_metrics."""
  est = estimator.Estimator(contract_model_fn, config=estimator.RunConfig(model_dir=spec['dir']),
                            params={'learning_rate': 0.1, 'batch_size': BATCH})
  out = {}
  est.train(train_input_fn, steps=2.5)
  out['after_steps_2_5'] = int(est.get_variable_value('global_step'))
  est.train(train_input_fn, max_steps=5.2)
  out['after_max_steps_5_2'] = int(est.get_variable_value('global_step'))
  out['eval_steps_1_5'] = est.evaluate(eval_input_fn, steps=1.5)
  out['eval_all'] = est.evaluate(eval_input_fn)
  added = estimator.add_metrics(est, _added_metrics)
  out['add_metrics'] = added.evaluate(lambda: eval_input_fn({'batch_size': BATCH}))
  out['keys'] = {k: list(out[k]) for k in ('eval_steps_1_5', 'eval_all', 'add_metrics')}
  return out


TASKS = {'scenario': task_scenario, 'write': task_write, 'resume': task_resume,
         'contract': task_contract}


def main():
  rounds(lambda specs: {'impl': IMPL, 'tf_version': tf.__version__,
                        'results': [jsonable(TASKS[spec['task']](spec)) for spec in specs]})


if __name__ == '__main__':
  main()
