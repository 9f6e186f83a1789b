"""The TF1-semantics canned estimators of `tf.compat.v1.estimator` (tensorflow-estimator
2.15's `DNNClassifier`, `LinearRegressor`, ... without the `V2`): the networks and heads of
`tf.estimator`'s, with what the v1 classes did differently:

* the loss is summed over the batch (`loss_reduction=tf.compat.v1.losses.Reduction.SUM`);
* optimizers are `tf.compat.v1.train` ones: a name ('Adagrad', 'Adam', 'Ftrl', 'RMSProp',
  'SGD') makes one with the v1 default learning rate (a DNN's 0.05, not 0.001), and an
  instance or a callable must give a `tf.compat.v1.train.Optimizer`;
* the variables are made under the original's partitioners (one part each unless the
  cluster has parameter servers, or a `partitioner` / `input_layer_partitioner` is given),
  and a lone DNN or linear model applies its optimizer inside its variable scope, so
  checkpoints hold the original's names, slot variables included
  (`dnn/hiddenlayer_0/kernel/t_0/Adagrad`, `linear/linear_model/age/weights/part_0/Ftrl`);
* wide-and-deep applies both optimizers, then advances the global step once;
* a binary classifier's AUCs are `tf.compat.v1.metrics.auc` ones.
"""
import tensorflow as tf

from tpu_estimator.canned import baseline
from tpu_estimator.canned import canned_estimator
from tpu_estimator.canned import classification_heads
from tpu_estimator.canned import dnn
from tpu_estimator.canned import dnn_linear
from tpu_estimator.canned import head_base
from tpu_estimator.canned.keys import MetricKeys
from tpu_estimator.canned.keys import PredictionKeys
from tpu_estimator.canned import linear
from tpu_estimator.canned import regression_heads
from tpu_estimator.canned import sdca
from tpu_estimator import errors

_v1 = tf.compat.v1
DNN_LEARNING_RATE = 0.05  # a lone DNN's (wide-and-deep's DNN keeps 0.001, as the original)
_MIN_SLICE_SIZE = 64 << 20
_OPTIMIZER_CLASSES = {
    'Adagrad': 'AdagradOptimizer', 'Adam': 'AdamOptimizer', 'Ftrl': 'FtrlOptimizer',
    'RMSProp': 'RMSPropOptimizer', 'SGD': 'GradientDescentOptimizer'}
# tf.compat.v1.losses.Reduction values (all but NONE, as the original took them).
_REDUCTIONS = {'weighted_sum': head_base.SUM,
               'weighted_sum_over_batch_size': head_base.SUM_OVER_BATCH_SIZE,
               'weighted_mean': head_base.WEIGHTED_MEAN,
               'weighted_sum_by_nonzero_weights': head_base.NONZERO_WEIGHTS_MEAN}
SUM = 'weighted_sum'


def loss_reduction_of(loss_reduction):
  """The head's reduction for a `tf.compat.v1.losses.Reduction` value."""
  if loss_reduction not in _REDUCTIONS:
    raise errors.value_error(
        'Unsupported loss_reduction for a tf.compat.v1.estimator canned estimator.',
        'Use a tf.compat.v1.losses.Reduction other than NONE.',
        loss_reduction=loss_reduction)
  return _REDUCTIONS[loss_reduction]


def get_optimizer(optimizer, learning_rate, argument='optimizer'):
  """A `tf.compat.v1.train.Optimizer`: made from a name with `learning_rate`, returned as
  given, or returned by a callable (called in the graph being built)."""
  if isinstance(optimizer, str):
    if optimizer not in _OPTIMIZER_CLASSES:
      raise errors.value_error('Unsupported optimizer name.',
                               'Use one of %s.' % ', '.join(sorted(_OPTIMIZER_CLASSES)),
                               **{argument: optimizer})
    return getattr(_v1.train, _OPTIMIZER_CLASSES[optimizer])(learning_rate=learning_rate)
  if callable(optimizer) and not isinstance(optimizer, _v1.train.Optimizer):
    optimizer = optimizer()
  if not isinstance(optimizer, _v1.train.Optimizer):
    raise errors.type_error(
        'A tf.compat.v1.estimator canned estimator trains with a tf.compat.v1.train.Optimizer '
        '(or its name, or a callable returning one).',
        'Pass e.g. tf.compat.v1.train.AdagradOptimizer(0.05), or use the tf.estimator class '
        'for a Keras optimizer.', **{argument: optimizer})
  return optimizer


