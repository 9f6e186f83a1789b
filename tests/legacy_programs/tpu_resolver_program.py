"""A tensorflow/tpu-style program (models/official/mnist and resnet): it builds a
TPUClusterResolver from `--tpu` even when no TPU is named, passes it to
`RunConfig(cluster=...)`, and asks the private
`tensorflow.python.estimator.estimator._load_global_step_from_checkpoint_dir` where training
resumes.  Run by tests/test_contrib_imports.py:

    tpu-estimator run [--tf1] tpu_resolver_program.py --model_dir=DIR --output_json=OUT \
        [--resolver=distribute|contrib] [--use_tpu --num_shards=2]
"""
import json

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.python.distribute.cluster_resolver.tpu import tpu_cluster_resolver
from tensorflow.python.estimator import estimator

flags = tf.flags
FLAGS = flags.FLAGS
flags.DEFINE_string('tpu', None, 'The Cloud TPU to use (none: this machine).')
flags.DEFINE_string('resolver', 'distribute', 'distribute: tf.distribute.cluster_resolver; '
                    'contrib: tf.contrib.cluster_resolver.')
flags.DEFINE_string('model_dir', None, 'Where checkpoints go.')
flags.DEFINE_bool('use_tpu', False, 'Whether to use TPU (replicas).')
flags.DEFINE_integer('num_shards', 8, 'Number of TPU cores.')
flags.DEFINE_string('output_json', None, 'Where to write the results.')


def model_fn(features, labels, mode, params):
  del params
  logits = tf.layers.dense(features['x'], 2)
  loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
  optimizer = tf.train.GradientDescentOptimizer(0.1)
  if FLAGS.use_tpu:
    optimizer = tf.tpu.CrossShardOptimizer(optimizer)
  train_op = optimizer.minimize(loss, tf.train.get_global_step())
  return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn(params):
  rng = np.random.RandomState(0)
  x = rng.rand(32, 3).astype(np.float32)
  y = (x[:, 0] > 0.5).astype(np.int32)
  data = tf.data.Dataset.from_tensor_slices(({'x': x}, y)).repeat()
  return data.batch(params['batch_size'], drop_remainder=True)


def main(argv):
  del argv
  cluster_resolver = (tf.contrib.cluster_resolver if FLAGS.resolver == 'contrib' else
                      tf.distribute.cluster_resolver)
  # As mnist_tpu.py / resnet_main.py: built even when no TPU is used.
  resolver = cluster_resolver.TPUClusterResolver(FLAGS.tpu or '', zone=None, project=None)
  config = tf.estimator.tpu.RunConfig(
      cluster=resolver, model_dir=FLAGS.model_dir,
      tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=2,
                                            num_shards=FLAGS.num_shards))
  classifier = tf.estimator.tpu.TPUEstimator(
      model_fn=model_fn, use_tpu=FLAGS.use_tpu, train_batch_size=8, eval_batch_size=8,
      config=config)
  before = estimator._load_global_step_from_checkpoint_dir(FLAGS.model_dir)  # pylint: disable=protected-access
  classifier.train(input_fn, max_steps=4)
  after = estimator._load_global_step_from_checkpoint_dir(FLAGS.model_dir)  # pylint: disable=protected-access
  metrics = classifier.evaluate(input_fn, steps=2)
  report = {
      'resolver_class': '%s.%s' % (type(resolver).__module__, type(resolver).__name__),
      'is_tensorflow_resolver': isinstance(resolver, tpu_cluster_resolver.TPUClusterResolver),
      'master': resolver.master(),
      'cluster_spec': resolver.cluster_spec().as_dict(),
      'config_master': config.master,
      'step_before': int(before),
      'step_after': int(after),
      'eval_global_step': int(metrics['global_step']),
      'eval_loss': float(metrics['loss']),
  }
  with tf.gfile.GFile(FLAGS.output_json, 'w') as f:
    json.dump(report, f)


if __name__ == '__main__':
  tf.app.run(main)
