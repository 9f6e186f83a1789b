"""`tf.keras.estimator.model_to_estimator` programs, run unchanged on the original (TF 2.15,
tensorflow-estimator 2.15, its Keras 2) and on tpu_estimator (`compat.install()`, tf.keras
routed to tf_keras).

    python keras_estimator_program.py {orig|ours} SPEC_JSON OUT_JSON...

Two compiled models, built with deterministic weights and fed fixed data, so both sides compute
the same numbers:
- 'sequential': the tutorial's Sequential classifier (`optimizer='adam'`,
  `sparse_categorical_crossentropy`, `metrics=['accuracy']`), converted by
  `tf.keras.estimator.model_to_estimator` (object-based checkpoints by default);
- 'functional': two named inputs, BatchNormalization, two named outputs (a logits classifier
  and a regressor) with loss weights, SGD with Nesterov momentum and per-output metrics,
  converted by `tf.compat.v1.keras.estimator.model_to_estimator` (name-based checkpoints).
"""
import os
import sys

if __name__ == '__main__' and sys.argv[1] == 'ours':
  import tpu_estimator.compat as _compat  # pylint: disable=g-import-not-at-top
  _compat.use_legacy_keras()
  _compat.install()

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

from program_results import jsonable, rounds  # pylint: disable=wrong-import-position

BATCH = 8
MODELS = ('sequential', 'functional')


def _data(n, seed):
  rng = np.random.RandomState(seed)
  a = rng.randn(n, 3).astype(np.float32)
  b = rng.randn(n, 1).astype(np.float32)
  cls = np.argmax(np.concatenate([a[:, :2], b], 1), axis=1).astype(np.int64)
  reg = (a.sum(1, keepdims=True) - b).astype(np.float32)
  return a, b, cls, reg


TRAIN = _data(64, 0)
EVAL = _data(36, 1)  # 4 full batches and one of 4


def _deterministic_weights(model):
  """Kernels and biases from a fixed formula (BatchNormalization keeps its initial values)."""
  values = []
  for i, w in enumerate(model.weights):
    shape = tuple(w.shape)
    if 'kernel' in w.name or w.name.endswith('bias:0') or 'bias' in w.name:
      size = int(np.prod(shape))
      values.append((np.sin(np.arange(size) * 0.37 + i) * 0.4).reshape(shape))
    else:
      values.append(w.numpy())
  model.set_weights(values)


def build(name):
  """(compiled model, converter, input_fn maker, serving receiver fn)."""
  keras = tf.keras
  if name == 'sequential':
    model = keras.Sequential([keras.layers.Dense(8, activation='relu', input_shape=(3,)),
                              keras.layers.Dense(3, activation='softmax')])
    model.compile(optimizer='adam', loss='sparse_categorical_crossentropy',
                  metrics=['accuracy'])
    convert = tf.keras.estimator.model_to_estimator
    features = lambda d: {model.input_names[0]: d[0]}
    labels = lambda d: d[2]
  else:
    a, b = keras.Input((3,), name='a'), keras.Input((1,), name='b')
    h = keras.layers.Dense(8, activation='relu', name='hidden')(
        keras.layers.concatenate([a, b]))
    h = keras.layers.BatchNormalization(name='bn')(h)
    cls, reg = keras.layers.Dense(3, name='cls')(h), keras.layers.Dense(1, name='reg')(h)
    model = keras.Model([a, b], [cls, reg])
    model.compile(
        optimizer=keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True),
        loss={'cls': keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              'reg': 'mse'},
        loss_weights={'cls': 1.0, 'reg': 0.5},
        metrics={'cls': ['accuracy'], 'reg': ['mae']})
    convert = tf.compat.v1.keras.estimator.model_to_estimator
    features = lambda d: {'a': d[0], 'b': d[1]}
    labels = lambda d: {'cls': d[2], 'reg': d[3]}
  _deterministic_weights(model)

  def input_fn(data, repeat=False):
    def fn():
      ds = tf.data.Dataset.from_tensor_slices((features(data), labels(data)))
      return (ds.repeat() if repeat else ds).batch(BATCH)
    return fn

  def serving_input_fn():
    inputs = {n: tf.compat.v1.placeholder(tf.float32, [None, int(t.shape[-1])], name=n)
              for n, t in zip(model.input_names, model.inputs)}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)

  return model, convert, input_fn, serving_input_fn


def checkpoint(model_dir):
  path = tf.train.latest_checkpoint(model_dir)
  reader = tf.train.load_checkpoint(path)
  names = sorted(n for n, _ in tf.train.list_variables(path))
  return {'names': names, 'values': {n: reader.get_tensor(n) for n in names
                                     if n != '_CHECKPOINTABLE_OBJECT_GRAPH'}}


def evaluated(est, input_fn):
  """evaluate()'s results as a list of (key, value), in the order returned."""
  return [[k, v] for k, v in est.evaluate(input_fn(EVAL)).items()]


def task_write(spec):
  model, convert, input_fn, serving_input_fn = build(spec['model'])
  est = convert(keras_model=model, model_dir=spec['dir'])
  est.train(input_fn(TRAIN, repeat=True), steps=spec['steps'])
  predictions = list(est.predict(lambda: input_fn(EVAL)().map(lambda f, l: f)))[:6]
  export_dir = est.export_saved_model(spec['dir'] + '_export', serving_input_fn)
  loaded = tf.saved_model.load(export_dir)
  signatures = {k: sorted(f.structured_outputs) for k, f in loaded.signatures.items()}
  return {'checkpoint': checkpoint(spec['dir']), 'eval': evaluated(est, input_fn),
          'predict': predictions, 'signatures': signatures,
          'keras_dir': sorted(os.listdir(os.path.join(spec['dir'], 'keras')))}


def task_resume(spec):
  """A model_dir the other implementation wrote: evaluate it, then train on."""
  model, convert, input_fn, _ = build(spec['model'])
  est = convert(keras_model=model, model_dir=spec['dir'])
  before = evaluated(est, input_fn)
  est.train(input_fn(TRAIN, repeat=True), steps=spec['steps'])
  return {'eval_before': before, 'eval_after': evaluated(est, input_fn),
          'checkpoint': checkpoint(spec['dir'])}


TASKS = {'write': task_write, 'resume': task_resume}


def main():
  impl = sys.argv[1]
  rounds(lambda specs: {'impl': impl, 'tf_version': tf.__version__,
                        'results': [jsonable(TASKS[spec['task']](spec)) for spec in specs]})


if __name__ == '__main__':
  main()
