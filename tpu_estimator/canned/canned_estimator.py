"""The shape every canned estimator has: networks make logits from `tf.feature_column` input,
a head makes the spec, each network trains with its own optimizer.

`CannedEstimator` is an `Estimator` whose `model_fn` is built from `Part`s (a variable scope,
a logits builder and an optimizer): the logits of all parts are summed, and each part's
optimizer updates only the variables of its scope.  The first part's optimizer advances the
global step (`iterations` = global step, as the original), the others keep their own counter.
"""
import collections
import contextlib
import warnings
import weakref

import tensorflow as tf

from tpu_estimator.canned import head_base
from tpu_estimator.canned import optimizers
from tpu_estimator.distribute import replication
from tpu_estimator import errors
from tpu_estimator.estimator import Estimator
from tpu_estimator import quiet
from tpu_estimator.specs import ModeKeys

_v1 = tf.compat.v1

# scope: the variable scope of the part ('dnn', 'linear'); build(features, mode,
# logits_dimension) -> (logits, update_ops); optimizer: as `optimizers.get_optimizer` takes it;
# learning_rate: for an optimizer given by name; argument: the constructor argument that gave
# the optimizer (named in errors).
Part = collections.namedtuple('Part', ['scope', 'build', 'optimizer', 'learning_rate',
                                       'argument'])


def check_feature_columns(name, feature_columns, allow_empty=False):
  """`feature_columns` as a list (a dict's values, as the original allowed), each a column."""
  if isinstance(feature_columns, dict):
    feature_columns = list(feature_columns.values())
  if feature_columns is None or isinstance(feature_columns, (str, bytes)) or \
      not hasattr(feature_columns, '__iter__'):
    raise errors.type_error('%s must be a list of tf.feature_column columns.' % name,
                            **{name: feature_columns})
  feature_columns = list(feature_columns)
  if not feature_columns and not allow_empty:
    raise errors.value_error('%s must not be empty.' % name, **{name: feature_columns})
  for column in feature_columns:
    if not hasattr(column, 'name') or not hasattr(column, 'parse_example_spec'):
      raise errors.type_error('Items of %s must be tf.feature_column columns.' % name,
                              item=column)
  return feature_columns


def check_features(features):
  """Feature-column networks read a dict of Tensors keyed by column keys."""
  if not isinstance(features, dict):
    raise errors.type_error('features must be a dict of Tensors (by feature column key).',
                            'Return a dict from input_fn.', features=features)
  return features


def _model_fn(head, parts, trainer):
  # Per graph, the names of the variables each part created in its first call: a later call
  # in the same graph (another replica of a strategy) reuses them and creates none.
  owned_names = weakref.WeakKeyDictionary()

  def model_fn(features, labels, mode, config):
    del config
    logits, update_ops, owned = [], [], []
    graph = _v1.get_default_graph()
    first_call = graph not in owned_names
    names = owned_names.setdefault(graph, [])
    with quiet.internal_calls(), warnings.catch_warnings():  # tf.feature_column's TF1 code
      warnings.filterwarnings('ignore', message='`layer.add_variable` is deprecated')
      warnings.filterwarnings('ignore', message='`layer.updates` will be removed')
      for index, part in enumerate(parts):
        before = {v.name for v in _v1.trainable_variables()}
        part_logits, part_updates = part.build(features, mode, head.logits_dimension)
        logits.append(part_logits)
        update_ops.extend(part_updates)
        if first_call:
          names.append([v.name for v in _v1.trainable_variables() if v.name not in before])
        by_name = {v.name: v for v in _v1.trainable_variables()}
        owned.append([by_name[name] for name in names[index]])
    total = logits[0] if len(logits) == 1 else tf.add_n(logits)

    def train_op_fn(loss):
      return trainer.train_op(parts, owned, loss, head)

    with trainer.head_scope(parts):
      if mode != ModeKeys.TRAIN:
        return head.create_estimator_spec(features, mode, total, labels)
      return head.create_estimator_spec(features, mode, total, labels, train_op_fn=train_op_fn,
                                        update_ops=update_ops)
  return model_fn


class Trainer(object):
  """How the parts' optimizers are made and applied: `tf.estimator` semantics (Keras
  optimizers, the first part's counting the global step).  `v1.V1Trainer` has the
  `tf.compat.v1.estimator` ones."""

  def head_scope(self, parts):
    """The name scope the head's spec is made in (none here: the head's own)."""
    del parts
    return contextlib.nullcontext()

  def check(self, part):
    """Fails at construction on a bad optimizer (a callable is called in each graph)."""
    if not callable(part.optimizer):
      optimizers.get_optimizer(part.optimizer, part.learning_rate, argument=part.argument)

  def train_op(self, parts, owned, loss, head):
    """The op training each part's `owned` variables for `loss`.  Under a strategy's replicas
    (RunConfig.train_distribute) a mean loss is divided by their number, as the original did
    for its Keras optimizers (which sum the replicas' gradients): the update is then the one
    of one device on all the replicas' rows."""
    if head.loss_reduction == head_base.SUM_OVER_BATCH_SIZE:
      loss = replication.replica_share(loss)
    ops = []
    for index, (part, variables) in enumerate(zip(parts, owned)):
      optimizer = optimizers.get_optimizer(part.optimizer, part.learning_rate,
                                           argument=part.argument)
      ops.append(optimizers.minimize(optimizer, loss, variables,
                                     _v1.train.get_or_create_global_step(),
                                     increment_global_step=index == 0,
                                     scope=head.optimizer_scope))
    return tf.group(*ops)


class CannedEstimator(Estimator):
  """An `Estimator` made of a head and logits-making parts (see the module docstring)."""

  def __init__(self, head, parts, model_dir=None, config=None, warm_start_from=None,
               trainer=None, model_fn=None):
    if not isinstance(head, head_base.Head):
      raise errors.type_error('head must be a tpu_estimator canned Head.', head=head)
    trainer = trainer or Trainer()
    for part in parts:  # a bad optimizer fails here, not at the first train call
      trainer.check(part)
    self._head = head
    # `model_fn`: one built elsewhere instead of the parts' (a LinearSDCA model's, canned/sdca).
    super().__init__(model_fn=model_fn or _model_fn(head, list(parts), trainer),
                     model_dir=model_dir, config=config, warm_start_from=warm_start_from)

  head = property(lambda self: self._head)
