"""A TensorFlow 1.15-style TPUEstimator program (BERT's run_classifier.py style):
`import tensorflow.compat.v1 as tf` plus `from tensorflow.contrib import X as contrib_X`,
run through `tpu-estimator run` WITHOUT --tf1 (tests/test_legacy_contrib_programs.py).

TFRecords of tf.train.Examples read with contrib_data.parallel_interleave and map_and_batch;
HParams overridden by --hparams; a small encoder (contrib_layers.fully_connected +
layer_norm, BERT's variable names) and a binary classifier; AdamW with L2 regularisation;
a host_call writing contrib summaries; streaming metrics in metric_fn.

    tpu-estimator run contrib_tf115_classifier.py --model_dir=DIR --output_json=OUT \
        [--use_tpu --num_shards=2]
"""
import json
import os

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.contrib import data as contrib_data
from tensorflow.contrib import layers as contrib_layers
from tensorflow.contrib import metrics as contrib_metrics
from tensorflow.contrib import opt as contrib_opt
from tensorflow.contrib import summary as contrib_summary
from tensorflow.contrib import tpu as contrib_tpu
from tensorflow.contrib import training as contrib_training
from tensorflow.contrib.tpu.python.tpu import tpu_config

flags = tf.flags
FLAGS = flags.FLAGS
flags.DEFINE_string('model_dir', None, 'Where checkpoints and summaries go.')
flags.DEFINE_bool('use_tpu', False, 'Whether to use TPU (replicas).')
flags.DEFINE_integer('num_shards', 8, 'Number of TPU cores.')
flags.DEFINE_integer('train_steps', 8, 'Training steps.')
flags.DEFINE_string('hparams', '', 'Comma-separated hyperparameter overrides.')
flags.DEFINE_string('output_json', None, 'Where to write the results.')

NUM_FEATURES = 6
BATCH = 8


def default_hparams():
  return contrib_training.HParams(hidden_size=8, learning_rate=0.01, weight_decay=0.001,
                                  l2=0.0001, use_layer_norm=True)


def make_data(n, seed):
  rng = np.random.RandomState(seed)
  x = rng.randn(n, NUM_FEATURES).astype(np.float32)
  y = (x[:, 0] - 0.5 * x[:, 1] + 0.3 * x[:, 2] > 0).astype(np.int64)
  return x, y


def write_records(path, data):
  with tf.python_io.TFRecordWriter(path) as writer:
    for x, y in zip(*data):
      example = tf.train.Example(features=tf.train.Features(feature={
          'x': tf.train.Feature(float_list=tf.train.FloatList(value=x)),
          'label': tf.train.Feature(int64_list=tf.train.Int64List(value=[y]))}))
      writer.write(example.SerializeToString())


def decode_record(record):
  example = tf.parse_single_example(record, {
      'x': tf.FixedLenFeature([NUM_FEATURES], tf.float32),
      'label': tf.FixedLenFeature([], tf.int64)})
  return {'x': example['x']}, tf.to_int32(example['label'])


def input_fn_builder(files, is_training):
  """BERT's and tensorflow/tpu's input pipelines: interleaved files, map_and_batch."""

  def input_fn(params):
    d = tf.data.Dataset.from_tensor_slices(tf.constant(files))
    d = d.apply(contrib_data.parallel_interleave(tf.data.TFRecordDataset, cycle_length=2,
                                                 sloppy=False))
    if is_training:
      d = d.repeat()
    return d.apply(contrib_data.map_and_batch(decode_record, batch_size=params['batch_size'],
                                              drop_remainder=is_training))

  return input_fn


def create_model(x, hparams):
  with tf.variable_scope('bert'):
    with tf.variable_scope('encoder'):
      hidden = contrib_layers.fully_connected(
          x, hparams.hidden_size, activation_fn=tf.nn.tanh,
          weights_initializer=contrib_layers.xavier_initializer(seed=1))
      if hparams.use_layer_norm:
        hidden = contrib_layers.layer_norm(hidden, begin_norm_axis=-1, begin_params_axis=-1,
                                           scope='LayerNorm')
  output_weights = tf.get_variable(
      'output_weights', [2, hparams.hidden_size],
      initializer=tf.truncated_normal_initializer(stddev=0.5, seed=2))
  output_bias = tf.get_variable('output_bias', [2], initializer=tf.zeros_initializer())
  logits = tf.nn.bias_add(tf.matmul(hidden, output_weights, transpose_b=True), output_bias)
  penalty = contrib_layers.apply_regularization(contrib_layers.l2_regularizer(hparams.l2),
                                                [output_weights])
  return logits, penalty


