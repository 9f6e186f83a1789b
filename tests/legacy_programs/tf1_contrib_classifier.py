"""A TensorFlow 1.x TPU program (BERT's run_classifier.py style): `import tensorflow as tf`
with the TF1 API, `tf.flags`, `tf.app.run`, `tf.contrib.tpu.*`, `tf.contrib.cluster_resolver`.
It runs on TensorFlow 2.16+ through `tpu-estimator run --tf1` (tests/test_compat.py); the
model, data and hyperparameters are those of tpu_classifier.py, so its results can be
compared with the original's run of that program.

    tpu-estimator run --tf1 tf1_contrib_classifier.py --model_dir=DIR --output_json=OUT \
        --init_checkpoint=CKPT [--use_tpu --num_tpu_cores=2]
"""
import json
import os

import numpy as np
import tensorflow as tf

flags = tf.flags
FLAGS = flags.FLAGS
flags.DEFINE_string('model_dir', None, 'Where checkpoints and summaries go.')
flags.DEFINE_string('init_checkpoint', None, 'The pretrained encoder checkpoint.')
flags.DEFINE_bool('use_tpu', False, 'Whether to use TPU.')
flags.DEFINE_string('tpu_name', None, 'The Cloud TPU to use.')
flags.DEFINE_integer('num_tpu_cores', 8, 'Total number of TPU cores.')
flags.DEFINE_integer('iterations_per_loop', 4, 'Steps per TPU loop.')
flags.DEFINE_integer('num_train_steps', 12, 'Training steps.')
flags.DEFINE_integer('batch_size', 16, 'Global batch size.')
flags.DEFINE_float('learning_rate', 0.05, 'Adam learning rate.')
flags.DEFINE_string('export_dir', None, 'Base directory for export_saved_model.')
flags.DEFINE_string('output_json', None, 'Where to write the results.')

NUM_FEATURES, HIDDEN, NUM_CLASSES = 4, 8, 3


def make_data(n, seed):
  rng = np.random.RandomState(seed)
  x = rng.randn(n, NUM_FEATURES).astype(np.float32)
  w = np.array([[1.0, -1.0, 0.5], [-0.5, 1.0, 0.0], [0.3, 0.2, -1.0], [0.0, -0.4, 0.8]],
               np.float32)
  return x, np.argmax(x @ w, axis=1).astype(np.int32)


TRAIN, EVAL, PREDICT = make_data(96, 0), make_data(72, 1), make_data(40, 2)


def input_fn_builder(data, is_training):

  def input_fn(params):
    d = tf.data.Dataset.from_tensor_slices(({'x': data[0]}, data[1]))
    if is_training:
      d = d.repeat()
    return d.batch(params['batch_size'], drop_remainder=is_training)

  return input_fn


def predict_input_fn(params):
  return tf.data.Dataset.from_tensor_slices({'x': PREDICT[0]}).batch(params['batch_size'])


def serving_input_fn():
  x = tf.placeholder(tf.float32, [None, NUM_FEATURES], name='x')
  return tf.estimator.export.ServingInputReceiver({'x': x}, {'x': x})


def create_model(x):
  with tf.variable_scope('encoder'):
    kernel = tf.get_variable('kernel', [NUM_FEATURES, HIDDEN],
                             initializer=tf.zeros_initializer())
    bias = tf.get_variable('bias', [HIDDEN], initializer=tf.zeros_initializer())
    hidden = tf.nn.relu(tf.matmul(x, kernel) + bias)
  with tf.variable_scope('classifier'):
    init = np.linspace(0.4, -0.4, HIDDEN * NUM_CLASSES).reshape(HIDDEN, NUM_CLASSES)
    weights = tf.get_variable('output_weights', [HIDDEN, NUM_CLASSES],
                              initializer=tf.constant_initializer(init))
    bias = tf.get_variable('output_bias', [NUM_CLASSES], initializer=tf.zeros_initializer())
    return tf.matmul(hidden, weights) + bias


