"""Run by tests/test_compat.py in a fresh process (install() changes TensorFlow's modules for
the whole process, so it is never called in the test process itself):

    python compat_probe.py OUT_JSON

Records, as JSON, what TensorFlow looks like before `tpu_estimator.compat.install()`, after
it (twice), through each legacy import style, and `use_legacy_keras()` without tf_keras.
Each check is recorded as a value (or the error it raised), and the test asserts on them."""
import importlib
import json
import os
import sys

os.environ.pop('TF_USE_LEGACY_KERAS', None)

import tensorflow as tf  # pylint: disable=g-import-not-at-top

import tpu_estimator as te  # pylint: disable=g-import-not-at-top
from tpu_estimator import compat  # pylint: disable=g-import-not-at-top
from tpu_estimator.distribute import cross_replica  # pylint: disable=g-import-not-at-top
from tpu_estimator.distribute import tpu_embedding  # pylint: disable=g-import-not-at-top

report = {}


def check(name, fn):
  try:
    value = fn()
  except Exception as e:  # pylint: disable=broad-except
    value = 'ERROR %s: %s' % (type(e).__name__, e)
  report[name] = value


def qualname(obj):
  return '%s.%s' % (obj.__module__, obj.__name__)


def try_import(statement):
  scope = {}
  exec(statement, scope)  # pylint: disable=exec-used
  return sorted(k for k in scope if not k.startswith('__'))


# --- before install(): TensorFlow exactly as shipped --------------------------------------
check('before/tf.estimator', lambda: hasattr(tf, 'estimator'))
check('before/tf.compat.v1.estimator', lambda: hasattr(tf.compat.v1, 'estimator'))
check('before/CrossShardOptimizer', lambda: qualname(tf.compat.v1.tpu.CrossShardOptimizer))
check('before/import tensorflow_estimator', lambda: try_import('import tensorflow_estimator'))
check('before/sys.modules', lambda: sorted(
    k for k in sys.modules if 'estimator' in k and not k.startswith('tpu_estimator')))

# --- install(), twice ------------------------------------------------------------------------
compat.install()
first = {name: sys.modules.get(name) for name in (
    'tensorflow.estimator', 'tensorflow.compat.v1.estimator', 'tensorflow_estimator')}
first_finders = len(sys.meta_path)
compat.install()
check('idempotent/same modules', lambda: all(
    sys.modules.get(name) is module for name, module in first.items()))
check('idempotent/same attributes', lambda: (
    tf.estimator is first['tensorflow.estimator'] and
    tf.compat.v1.estimator is first['tensorflow.compat.v1.estimator']))
check('idempotent/meta_path', lambda: len(sys.meta_path) == first_finders)

