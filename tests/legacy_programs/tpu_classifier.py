"""A BERT-era TPUEstimator fine-tuning program, written against `tf.compat.v1.estimator.tpu`
as it was before TensorFlow 2.16.  It runs unchanged on the original (TF 2.15 +
tensorflow-estimator) and through `tpu-estimator run` on TF 2.16+ (tests/test_compat.py).

    python tpu_classifier.py --model_dir=DIR --output_json=OUT [--use_tpu --num_shards=2]

Everything is deterministic: constant initialisers, fixed data, no shuffling.  The encoder
starts from a "pretrained" checkpoint (`--init_checkpoint`, written first with
`--write_init_checkpoint`) through `scaffold_fn` + `init_from_checkpoint`.  `--schedule` lists
the actions to run in order; each appends its results to --output_json.
"""
import json
import os

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

FLAGS = flags.FLAGS
flags.DEFINE_string('model_dir', None, 'Where checkpoints and summaries go.')
flags.DEFINE_string('init_checkpoint', None, 'The pretrained encoder checkpoint.')
flags.DEFINE_bool('write_init_checkpoint', False, 'First write --init_checkpoint.')
flags.DEFINE_bool('use_tpu', False, 'Whether to use TPU (replicas).')
flags.DEFINE_integer('num_shards', 8, 'Number of TPU cores (shards).')
flags.DEFINE_integer('iterations_per_loop', 4, 'Steps per TPU loop.')
flags.DEFINE_integer('train_steps', 12, 'Total training steps (max_steps).')
flags.DEFINE_integer('save_checkpoints_steps', 4, 'Checkpoint frequency.')
flags.DEFINE_integer('train_batch_size', 16, 'Global training batch size.')
flags.DEFINE_integer('eval_batch_size', 16, 'Global eval batch size.')
flags.DEFINE_integer('predict_batch_size', 16, 'Global predict batch size.')
flags.DEFINE_float('learning_rate', 0.05, 'Adam learning rate.')
flags.DEFINE_list('schedule', ['train', 'evaluate', 'predict', 'export'], 'Actions, in order.')
flags.DEFINE_string('export_dir', None, 'Base directory for export_saved_model.')
flags.DEFINE_string('load_export', None, 'A SavedModel to load and run (action load_export).')
flags.DEFINE_string('output_json', None, 'Where to write the results.')
flags.mark_flag_as_required('model_dir')

NUM_FEATURES, HIDDEN, NUM_CLASSES = 4, 8, 3
ModeKeys = tf.estimator.ModeKeys


def make_data(n, seed):
  rng = np.random.RandomState(seed)
  x = rng.randn(n, NUM_FEATURES).astype(np.float32)
  w = np.array([[1.0, -1.0, 0.5], [-0.5, 1.0, 0.0], [0.3, 0.2, -1.0], [0.0, -0.4, 0.8]],
               np.float32)
  return x, np.argmax(x @ w, axis=1).astype(np.int32)


TRAIN = make_data(96, 0)  # 6 batches of 16
EVAL = make_data(72, 1)  # 4 batches of 16 and one of 8
PREDICT = make_data(40, 2)


def train_input_fn(params):
  ds = tf.data.Dataset.from_tensor_slices(({'x': TRAIN[0]}, TRAIN[1]))
  return ds.repeat().batch(params['batch_size'], drop_remainder=True)


def eval_input_fn(params):
  return tf.data.Dataset.from_tensor_slices(({'x': EVAL[0]}, EVAL[1])).batch(
      params['batch_size'])


def predict_input_fn(params):
  return tf.data.Dataset.from_tensor_slices({'x': PREDICT[0]}).batch(params['batch_size'])


def serving_input_receiver_fn():
  x = tf.compat.v1.placeholder(tf.float32, [None, NUM_FEATURES], name='x')
  return tf.estimator.export.ServingInputReceiver({'x': x}, {'x': x})


# ---------------------------------------------------------------------------------------------
def pretrained_values():
  kernel = np.linspace(-0.6, 0.7, NUM_FEATURES * HIDDEN).reshape(NUM_FEATURES, HIDDEN)
  return {'encoder/kernel': kernel.astype(np.float32),
          'encoder/bias': np.full([HIDDEN], 0.05, np.float32)}


