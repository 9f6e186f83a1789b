"""Keras-layer model_fns, run unchanged on the original TPUEstimator (TF 2.15, Keras 2) and on
`tpu_estimator` (TF 2.21, Keras 3); only the import switch differs.

    python keras_program.py {orig|ours} SPEC_JSON OUT_JSON...

Each model_fn builds its network with `tf.keras` inside `model_fn` and no layer names (the
numbering is the point): a Dense MLP, Conv2D + BatchNormalization + Dropout (`training=` from
the mode), a functional model with two inputs, a subclassed `tf.keras.Model` (with an L2
regularizer, whose loss the model_fn adds) and a `Sequential`.  The update is a
`tf.compat.v1.train` optimizer, the pattern docs/guides/gpus-and-cpus.md recommends.  Weights
start from deterministic initialisers and the data is fixed, so both sides compute the same numbers.

tests/test_keras_model_fns.py imports this module for the same model_fns (`make_estimator`).
"""
import os
import sys

import keras
import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
NUM_FEATURES = 4
NUM_CLASSES = 3
BATCH = 16
TRAIN_N = 96
EVAL_N = 72  # 4 full batches and one of 8
PREDICT_N = 40  # 2 full batches and one of 8
MODELS = ('mlp', 'conv_bn_dropout', 'two_inputs', 'subclassed', 'sequential')


def make_data(n, seed):
  rng = np.random.RandomState(seed)
  x = rng.randn(n, NUM_FEATURES).astype(np.float32)
  w = np.array([[1.0, -1.0, 0.5], [-0.5, 1.0, 0.0], [0.3, 0.2, -1.0], [0.0, -0.4, 0.8]],
               np.float32)
  return x, np.argmax(x @ w, axis=1).astype(np.int64)


TRAIN = make_data(TRAIN_N, 0)
EVAL = make_data(EVAL_N, 1)
PREDICT = make_data(PREDICT_N, 2)


def train_input_fn(params):
  ds = tf.data.Dataset.from_tensor_slices(({'x': TRAIN[0]}, TRAIN[1]))
  return ds.repeat().batch(params['batch_size'], drop_remainder=True)


def eval_input_fn(params):
  return tf.data.Dataset.from_tensor_slices(({'x': EVAL[0]}, EVAL[1])).batch(
      params['batch_size'])


def predict_input_fn(params):
  return tf.data.Dataset.from_tensor_slices({'x': PREDICT[0]}).batch(params['batch_size'])


def implementation(impl):
  """(the module standing for tf.compat.v1.estimator.tpu, the one for
  tf.compat.v1.estimator.export) of 'ours' or 'orig'."""
  if impl == 'ours':
    import tpu_estimator  # pylint: disable=import-outside-toplevel
    return tpu_estimator, tpu_estimator.export
  return tf.compat.v1.estimator.tpu, tf.compat.v1.estimator.export


def make_serving_input_fn(impl):

  def serving_input_fn():
    x = v1.placeholder(tf.float32, [None, NUM_FEATURES], name='x')
    return implementation(impl)[1].ServingInputReceiver({'x': x}, {'x': x})

  return serving_input_fn


class Wave:
  """A deterministic initializer: a sine wave over the variable's elements (no seeds, so
  Keras 2 and Keras 3 start from the same weights)."""

  def __init__(self, phase, scale=0.5):
    self.phase, self.scale = phase, scale

  def __call__(self, shape, dtype=None, **kwargs):
    del kwargs
    size = int(np.prod(shape))
    values = np.sin(np.arange(size) * 1.37 + self.phase) * self.scale
    return tf.constant(values.reshape(shape), dtype=dtype or tf.float32)

  def get_config(self):
    return {'phase': self.phase, 'scale': self.scale}


def dense(units, phase, **kwargs):
  return tf.keras.layers.Dense(units, kernel_initializer=Wave(phase), **kwargs)


class Net(tf.keras.Model):
  """A subclassed model: two Dense layers, the first L2-regularized."""

  def __init__(self):
    super().__init__()
    self.hidden = dense(8, 3.0, activation='relu',
                        kernel_regularizer=tf.keras.regularizers.l2(0.01))
    self.out = dense(NUM_CLASSES, 4.0)

  def call(self, inputs):
    return self.out(self.hidden(inputs))


def network(model, x, training):
  """(logits, regularization losses) of `model` on `x`."""
  if model == 'mlp':
    return dense(NUM_CLASSES, 1.0)(dense(8, 0.0, activation='relu')(x)), []
  if model == 'conv_bn_dropout':
    images = tf.reshape(x, [-1, 2, 2, 1])
    h = tf.keras.layers.Conv2D(4, 2, padding='same', activation='relu',
                               kernel_initializer=Wave(2.0))(images)
    h = tf.keras.layers.BatchNormalization()(h, training=training)
    h = tf.keras.layers.Dropout(0.25)(h, training=training)
    return dense(NUM_CLASSES, 5.0)(tf.keras.layers.Flatten()(h)), []
  if model == 'two_inputs':
    a = tf.keras.Input(shape=(2,))
    b = tf.keras.Input(shape=(2,))
    h = tf.keras.layers.Concatenate()([dense(4, 6.0, activation='relu')(a),
                                       dense(4, 7.0, activation='relu')(b)])
    net = tf.keras.Model([a, b], dense(NUM_CLASSES, 8.0)(h))
    return net([x[:, :2], x[:, 2:]], training=training), net.losses
  if model == 'subclassed':
    net = Net()
    logits = net(x, training=training)
    return logits, net.losses
  if model == 'sequential':
    net = tf.keras.Sequential([dense(8, 9.0, activation='relu'), dense(NUM_CLASSES, 10.0)])
    return net(x, training=training), net.losses
  raise ValueError('unknown model %r' % model)


