"""`tpu_estimator.model_to_estimator` on Keras 3 models (one device and sharded), its argument
checks, the optimizer mapping, and the tf_keras entry points under `compat.install()`.
The tf_keras path against the original: tests/test_keras_estimator_differential.py."""
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from tpu_estimator.keras_models import backends
from tpu_estimator.keras_models import optimizers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RNG = np.random.RandomState(0)
A = RNG.randn(64, 3).astype(np.float32)
B = RNG.randn(64, 1).astype(np.float32)
CLS = np.argmax(np.concatenate([A[:, :2], B], 1), axis=1).astype(np.int64)
REG = (A.sum(1, keepdims=True) - B).astype(np.float32)
STEPS = 4


def _model(optimizer=None):
  a, b = keras.Input((3,), name='a'), keras.Input((1,), name='b')
  h = keras.layers.Dense(8, activation='relu', name='hidden')(keras.layers.concatenate([a, b]))
  model = keras.Model([a, b], [keras.layers.Dense(3, name='cls')(h),
                               keras.layers.Dense(1, name='reg')(h)])
  model.compile(optimizer=optimizer or keras.optimizers.Adam(0.01),
                loss={'cls': keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      'reg': 'mse'},
                loss_weights={'cls': 1.0, 'reg': 0.5},
                metrics={'cls': ['accuracy'], 'reg': ['mae']})
  model.set_weights([np.sin(np.arange(w.size) * 0.37 + i).reshape(w.shape) * 0.4
                     for i, w in enumerate(model.get_weights())])
  return model


def _input_fn(params=None, repeat=True):
  batch = (params or {}).get('batch_size', 16)
  ds = tf.data.Dataset.from_tensor_slices(({'a': A, 'b': B}, {'cls': CLS, 'reg': REG}))
  return (ds.repeat() if repeat else ds).batch(batch, drop_remainder=True)


def _features(params=None):
  return _input_fn(params, repeat=False).map(lambda f, l: f)


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """One device and 2 shards (2 steps per loop), same global batch of 16, STEPS steps."""
  one = te.model_to_estimator(_model(), model_dir=str(tmp_path_factory.mktemp('one')))
  one.train(_input_fn, steps=STEPS)
  config = te.RunConfig(model_dir=str(tmp_path_factory.mktemp('two')),
                        tpu_config=te.TPUConfig(num_shards=2, iterations_per_loop=2))
  two = te.model_to_estimator(_model(), config=config, train_batch_size=16,
                              eval_batch_size=16, predict_batch_size=16)
  two.train(_input_fn, steps=STEPS)
  return one, two


def test_run_config_strategy_trains_as_one_device(trained, tmp_path):
  """RunConfig(train_distribute=MirroredStrategy) over 2 logical CPUs, input_fn(input_context)
  batches of 8 per replica: the update one device makes on the same 16 rows; evaluation under
  eval_distribute reports the compiled metrics.  Object-based checkpoints are refused there."""
  one, _ = trained
  strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
  config = te.EstimatorRunConfig(model_dir=str(tmp_path / 'mirrored'),
                                 train_distribute=strategy, eval_distribute=strategy)
  est = te.model_to_estimator(_model(), config=config)
  est.train(lambda input_context: _input_fn({'batch_size': 8}), steps=STEPS)
  for name in ('hidden/kernel', 'cls/bias', 'reg/kernel'):
    np.testing.assert_allclose(est.get_variable_value(name), one.get_variable_value(name),
                               rtol=1e-5, atol=1e-6, err_msg=name)
  result = est.evaluate(lambda: _input_fn(repeat=False))
  assert list(result) == list(one.evaluate(lambda: _input_fn(repeat=False)))
  with pytest.raises(ValueError, match="checkpoint_format='saver'"):
    te.model_to_estimator(_model(), config=config, checkpoint_format='checkpoint')


def test_one_device_is_an_estimator_and_two_shards_a_tpu_estimator(trained):
  one, two = trained
  assert type(one) is te.Estimator and isinstance(two, te.TPUEstimator)
  assert one.get_variable_value('global_step') == two.get_variable_value('global_step') == STEPS


def test_two_shards_train_as_one_device_on_the_same_global_batch(trained):
  one, two = trained
  names = [n for n in one.get_variable_names() if n.endswith(('/kernel', '/bias'))]
  assert sorted(names) == ['cls/bias', 'cls/kernel', 'hidden/bias', 'hidden/kernel',
                           'reg/bias', 'reg/kernel']
  assert 'hidden/kernel/Adam' in one.get_variable_names()  # the v1 Adam the mapping chose
  for name in names:
    np.testing.assert_allclose(two.get_variable_value(name), one.get_variable_value(name),
                               rtol=1e-5, atol=1e-6, err_msg=name)


def test_started_from_the_keras_weights(tmp_path):
  model = _model()
  est = te.model_to_estimator(model, model_dir=str(tmp_path))
  est.train(_input_fn, steps=1)
  # One Adam step moves each weight by at most about the learning rate.
  np.testing.assert_allclose(est.get_variable_value('hidden/kernel'), model.get_weights()[0],
                             atol=0.011)
  assert os.path.exists(os.path.join(str(tmp_path), 'keras', 'keras_model.ckpt.index'))


