"""Run by tests/test_contrib_imports.py as `tpu-estimator run [--tf1] contrib_import_probe.py
OUT_JSON`: tries every form in which TPUEstimator-era programs imported `tensorflow.contrib`
and TF 1.x's estimator modules, and records each result (a value, or the error it raised) as
JSON for the test to assert on."""
import json
import sys

import tensorflow as tf

import tpu_estimator as te

report = {'tf_module': type(tf).__name__, 'executing_eagerly': tf.executing_eagerly()}


def check(name, statement, expression='ok'):
  """Runs `statement`, records `expression` evaluated in its scope (or the error raised)."""
  scope = {'tf': tf, 'te': te, 'sys': sys}
  try:
    exec(statement, scope)  # pylint: disable=exec-used
    value = eval(expression, scope)  # pylint: disable=eval-used
  except Exception as e:  # pylint: disable=broad-except
    value = 'ERROR %s: %s' % (type(e).__name__, e)
  report[name] = value


def qualname(obj):
  return '%s.%s' % (getattr(obj, '__module__', '?'), getattr(obj, '__name__', '?'))


# --- every import form, each checked to give the same objects -------------------------------
impl = 'sys.modules["tpu_estimator.compat.contrib.%s"]'
check('form/import tensorflow.contrib',
      'import tensorflow.contrib\nok = tensorflow.contrib.tpu.TPUEstimator is te.TPUEstimator')
check('form/from tensorflow.contrib import tpu',
      'from tensorflow.contrib import tpu as contrib_tpu\n'
      'ok = (contrib_tpu.TPUEstimator, contrib_tpu.RunConfig, contrib_tpu.TPUConfig, '
      'contrib_tpu.CrossShardOptimizer, contrib_tpu.InputPipelineConfig) == (te.TPUEstimator, '
      'te.RunConfig, te.TPUConfig, te.CrossShardOptimizer, te.InputPipelineConfig)')
check('form/contrib tpu falls back to tf.compat.v1.tpu',
      'ok = tf.contrib.tpu.bfloat16_scope is tf.compat.v1.tpu.bfloat16_scope')
for name, attr in (('layers', 'layer_norm'), ('data', 'map_and_batch'),
                   ('metrics', 'streaming_pearson_correlation'), ('training', 'HParams'),
                   ('summary', 'create_file_writer'), ('image', 'transform'),
                   ('opt', 'AdamWOptimizer'), ('lookup', 'index_table_from_tensor'),
                   ('estimator', 'add_metrics')):
  target = (impl % name) + '.' + attr
  check('form/from tensorflow.contrib import %s' % name,
        'from tensorflow.contrib import %s as m\nok = m.%s is %s' % (name, attr, target))
  check('form/import tensorflow.contrib.%s as' % name,
        'import tensorflow.contrib.%s as m\nok = m.%s is %s' % (name, attr, target))
  check('form/tf.contrib.%s' % name, 'ok = tf.contrib.%s.%s is %s' % (name, attr, target))
  check('form/tf.compat.v1.contrib.%s' % name,
        'ok = tf.compat.v1.contrib.%s.%s is %s' % (name, attr, target))
check('form/import tensorflow.compat.v1 as tf1',
      'import tensorflow.compat.v1 as tf1\nok = tf1.contrib.layers.layer_norm is '
      + (impl % 'layers') + '.layer_norm')
check('form/cluster_resolver', 'from tensorflow.contrib import cluster_resolver\n'
      'ok = cluster_resolver.TPUClusterResolver.__name__')
check('form/import tensorflow.contrib.slim as slim',
      'import tensorflow.contrib.slim as slim\nok = slim.conv2d is tf.contrib.layers.conv2d and '
      'slim.arg_scope.__module__.startswith("tf_slim.")')
check('form/from tensorflow.contrib import framework',
      'from tensorflow.contrib import framework as contrib_framework\n'
      'ok = contrib_framework.arg_scope is tf.contrib.slim.arg_scope')