class V1Trainer(canned_estimator.Trainer):
  """The v1 training op.  `in_scope`: a lone part minimizes inside its variable scope (as
  the original's head did, which names slots `<variable>/t_0/<Optimizer>` for partitioned
  DNN variables); otherwise all parts minimize, then the global step advances once."""

  def __init__(self, in_scope):
    self._in_scope = in_scope

  def check(self, part):
    if not callable(part.optimizer) or isinstance(part.optimizer, _v1.train.Optimizer):
      get_optimizer(part.optimizer, part.learning_rate, part.argument)

  def head_scope(self, parts):
    """A lone part's head runs in the part's name scope, as the original's (its ops are
    `linear/head/...`, `dnn/head/...`)."""
    if self._in_scope:
      return tf.name_scope('%s/' % parts[0].scope)
    return super().head_scope(parts)

  def train_op(self, parts, owned, loss, head):
    # The original's v1 head applied the optimizer in its name scope (`head`, or the head's
    # name) inside the model's: optimizer variables that are not slots (Adam's
    # `dnn/head/beta1_power`) are named by it.
    head_scope = getattr(head, 'name', None) or 'head'
    global_step = _v1.train.get_or_create_global_step()
    if self._in_scope:
      (part,), (variables,) = parts, owned
      with _v1.variable_scope(part.scope, auxiliary_name_scope=False), \
          tf.name_scope('%s/%s/' % (part.scope, head_scope)):
        optimizer = get_optimizer(part.optimizer, part.learning_rate, part.argument)
        return optimizer.minimize(loss, global_step=global_step, var_list=variables)
    with tf.name_scope(head_scope + '/'):
      ops = [get_optimizer(part.optimizer, part.learning_rate, part.argument).minimize(
          loss, var_list=variables) for part, variables in zip(parts, owned)]
      with tf.control_dependencies([tf.group(*ops)]):
        return _v1.assign_add(global_step, 1).op


def _num_ps_replicas(config):
  return getattr(config, 'num_ps_replicas', None) or 0


def _input_partitioner(config, given):
  return given or _v1.min_max_variable_partitioner(
      max_partitions=_num_ps_replicas(config), min_slice_size=_MIN_SLICE_SIZE)


class BinaryClassHead(classification_heads.BinaryClassHead):
  """The v1 binary head: as `tf.estimator`'s, but `auc` and `auc_precision_recall` are
  `tf.compat.v1.metrics.auc` (trapezoidal sums over 200 thresholds; Keras' PR-AUC
  interpolates and gives other values)."""

  def _metrics(self, labels, logits, predictions, unweighted_loss, weights):
    result = super()._metrics(labels, logits, predictions, unweighted_loss, weights)
    logistic = predictions[PredictionKeys.LOGISTIC]
    weights = weights * tf.ones_like(logistic)
    for key, curve in ((MetricKeys.AUC, 'ROC'), (MetricKeys.AUC_PR, 'PR')):
      result[self.metric_key(key)] = _v1.metrics.auc(labels=labels, predictions=logistic,
                                                     weights=weights, curve=curve, name=key)
    return result


def with_v1_loss(head, loss_reduction):
  """`head`, its loss reduced as the v1 heads did (`tf.compat.v1.losses.compute_weighted_loss`
  by `loss_reduction`), in ops of their names: tensorflow/models' census and movielens
  programs log `linear/head/weighted_loss/Sum` and `dnn/head/weighted_loss/value`.
  `loss_reduction`: one `loss_reduction_of` took (the head was built with it)."""
  head.v1_reduction = loss_reduction
  return head


def classification_head(n_classes, weight_column, label_vocabulary, loss_reduction):
  reduction = loss_reduction_of(loss_reduction)
  head = classification_heads.classification_head(n_classes, weight_column, label_vocabulary,
                                                  reduction)
  if isinstance(head, classification_heads.BinaryClassHead):
    head = BinaryClassHead(weight_column=weight_column, label_vocabulary=label_vocabulary,
                           loss_reduction=reduction)
  return with_v1_loss(head, loss_reduction)


