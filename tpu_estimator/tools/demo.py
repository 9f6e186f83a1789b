"""The end-to-end demo: a small convolutional classifier for scikit-learn's digits, trained,
evaluated and used for prediction with `TPUEstimator(use_tpu=True)`.

The model and input code below is written the way a user of
`tf.compat.v1.estimator.tpu.TPUEstimator` would write it: an `input_fn` that batches with
`params['batch_size']`, a `model_fn` built from `tf.compat.v1.get_variable` and `tf.nn` ops that
returns a `TPUEstimatorSpec` with `eval_metrics` and a `host_call`, and an optimizer wrapped in
`CrossShardOptimizer`.  The batch is split over `shards` replicas: by default every local GPU,
or two logical CPU devices on a machine without one (to show the sharded path there too).

    python -m tpu_estimator demo --steps 400 --shards 2
"""
import os
import tempfile
import time

import numpy as np
import tensorflow as tf

import tpu_estimator as te

v1 = tf.compat.v1

IMAGE_SIZE = 8
NUM_CLASSES = 10
TEST_FRACTION = 0.2

DEFAULT_STEPS = 400
DEFAULT_ITERATIONS_PER_LOOP = 100
TRAIN_BATCH_SIZE = 64  # global: split over the shards
EVAL_BATCH_SIZE = 128
PREDICT_BATCH_SIZE = 128
LEARNING_RATE = 3e-3


# ---------------------------------------------------------------------------------------------
# Data

def load_data():
  """((x_train, y_train), (x_test, y_test)): the 8x8 digits scaled to [0, 1], the last
  `TEST_FRACTION` of the data set (in its shipped order) held out as the test split."""
  try:
    from sklearn.datasets import load_digits  # pylint: disable=import-outside-toplevel
  except ImportError as e:  # pragma: no cover
    raise ImportError('The demo reads the digits data set shipped with scikit-learn: '
                      'pip install "tpu-estimator[demo]" (or scikit-learn).') from e
  digits = load_digits()
  x = (digits.images / 16.0).astype(np.float32).reshape(-1, IMAGE_SIZE, IMAGE_SIZE, 1)
  y = digits.target.astype(np.int64)
  split = len(x) - int(round(len(x) * TEST_FRACTION))
  return (x[:split], y[:split]), (x[split:], y[split:])


def train_input_fn(x, y, seed):
  """Shuffled, repeated batches of `params['batch_size']`."""

  def input_fn(params):
    ds = tf.data.Dataset.from_tensor_slices(({'image': x}, y))
    ds = ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True).repeat()
    return ds.batch(params['batch_size'], drop_remainder=True).prefetch(2)

  return input_fn


def eval_input_fn(x, y=None):
  """One pass over (x, y) in order; the last batch may be partial.  Without `y`, features
  only (prediction)."""

  def input_fn(params):
    features = {'image': x}
    ds = tf.data.Dataset.from_tensor_slices((features, y) if y is not None else features)
    return ds.batch(params['batch_size'])

  return input_fn


# ---------------------------------------------------------------------------------------------
# Model

def _conv(x, name, filters):
  with v1.variable_scope(name):
    kernel = v1.get_variable('kernel', [3, 3, x.shape[-1], filters],
                             initializer=v1.glorot_uniform_initializer())
    bias = v1.get_variable('bias', [filters], initializer=v1.zeros_initializer())
    y = tf.nn.conv2d(x, kernel, strides=1, padding='SAME')
    return tf.nn.relu(tf.nn.bias_add(y, bias))


def _dense(x, name, units, activation=None):
  with v1.variable_scope(name):
    kernel = v1.get_variable('kernel', [x.shape[-1], units],
                             initializer=v1.glorot_uniform_initializer())
    bias = v1.get_variable('bias', [units], initializer=v1.zeros_initializer())
    y = tf.matmul(x, kernel) + bias
    return activation(y) if activation is not None else y


def logits_fn(images):
  """8x8x1 -> conv 3x3/32, max-pool -> 4x4x32 -> conv 3x3/64, max-pool -> 2x2x64
  -> dense 128 -> 10 logits."""
  net = _conv(images, 'conv1', 32)
  net = tf.nn.max_pool2d(net, ksize=2, strides=2, padding='SAME')
  net = _conv(net, 'conv2', 64)
  net = tf.nn.max_pool2d(net, ksize=2, strides=2, padding='SAME')
  net = tf.reshape(net, [-1, 2 * 2 * 64])
  net = _dense(net, 'dense1', 128, tf.nn.relu)
  return _dense(net, 'logits', NUM_CLASSES)


def metric_fn(labels, logits):
  """Runs on the host over the concatenated shards."""
  return {'accuracy': v1.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, 1))}


def host_call_fn(global_step, loss):
  """Runs on the host every training step: a TF2 summary of the mean loss over shards."""
  tf.summary.scalar('host_call/loss', tf.reduce_mean(loss), step=global_step[0])


def model_fn(features, labels, mode, params):
  """Called once per shard, with the per-shard batch (`params['batch_size']`)."""
  logits = logits_fn(features['image'])
  if mode == te.ModeKeys.PREDICT:
    return te.TPUEstimatorSpec(mode, predictions={
        'classes': tf.argmax(logits, 1),
        'probabilities': tf.nn.softmax(logits),
    })
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits))
  if mode == te.ModeKeys.EVAL:
    return te.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))
  optimizer = te.CrossShardOptimizer(v1.train.AdamOptimizer(params['learning_rate']))
  train_op = optimizer.minimize(loss, global_step=v1.train.get_global_step())
  # host_call tensors are concatenated over shards along axis 0: give scalars a batch axis.
  host_call = (host_call_fn, [tf.reshape(v1.train.get_global_step(), [1]),
                              tf.reshape(loss, [1])])
  return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op, host_call=host_call)