# --- what the namespaces hold ----------------------------------------------------------------
v1e = lambda: tf.compat.v1.estimator
NAMES = {
    'tf.estimator.Estimator': lambda: tf.estimator.Estimator is te.Estimator,
    'tf.estimator.EstimatorSpec': lambda: tf.estimator.EstimatorSpec is te.EstimatorSpec,
    'tf.estimator.ModeKeys': lambda: tf.estimator.ModeKeys is te.ModeKeys,
    'tf.estimator.RunConfig': lambda: tf.estimator.RunConfig is te.EstimatorRunConfig,
    'tf.estimator.TrainSpec': lambda: tf.estimator.TrainSpec is te.TrainSpec,
    'tf.estimator.EvalSpec': lambda: tf.estimator.EvalSpec is te.EvalSpec,
    'tf.estimator.train_and_evaluate':
        lambda: tf.estimator.train_and_evaluate is te.train_and_evaluate,
    'tf.estimator.FinalExporter': lambda: tf.estimator.FinalExporter is te.FinalExporter,
    'tf.estimator.LatestExporter': lambda: tf.estimator.LatestExporter is te.LatestExporter,
    'tf.estimator.BestExporter': lambda: tf.estimator.BestExporter is te.BestExporter,
    'tf.estimator.Exporter': lambda: tf.estimator.Exporter is te.Exporter,
    'tf.estimator.WarmStartSettings':
        lambda: tf.estimator.WarmStartSettings is te.WarmStartSettings,
    'tf.estimator.SessionRunHook':
        lambda: tf.estimator.SessionRunHook is tf.compat.v1.train.SessionRunHook,
    'tf.estimator.SessionRunArgs':
        lambda: tf.estimator.SessionRunArgs is tf.compat.v1.train.SessionRunArgs,
    'tf.estimator.LoggingTensorHook':
        lambda: tf.estimator.LoggingTensorHook is te.LoggingTensorHook,
    'tf.estimator.CheckpointSaverListener':
        lambda: tf.estimator.CheckpointSaverListener is te.CheckpointSaverListener,
    'tf.estimator.ProfilerHook':
        lambda: tf.estimator.ProfilerHook is tf.compat.v1.train.ProfilerHook,
    'tf.estimator.export.ServingInputReceiver':
        lambda: tf.estimator.export.ServingInputReceiver is te.export.ServingInputReceiver,
    'tf.estimator.export.TensorServingInputReceiver': lambda: (
        tf.estimator.export.TensorServingInputReceiver is
        te.export.TensorServingInputReceiver),
    'tf.estimator.export.build_raw_serving_input_receiver_fn': lambda: (
        tf.estimator.export.build_raw_serving_input_receiver_fn is
        te.export.build_raw_serving_input_receiver_fn),
    'tf.estimator.export.build_parsing_serving_input_receiver_fn': lambda: (
        tf.estimator.export.build_parsing_serving_input_receiver_fn is
        te.export.build_parsing_serving_input_receiver_fn),
    'tf.estimator.export.PredictOutput':
        lambda: tf.estimator.export.PredictOutput is te.export.PredictOutput,
    'tf.estimator.export.ClassificationOutput':
        lambda: tf.estimator.export.ClassificationOutput is te.export.ClassificationOutput,
    'tf.estimator.export.RegressionOutput':
        lambda: tf.estimator.export.RegressionOutput is te.export.RegressionOutput,
    'tf.compat.v1.estimator.RunConfig': lambda: v1e().RunConfig is te.EstimatorRunConfig,
    'tf.compat.v1.estimator.Estimator': lambda: v1e().Estimator is te.Estimator,
    'tf.compat.v1.estimator.tpu.TPUEstimator':
        lambda: v1e().tpu.TPUEstimator is te.TPUEstimator,
    'tf.compat.v1.estimator.tpu.TPUEstimatorSpec':
        lambda: v1e().tpu.TPUEstimatorSpec is te.TPUEstimatorSpec,
    'tf.compat.v1.estimator.tpu.RunConfig': lambda: v1e().tpu.RunConfig is te.RunConfig,
    'tf.compat.v1.estimator.tpu.TPUConfig': lambda: v1e().tpu.TPUConfig is te.TPUConfig,
    'tf.compat.v1.estimator.tpu.InputPipelineConfig':
        lambda: v1e().tpu.InputPipelineConfig is te.InputPipelineConfig,
    'tf.compat.v1.estimator.tpu.ExportSavedModelApiVersion':
        lambda: v1e().tpu.ExportSavedModelApiVersion is te.ExportSavedModelApiVersion,
    'tf.compat.v1.estimator.export.PredictOutput':
        lambda: v1e().export.PredictOutput is te.export.PredictOutput,
    'tf.compat.v1.estimator.experimental': lambda: type(v1e().experimental).__name__,
    'tf.estimator.experimental.stop_if_no_decrease_hook': lambda: (
        tf.estimator.experimental.stop_if_no_decrease_hook is
        te.experimental.stop_if_no_decrease_hook),
    'tf.compat.v1.estimator.experimental.InMemoryEvaluatorHook': lambda: (
        v1e().experimental.InMemoryEvaluatorHook is te.experimental.InMemoryEvaluatorHook),
    'tf.compat.v1.estimator.inputs.numpy_input_fn':
        lambda: v1e().inputs.numpy_input_fn is te.inputs.numpy_input_fn,
    'tf.compat.v1.estimator.inputs.pandas_input_fn':
        lambda: v1e().inputs.pandas_input_fn is te.pandas_input_fn,
    'tf.compat.v2.estimator.Estimator': lambda: tf.compat.v2.estimator.Estimator is te.Estimator,
    'tf.estimator.tpu.TPUEstimator': lambda: tf.estimator.tpu.TPUEstimator is te.TPUEstimator,
    'tf.compat.v1.tpu.CrossShardOptimizer':
        lambda: tf.compat.v1.tpu.CrossShardOptimizer is te.CrossShardOptimizer,
    'tf.compat.v1.tpu.cross_replica_sum': lambda: (
        tf.compat.v1.tpu.cross_replica_sum is cross_replica.cross_replica_sum),
    'tf.compat.v1.estimator.tpu.experimental.EmbeddingConfigSpec': lambda: (
        v1e().tpu.experimental.EmbeddingConfigSpec is tpu_embedding.EmbeddingConfigSpec),
    'tf.compat.v1.tpu.experimental.AdagradParameters': lambda: (
        tf.compat.v1.tpu.experimental.AdagradParameters.__name__ == 'AdagradParameters'),
    'tf.compat.v1.tpu.experimental.StochasticGradientDescentParameters': lambda: (
        tf.compat.v1.tpu.experimental.StochasticGradientDescentParameters(0.1).learning_rate
        == 0.1),
    # What TF-Lattice's canned estimators import from the original's modules.
    'estimator.EstimatorV2': lambda: importlib.import_module(
        'tensorflow_estimator.python.estimator.estimator').EstimatorV2 is te.Estimator,
    'estimator.maybe_overwrite_model_dir_and_session_config': lambda: importlib.import_module(
        'tensorflow_estimator.python.estimator.estimator'
    ).maybe_overwrite_model_dir_and_session_config(None, '/tmp/lattice').model_dir ==
        '/tmp/lattice',
    'canned.optimizers': lambda: (lambda m: (
        type(m.get_optimizer_instance_v2('Adam', 0.1)).__name__ == 'Adam' and isinstance(
            m.get_optimizer_instance('SGD', 0.1), tf.compat.v1.train.GradientDescentOptimizer)))(
                importlib.import_module('tensorflow_estimator.python.estimator.canned.optimizers')),
    # mesh_tensorflow (tensor2tensor) registers conversions through TF 1.x's location.
    'tensorflow.python.framework.ops.register_tensor_conversion_function': lambda: (
        importlib.import_module('tensorflow.python.framework.ops')
        .register_tensor_conversion_function is tf.register_tensor_conversion_function),
    'tensorflow.compiler.tf2xla.python.xla.replica_id': lambda: (
        importlib.import_module('tensorflow.compiler.tf2xla.python.xla').replica_id is
        cross_replica.replica_id),
}
for name, fn in NAMES.items():
  check('names/' + name, fn)

