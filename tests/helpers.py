"""Tiny model_fns and input_fns shared by the tests (deterministic: constant initialisers,
fixed data order)."""
import glob
import os

import numpy as np
import tensorflow as tf

import tpu_estimator as te

v1 = tf.compat.v1
NUM_FEATURES = 4
NUM_CLASSES = 3


def make_data(n=96, seed=0):
  rng = np.random.RandomState(seed)
  x = rng.randn(n, NUM_FEATURES).astype(np.float32)
  w = rng.randn(NUM_FEATURES, NUM_CLASSES).astype(np.float32)
  y = np.argmax(x @ w, axis=1).astype(np.int64)
  return x, y


def write_csv_rows(path, x, y, lo, hi):
  """Rows lo..hi-1 of (x, y) as CSV lines (features, then the label) in `path`."""
  with open(path, 'w') as f:
    f.writelines(','.join([str(v) for v in x[i]] + [str(y[i])]) + '\n' for i in range(lo, hi))


def parse_csv_row(line):
  """(features, label) of a line `write_csv_rows` wrote."""
  columns = tf.io.decode_csv(line, [[0.0]] * NUM_FEATURES + [[0]])
  return {'x': tf.stack(columns[:-1])}, tf.cast(columns[-1], tf.int64)


def dataset_input_fn(x, y, batch_size=None, repeat=True, drop_remainder=False):
  """An input_fn reading (x, y); batch from params['batch_size'] unless given."""

  def input_fn(params):
    size = batch_size or params['batch_size']
    ds = tf.data.Dataset.from_tensor_slices(({'x': x}, y))
    if repeat:
      ds = ds.repeat()
    return ds.batch(size, drop_remainder=drop_remainder)

  return input_fn


def _logits(features):
  kernel = v1.get_variable('dense/kernel', [NUM_FEATURES, NUM_CLASSES],
                           initializer=tf.constant_initializer(
                               np.linspace(-0.5, 0.5, NUM_FEATURES * NUM_CLASSES).reshape(
                                   NUM_FEATURES, NUM_CLASSES)))
  bias = v1.get_variable('dense/bias', [NUM_CLASSES], initializer=tf.zeros_initializer())
  return tf.matmul(features['x'], kernel) + bias


def make_model_fn(tpu=False, learning_rate=0.1, cross_shard=False, optimizer='sgd',
                  host_call=False):
  """A linear softmax classifier; `tpu` returns TPUEstimatorSpec with eval_metrics."""

  def model_fn(features, labels, mode, params):
    logits = _logits(features)
    predictions = {'classes': tf.argmax(logits, 1), 'probabilities': tf.nn.softmax(logits)}
    if mode == te.ModeKeys.PREDICT:
      if tpu:
        return te.TPUEstimatorSpec(mode, predictions=predictions)
      return te.EstimatorSpec(mode, predictions=predictions)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    train_op = None
    if mode == te.ModeKeys.TRAIN:
      opt = (v1.train.GradientDescentOptimizer(learning_rate) if optimizer == 'sgd' else
             v1.train.AdamOptimizer(learning_rate))
      if cross_shard:
        opt = te.CrossShardOptimizer(opt)
      train_op = opt.minimize(loss, global_step=v1.train.get_global_step())
    if tpu:
      def metric_fn(labels, logits):
        return {'accuracy': v1.metrics.accuracy(labels, tf.argmax(logits, 1)),
                'mean_label': v1.metrics.mean(tf.cast(labels, tf.float32))}
      spec_host_call = None
      if host_call:
        def host_fn(gs, loss):
          tf.summary.scalar('host_loss', tf.reduce_mean(loss), step=gs[0])
          return v1.summary.scalar('v1_host_loss', tf.reduce_mean(loss))
        spec_host_call = (host_fn, [tf.reshape(v1.train.get_global_step(), [1]),
                                    tf.reshape(loss, [1])])
      return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                 eval_metrics=(metric_fn, [labels, logits]),
                                 host_call=spec_host_call)
    metrics = {'accuracy': v1.metrics.accuracy(labels, predictions['classes']),
               'mean_label': v1.metrics.mean(tf.cast(labels, tf.float32))}
    return te.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics,
                            predictions=predictions)

  return model_fn


def adagrad_classifier_spec(mode, labels, logits):
  """A TPUEstimatorSpec classifying `labels` from `logits`: Adagrad(0.5) across the shards in
  TRAIN, accuracy in EVAL."""
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
  if mode == te.ModeKeys.TRAIN:
    optimizer = te.CrossShardOptimizer(tf.compat.v1.train.AdagradOptimizer(0.5))
    return te.TPUEstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(
        loss, tf.compat.v1.train.get_global_step()))
  return te.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(
      lambda labels, logits: {
          'acc': tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))},
      [labels, logits]))


