"""Canned estimators and heads on `tf.feature_column` (`tf.estimator.DNNClassifier`, ...),
built on this project's `Estimator` core with the original's variable names, metric and
prediction keys, and export signatures."""
from tpu_estimator.canned.classification_heads import BinaryClassHead
from tpu_estimator.canned.classification_heads import MultiClassHead
from tpu_estimator.canned.dnn import DNNClassifier
from tpu_estimator.canned.dnn import DNNEstimator
from tpu_estimator.canned.dnn import DNNRegressor
from tpu_estimator.canned.head_base import Head
from tpu_estimator.canned.keys import MetricKeys
from tpu_estimator.canned.keys import PredictionKeys
from tpu_estimator.canned.linear import LinearClassifier
from tpu_estimator.canned.linear import LinearEstimator
from tpu_estimator.canned.linear import LinearRegressor
from tpu_estimator.canned.regression_heads import LogisticRegressionHead
from tpu_estimator.canned.regression_heads import PoissonRegressionHead
from tpu_estimator.canned.regression_heads import RegressionHead
from tpu_estimator.canned.baseline import BaselineClassifier
from tpu_estimator.canned.baseline import BaselineEstimator
from tpu_estimator.canned.baseline import BaselineRegressor
from tpu_estimator.canned.dnn_linear import DNNLinearCombinedClassifier
from tpu_estimator.canned.dnn_linear import DNNLinearCombinedEstimator
from tpu_estimator.canned.dnn_linear import DNNLinearCombinedRegressor