def _regression_head(label_dimension, weight_column, loss_reduction):
  return with_v1_loss(regression_heads.RegressionHead(label_dimension, weight_column,
                                                      loss_reduction_of(loss_reduction)),
                      loss_reduction)


class _DNN(canned_estimator.CannedEstimator):

  def __init__(self, head, hidden_units, feature_columns, model_dir, optimizer, activation_fn,
               dropout, input_layer_partitioner, config, warm_start_from, batch_norm):
    part = dnn.dnn_part(
        feature_columns, hidden_units, activation_fn, dropout, batch_norm, optimizer,
        learning_rate=DNN_LEARNING_RATE,
        partitioner=_v1.min_max_variable_partitioner(max_partitions=_num_ps_replicas(config)),
        input_layer_partitioner=_input_partitioner(config, input_layer_partitioner))
    super().__init__(head, [part], model_dir, config, warm_start_from, V1Trainer(True))


class DNNClassifier(_DNN):
  """Classifies with a DNN, TF1 semantics (`tf.compat.v1.estimator.DNNClassifier`)."""

  def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2,
               weight_column=None, label_vocabulary=None, optimizer='Adagrad',
               activation_fn=tf.nn.relu, dropout=None, input_layer_partitioner=None,
               config=None, warm_start_from=None, loss_reduction=SUM,
               batch_norm=False):
    head = classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)
    super().__init__(head, hidden_units, feature_columns, model_dir, optimizer, activation_fn,
                     dropout, input_layer_partitioner, config, warm_start_from, batch_norm)


class DNNRegressor(_DNN):
  """Regression with a DNN, TF1 semantics (`tf.compat.v1.estimator.DNNRegressor`)."""

  def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension=1,
               weight_column=None, optimizer='Adagrad', activation_fn=tf.nn.relu,
               dropout=None, input_layer_partitioner=None, config=None, warm_start_from=None,
               loss_reduction=SUM, batch_norm=False):
    head = _regression_head(label_dimension, weight_column, loss_reduction)
    super().__init__(head, hidden_units, feature_columns, model_dir, optimizer, activation_fn,
                     dropout, input_layer_partitioner, config, warm_start_from, batch_norm)


class _Linear(canned_estimator.CannedEstimator):

  def __init__(self, head, feature_columns, model_dir, optimizer, config, partitioner,
               warm_start_from, sparse_combiner):
    if isinstance(optimizer, sdca.LinearSDCA):  # its unshrunk copies: linear/<part>_unshrunk
      model_fn = linear.sdca_model_fn(head, feature_columns, optimizer, sparse_combiner,
                                      _input_partitioner(config, partitioner), prefix='linear/')
      super().__init__(head, [], model_dir, config, warm_start_from, model_fn=model_fn)
      return
    part = linear.linear_part(feature_columns, optimizer, sparse_combiner,
                              partitioner=_input_partitioner(config, partitioner))
    super().__init__(head, [part], model_dir, config, warm_start_from, V1Trainer(True))


class LinearClassifier(_Linear):
  """Classifies with a linear model, TF1 semantics
  (`tf.compat.v1.estimator.LinearClassifier`)."""

  def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None,
               label_vocabulary=None, optimizer='Ftrl', config=None, partitioner=None,
               warm_start_from=None, loss_reduction=SUM, sparse_combiner='sum'):
    head = classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)
    super().__init__(head, feature_columns, model_dir, optimizer, config, partitioner,
                     warm_start_from, sparse_combiner)


class LinearRegressor(_Linear):
  """Regression with a linear model, TF1 semantics
  (`tf.compat.v1.estimator.LinearRegressor`)."""

  def __init__(self, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
               optimizer='Ftrl', config=None, partitioner=None, warm_start_from=None,
               loss_reduction=SUM, sparse_combiner='sum'):
    head = _regression_head(label_dimension, weight_column, loss_reduction)
    super().__init__(head, feature_columns, model_dir, optimizer, config, partitioner,
                     warm_start_from, sparse_combiner)