def model_fn_builder(init_checkpoint, learning_rate, use_tpu):

  def model_fn(features, labels, mode, params):
    tf.logging.info('*** model_fn: mode=%s, batch_size=%s ***', mode, params['batch_size'])
    logits = create_model(features['x'])
    probabilities = tf.nn.softmax(logits)

    tvars = tf.trainable_variables()
    ckpt_names = {name for name, _ in tf.train.list_variables(init_checkpoint)}
    assignment_map = {v.name.split(':')[0]: v.name.split(':')[0] for v in tvars
                      if v.name.split(':')[0] in ckpt_names}

    def tpu_scaffold():
      tf.train.init_from_checkpoint(init_checkpoint, assignment_map)
      return tf.train.Scaffold()

    if mode == tf.estimator.ModeKeys.PREDICT:
      predictions = {'probabilities': probabilities,
                     'classes': tf.argmax(logits, axis=1, output_type=tf.int32)}
      return tf.contrib.tpu.TPUEstimatorSpec(
          mode, predictions=predictions, scaffold_fn=tpu_scaffold,
          export_outputs={'serving_default': tf.estimator.export.PredictOutput(predictions)})

    per_example_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                      logits=logits)
    loss = tf.reduce_mean(per_example_loss)
    if mode == tf.estimator.ModeKeys.TRAIN:
      global_step = tf.train.get_or_create_global_step()
      optimizer = tf.train.AdamOptimizer(learning_rate)
      if use_tpu:
        optimizer = tf.contrib.tpu.CrossShardOptimizer(optimizer)
      grads_and_vars = optimizer.compute_gradients(loss)
      grads, tvars = zip(*grads_and_vars)
      grads, _ = tf.clip_by_global_norm(grads, clip_norm=10.0)
      train_op = optimizer.apply_gradients(zip(grads, tvars), global_step=global_step)

      def host_call_fn(gs, loss):
        with tf.compat.v2.summary.create_file_writer(FLAGS.model_dir).as_default():
          with tf.compat.v2.summary.record_if(True):
            tf.compat.v2.summary.scalar('host/loss', tf.reduce_mean(loss), step=gs[0])
            return tf.summary.all_v2_summary_ops()

      return tf.contrib.tpu.TPUEstimatorSpec(
          mode, loss=loss, train_op=train_op, scaffold_fn=tpu_scaffold,
          host_call=(host_call_fn, [tf.reshape(global_step, [1]), tf.reshape(loss, [1])]))

    def metric_fn(per_example_loss, labels, logits):
      predictions = tf.argmax(logits, axis=1, output_type=tf.int32)
      return {'eval_accuracy': tf.metrics.accuracy(labels, predictions),
              'eval_loss': tf.metrics.mean(per_example_loss),
              'auc_class0': tf.metrics.auc(tf.equal(labels, 0), tf.nn.softmax(logits)[:, 0],
                                           num_thresholds=50)}

    return tf.contrib.tpu.TPUEstimatorSpec(
        mode, loss=loss, scaffold_fn=tpu_scaffold,
        eval_metrics=(metric_fn, [per_example_loss, labels, logits]))

  return model_fn


def tolist(value):
  if isinstance(value, dict):
    return {k: tolist(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [tolist(v) for v in value]
  if isinstance(value, (np.ndarray, np.generic)):
    return value.tolist()
  return value


def main(_):
  tf.logging.set_verbosity(tf.logging.INFO)
  assert not tf.executing_eagerly(), 'expected TF1 graph mode'
  tpu_cluster_resolver = None
  if FLAGS.use_tpu and FLAGS.tpu_name:
    tpu_cluster_resolver = tf.contrib.cluster_resolver.TPUClusterResolver(FLAGS.tpu_name)
  is_per_host = tf.contrib.tpu.InputPipelineConfig.PER_HOST_V2
  run_config = tf.contrib.tpu.RunConfig(
      cluster=tpu_cluster_resolver, model_dir=FLAGS.model_dir, save_checkpoints_steps=4,
      tpu_config=tf.contrib.tpu.TPUConfig(iterations_per_loop=FLAGS.iterations_per_loop,
                                          num_shards=FLAGS.num_tpu_cores,
                                          per_host_input_for_training=is_per_host))
  estimator = tf.contrib.tpu.TPUEstimator(
      use_tpu=FLAGS.use_tpu, config=run_config,
      model_fn=model_fn_builder(FLAGS.init_checkpoint, FLAGS.learning_rate, FLAGS.use_tpu),
      train_batch_size=FLAGS.batch_size, eval_batch_size=FLAGS.batch_size,
      predict_batch_size=FLAGS.batch_size)
  estimator.train(input_fn=input_fn_builder(TRAIN, True), max_steps=FLAGS.num_train_steps)
  metrics = estimator.evaluate(input_fn=input_fn_builder(EVAL, False), steps=None)
  predictions = list(estimator.predict(input_fn=predict_input_fn))
  export_path = estimator.export_saved_model(FLAGS.export_dir, serving_input_fn)
  with tf.Graph().as_default(), tf.Session() as session:
    meta = tf.saved_model.loader.load(session, ['serve'], export_path)
    signature = meta.signature_def['serving_default']
    exported = session.run({k: v.name for k, v in signature.outputs.items()},
                           {signature.inputs['x'].name: PREDICT[0]})
  host_losses = []
  for name in sorted(tf.gfile.ListDirectory(FLAGS.model_dir)):
    if 'tfevents' in name:
      for event in tf.train.summary_iterator(os.path.join(FLAGS.model_dir, name)):
        for value in event.summary.value:
          if value.tag == 'host/loss':
            host_losses.append([int(event.step), float(tf.make_ndarray(value.tensor))])
  names = sorted(estimator.get_variable_names())
  report = {
      'tf_module': type(tf).__name__,
      'executing_eagerly': tf.executing_eagerly(),
      'estimator_class': '%s.%s' % (type(estimator).__module__, type(estimator).__name__),
      'global_step': int(estimator.get_variable_value('global_step')),
      'variable_names': names,
      'variables': {n: estimator.get_variable_value(n) for n in names},
      'metrics': metrics,
      'predictions': predictions,
      'export_outputs': exported,
      'host_losses': sorted(host_losses),
  }
  with tf.gfile.GFile(FLAGS.output_json, 'w') as f:
    json.dump(tolist(report), f)


if __name__ == '__main__':
  flags.mark_flag_as_required('model_dir')
  flags.mark_flag_as_required('init_checkpoint')
  tf.app.run()
