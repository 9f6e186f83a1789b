"""One program for the early-stopping hooks and numpy_input_fn, run unchanged on the original
(TF 2.15 + tensorflow-estimator 2.15) and on `tpu_estimator`; only the import switch differs.

    python early_stopping_program.py {orig|ours} WORKDIR OUT_JSON

The evaluations are scripted: the eval metric `score` is a fixed function of the global step
(`SCORES`), so both implementations see the same eval sequence whatever the weights do.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

IMPL, WORKDIR, OUT = sys.argv[1:4]
if IMPL == 'ours':
  import tpu_estimator as estimator  # stands for tf.compat.v1.estimator
  experimental = estimator.experimental
  inputs = estimator.inputs
else:
  estimator = tf.compat.v1.estimator
  experimental = tf.compat.v1.estimator.experimental
  inputs = tf.compat.v1.estimator.inputs
v1 = tf.compat.v1
v1.logging.set_verbosity(v1.logging.ERROR)

# score by global step: falls to its minimum at step 30, then rises (no decrease after 30).
SCORES = np.array([abs(step - 30) + 1.0 for step in range(201)], np.float32)
X = np.arange(64, dtype=np.float32).reshape(32, 2)
Y = (np.arange(32) % 2).astype(np.int64)


def model_fn(features, labels, mode):
  kernel = v1.get_variable('w', [2, 1], initializer=tf.zeros_initializer())
  logits = tf.matmul(features['x'], kernel)
  step = v1.train.get_global_step()
  if mode == estimator.ModeKeys.PREDICT:
    return estimator.EstimatorSpec(mode, predictions={'logits': logits})
  loss = tf.reduce_mean(tf.square(logits[:, 0] - tf.cast(labels, tf.float32)))
  train_op = v1.train.GradientDescentOptimizer(1e-4).minimize(loss, global_step=step)
  score = tf.gather(tf.constant(SCORES), tf.minimum(step, len(SCORES) - 1))
  metrics = {'score': v1.metrics.mean(score)}
  return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)


def train_input_fn():
  return tf.data.Dataset.from_tensor_slices(({'x': X}, Y)).repeat().batch(8)


def eval_input_fn():
  return tf.data.Dataset.from_tensor_slices(({'x': X}, Y)).batch(16)


def make_estimator(name, **config):
  run_config = estimator.RunConfig(model_dir=os.path.join(WORKDIR, IMPL, name),
                                   save_summary_steps=None, log_step_count_steps=None,
                                   **config)
  return estimator.Estimator(model_fn, config=run_config)


def eval_steps(est, sub='eval'):
  steps = set()
  directory = os.path.join(est.model_dir, sub)
  for path in tf.io.gfile.glob(os.path.join(directory, '*.tfevents.*')):
    for event in v1.train.summary_iterator(path):
      if any(v.tag == 'score' for v in event.summary.value):
        steps.add(int(event.step))
  return sorted(steps)


def in_train_and_evaluate(name, make_hook, max_steps=100):
  est = make_estimator(name, save_checkpoints_steps=5, keep_checkpoint_max=50)
  hook = make_hook(est)
  result, _ = estimator.train_and_evaluate(
      est, estimator.TrainSpec(train_input_fn, max_steps=max_steps, hooks=[hook]),
      estimator.EvalSpec(eval_input_fn, steps=None, throttle_secs=0, start_delay_secs=0))
  return {'final_step': int(est.get_variable_value('global_step')),
          'result_step': int(result['global_step']), 'eval_steps': eval_steps(est)}


def timer_semantics(name, every_steps, stop_on_call):
  """make_early_stopping_hook: the step training stops at when should_stop_fn says stop on
  its `stop_on_call`-th call, asked every `every_steps` steps."""
  est = make_estimator(name, save_checkpoints_steps=1000)
  calls = []

  def should_stop():
    calls.append(1)
    return len(calls) >= stop_on_call

  hook = experimental.make_early_stopping_hook(est, should_stop, run_every_secs=None,
                                               run_every_steps=every_steps)
  est.train(train_input_fn, max_steps=200, hooks=[hook])
  return {'final_step': int(est.get_variable_value('global_step')), 'calls': len(calls)}


def from_written_evals(name, make_hook):
  """A hook reading an eval dir written before training (scores at steps 10, 20, ...)."""
  est = make_estimator(name, save_checkpoints_steps=1000)
  with tf.Graph().as_default():
    writer = v1.summary.FileWriter(os.path.join(est.model_dir, 'eval'))
    for step, score in ((10, 5.0), (20, 3.0), (30, 4.0), (40, 2.5), (50, 2.6), (60, 2.7)):
      writer.add_summary(v1.Summary(value=[v1.Summary.Value(tag='score', simple_value=score)]),
                         step)
    writer.close()
  est.train(train_input_fn, max_steps=50, hooks=[make_hook(est)])
  return {'final_step': int(est.get_variable_value('global_step'))}


def in_memory_evaluator(name):
  est = make_estimator(name, save_checkpoints_steps=1000)
  hook = experimental.InMemoryEvaluatorHook(est, eval_input_fn, name='mem', every_n_iter=5)
  est.train(train_input_fn, max_steps=12, hooks=[hook])
  return {'eval_steps': eval_steps(est, 'eval_mem')}


def numpy_batches(name, **kwargs):
  """What a model sees from numpy_input_fn, through predict: each row's id, and the size of
  the batch it came in."""
  x = {'id': np.arange(10, dtype=np.int64), 'f': np.arange(10, dtype=np.float32) * 0.5}

  def id_model_fn(features, labels, mode):
    del labels
    size = tf.shape(features['id'])[0]
    return estimator.EstimatorSpec(mode, predictions={
        'id': features['id'], 'f': features['f'], 'batch': tf.fill([size], size)})

  est = estimator.Estimator(id_model_fn, model_dir=os.path.join(WORKDIR, IMPL, name))
  input_fn = inputs.numpy_input_fn(x, **kwargs)
  rows = list(est.predict(input_fn, yield_single_examples=True))
  return {'ids': [int(r['id']) for r in rows], 'f': [float(r['f']) for r in rows],
          'batches': [int(r['batch']) for r in rows]}


def numpy_training_labels(name):
  """numpy_input_fn with y, through train: the labels model_fn saw."""
  seen = []

  def label_model_fn(features, labels, mode):
    step = v1.train.get_global_step()
    loss = tf.reduce_mean(features['x'] * 0.0)
    with tf.control_dependencies([tf.compat.v1.py_func(
        lambda l: seen.append(l.tolist()) or np.int64(0), [labels], tf.int64)]):
      train_op = v1.assign_add(step, 1)
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

  est = estimator.Estimator(label_model_fn, model_dir=os.path.join(WORKDIR, IMPL, name))
  est.train(inputs.numpy_input_fn({'x': X[:10]}, Y[:10] * 7, batch_size=4, num_epochs=1,
                                  shuffle=False))
  return {'labels': seen}


def main():
  out = {}
  out['no_decrease_tae'] = in_train_and_evaluate('no_decrease', lambda est: (
      experimental.stop_if_no_decrease_hook(est, 'score', 10, run_every_secs=None,
                                            run_every_steps=1)))
  out['lower_tae'] = in_train_and_evaluate('lower', lambda est: (
      experimental.stop_if_lower_hook(est, 'score', 12.0, min_steps=0, run_every_secs=0)))
  out['higher_tae_min_steps'] = in_train_and_evaluate('higher', lambda est: (
      experimental.stop_if_higher_hook(est, 'score', 4.5, min_steps=31, run_every_secs=None,
                                       run_every_steps=1)))
  out['timer_every_4_third_call'] = timer_semantics('timer4', 4, 3)
  out['timer_every_1_fifth_call'] = timer_semantics('timer1', 1, 5)
  out['written_no_increase'] = from_written_evals('written_inc', lambda est: (
      experimental.stop_if_no_increase_hook(est, 'score', 30, run_every_secs=None,
                                            run_every_steps=3)))
  out['written_no_decrease_min_steps'] = from_written_evals('written_dec', lambda est: (
      experimental.stop_if_no_decrease_hook(est, 'score', 20, min_steps=25,
                                            run_every_secs=None, run_every_steps=7)))
  out['in_memory'] = in_memory_evaluator('in_memory')
  for key, kwargs in {
      'np_b4_e1': dict(batch_size=4, num_epochs=1, shuffle=False),
      'np_b4_e2': dict(batch_size=4, num_epochs=2, shuffle=False),
      'np_b5_e3': dict(batch_size=5, num_epochs=3, shuffle=False),
      'np_b16_e1': dict(batch_size=16, num_epochs=1, shuffle=False),
      'np_b3_e2_shuffled': dict(batch_size=3, num_epochs=2, shuffle=True),
  }.items():
    out[key] = numpy_batches(key, **kwargs)
  out['np_train_labels'] = numpy_training_labels('np_train')
  with open(OUT, 'w') as f:
    json.dump(out, f)


if __name__ == '__main__':
  main()