class _Combined(canned_estimator.CannedEstimator):

  def __init__(self, head, model_dir, linear_feature_columns, linear_optimizer,
               dnn_feature_columns, dnn_optimizer, dnn_hidden_units, dnn_activation_fn,
               dnn_dropout, input_layer_partitioner, config, warm_start_from, batch_norm,
               linear_sparse_combiner):
    parts = dnn_linear.combined_parts(
        linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
        dnn_hidden_units, dnn_activation_fn, dnn_dropout, batch_norm, linear_sparse_combiner,
        dnn_partitioner=_v1.min_max_variable_partitioner(
            max_partitions=_num_ps_replicas(config)),
        input_layer_partitioner=_input_partitioner(config, input_layer_partitioner))
    super().__init__(head, parts, model_dir, config, warm_start_from, V1Trainer(False))


class DNNLinearCombinedClassifier(_Combined):
  """Wide-and-deep classifier, TF1 semantics
  (`tf.compat.v1.estimator.DNNLinearCombinedClassifier`)."""

  def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer='Ftrl',
               dnn_feature_columns=None, dnn_optimizer='Adagrad', dnn_hidden_units=None,
               dnn_activation_fn=tf.nn.relu, dnn_dropout=None, n_classes=2, weight_column=None,
               label_vocabulary=None, input_layer_partitioner=None, config=None,
               warm_start_from=None, loss_reduction=SUM, batch_norm=False,
               linear_sparse_combiner='sum'):
    head = classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)
    super().__init__(head, model_dir, linear_feature_columns, linear_optimizer,
                     dnn_feature_columns, dnn_optimizer, dnn_hidden_units, dnn_activation_fn,
                     dnn_dropout, input_layer_partitioner, config, warm_start_from, batch_norm,
                     linear_sparse_combiner)


class DNNLinearCombinedRegressor(_Combined):
  """Wide-and-deep regressor, TF1 semantics
  (`tf.compat.v1.estimator.DNNLinearCombinedRegressor`)."""

  def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer='Ftrl',
               dnn_feature_columns=None, dnn_optimizer='Adagrad', dnn_hidden_units=None,
               dnn_activation_fn=tf.nn.relu, dnn_dropout=None, label_dimension=1,
               weight_column=None, input_layer_partitioner=None, config=None,
               warm_start_from=None, loss_reduction=SUM, batch_norm=False,
               linear_sparse_combiner='sum'):
    head = _regression_head(label_dimension, weight_column, loss_reduction)
    super().__init__(head, model_dir, linear_feature_columns, linear_optimizer,
                     dnn_feature_columns, dnn_optimizer, dnn_hidden_units, dnn_activation_fn,
                     dnn_dropout, input_layer_partitioner, config, warm_start_from, batch_norm,
                     linear_sparse_combiner)


class BaselineClassifier(canned_estimator.CannedEstimator):
  """Predicts the class prior, TF1 semantics (`tf.compat.v1.estimator.BaselineClassifier`)."""

  def __init__(self, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None,
               optimizer='Ftrl', config=None, loss_reduction=SUM):
    head = classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)
    super().__init__(head, [baseline.baseline_part(optimizer)], model_dir, config,
                     trainer=V1Trainer(False))


class BaselineRegressor(canned_estimator.CannedEstimator):
  """Predicts the label mean, TF1 semantics (`tf.compat.v1.estimator.BaselineRegressor`)."""

  def __init__(self, model_dir=None, label_dimension=1, weight_column=None, optimizer='Ftrl',
               config=None, loss_reduction=SUM):
    if not errors.is_int(label_dimension):
      raise errors.type_error('label_dimension must be an int.', label_dimension=label_dimension)
    head = _regression_head(label_dimension, weight_column, loss_reduction)
    super().__init__(head, [baseline.baseline_part(optimizer)], model_dir, config,
                     trainer=V1Trainer(False))


NAMES = ('BaselineClassifier', 'BaselineRegressor', 'DNNClassifier',
         'DNNLinearCombinedClassifier', 'DNNLinearCombinedRegressor', 'DNNRegressor',
         'LinearClassifier', 'LinearRegressor')