def write_init_checkpoint(path):
  """What a pretraining job left behind: the encoder's variables in a Saver checkpoint."""
  with tf.Graph().as_default():
    for name, value in pretrained_values().items():
      tf.compat.v1.get_variable(name, initializer=value)
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      saver.save(session, path)


def get_assignment_map_from_checkpoint(tvars, init_checkpoint):
  """As BERT's modeling.py: the trainable variables found in the checkpoint."""
  names = {v.name.split(':')[0] for v in tvars}
  assignment_map = {}
  for name, _ in tf.compat.v1.train.list_variables(init_checkpoint):
    if name in names:
      assignment_map[name] = name
  return assignment_map


def create_model(features):
  with tf.compat.v1.variable_scope('encoder'):
    kernel = tf.compat.v1.get_variable('kernel', [NUM_FEATURES, HIDDEN],
                                       initializer=tf.compat.v1.zeros_initializer())
    bias = tf.compat.v1.get_variable('bias', [HIDDEN],
                                     initializer=tf.compat.v1.zeros_initializer())
    hidden = tf.nn.relu(tf.matmul(features['x'], kernel) + bias)
  with tf.compat.v1.variable_scope('classifier'):
    init = np.linspace(0.4, -0.4, HIDDEN * NUM_CLASSES).reshape(HIDDEN, NUM_CLASSES)
    weights = tf.compat.v1.get_variable('output_weights', [HIDDEN, NUM_CLASSES],
                                        initializer=tf.compat.v1.constant_initializer(init))
    bias = tf.compat.v1.get_variable('output_bias', [NUM_CLASSES],
                                     initializer=tf.compat.v1.zeros_initializer())
    return tf.matmul(hidden, weights) + bias


class GlobalStepRecorderHook(tf.estimator.SessionRunHook):
  """A user hook: fetches the global step with SessionRunArgs, counts session.run calls."""

  def __init__(self, name, record):
    self._name = name
    self._record = record

  def begin(self):
    self._global_step = tf.compat.v1.train.get_global_step()
    self._record[self._name] = {'begin': 1, 'runs': 0, 'end_step': None}

  def before_run(self, run_context):
    return tf.estimator.SessionRunArgs({'global_step': self._global_step})

  def after_run(self, run_context, run_values):
    assert run_values.results['global_step'] >= 0
    self._record[self._name]['runs'] += 1

  def end(self, session):
    self._record[self._name]['end_step'] = int(session.run(self._global_step))


