"""`BaselineClassifier`, `BaselineRegressor` and `BaselineEstimator`: features ignored, one
bias per logit (`baseline/bias`, zero-initialised) learned with Ftrl (learning rate 0.3), so
they predict the label prior / label mean, as in tensorflow-estimator 2.15.  They are the
"is my model better than nothing" yardstick."""
import tensorflow as tf

from tpu_estimator.canned import canned_estimator
from tpu_estimator.canned import classification_heads
from tpu_estimator.canned import head_base
from tpu_estimator.canned import regression_heads
from tpu_estimator import errors

_v1 = tf.compat.v1
LEARNING_RATE = 0.3


def _batch_size(features):
  """The batch size of the features (the first one's leading dimension)."""
  if isinstance(features, dict):
    if not features:
      raise ValueError('The baseline needs at least one feature to tell the batch size. '
                       'Received: features={}. Return any feature from input_fn.')
    features = features[sorted(features)[0]]
  if isinstance(features, tf.SparseTensor):
    return features.dense_shape[0]
  return tf.shape(features, out_type=tf.int64)[0]


def baseline_part(optimizer):
  def build(features, mode, logits_dimension):
    del mode
    with _v1.variable_scope('baseline'):
      bias = _v1.get_variable('bias', [logits_dimension], initializer=_v1.zeros_initializer())
    batch = _batch_size(features)
    logits = tf.tile(bias[tf.newaxis], tf.stack([tf.cast(batch, tf.int32), 1]))
    if logits_dimension == 1:
      _v1.summary.scalar('bias', bias[0])
    else:
      _v1.summary.histogram('bias', bias)
    return logits, []

  return canned_estimator.Part('baseline', build, optimizer, LEARNING_RATE, 'optimizer')


class BaselineEstimator(canned_estimator.CannedEstimator):
  """A bias-only model with any head (`tf.estimator.BaselineEstimator`)."""

  def __init__(self, head, model_dir=None, optimizer='Ftrl', config=None):
    super().__init__(head, [baseline_part(optimizer)], model_dir, config)


class BaselineClassifier(BaselineEstimator):
  """Predicts the class prior (`tf.estimator.BaselineClassifier`)."""

  def __init__(self, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None,
               optimizer='Ftrl', config=None, loss_reduction=head_base.SUM_OVER_BATCH_SIZE):
    head = classification_heads.classification_head(n_classes, weight_column, label_vocabulary,
                                                    loss_reduction)
    super().__init__(head, model_dir, optimizer, config)


class BaselineRegressor(BaselineEstimator):
  """Predicts the label mean (`tf.estimator.BaselineRegressor`)."""

  def __init__(self, model_dir=None, label_dimension=1, weight_column=None, optimizer='Ftrl',
               config=None, loss_reduction=head_base.SUM_OVER_BATCH_SIZE):
    if not errors.is_int(label_dimension):
      raise errors.type_error('label_dimension must be an int.', label_dimension=label_dimension)
    head = regression_heads.RegressionHead(label_dimension, weight_column, loss_reduction)
    super().__init__(head, model_dir, optimizer, config)