check('form/same module objects',
      'import tensorflow.contrib.layers\nok = (sys.modules["tensorflow.contrib"] is tf.contrib '
      'is tf.compat.v1.contrib) and tensorflow.contrib.layers is tf.contrib.layers')

# --- the deep module paths programs really used ----------------------------------------------
DEEP = {
    'tpu_estimator': ('from tensorflow.contrib.tpu.python.tpu import tpu_estimator\n'
                      'ok = (tpu_estimator.TPUEstimator is te.TPUEstimator and '
                      'tpu_estimator.TPUEstimatorSpec is te.TPUEstimatorSpec)'),
    'tpu_config': ('from tensorflow.contrib.tpu.python.tpu import tpu_config\n'
                   'ok = tpu_config.RunConfig is te.RunConfig and '
                   'tpu_config.TPUConfig is te.TPUConfig'),
    'tpu_optimizer': ('from tensorflow.contrib.tpu.python.tpu.tpu_optimizer import '
                      'CrossShardOptimizer\nok = CrossShardOptimizer is te.CrossShardOptimizer'),
    'import tpu_config as': ('import tensorflow.contrib.tpu.python.tpu.tpu_config as c\n'
                             'ok = c.InputPipelineConfig is te.InputPipelineConfig'),
    'tpu_function': ('from tensorflow.contrib.tpu.python.tpu import tpu_function\n'
                     'ok = tpu_function.__name__'),
    'tpu_ops': 'from tensorflow.contrib.tpu.python.ops import tpu_ops\nok = tpu_ops.__name__',
    'async_checkpoint': ('from tensorflow.contrib.tpu.python.tpu import async_checkpoint\n'
                         'ok = issubclass(async_checkpoint.AsyncCheckpointSaverHook, '
                         'tf.compat.v1.train.CheckpointSaverHook)'),
    'evaluation': ('from tensorflow.contrib.training.python.training import evaluation\n'
                   'ok = evaluation.checkpoints_iterator is '
                   + (impl % 'training') + '.checkpoints_iterator'),
    'hparam': ('from tensorflow.contrib.training.python.training.hparam import HParams\n'
               'ok = HParams(a=1).parse("a=3").a'),
    'layers': ('from tensorflow.contrib.layers.python.layers import layers, initializers, '
               'regularizers\nok = (layers.layer_norm is tf.contrib.layers.layer_norm and '
               'initializers.xavier_initializer is tf.contrib.layers.xavier_initializer and '
               'regularizers.l2_regularizer is tf.contrib.layers.l2_regularizer)'),
    'data': ('from tensorflow.contrib.data.python.ops import batching, interleave_ops\n'
             'ok = (batching.map_and_batch is tf.contrib.data.map_and_batch and '
             'interleave_ops.parallel_interleave is tf.contrib.data.parallel_interleave)'),
    'cluster_resolver': ('from tensorflow.contrib.cluster_resolver.python.training import '
                         'tpu_cluster_resolver\n'
                         'ok = tpu_cluster_resolver.TPUClusterResolver.__name__'),
    'slim.nets': ('from tensorflow.contrib.slim.nets import resnet_v1\n'
                  'ok = resnet_v1.__name__'),
    # TF 1.x's file path of the same (show_and_tell's image embedding)
    'slim.python.slim.nets': ('from tensorflow.contrib.slim.python.slim.nets.inception_v3 '
                              'import inception_v3_base\n'
                              'ok = inception_v3_base.__module__'),
    'opt': ('from tensorflow.contrib.opt.python.training import weight_decay_optimizers\n'
            'ok = weight_decay_optimizers.AdamWOptimizer is tf.contrib.opt.AdamWOptimizer'),
    # tf_slim's, from its package (tensor2tensor's optimize.py and attention_lm.py)
    'layers.optimize_loss': ('from tensorflow.contrib.layers import optimize_loss, '
                             'OPTIMIZER_CLS_NAMES\n'
                             'ok = callable(optimize_loss) and "Adam" in OPTIMIZER_CLS_NAMES'),
    'framework.deprecated': ('from tensorflow.contrib.framework import deprecated\n'
                             'ok = deprecated(None, "Use g.")(lambda: 3)() == 3'),
}
for name, statement in DEEP.items():
  check('deep/' + name, statement)

