"""tpu_estimator: TPUEstimator and the Estimator core on TensorFlow 2.16+.

`model_fn`/`input_fn` programs written for `tf.compat.v1.estimator[.tpu]` run unchanged with
their import pointed here; `TPUEstimator(use_tpu=True)` shards over TPU-less hardware too.
"""
__version__ = '0.1.0'  # the package's version, in this one place (pyproject reads it)

from tpu_estimator import quiet as _quiet  # imports no TensorFlow: runs before it is imported

_quiet.quiet_startup()

import importlib as _importlib  # pylint: disable=wrong-import-position

import tensorflow as _tf  # pylint: disable=wrong-import-position

from tpu_estimator import gc_freeze as _gc_freeze  # pylint: disable=wrong-import-position

# TensorFlow's objects (and those of the program's imports before this one) stay out of the
# full garbage collections that the imports below may set off (gc_freeze.py).
_gc_freeze.freeze_imported()

# What every Estimator program uses is imported here; the rest (canned estimators, Keras
# models, the train_and_evaluate driver, exporters, input helpers, the experimental hooks) on
# first use, through `__getattr__` below: `import tpu_estimator` only pays for what the call
# needs (docs/design-decisions.md, "Time to the first step").
from tpu_estimator.config import InputPipelineConfig
from tpu_estimator.config import RunConfig as _CoreRunConfig
from tpu_estimator.config import TPUConfig
from tpu_estimator.config import TPURunConfig
from tpu_estimator.config import parse_tf_config
from tpu_estimator.errors import NanLossDuringTrainingError
from tpu_estimator.errors import NoCheckpointError
from tpu_estimator.estimator import Estimator
from tpu_estimator.estimator import TPUEstimator
from tpu_estimator.estimator import add_metrics
from tpu_estimator.checkpoints.lock import ModelDirLockedError
from tpu_estimator.specs import EstimatorSpec
from tpu_estimator.specs import ModeKeys
from tpu_estimator.specs import TPUEstimatorSpec
from tpu_estimator.warm_starting import WarmStartSettings

# name -> the module that defines it: imported when the name is first read.
_LAZY_NAMES = {
    'CorruptCheckpointError': 'tpu_estimator.checkpoints.state',
    'CrossShardOptimizer': 'tpu_estimator.cross_shard_optimizer',
    'numpy_input_fn': 'tpu_estimator.inputs',
    'pandas_input_fn': 'tpu_estimator.inputs',
    'model_to_estimator': 'tpu_estimator.keras_models',
}
_LAZY_NAMES.update(dict.fromkeys(
    ('BestExporter', 'EvalSpec', 'Exporter', 'FinalExporter', 'LatestExporter', 'TrainSpec',
     'train_and_evaluate'), 'tpu_estimator.training'))
_LAZY_NAMES.update(dict.fromkeys(
    ('BaselineClassifier', 'BaselineRegressor', 'DNNClassifier', 'DNNLinearCombinedClassifier',
     'DNNLinearCombinedRegressor', 'DNNRegressor', 'LinearClassifier', 'LinearRegressor'),
    'tpu_estimator.canned'))
# Submodules reachable as attributes without importing them first (`tpu_estimator.canned`), as
# when this module imported them all.
_LAZY_MODULES = ('canned', 'cross_shard_optimizer', 'experimental', 'export', 'inputs',
                 'keras_models', 'training')


def __getattr__(name):
  """Imports a lazily loaded name's module on first use (PEP 562) and keeps the value."""
  if name in _LAZY_NAMES:
    value = getattr(_importlib.import_module(_LAZY_NAMES[name]), name)
  elif name in _LAZY_MODULES:
    value = _importlib.import_module('tpu_estimator.' + name)
  else:
    raise AttributeError('module %r has no attribute %r' % (__name__, name))
  globals()[name] = value
  return value


def __dir__():
  return sorted(set(globals()) | set(_LAZY_NAMES) | set(_LAZY_MODULES))


# `RunConfig` here is the TPU one (as in tf.compat.v1.estimator.tpu); the Estimator's plain
# RunConfig is `EstimatorRunConfig` (tf.estimator.RunConfig).  A TPU RunConfig is accepted by
# Estimator too.
RunConfig = TPURunConfig
EstimatorRunConfig = _CoreRunConfig

# The hooks and session pieces the original re-exported from TensorFlow core.
SessionRunHook = _tf.compat.v1.train.SessionRunHook
SessionRunArgs = _tf.compat.v1.train.SessionRunArgs
CheckpointSaverListener = _tf.compat.v1.train.CheckpointSaverListener
LoggingTensorHook = _tf.compat.v1.train.LoggingTensorHook
StopAtStepHook = _tf.compat.v1.train.StopAtStepHook
CheckpointSaverHook = _tf.compat.v1.train.CheckpointSaverHook
StepCounterHook = _tf.compat.v1.train.StepCounterHook
NanTensorHook = _tf.compat.v1.train.NanTensorHook
SummarySaverHook = _tf.compat.v1.train.SummarySaverHook
FinalOpsHook = _tf.compat.v1.train.FinalOpsHook
FeedFnHook = _tf.compat.v1.train.FeedFnHook


class ExportSavedModelApiVersion:
  V1 = 1
  V2 = 2


# Last: what the imports above left alive stays out of full garbage collections too.
_gc_freeze.freeze_imported()


__all__ = [
    'BestExporter', 'EvalSpec', 'Exporter', 'FinalExporter', 'LatestExporter', 'TrainSpec',
    'train_and_evaluate', 'add_metrics',
    'CheckpointSaverHook', 'CheckpointSaverListener', 'CorruptCheckpointError',
    'CrossShardOptimizer', 'Estimator',
    'EstimatorRunConfig', 'EstimatorSpec', 'ExportSavedModelApiVersion', 'FeedFnHook',
    'FinalOpsHook', 'InputPipelineConfig', 'LoggingTensorHook', 'ModeKeys', 'ModelDirLockedError',
    'NanLossDuringTrainingError', 'NanTensorHook', 'NoCheckpointError', 'RunConfig',
    'SessionRunArgs', 'SessionRunHook', 'StepCounterHook', 'StopAtStepHook',
    'SummarySaverHook', 'TPUConfig', 'TPUEstimator', 'TPUEstimatorSpec', 'TPURunConfig',
    'WarmStartSettings', 'experimental', 'export', 'inputs', 'numpy_input_fn', 'pandas_input_fn',
    'parse_tf_config', 'canned', 'BaselineClassifier', 'BaselineRegressor', 'DNNClassifier',
    'DNNLinearCombinedClassifier', 'DNNLinearCombinedRegressor', 'DNNRegressor',
    'LinearClassifier', 'LinearRegressor', 'model_to_estimator'
]
