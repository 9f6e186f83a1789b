"""Canned estimators and heads on `tf.feature_column` (`tf.estimator.DNNClassifier`, ...),
built on this project's `Estimator` core with the original's variable names, metric and
prediction keys, and export signatures."""
from tpu_estimator.canned.baseline import BaselineClassifier
from tpu_estimator.canned.baseline import BaselineEstimator
from tpu_estimator.canned.baseline import BaselineRegressor
from tpu_estimator.canned.classification_heads import BinaryClassHead
from tpu_estimator.canned.classification_heads import MultiClassHead
from tpu_estimator.canned.dnn import DNNClassifier
from tpu_estimator.canned.dnn import DNNEstimator
from tpu_estimator.canned.dnn import DNNRegressor
from tpu_estimator.canned.dnn_linear import DNNLinearCombinedClassifier
from tpu_estimator.canned.dnn_linear import DNNLinearCombinedEstimator
from tpu_estimator.canned.dnn_linear import DNNLinearCombinedRegressor
from tpu_estimator.canned.head_base import Head
from tpu_estimator.canned.heads import binary_classification_head
from tpu_estimator.canned.heads import logistic_regression_head
from tpu_estimator.canned.heads import multi_class_head
from tpu_estimator.canned.heads import multi_head
from tpu_estimator.canned.heads import multi_label_head
from tpu_estimator.canned.heads import poisson_regression_head
from tpu_estimator.canned.heads import regression_head
from tpu_estimator.canned.keys import MetricKeys
from tpu_estimator.canned.kmeans import KMeans
from tpu_estimator.canned.keys import PredictionKeys
from tpu_estimator.canned.linear import LinearClassifier
from tpu_estimator.canned.linear import LinearEstimator
from tpu_estimator.canned.linear import LinearRegressor
from tpu_estimator.canned.multi_head import MultiHead
from tpu_estimator.canned.multi_label_head import MultiLabelHead
from tpu_estimator.canned.parse_example_specs import classifier_parse_example_spec
from tpu_estimator.canned.parse_example_specs import regressor_parse_example_spec
from tpu_estimator.canned.regression_heads import LogisticRegressionHead
from tpu_estimator.canned.regression_heads import PoissonRegressionHead
from tpu_estimator.canned.regression_heads import RegressionHead
from tpu_estimator.canned.rnn import RNNClassifier
from tpu_estimator.canned.rnn import RNNEstimator
from tpu_estimator.canned.sdca import LinearSDCA
from tpu_estimator.canned.sequential_head import SequentialHeadWrapper

ESTIMATOR_NAMES = (
    'BaselineClassifier', 'BaselineEstimator', 'BaselineRegressor', 'DNNClassifier',
    'DNNEstimator', 'DNNLinearCombinedClassifier', 'DNNLinearCombinedEstimator',
    'DNNLinearCombinedRegressor', 'DNNRegressor', 'LinearClassifier', 'LinearEstimator',
    'LinearRegressor')
HEAD_NAMES = ('BinaryClassHead', 'Head', 'LogisticRegressionHead', 'MultiClassHead',
              'MultiHead', 'MultiLabelHead', 'PoissonRegressionHead', 'RegressionHead')
HEAD_FUNCTION_NAMES = ('binary_classification_head', 'logistic_regression_head',
                       'multi_class_head', 'multi_head', 'multi_label_head',
                       'poisson_regression_head', 'regression_head')
# tf.estimator.experimental's canned estimators.
EXPERIMENTAL_NAMES = ('RNNClassifier', 'RNNEstimator')
# What tf.estimator holds of this package (tensorflow-estimator 2.15's names).
V2_NAMES = ESTIMATOR_NAMES + HEAD_NAMES + ('classifier_parse_example_spec',
                                           'regressor_parse_example_spec')