def metric_fn(labels, logits):
  return {'accuracy': v1.metrics.accuracy(labels, tf.argmax(logits, 1)),
          'mean_max_prob': v1.metrics.mean(tf.reduce_max(tf.nn.softmax(logits), 1))}


def model_fn(features, labels, mode, params):
  """The network of params['model'], a v1 Adam update, eval_metrics and exports."""
  tpu, export = implementation(params['impl'])
  training = mode == 'train'  # ModeKeys.TRAIN in both
  logits, reg_losses = network(params['model'], features['x'], training)
  predictions = {'classes': tf.argmax(logits, 1), 'logits': logits}
  if labels is None:
    return tpu.TPUEstimatorSpec(
        mode, predictions=predictions,
        export_outputs={'serving_default': export.PredictOutput(predictions)})
  loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits)
  if reg_losses:
    loss += tf.add_n(reg_losses)
  train_op = None
  if training:
    optimizer = v1.train.AdamOptimizer(params['learning_rate'])
    if params.get('cross_shard'):
      optimizer = tpu.CrossShardOptimizer(optimizer)
    train_op = optimizer.minimize(loss, v1.train.get_global_step())
  return tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                              eval_metrics=(metric_fn, [labels, logits]))


def make_estimator(model, model_dir, impl='ours', use_tpu=False, shards=None,
                   learning_rate=0.05, warm_start_from=None, iterations_per_loop=4):
  """A TPUEstimator of `model` on `impl` ('ours' or 'orig')."""
  tpu = implementation(impl)[0]
  tpu_config = tpu.TPUConfig(iterations_per_loop=iterations_per_loop,
                             **({'num_shards': shards} if shards else {}))
  config = tpu.RunConfig(model_dir=model_dir, save_checkpoints_steps=100, keep_checkpoint_max=3,
                         tpu_config=tpu_config)
  return tpu.TPUEstimator(
      model_fn, config=config, use_tpu=use_tpu, train_batch_size=BATCH,
      eval_batch_size=BATCH, predict_batch_size=BATCH, warm_start_from=warm_start_from,
      params={'model': model, 'learning_rate': learning_rate, 'cross_shard': use_tpu,
              'impl': impl})


# ---------------------------------------------------------------------------------------------
def checkpoint_state(est):
  names = sorted(est.get_variable_names())
  return {'global_step': int(est.get_variable_value('global_step')), 'variable_names': names,
          'variables': {n: est.get_variable_value(n) for n in names}}


def served(export_dir):
  """The export loaded with tf.saved_model.load and called on the predict data."""
  loaded = tf.saved_model.load(export_dir, tags=['serve'])
  out = loaded.signatures['serving_default'](x=tf.constant(PREDICT[0]))
  return {k: v.numpy() for k, v in out.items()}


def task_write(spec):
  """Train `steps` from scratch; the checkpoint, evaluation, predictions and a served
  export of the result."""
  est = make_estimator(spec['model'], spec['dir'], IMPL)
  est.train(train_input_fn, max_steps=spec['steps'])
  out = {'state': checkpoint_state(est), 'eval': est.evaluate(eval_input_fn),
         'predict': list(est.predict(predict_input_fn))}
  if spec.get('export'):
    export_dir = est.export_saved_model(spec['dir'] + '_export',
                                        make_serving_input_fn(IMPL))
    out['served'] = served(export_dir)
  return out


def task_resume(spec):
  """Evaluate and predict a model_dir the other implementation wrote, then train on."""
  est = make_estimator(spec['model'], spec['dir'], IMPL)
  out = {'before': checkpoint_state(est), 'eval_before': est.evaluate(eval_input_fn),
         'predict_before': list(est.predict(predict_input_fn))}
  est.train(train_input_fn, steps=spec['steps'])
  out['after'] = checkpoint_state(est)
  out['eval_after'] = est.evaluate(eval_input_fn)
  return out


TASKS = {'write': task_write, 'resume': task_resume}
IMPL = 'ours'


def main():
  # Run as a script (this folder on the path); tests import the module without running main.
  from program_results import jsonable, rounds  # pylint: disable=import-outside-toplevel
  global IMPL  # pylint: disable=global-statement
  IMPL = impl = sys.argv[1]
  if impl not in ('ours', 'orig'):
    raise SystemExit('usage: keras_program.py {orig|ours} SPEC_JSON OUT_JSON...')
  rounds(lambda specs: {'impl': impl, 'tf_version': tf.__version__,
                        'keras_version': keras.__version__,
                        'results': [jsonable(TASKS[spec['task']](spec)) for spec in specs]})


if __name__ == '__main__':
  sys.path.insert(0, os.getcwd())
  main()
