"""The head-taking TF1-semantics canned estimators of `tf.compat.v1.estimator`
(tensorflow-estimator 2.15's `DNNEstimator`, `LinearEstimator`, `DNNLinearCombinedEstimator`,
`BaselineEstimator` without the `V2`): the networks, optimizers, partitioners and checkpoint
names of `v1.DNNClassifier` & co. (see `v1`), with the head the user gives.

The original's v1 classes took its v1 heads (`v1_heads`: what `tf.contrib.estimator`'s head
functions made).  They take any head of this package: the v1 ones, and also `tf.estimator`'s
(`BinaryClassHead`, `MultiHead`, ...), which the original's v1 classes could not train (a
`tf.estimator` head asks for a Keras optimizer, the v1 classes made a `tf.compat.v1.train`
one); here such a head trains with the v1 optimizer and keeps its own loss reduction.
"""
import tensorflow as tf

from tpu_estimator.canned import baseline
from tpu_estimator.canned import canned_estimator
from tpu_estimator.canned import head_base
from tpu_estimator.canned import v1
from tpu_estimator import errors


def check_head(head):
  if not isinstance(head, head_base.Head):
    raise errors.type_error(
        'head must be a head of tpu_estimator (a tf.estimator head or a TF1 one).',
        'Pass e.g. tf.estimator.BinaryClassHead(), tf.contrib.estimator.'
        'multi_class_head(3), or a head from '
        'tensorflow_estimator.python.estimator.canned.head.', head=head)
  return head


class DNNEstimator(v1._DNN):  # pylint: disable=protected-access
  """A DNN with any head, TF1 semantics (`tf.compat.v1.estimator.DNNEstimator`)."""

  def __init__(self, head, hidden_units, feature_columns, model_dir=None, optimizer='Adagrad',
               activation_fn=tf.nn.relu, dropout=None, input_layer_partitioner=None,
               config=None, warm_start_from=None, batch_norm=False):
    super().__init__(check_head(head), hidden_units, feature_columns, model_dir, optimizer,
                     activation_fn, dropout, input_layer_partitioner, config, warm_start_from,
                     batch_norm)


class LinearEstimator(v1._Linear):  # pylint: disable=protected-access
  """A linear model with any head, TF1 semantics (`tf.compat.v1.estimator.LinearEstimator`)."""

  def __init__(self, head, feature_columns, model_dir=None, optimizer='Ftrl', config=None,
               partitioner=None, sparse_combiner='sum', warm_start_from=None):
    super().__init__(check_head(head), feature_columns, model_dir, optimizer, config,
                     partitioner, warm_start_from, sparse_combiner)


class DNNLinearCombinedEstimator(v1._Combined):  # pylint: disable=protected-access
  """Wide-and-deep with any head, TF1 semantics
  (`tf.compat.v1.estimator.DNNLinearCombinedEstimator`; as the original's, it takes no
  `warm_start_from`)."""

  def __init__(self, head, model_dir=None, linear_feature_columns=None, linear_optimizer='Ftrl',
               dnn_feature_columns=None, dnn_optimizer='Adagrad', dnn_hidden_units=None,
               dnn_activation_fn=tf.nn.relu, dnn_dropout=None, input_layer_partitioner=None,
               config=None, batch_norm=False, linear_sparse_combiner='sum'):
    super().__init__(check_head(head), model_dir, linear_feature_columns, linear_optimizer,
                     dnn_feature_columns, dnn_optimizer, dnn_hidden_units, dnn_activation_fn,
                     dnn_dropout, input_layer_partitioner, config, None, batch_norm,
                     linear_sparse_combiner)


class BaselineEstimator(canned_estimator.CannedEstimator):
  """A bias-only model with any head, TF1 semantics
  (`tf.compat.v1.estimator.BaselineEstimator`)."""

  def __init__(self, head, model_dir=None, optimizer='Ftrl', config=None):
    super().__init__(check_head(head), [baseline.baseline_part(optimizer)], model_dir, config,
                     trainer=v1.V1Trainer(False))


NAMES = ('BaselineEstimator', 'DNNEstimator', 'DNNLinearCombinedEstimator', 'LinearEstimator')