# ---------------------------------------------------------------------------------------------
# The demo

EXPORT_EXAMPLES = 8


CPU_SHARDS = 2  # the default without a GPU


def default_shards():
  """Every local GPU, or `CPU_SHARDS` logical CPU devices where there is none."""
  return len(tf.config.list_physical_devices('GPU')) or CPU_SHARDS


def run(steps=DEFAULT_STEPS, shards=None, model_dir=None,
        iterations_per_loop=DEFAULT_ITERATIONS_PER_LOOP, seed=0, out=print):
  """Trains `steps` steps, evaluates and predicts on the test split; reports through `out`
  (one line per call) and returns the numbers.  `shards=None`: `default_shards()`."""
  if shards is None:
    shards = default_shards()
  if model_dir is None:
    model_dir = tempfile.mkdtemp(prefix='tpu_estimator_demo_')
  model_dir = os.path.abspath(os.fspath(model_dir))
  (x_train, y_train), (x_test, y_test) = load_data()

  estimator = make_estimator(model_dir, shards, iterations_per_loop, seed)
  out('Digits: %d training, %d test images (8x8); %d shard(s), global batch %d, '
      'iterations_per_loop %s.' % (len(x_train), len(x_test), shards, TRAIN_BATCH_SIZE,
                                   iterations_per_loop))
  first_step = estimator.get_variable_value('global_step') if estimator.latest_checkpoint() else 0
  start = time.time()
  estimator.train(train_input_fn(x_train, y_train, seed), steps=steps)
  train_seconds = time.time() - start
  steps_run = int(estimator.get_variable_value('global_step')) - int(first_step)
  metrics = estimator.evaluate(eval_input_fn(x_test, y_test))
  predictions = list(estimator.predict(eval_input_fn(x_test), predict_keys=['classes']))
  predicted = np.array([p['classes'] for p in predictions])
  agreement = float(np.mean(predicted == y_test)) if len(predicted) == len(y_test) else None

  export_dir, served_classes = export_and_serve(estimator, model_dir, x_test[:EXPORT_EXAMPLES])
  result = {
      'export_dir': export_dir,
      'served_classes': served_classes.tolist(),
      'predicted_classes': predicted[:EXPORT_EXAMPLES].tolist(),
      'accuracy': float(metrics['accuracy']),
      'loss': float(metrics['loss']),
      'global_step': int(metrics['global_step']),
      'steps_per_sec': steps_run / train_seconds,
      'train_seconds': train_seconds,
      'model_dir': model_dir,
      'predictions': len(predictions),
      'predict_accuracy': agreement,
      'test_size': len(x_test),
      'steps_run': steps_run,
  }
  report(result, y_test, out)
  return result


def make_estimator(model_dir, shards, iterations_per_loop, seed):
  # Summaries are written at the end of device loops: save them once per loop.
  summary_steps = iterations_per_loop if isinstance(iterations_per_loop, int) else 100
  config = te.RunConfig(
      model_dir=model_dir, tf_random_seed=seed, save_summary_steps=summary_steps,
      tpu_config=te.TPUConfig(iterations_per_loop=iterations_per_loop, num_shards=shards))
  return te.TPUEstimator(
      model_fn=model_fn, config=config, use_tpu=True, params={'learning_rate': LEARNING_RATE},
      train_batch_size=TRAIN_BATCH_SIZE, eval_batch_size=EVAL_BATCH_SIZE,
      predict_batch_size=PREDICT_BATCH_SIZE)


def export_and_serve(estimator, model_dir, images):
  """Exports for serving, reloads the SavedModel as a TF2 program would and classifies
  `images`: (export directory, the classes served)."""
  export_dir = estimator.export_saved_model(
      os.path.join(model_dir, 'export'),
      te.export.build_raw_serving_input_receiver_fn(
          {'image': tf.zeros([1] + list(images.shape[1:]), tf.float32)})).decode()
  served = tf.saved_model.load(export_dir, tags=['serve']).signatures['serving_default']
  return export_dir, served(image=tf.constant(images))['classes'].numpy()


def report(result, y_test, out):
  """The demo's report, one line per `out` call."""
  steps_run, train_seconds = result['steps_run'], result['train_seconds']
  agreement, export_dir = result['predict_accuracy'], result['export_dir']
  out('Test accuracy: %.4f (loss %.4f) at global step %d.' %
      (result['accuracy'], result['loss'], result['global_step']))
  # Not the progress bar's figure: that one counts the training loop from its second
  # session.run on; this one is the whole call.
  out('Training: %d steps in %.1f s, %.1f steps/s over the whole train() call' %
      (steps_run, train_seconds, result['steps_per_sec']))
  out('  (graph building and checkpoints included; the bar\'s steps/s is the loop alone).')
  out('Predicted %d test images (accuracy of the predicted classes: %s).' %
      (result['predictions'], 'n/a' if agreement is None else '%.4f' % agreement))
  out('Exported to %s; reloaded, it classifies the first %d test digits as %s (true: %s).' %
      (export_dir, EXPORT_EXAMPLES, ' '.join(map(str, result['served_classes'])),
       ' '.join(map(str, y_test[:EXPORT_EXAMPLES]))))
  out('Model directory: %s' % result['model_dir'])
  out('View the training curves: tensorboard --logdir %s' % result['model_dir'])