def test_evaluate_reports_loss_and_compiled_metrics_the_same_sharded(trained):
  one, two = trained
  r1, r2 = one.evaluate(lambda: _input_fn(repeat=False)), two.evaluate(
      lambda params: _input_fn(params, repeat=False))
  assert list(r1) == list(r2) == ['cls_accuracy', 'loss', 'reg_mae', 'global_step']
  for key in r1:
    np.testing.assert_allclose(r2[key], r1[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_predictions_keyed_by_output_names_and_exported(trained, tmp_path):
  one, two = trained
  p1 = list(one.predict(_features))
  p2 = list(two.predict(_features))
  assert len(p1) == len(p2) == 64 and sorted(p1[0]) == ['cls', 'reg']
  np.testing.assert_allclose(np.stack([p['cls'] for p in p2]),
                             np.stack([p['cls'] for p in p1]), rtol=1e-5, atol=1e-6)

  def serving_input_fn():
    inputs = {'a': tf.compat.v1.placeholder(tf.float32, [None, 3], name='a'),
              'b': tf.compat.v1.placeholder(tf.float32, [None, 1], name='b')}
    return te.export.ServingInputReceiver(inputs, inputs)

  export_dir = one.export_saved_model(str(tmp_path), serving_input_fn)
  served = tf.saved_model.load(export_dir).signatures['serving_default'](
      a=tf.constant(A[:4]), b=tf.constant(B[:4]))
  assert sorted(served) == ['cls', 'reg']
  np.testing.assert_allclose(served['cls'].numpy(), np.stack([p['cls'] for p in p1[:4]]),
                             rtol=1e-5, atol=1e-6)
  # TRAIN and EVAL graphs carry the compiled metrics in their signatures, as the original's.
  receiver = te.experimental.build_raw_supervised_input_receiver_fn(
      {'a': tf.zeros([1, 3]), 'b': tf.zeros([1, 1])},
      {'cls': tf.zeros([1], tf.int64), 'reg': tf.zeros([1, 1])})
  for est in (one, two):
    path = est.experimental_export_all_saved_models(
        str(tmp_path / 'supervised'), {te.ModeKeys.TRAIN: receiver, te.ModeKeys.EVAL: receiver})
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
      for tag in ('train', 'eval'):
        signature = tf.compat.v1.saved_model.load(session, [tag], path).signature_def[tag]
        assert sorted(signature.inputs) == ['a', 'b', 'cls', 'reg']
        assert {'loss', 'metrics/cls_accuracy/value', 'metrics/reg_mae/value'} <= set(
            signature.outputs), (tag, sorted(signature.outputs))


@pytest.mark.parametrize('optimizer, expected', [
    (keras.optimizers.SGD(0.1), tf.compat.v1.train.GradientDescentOptimizer),
    (keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
     tf.compat.v1.train.MomentumOptimizer),
    (keras.optimizers.Adam(0.002, beta_1=0.8), tf.compat.v1.train.AdamOptimizer),
    (keras.optimizers.Adagrad(0.1), tf.compat.v1.train.AdagradOptimizer),
    (keras.optimizers.RMSprop(0.01, rho=0.8, centered=True), tf.compat.v1.train.RMSPropOptimizer),
    (keras.optimizers.Adadelta(1.0), tf.compat.v1.train.AdadeltaOptimizer),
    (keras.optimizers.Ftrl(0.1, l1_regularization_strength=0.01),
     tf.compat.v1.train.FtrlOptimizer),
])
def test_keras_optimizers_map_to_v1_with_their_hyper_parameters(optimizer, expected):
  plan = optimizers.plan(backends.Backend(backends.KERAS3, keras), optimizer, sharded=False)
  assert plan.kind == 'mapped'
  with tf.Graph().as_default():
    v1 = optimizers._v1_equivalent(plan.cls, plan.config)  # pylint: disable=protected-access
  assert type(v1) is expected
  if expected is tf.compat.v1.train.MomentumOptimizer:
    assert v1._momentum == pytest.approx(0.9) and v1._use_nesterov  # pylint: disable=protected-access
  if expected is tf.compat.v1.train.AdamOptimizer:
    assert (v1._lr, v1._beta1) == pytest.approx((0.002, 0.8))  # pylint: disable=protected-access
  if expected is tf.compat.v1.train.RMSPropOptimizer:
    assert v1._decay == pytest.approx(0.8) and v1._centered  # pylint: disable=protected-access


def test_refusals_name_the_argument_and_the_fix(tmp_path):
  with pytest.raises(ValueError, match='Lion.*SGD, Adam, Adagrad, RMSprop, Adadelta, Ftrl'):
    te.model_to_estimator(_model(keras.optimizers.Lion()), model_dir=str(tmp_path))
  with pytest.raises(ValueError, match='weight_decay'):
    te.model_to_estimator(_model(keras.optimizers.Adam(weight_decay=0.01)),
                          model_dir=str(tmp_path))
  uncompiled = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
  with pytest.raises(ValueError, match='not been compiled'):
    te.model_to_estimator(uncompiled, model_dir=str(tmp_path))
  with pytest.raises(ValueError, match='exactly one of `keras_model` and `keras_model_path`'):
    te.model_to_estimator(_model(), keras_model_path='x.h5')
  with pytest.raises(ValueError, match='checkpoint_format'):
    te.model_to_estimator(_model(), model_dir=str(tmp_path), checkpoint_format='tf')
  with pytest.raises(TypeError, match='keras_model'):
    te.model_to_estimator(object())
  with pytest.raises(ValueError, match='export_outputs'):
    te.model_to_estimator(_model(), model_dir=str(tmp_path),
                          export_outputs={'nope': te.export.PredictOutput})


def test_keras_model_path_of_a_saved_keras_3_model(tmp_path):
  path = str(tmp_path / 'model.keras')
  _model().save(path)
  est = te.model_to_estimator(keras_model_path=path, model_dir=str(tmp_path / 'dir'))
  est.train(_input_fn, steps=1)
  assert est.get_variable_value('global_step') == 1


_TF_KERAS_PROGRAM = textwrap.dedent('''
    import numpy as np
    import tpu_estimator.compat as compat
    compat.use_legacy_keras()
    compat.install()
    import tensorflow as tf
    from tensorflow_estimator.python.estimator import keras_lib
    model = tf.keras.Sequential([tf.keras.layers.Dense(4, activation='relu', input_shape=(3,)),
                                 tf.keras.layers.Dense(2, activation='softmax')])
    model.compile(optimizer=tf.compat.v1.train.GradientDescentOptimizer(0.1),
                  loss='sparse_categorical_crossentropy', metrics=['accuracy'])
    x = np.random.RandomState(0).randn(32, 3).astype('float32')
    y = (x[:, 0] > 0).astype('int64')
    est = keras_lib.model_to_estimator(keras_model=model, checkpoint_format='saver',
                                       metric_names_map={'accuracy': 'acc'})
    est.train(lambda: tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8), steps=3)
    result = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices((x, y)).batch(8))
    assert list(result) == ['acc', 'loss', 'global_step'], result
    assert sorted(est.get_variable_names()) == ['dense/bias', 'dense/kernel', 'dense_1/bias',
                                                'dense_1/kernel', 'global_step']
    # The user's eager model still works after its copies were built in our graphs.
    assert model.predict(x, verbose=0).shape == (32, 2)
    assert len(model.get_weights()) == 4
    print('OK')
''')


def test_tf_keras_compiled_with_a_v1_optimizer_under_compat():
  """A subprocess: compat.install() changes the process for good."""
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      p for p in (REPO, os.environ.get('PYTHONPATH')) if p), TF_CPP_MIN_LOG_LEVEL='2')
  env.pop('TF_USE_LEGACY_KERAS', None)
  proc = subprocess.run([sys.executable, '-c', _TF_KERAS_PROGRAM], capture_output=True,
                        text=True, env=env, timeout=300, check=False)
  assert proc.returncode == 0 and 'OK' in proc.stdout, proc.stderr[-3000:]