def model_fn_builder(init_checkpoint, learning_rate, use_tpu, hook_record):

  def model_fn(features, labels, mode, params):
    del params
    logits = create_model(features)
    probabilities = tf.nn.softmax(logits)
    classes = tf.argmax(logits, axis=1, output_type=tf.int32)

    scaffold_fn = None
    if init_checkpoint:
      assignment_map = get_assignment_map_from_checkpoint(
          tf.compat.v1.trainable_variables(), init_checkpoint)

      def tpu_scaffold():
        tf.compat.v1.train.init_from_checkpoint(init_checkpoint, assignment_map)
        return tf.compat.v1.train.Scaffold()

      scaffold_fn = tpu_scaffold

    if mode == ModeKeys.PREDICT:
      outputs = {'probabilities': probabilities, 'classes': classes}
      return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
          mode, predictions=outputs, scaffold_fn=scaffold_fn,
          prediction_hooks=[GlobalStepRecorderHook('predict', hook_record)],
          export_outputs={
              'serving_default': tf.estimator.export.PredictOutput(outputs),
              'classify': tf.estimator.export.ClassificationOutput(scores=probabilities)})

    per_example_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                      logits=logits)
    loss = tf.reduce_mean(per_example_loss)

    if mode == ModeKeys.TRAIN:
      global_step = tf.compat.v1.train.get_or_create_global_step()
      optimizer = tf.compat.v1.train.AdamOptimizer(learning_rate)
      if use_tpu:
        optimizer = tf.compat.v1.tpu.CrossShardOptimizer(optimizer)
      grads_and_vars = optimizer.compute_gradients(loss)
      grads, tvars = zip(*grads_and_vars)
      grads, _ = tf.clip_by_global_norm(grads, clip_norm=10.0)
      train_op = optimizer.apply_gradients(zip(grads, tvars), global_step=global_step)

      def host_call_fn(gs, loss, lr):
        """TF2 summaries on the host, as in TPU programs of the TF 2.x era."""
        gs = gs[0]
        with tf.compat.v2.summary.create_file_writer(FLAGS.model_dir).as_default():
          with tf.compat.v2.summary.record_if(True):
            tf.compat.v2.summary.scalar('host/loss', tf.reduce_mean(loss), step=gs)
            tf.compat.v2.summary.scalar('host/learning_rate', lr[0], step=gs)
            return tf.compat.v1.summary.all_v2_summary_ops()

      host_call = (host_call_fn, [tf.reshape(global_step, [1]), tf.reshape(loss, [1]),
                                  tf.reshape(tf.constant(learning_rate, tf.float32), [1])])
      return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
          mode, loss=loss, train_op=train_op, scaffold_fn=scaffold_fn, host_call=host_call,
          training_hooks=[GlobalStepRecorderHook('train', hook_record)])

    def metric_fn(per_example_loss, labels, logits):
      predictions = tf.argmax(logits, axis=1, output_type=tf.int32)
      probs = tf.nn.softmax(logits)
      onehot = tf.one_hot(labels, NUM_CLASSES)
      is_zero, predicted_zero = tf.equal(labels, 0), tf.equal(predictions, 0)
      v1m = tf.compat.v1.metrics
      return {
          'eval_accuracy': v1m.accuracy(labels, predictions),
          'eval_loss': v1m.mean(per_example_loss),
          'mean_per_class_accuracy': v1m.mean_per_class_accuracy(labels, predictions,
                                                                 NUM_CLASSES),
          'precision_class0': v1m.precision(is_zero, predicted_zero),
          'recall_class0': v1m.recall(is_zero, predicted_zero),
          'auc_class0': v1m.auc(is_zero, probs[:, 0], num_thresholds=50),
          'true_positives_class0': v1m.true_positives(is_zero, predicted_zero),
          'false_negatives_class0': v1m.false_negatives(is_zero, predicted_zero),
          'mse_probabilities': v1m.mean_squared_error(onehot, probs),
          'rmse_probabilities': v1m.root_mean_squared_error(onehot, probs),
          'mae_probabilities': v1m.mean_absolute_error(onehot, probs),
          'mean_iou': v1m.mean_iou(labels, predictions, NUM_CLASSES),
          'recall_at_2': v1m.recall_at_k(tf.cast(labels, tf.int64), logits, k=2),
      }

    return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
        mode, loss=loss, scaffold_fn=scaffold_fn,
        eval_metrics=(metric_fn, [per_example_loss, labels, logits]),
        evaluation_hooks=[GlobalStepRecorderHook('evaluate', hook_record)])

  return model_fn