def model_fn_builder(hparams, use_tpu):

  def model_fn(features, labels, mode, params):
    del params
    logits, penalty = create_model(features['x'], hparams)
    probabilities = tf.nn.softmax(logits)
    if mode == tf.estimator.ModeKeys.PREDICT:
      return contrib_tpu.TPUEstimatorSpec(mode, predictions={
          'probabilities': probabilities, 'class': tf.argmax(logits, axis=-1)})
    per_example_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits)
    loss = tf.reduce_mean(per_example_loss) + penalty
    if mode == tf.estimator.ModeKeys.TRAIN:
      optimizer = contrib_opt.AdamWOptimizer(weight_decay=hparams.weight_decay,
                                             learning_rate=hparams.learning_rate)
      if use_tpu:
        optimizer = contrib_tpu.CrossShardOptimizer(optimizer)
      global_step = tf.train.get_or_create_global_step()
      train_op = optimizer.minimize(loss, global_step=global_step)

      def host_call_fn(gs, host_loss):
        with contrib_summary.create_file_writer(FLAGS.model_dir, max_queue=100).as_default():
          with contrib_summary.always_record_summaries():
            contrib_summary.scalar('host_loss', tf.reduce_mean(host_loss), step=gs[0])
            return contrib_summary.all_summary_ops()

      host_call = (host_call_fn, [tf.reshape(global_step, [1]), tf.reshape(loss, [1])])
      return contrib_tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                          host_call=host_call)

    def metric_fn(per_example_loss, labels, logits):
      probabilities = tf.nn.softmax(logits)
      predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
      positive = probabilities[:, 1]
      return {
          'accuracy': contrib_metrics.streaming_accuracy(predictions, labels),
          'auc': contrib_metrics.streaming_auc(positive, labels),
          'pearson': contrib_metrics.streaming_pearson_correlation(positive,
                                                                   tf.to_float(labels)),
          'mean_loss': contrib_metrics.streaming_mean(per_example_loss),
          'f1': contrib_metrics.f1_score(labels, positive),
          'concat_labels': contrib_metrics.streaming_concat(labels),
      }

    return contrib_tpu.TPUEstimatorSpec(mode, loss=loss,
                                        eval_metrics=(metric_fn, [per_example_loss, labels,
                                                                  logits]))

  return model_fn


def main(_):
  hparams = default_hparams().parse(FLAGS.hparams)
  data_dir = os.path.join(FLAGS.model_dir + '_data')
  tf.gfile.MakeDirs(data_dir)
  train_files = [os.path.join(data_dir, 'train-%d.tfrecord' % i) for i in range(2)]
  for i, path in enumerate(train_files):
    write_records(path, make_data(32, i))
  eval_file = os.path.join(data_dir, 'eval.tfrecord')
  write_records(eval_file, make_data(20, 7))

  run_config = contrib_tpu.RunConfig(
      model_dir=FLAGS.model_dir, save_checkpoints_steps=4,
      tpu_config=tpu_config.TPUConfig(
          iterations_per_loop=4, num_shards=FLAGS.num_shards,
          per_host_input_for_training=tpu_config.InputPipelineConfig.PER_HOST_V2))
  estimator = contrib_tpu.TPUEstimator(
      model_fn=model_fn_builder(hparams, FLAGS.use_tpu), config=run_config,
      use_tpu=FLAGS.use_tpu, train_batch_size=BATCH, eval_batch_size=BATCH,
      predict_batch_size=BATCH)
  estimator.train(input_fn_builder(train_files, True), max_steps=FLAGS.train_steps)
  metrics = estimator.evaluate(input_fn_builder([eval_file], False), steps=None)
  predictions = list(estimator.predict(input_fn_builder([eval_file], False),
                                       yield_single_examples=True))

  def serving_input_fn():
    x = tf.placeholder(tf.float32, [None, NUM_FEATURES], name='x')
    return tf.estimator.export.ServingInputReceiver({'x': x}, {'x': x})

  export_dir = estimator.export_saved_model(os.path.join(FLAGS.model_dir, 'export'),
                                            serving_input_fn)
  if isinstance(export_dir, bytes):
    export_dir = export_dir.decode()
  loaded = (tf.saved_model.load_v2(export_dir, tags=['serve']) if tf.executing_eagerly()
            else None)
  exported = None
  if loaded is not None:
    outputs = loaded.signatures['serving_default'](x=tf.constant(make_data(20, 7)[0][:4]))
    exported = outputs['probabilities'].numpy().tolist()

  summaries = []
  for path in tf.gfile.Glob(os.path.join(FLAGS.model_dir, 'events.out.tfevents.*')):
    for event in tf.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == 'host_loss':
          summaries.append(event.step)
  reader = tf.train.load_checkpoint(FLAGS.model_dir)
  variables = {name: reader.get_tensor(name).tolist()
               for name, _ in tf.train.list_variables(FLAGS.model_dir)
               if name.startswith(('bert/', 'output_'))}
  report = {
      'executing_eagerly': tf.executing_eagerly(),
      'hparams': hparams.values(), 'hparams_json': hparams.to_json(),
      'global_step': int(reader.get_tensor('global_step')),
      'variable_names': sorted(n for n, _ in tf.train.list_variables(FLAGS.model_dir)),
      'variables': variables,
      'metrics': {k: np.asarray(v).tolist() for k, v in metrics.items()},
      'labels': make_data(20, 7)[1].tolist(),
      'predictions': [p['probabilities'].tolist() for p in predictions],
      'export_dir': export_dir, 'exported': exported,
      'host_loss_steps': sorted(summaries),
  }
  with open(FLAGS.output_json, 'w') as f:
    json.dump(report, f)


if __name__ == '__main__':
  flags.mark_flag_as_required('model_dir')
  tf.app.run()