# --- TF 1.x's internal estimator modules -----------------------------------------------------
ESTIMATOR = {
    'estimator': ('from tensorflow.python.estimator import estimator\n'
                  'ok = estimator.Estimator is te.Estimator'),
    'model_fn': ('from tensorflow.python.estimator.model_fn import EstimatorSpec, ModeKeys\n'
                 'ok = EstimatorSpec is te.EstimatorSpec and ModeKeys is te.ModeKeys'),
    'run_config': ('import tensorflow.python.estimator.run_config as run_config\n'
                   'ok = run_config.RunConfig is te.EstimatorRunConfig'),
    'training': ('from tensorflow.python.estimator import training\n'
                 'ok = training.train_and_evaluate is te.train_and_evaluate'),
    'export': ('from tensorflow.python.estimator.export import export\n'
               'ok = export.ServingInputReceiver is te.export.ServingInputReceiver'),
    'estimator_lib': ('from tensorflow.python.estimator import estimator_lib\n'
                      'ok = estimator_lib.TrainSpec is te.TrainSpec'),
    # TF <= 2.15 served the original's TPU modules there too (mesh_tensorflow)
    'tpu_paths': ('from tensorflow.python.tpu import tpu_estimator, tpu_config\n'
                  'ok = (tpu_estimator.TPUEstimator is te.TPUEstimator and '
                  'tpu_config.TPUConfig is te.TPUConfig)'),
    'canned': ('from tensorflow.python.estimator.canned import dnn, metric_keys\n'
               'from tensorflow.python.estimator.head import binary_class_head\n'
               'ok = (dnn.DNNClassifierV2 is te.DNNClassifier and metric_keys.MetricKeys is '
               'te.canned.MetricKeys and binary_class_head.BinaryClassHead is '
               'te.canned.BinaryClassHead)'),
}
for name, statement in ESTIMATOR.items():
  check('estimator/' + name, statement)
check('estimator/missing', 'import tensorflow.python.estimator.canned.boosted_trees')
# TensorFlow's own modules under tensorflow.python are untouched
check('real/tensorflow.python.ops', 'from tensorflow.python.ops import array_ops\n'
      'ok = array_ops.__name__')
check('real/tensorflow.python.tpu', 'import tensorflow.python.tpu.tpu_function as f\n'
      'ok = f.__name__')

# --- what is not provided says so ------------------------------------------------------------
check('missing/tf.contrib.seq2seq', 'ok = tf.contrib.seq2seq')
check('missing/from tensorflow.contrib import seq2seq', 'from tensorflow.contrib import seq2seq')
check('missing/import tensorflow.contrib.gan', 'import tensorflow.contrib.gan')
check('missing/tf.contrib.layers name', 'ok = tf.contrib.layers.no_such_layer')
check('missing/from tensorflow.contrib.layers import name',
      'from tensorflow.contrib.layers import no_such_layer')
check('missing/deep path', 'import tensorflow.contrib.tpu.python.tpu.no_such_module')
check('missing/name from a deep path',
      'from tensorflow.contrib.layers.python.layers.layers import no_such_name')

# --- tensorflow.python.keras is tf.keras's Keras (tf_keras under run) -------------------------
check('python_keras/same objects',
      'from tensorflow.python.keras import layers, models, backend\n'
      'import tensorflow.python.keras.optimizers as optimizers\n'
      'from tensorflow.python.keras.engine import training, input_spec\n'
      'ok = (layers.Dense is tf.keras.layers.Dense and models.Sequential is tf.keras.Sequential '
      'and training.Model is tf.keras.Model and input_spec.InputSpec is tf.keras.layers.InputSpec'
      ' and backend.epsilon() == 1e-07 and layers.Dense.__module__.startswith("tf_keras.") and '
      'optimizers.Adam.__module__.startswith("tf_keras."))')
