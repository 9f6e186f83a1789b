"""tpu_estimator: TPUEstimator and the Estimator core on TensorFlow 2.16+.

`model_fn`/`input_fn` programs written for `tf.compat.v1.estimator[.tpu]` run unchanged with
their import pointed here; `TPUEstimator(use_tpu=True)` shards over TPU-less hardware too.
"""
from tpu_estimator import quiet as _quiet  # imports no TensorFlow: runs before it is imported

_quiet.quiet_startup()

import tensorflow as _tf  # pylint: disable=wrong-import-position

from tpu_estimator import experimental
from tpu_estimator import export
from tpu_estimator import inputs
from tpu_estimator.config import InputPipelineConfig
from tpu_estimator.checkpoints.state import CorruptCheckpointError
from tpu_estimator.config import RunConfig as _CoreRunConfig
from tpu_estimator.config import TPUConfig
from tpu_estimator.config import TPURunConfig
from tpu_estimator.config import parse_tf_config
from tpu_estimator.cross_shard_optimizer import CrossShardOptimizer
from tpu_estimator.errors import NanLossDuringTrainingError
from tpu_estimator.errors import NoCheckpointError
from tpu_estimator.estimator import Estimator
from tpu_estimator.estimator import TPUEstimator
from tpu_estimator.estimator import add_metrics
from tpu_estimator.inputs import numpy_input_fn
from tpu_estimator.inputs import pandas_input_fn
from tpu_estimator.checkpoints.lock import ModelDirLockedError
from tpu_estimator.specs import EstimatorSpec
from tpu_estimator.specs import ModeKeys
from tpu_estimator.specs import TPUEstimatorSpec
from tpu_estimator.training import BestExporter
from tpu_estimator.training import EvalSpec
from tpu_estimator.training import Exporter
from tpu_estimator.training import FinalExporter
from tpu_estimator.training import LatestExporter
from tpu_estimator.training import TrainSpec
from tpu_estimator.training import train_and_evaluate
from tpu_estimator.warm_starting import WarmStartSettings
from tpu_estimator import canned  # pylint: disable=wrong-import-position (needs Estimator)
from tpu_estimator.canned import BaselineClassifier
from tpu_estimator.canned import BaselineRegressor
from tpu_estimator.canned import DNNClassifier
from tpu_estimator.canned import DNNLinearCombinedClassifier
from tpu_estimator.canned import DNNLinearCombinedRegressor
from tpu_estimator.canned import DNNRegressor
from tpu_estimator.canned import LinearClassifier
from tpu_estimator.canned import LinearRegressor
from tpu_estimator.keras_models import model_to_estimator  # pylint: disable=wrong-import-position

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