_TF1_KERAS_PROGRAM = textwrap.dedent('''
    import numpy as np
    import tensorflow as tf
    if not hasattr(tf, 'logging'):  # a TF 2.x program in v1 graph mode
      tf.compat.v1.disable_v2_behavior()
    model = tf.keras.Sequential([tf.keras.layers.Dense(3, activation='relu', input_shape=(5,)),
                                 tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.compat.v1.train.RMSPropOptimizer(0.01), loss='mse',
                  metrics=['mae'])
    est = tf.keras.estimator.model_to_estimator(keras_model=model)
    x = np.linspace(0, 1, 80, dtype=np.float32).reshape(16, 5)
    data = lambda: tf.data.Dataset.from_tensor_slices((x, x.sum(1, keepdims=True))).batch(4)
    est.train(data, max_steps=2 * 16 / 4)  # a float, as trainers computed it
    print('KEYS', list(est.evaluate(data)))
''')


@pytest.mark.parametrize('flags', [[], ['--tf1']])
def test_tf_keras_model_compiled_in_v1_graph_mode(tmp_path, flags):
  """A model compiled in v1 graph mode (after disable_v2_behavior, or a TF 1.x program under
  --tf1) keeps no compile config: its metrics are read from the model and named as Keras's v1
  compile named them (`mean_absolute_error` for 'mae'), as in the original."""
  program = tmp_path / 'program.py'
  program.write_text(_TF1_KERAS_PROGRAM)
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      p for p in (REPO, os.environ.get('PYTHONPATH')) if p), TF_CPP_MIN_LOG_LEVEL='2')
  proc = subprocess.run([sys.executable, '-m', 'tpu_estimator', 'run'] + flags + [str(program)],
                        capture_output=True, text=True, env=env, timeout=300, check=False,
                        cwd=str(tmp_path))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "KEYS ['loss', 'mean_absolute_error', 'global_step']" in proc.stdout, proc.stdout