check('python_keras/missing', 'import tensorflow.python.keras.no_such_module')

# --- a program's own `import tf_slim`: the names tf-slim 1.1.0 calls and TF removed ------------
check('tf_slim/direct import',
      'import tf_slim\n'
      'from tensorflow.python.ops import control_flow_ops, array_ops\n'
      'g = tf.Graph()\n'
      'with g.as_default():\n'
      '  x = tf.ones([2, 4, 4, 3])\n'
      '  training = tf.compat.v1.placeholder_with_default(True, [])\n'
      '  y = tf_slim.layers.gdn(x)\n'
      '  z = tf_slim.batch_norm(x, is_training=training)\n'
      '  c = tf_slim.layers.utils.smart_cond(training, lambda: x * 2., lambda: x)\n'
      '  with tf.compat.v1.Session() as s:\n'
      '    s.run(tf.compat.v1.global_variables_initializer())\n'
      '    got = s.run(c)\n'
      'ok = bool(control_flow_ops.cond is tf.compat.v1.cond and array_ops.stack is tf.stack '
      'and got.sum() == 2. * 2 * 4 * 4 * 3)')

# --- tf.contrib.rnn (the cells TF 1.x shared with core) and tf.contrib.stateless --------------
check('rnn/core cells', 'from tensorflow.contrib import rnn\n'
      'ok = (rnn.BasicLSTMCell is tf.compat.v1.nn.rnn_cell.BasicLSTMCell and '
      'rnn.MultiRNNCell is tf.compat.v1.nn.rnn_cell.MultiRNNCell and '
      'rnn.static_rnn is tf.compat.v1.nn.static_rnn)')
check('rnn/contrib-only cell', 'ok = tf.contrib.rnn.LayerNormBasicLSTMCell')
check('stateless', 'from tensorflow.contrib import stateless\n'
      'ok = stateless.stateless_truncated_normal is '
      'tf.compat.v1.random.stateless_truncated_normal and callable('
      'stateless.stateless_random_uniform)')

# --- TF 1.x's API modules imported by name (under --tf1: the v1 modules) ---------------------
if report['tf_module'] == 'TF1Module':
  check('v1_module/from tensorflow.gfile import Exists',
        'from tensorflow.gfile import Exists\nok = Exists is tf.gfile.Exists')
  check('v1_module/from tensorflow.train import AdamOptimizer',
        'from tensorflow.train import AdamOptimizer\nok = AdamOptimizer is tf.train.AdamOptimizer')
  check('v1_module/import tensorflow.python_io as io',
        'import tensorflow.python_io as io\nok = io.TFRecordWriter is tf.python_io.TFRecordWriter')
  check('v1_module/tensorflow.python still TensorFlow\'s',
        'from tensorflow.python.ops import array_ops\nok = callable(array_ops.concat)')

# --- a third-party library these programs import at module level -----------------------------
# Under --tf1 without pkg_resources, as where setuptools 82+ removed it (compat/hub_import.py).
BLOCKED = report['tf_module'] == 'TF1Module'
if BLOCKED:
  sys.modules['pkg_resources'] = None  # `import pkg_resources` raises ModuleNotFoundError
check('third_party/tensorflow_hub', 'import tensorflow_hub as hub\n'
      'ok = callable(hub.KerasLayer) and callable(hub.load)')
if BLOCKED:
  check('third_party/pkg_resources after tensorflow_hub', 'import pkg_resources')
# TF 2.0's eager profiler (gone in TensorFlow 2.21): tensorflow/models' keras_utils imports it.
check('third_party/eager profiler',
      'import os, tempfile\n'
      'from tensorflow.python.eager import profiler\n'
      'logdir = tempfile.mkdtemp()\n'
      'profiler.start()\n'
      'trace = profiler.stop()\n'
      'profiler.save(logdir, trace)\n'
      'ok = any(names for root, _, names in os.walk(logdir) if "plugins/profile" in root)')

with open(sys.argv[1], 'w') as f:
  json.dump(report, f, indent=1, sort_keys=True)