# ---------------------------------------------------------------------------------------------
def jsonable(value):
  if isinstance(value, dict):
    return {str(k): jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [jsonable(v) for v in value]
  if isinstance(value, np.ndarray):
    return jsonable(value.tolist())
  if isinstance(value, np.generic):
    return value.item()
  if isinstance(value, bytes):
    return value.decode('utf-8')
  return value


def checkpoint_state(estimator):
  state = tf.train.get_checkpoint_state(FLAGS.model_dir)
  names = sorted(estimator.get_variable_names())
  return {'global_step': int(estimator.get_variable_value('global_step')),
          'latest': os.path.basename(estimator.latest_checkpoint()),
          'all_checkpoints': [os.path.basename(p) for p in state.all_model_checkpoint_paths],
          'variable_names': names,
          'variables': {n: estimator.get_variable_value(n) for n in names}}


def saved_model_tags(path):
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=g-import-not-at-top
  proto = saved_model_pb2.SavedModel()
  with open(os.path.join(path, 'saved_model.pb'), 'rb') as f:
    proto.ParseFromString(f.read())
  return sorted(sorted(m.meta_info_def.tags) for m in proto.meta_graphs)


def run_saved_model(path):
  """Loads the [serve] MetaGraph in a fresh session and runs its default signature.  (The
  'classify' output needs serialized tf.Examples, so with this raw-tensor receiver both
  implementations leave that signature out.)"""
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    meta = tf.compat.v1.saved_model.loader.load(session, ['serve'], path)
    signature = meta.signature_def['serving_default']
    fetches = {k: v.name for k, v in signature.outputs.items()}
    outputs = session.run(fetches, {signature.inputs['x'].name: PREDICT[0]})
  return {'signatures': sorted(meta.signature_def), 'tags': saved_model_tags(path),
          'inputs': sorted(signature.inputs), 'outputs': outputs}


def scalar_summaries(model_dir):
  """[event dir, tag, step, value] of the scalar summaries written to model_dir (timing
  summaries keep their tag and step only)."""
  found = []
  for root, _, names in os.walk(model_dir):
    for name in sorted(names):
      if 'tfevents' not in name:
        continue
      rel = os.path.relpath(root, model_dir)
      for event in tf.compat.v1.train.summary_iterator(os.path.join(root, name)):
        for value in event.summary.value:
          if value.HasField('simple_value'):
            number = None if '/sec' in value.tag else float(value.simple_value)
          elif value.HasField('tensor') and value.tensor.dtype == 1 and \
              not value.tensor.tensor_shape.dim:
            number = float(tf.make_ndarray(value.tensor))
          else:
            continue
          found.append([rel, value.tag, int(event.step), number])
  return sorted(found, key=lambda f: (f[0], f[1], f[2]))


def main(_):
  if FLAGS.write_init_checkpoint:
    write_init_checkpoint(FLAGS.init_checkpoint)
  hook_record = {}
  run_config = tf.compat.v1.estimator.tpu.RunConfig(
      cluster=None, master=None, model_dir=FLAGS.model_dir,
      save_checkpoints_steps=FLAGS.save_checkpoints_steps,
      tpu_config=tf.compat.v1.estimator.tpu.TPUConfig(
          iterations_per_loop=FLAGS.iterations_per_loop, num_shards=FLAGS.num_shards,
          per_host_input_for_training=tf.compat.v1.estimator.tpu.InputPipelineConfig
          .PER_HOST_V2))
  model_fn = model_fn_builder(FLAGS.init_checkpoint, FLAGS.learning_rate, FLAGS.use_tpu,
                              hook_record)
  estimator = tf.compat.v1.estimator.tpu.TPUEstimator(
      use_tpu=FLAGS.use_tpu, model_fn=model_fn, config=run_config,
      train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
      predict_batch_size=FLAGS.predict_batch_size)

  results = []
  for action in FLAGS.schedule:
    tf.compat.v1.logging.info('***** Running %s *****', action)
    hook_record.clear()
    if action == 'train':
      estimator.train(input_fn=train_input_fn, max_steps=FLAGS.train_steps)
      out = checkpoint_state(estimator)
    elif action == 'evaluate':
      out = {'metrics': estimator.evaluate(input_fn=eval_input_fn, steps=None)}
    elif action == 'predict':
      out = {'predictions': list(estimator.predict(input_fn=predict_input_fn))}
    elif action == 'export':
      path = estimator.export_saved_model(FLAGS.export_dir, serving_input_receiver_fn)
      path = path.decode('utf-8') if isinstance(path, bytes) else path
      out = {'path': path, 'loaded': run_saved_model(path)}
    elif action == 'load_export':
      out = {'loaded': run_saved_model(FLAGS.load_export)}
    else:
      raise ValueError('Unknown action %r' % action)
    out['action'] = action
    out['hooks'] = dict(hook_record)
    results.append(out)

  report = {'tf_version': tf.__version__,
            'estimator_module': type(estimator).__module__,
            'results': results,
            'summaries': scalar_summaries(FLAGS.model_dir)}
  with open(FLAGS.output_json, 'w') as f:
    json.dump(jsonable(report), f)


if __name__ == '__main__':
  flags.mark_flag_as_required('output_json')
  app.run(main)
