"""A TensorFlow 1.13-style TPUEstimator program (tensorflow/tpu's mnist/resnet style):
`import tensorflow as tf` with the TF1 API, every contrib name reached as `tf.contrib.X.name`
or through the deep module paths, run through `tpu-estimator run --tf1`
(tests/test_legacy_contrib_programs.py).

Images from tf.data with shuffle_and_repeat, tf.contrib.image.rotate and
batch_and_drop_remainder; a small CNN of tf.contrib.layers (conv2d, batch_norm, max_pool2d,
flatten, dropout, fully_connected) under a slim arg_scope; MomentumW; a host_call with
record_summaries_every_n_global_steps; metric_fn with tf.metrics and contrib streaming metrics.

    tpu-estimator run --tf1 contrib_tf113_cnn.py --model_dir=DIR --output_json=OUT \
        [--use_tpu --num_shards=2]
"""
import json
import os

import numpy as np
import tensorflow as tf
import tensorflow.contrib.slim as slim
from tensorflow.contrib.tpu.python.tpu import tpu_config
from tensorflow.contrib.tpu.python.tpu import tpu_estimator
from tensorflow.contrib.tpu.python.tpu import tpu_optimizer
from tensorflow.contrib.training.python.training import evaluation

flags = tf.flags
FLAGS = flags.FLAGS
flags.DEFINE_string('model_dir', None, 'Where checkpoints and summaries go.')
flags.DEFINE_bool('use_tpu', False, 'Whether to use TPU (replicas).')
flags.DEFINE_integer('num_shards', 8, 'Number of TPU cores.')
flags.DEFINE_integer('train_steps', 6, 'Training steps.')
flags.DEFINE_string('output_json', None, 'Where to write the results.')

SIZE, CLASSES, BATCH = 8, 2, 8


def make_images(n, seed):
  rng = np.random.RandomState(seed)
  labels = rng.randint(0, CLASSES, n).astype(np.int32)
  images = rng.rand(n, SIZE, SIZE, 1).astype(np.float32) * 0.5
  images[labels == 1, 2:6, 3:5, :] += 1.0  # a vertical bar for class 1
  return images, labels


def input_fn_builder(data, is_training):

  def input_fn(params):
    batch_size = params['batch_size']
    d = tf.data.Dataset.from_tensor_slices(data)
    if is_training:
      d = d.apply(tf.contrib.data.shuffle_and_repeat(buffer_size=64, seed=1))
      d = d.map(lambda image, label: (tf.contrib.image.rotate(image, 0.1), label))
      return d.apply(tf.contrib.data.batch_and_drop_remainder(batch_size))
    return d.batch(batch_size)

  return input_fn


def cnn(images, is_training):
  with slim.arg_scope([tf.contrib.layers.conv2d, tf.contrib.layers.fully_connected],
                      weights_initializer=tf.contrib.layers.variance_scaling_initializer(
                          seed=1),
                      weights_regularizer=tf.contrib.layers.l2_regularizer(1e-4)):
    net = tf.contrib.layers.conv2d(images, 4, [3, 3], activation_fn=None)
    net = tf.contrib.layers.batch_norm(net, decay=0.9, scale=True, is_training=is_training,
                                       activation_fn=tf.nn.relu)
    net = tf.contrib.layers.max_pool2d(net, [2, 2])
    net = tf.contrib.layers.flatten(net)
    net = tf.contrib.layers.dropout(net, keep_prob=1.0, is_training=is_training)
    return tf.contrib.layers.fully_connected(net, CLASSES, activation_fn=None)


def model_fn(features, labels, mode, params):
  del params
  is_training = mode == tf.estimator.ModeKeys.TRAIN
  logits = cnn(features, is_training)
  if mode == tf.estimator.ModeKeys.PREDICT:
    return tpu_estimator.TPUEstimatorSpec(mode, predictions={
        'class': tf.argmax(logits, axis=1), 'probabilities': tf.nn.softmax(logits)})
  loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
  loss += tf.add_n(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES))
  if is_training:
    global_step = tf.train.get_global_step()
    optimizer = tf.contrib.opt.MomentumWOptimizer(weight_decay=1e-4, learning_rate=0.05,
                                                  momentum=0.9)
    if FLAGS.use_tpu:
      optimizer = tpu_optimizer.CrossShardOptimizer(optimizer)
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
      train_op = optimizer.minimize(loss, global_step)

    def host_call_fn(gs, lr):
      gs = gs[0]
      with tf.contrib.summary.create_file_writer(FLAGS.model_dir).as_default():
        with tf.contrib.summary.record_summaries_every_n_global_steps(2, global_step=gs):
          tf.contrib.summary.scalar('learning_rate', lr[0], step=gs)
          return tf.contrib.summary.all_summary_ops()

    return tpu_estimator.TPUEstimatorSpec(
        mode, loss=loss, train_op=train_op,
        host_call=(host_call_fn, [tf.reshape(global_step, [1]), tf.constant([0.05])]))

  def metric_fn(labels, logits):
    predictions = tf.argmax(logits, axis=1)
    return {'accuracy': tf.metrics.accuracy(labels, predictions),
            'streaming_accuracy': tf.contrib.metrics.streaming_accuracy(
                tf.cast(predictions, tf.int32), labels)}

  return tpu_estimator.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn,
                                                                       [labels, logits]))


def main(_):
  config = tpu_config.RunConfig(
      model_dir=FLAGS.model_dir, save_checkpoints_steps=3,
      tpu_config=tpu_config.TPUConfig(iterations_per_loop=3, num_shards=FLAGS.num_shards))
  estimator = tpu_estimator.TPUEstimator(
      model_fn=model_fn, config=config, use_tpu=FLAGS.use_tpu, train_batch_size=BATCH,
      eval_batch_size=BATCH, predict_batch_size=BATCH)
  estimator.train(input_fn_builder(make_images(48, 0), True), max_steps=FLAGS.train_steps)
  checkpoints = list(evaluation.checkpoints_iterator(FLAGS.model_dir, timeout=0))
  eval_data = make_images(20, 1)
  metrics = estimator.evaluate(input_fn_builder(eval_data, False), steps=None)
  predictions = list(estimator.predict(input_fn_builder(eval_data[0], False)))

  def serving_input_fn():
    images = tf.placeholder(tf.float32, [None, SIZE, SIZE, 1], name='images')
    return tf.estimator.export.TensorServingInputReceiver(images, images)

  export_dir = estimator.export_savedmodel(os.path.join(FLAGS.model_dir, 'export'),
                                           serving_input_fn)
  steps = []
  for path in tf.gfile.Glob(os.path.join(FLAGS.model_dir, 'events.out.tfevents.*')):
    for event in tf.train.summary_iterator(path):
      steps.extend(event.step for v in event.summary.value if v.tag == 'learning_rate')
  report = {
      'executing_eagerly': tf.executing_eagerly(),
      'variable_names': sorted(n for n, _ in tf.train.list_variables(FLAGS.model_dir)),
      'checkpoints': [os.path.basename(c) for c in checkpoints],
      'metrics': {k: float(v) for k, v in metrics.items()},
      'labels': eval_data[1].tolist(),
      'predictions': [int(p['class']) for p in predictions],
      'export': sorted(os.listdir(export_dir if isinstance(export_dir, str)
                                  else export_dir.decode())),
      'host_call_steps': sorted(steps),
  }
  with open(FLAGS.output_json, 'w') as f:
    json.dump(report, f)


if __name__ == '__main__':
  tf.app.run()