# --- import styles ---------------------------------------------------------------------------
IMPORTS = [
    'import tensorflow.compat.v1 as tf1; ok = tf1.estimator.tpu.TPUEstimator',
    'from tensorflow.compat.v1 import estimator; ok = estimator.tpu.RunConfig',
    'from tensorflow.compat.v1.estimator import tpu; ok = tpu.TPUConfig',
    'from tensorflow.compat.v1.estimator.tpu import TPUEstimator, TPUEstimatorSpec',
    'import tensorflow.compat.v1.estimator.tpu as tpu_lib; ok = tpu_lib.TPUEstimator',
    'from tensorflow.estimator import export; ok = export.ServingInputReceiver',
    'from tensorflow.estimator.export import PredictOutput',
    'import tensorflow.compat.v2 as tf2; ok = tf2.estimator.Estimator',
    'import tensorflow_estimator as tfe; ok = tfe.estimator.tpu.TPUEstimator',
    'from tensorflow_estimator import estimator as tf_estimator; ok = tf_estimator.Estimator',
    'from tensorflow_estimator.python.estimator.tpu.tpu_estimator import TPUEstimator',
    'from tensorflow_estimator.python.estimator.tpu.tpu_estimator import '
    'ExportSavedModelApiVersion',
    'from tensorflow_estimator.python.estimator.tpu import tpu_config; ok = tpu_config.TPUConfig',
    'from tensorflow_estimator.python.estimator.tpu.tpu_optimizer import CrossShardOptimizer',
    'from tensorflow_estimator.python.estimator import estimator as estimator_lib; '
    'ok = estimator_lib.Estimator',
    'from tensorflow_estimator.python.estimator.export import export_lib; '
    'ok = export_lib.ServingInputReceiver',
    'from tensorflow_estimator.python.estimator.model_fn import EstimatorSpec',
    'from tensorflow_estimator.python.estimator.run_config import RunConfig',
    'from tensorflow_estimator.python.estimator.training import TrainSpec, EvalSpec',
]
for statement in IMPORTS:
  check('import/' + statement, lambda s=statement: try_import(s))
check('import/same objects', lambda: __import__(
    'tensorflow.compat.v1', fromlist=['estimator']).estimator is tf.compat.v1.estimator)
check('import/tpu_config.RunConfig is the TPU one', lambda: sys.modules[
    'tensorflow_estimator.python.estimator.tpu.tpu_config'].RunConfig is te.RunConfig)

# --- what is not provided says so ------------------------------------------------------------
check('missing/tf.estimator.BoostedTreesClassifier', lambda: tf.estimator.BoostedTreesClassifier)
check('missing/tf.compat.v1.estimator.BoostedTreesRegressor',
      lambda: tf.compat.v1.estimator.BoostedTreesRegressor)
check('canned/tf.estimator.DNNClassifier is ours',
      lambda: tf.estimator.DNNClassifier is te.DNNClassifier)
check('missing/tf.estimator.inputs', lambda: tf.estimator.inputs)
check('missing/import canned', lambda: try_import(
    'import tensorflow_estimator.python.estimator.canned.boosted_trees'))
check('canned/import dnn', lambda: importlib.import_module(
    'tensorflow_estimator.python.estimator.canned.dnn').DNNClassifierV2 is te.DNNClassifier)
check('contrib/tf.compat.v1.contrib without tf1', lambda: hasattr(tf.compat.v1, 'contrib'))

# --- TensorFlow core still works -------------------------------------------------------------
check('core/eager still on', tf.executing_eagerly)
check('core/tf.compat.v1.tpu.rewrite', lambda: callable(tf.compat.v1.tpu.rewrite))

# --- use_legacy_keras() without tf_keras -------------------------------------------------------
sys.modules['tf_keras'] = None  # as if the package were not installed
check('no_tf_keras/legacy_keras_available', compat.legacy_keras_available)
check('no_tf_keras/use_legacy_keras', compat.use_legacy_keras)
check('no_tf_keras/env', lambda: os.environ.get('TF_USE_LEGACY_KERAS'))
check('no_tf_keras/layers.dense', lambda: tf.compat.v1.layers.dense)

with open(sys.argv[1], 'w') as f:
  json.dump(report, f, indent=1, sort_keys=True)