def tpu_config(num_shards=None, iterations_per_loop=4, model_dir=None, **kwargs):
  per_host = kwargs.pop('per_host_input_for_training', True)
  xla = kwargs.pop('xla', None)
  return te.RunConfig(model_dir=model_dir, tpu_config=te.TPUConfig(
      iterations_per_loop=iterations_per_loop, num_shards=num_shards,
      per_host_input_for_training=per_host, xla=xla), **kwargs)


def snapshot(directory):
  """Every file's bytes under `directory`."""
  result = {}
  for root, _, files in os.walk(directory):
    for name in files:
      path = os.path.join(root, name)
      with open(path, 'rb') as f:
        result[os.path.relpath(path, directory)] = f.read()
  return result


def counting(model_fn):
  """(`model_fn` recording the mode of each call, the list of those modes): the number of
  graphs built (one call per replica each)."""
  calls = []

  def counted(features, labels, mode, params):
    calls.append(mode)
    return model_fn(features, labels, mode, params)

  return counted, calls


class BuildsOpsHook(tf.compat.v1.train.SessionRunHook):
  """A hook that builds an op in every begin(), as some users' hooks do, and records what it
  fetched at each run."""

  def __init__(self):
    self.fetched = []

  def begin(self):
    self.op = tf.constant(1.0, name='hook_op')

  def before_run(self, run_context):
    return tf.compat.v1.train.SessionRunArgs(self.op)

  def after_run(self, run_context, run_values):
    self.fetched.append(float(run_values.results))


class EventsHook(tf.compat.v1.train.SessionRunHook):
  """Records the calls a MonitoredSession makes to a hook, in order."""

  def __init__(self):
    self.events = []

  def begin(self):
    self.events.append('begin')

  def after_create_session(self, session, coord):
    self.events.append('created')

  def after_run(self, run_context, run_values):
    self.events.append('run')

  def end(self, session):
    self.events.append('end')


class FinalValues(tf.compat.v1.train.SessionRunHook):
  """Records, into the dict `seen`, this task's own global step and kernel in its session as
  training ends.  In a cluster a worker's train() can return before the chief has written its
  last checkpoint, so reading the model_dir afterwards races the chief."""

  def __init__(self, seen):
    self._seen = seen

  def begin(self):
    self._step = tf.compat.v1.train.get_global_step()
    self._kernel = [v for v in tf.compat.v1.global_variables() if v.op.name == 'dense/kernel']

  def end(self, session):
    step, kernel = session.run([self._step, self._kernel])
    self._seen.update(global_step=int(step), kernel=kernel[0].tolist() if kernel else None)


def convolved(x):
  """`x` [batch, features] through a 1x3 convolution (same shape, a constant kernel): an op
  XLA's CPU backend runs slower than TensorFlow, so `xla=None` does not compile it on CPU."""
  image = tf.reshape(x, [-1, 1, x.shape[1], 1])
  kernel = tf.constant(1 / 3, tf.float32, [1, 3, 1, 1])
  return tf.reshape(tf.nn.conv2d(image, kernel, 1, 'SAME'), [-1, x.shape[1]])


class XlaRunSpy(tf.compat.v1.train.SessionRunHook):
  """Traces every run and records whether any node ran as a compiled XLA cluster, and whether
  the whole loop ran as one computation (an `XlaLaunch`, and no model op run on its own)."""

  def __init__(self):
    self.compiled_runs = 0
    self.whole_loop_runs = 0

  def before_run(self, run_context):
    del run_context
    return tf.compat.v1.train.SessionRunArgs(
        None, options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE))

  def after_run(self, run_context, run_values):
    del run_context
    nodes = [node for dev in run_values.run_metadata.step_stats.dev_stats
             for node in dev.node_stats]
    types = {node.timeline_label.split('=')[-1].split('(')[0].strip() for node in nodes}
    # Auto-clustered steps run as `_XlaRun` nodes named `cluster_<n>_1/xla_run`; a loop
    # compiled as a whole as one `XlaLaunch`.
    if any(node.node_name.endswith('xla_run') for node in nodes) or 'XlaLaunch' in types:
      self.compiled_runs += 1
    if 'XlaLaunch' in types and not types & {'MatMul', 'ResourceApplyAdam',
                                             'ResourceApplyGradientDescent'}:
      self.whole_loop_runs += 1


def scalar_summaries(directory, tag):
  """{step: value} of the scalar summaries `tag` in the event files of `directory` (TF1 simple
  values and TF2 tensors)."""
  values = {}
  for path in glob.glob(os.path.join(directory, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == tag:
          number = value.simple_value if value.HasField('simple_value') else \
              float(tf.make_ndarray(value.tensor))
          values[event.step] = number
  return values
