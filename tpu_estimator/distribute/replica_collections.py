"""Each replica of a sharded TPUEstimator `model_fn` sees its own losses and update ops.

On a TPU the original traced `model_fn` once and replicated the computation, so the graph's
`LOSSES` and `UPDATE_OPS` collections held one replica's entries.  Here `model_fn` is called
once per replica (`tf.distribute` replica threads) in one graph, so without this
`tf.compat.v1.losses.get_total_loss()` in the second replica also summed the first replica's
loss (its gradients and its reported loss came out wrong, silently: google-research/simclr on 2
shards evaluated a loss of 1.33 against one device's 0.97), `get_collection(UPDATE_OPS)`
gathered every replica's batch-norm updates, and `moving_average_variables()` every replica's
moving averages.

`own_collections()` around a replica's `model_fn` call records which replica added each entry
of those collections and hides the other replicas' entries from its reads.  Entries added
outside the replicas (before or after) are seen by all; so are the variables' collections.
A read by scope (`get_collection(UPDATE_OPS, scope)`) matches the scope against each entry's
name without the replica's own name scope ('replica_1/'), as one traced `model_fn` named it.
Entries appended to `get_collection_ref`'s list directly (tf_keras's legacy layers add their
batch-norm updates so) carry no recorded owner: it is read from the replica scope in their
name, or is the first replica where they came after it began (`_owner`).
`REGULARIZATION_LOSSES`: a replica sees its own entries and those added outside the replicas;
another replica's entry is given to it rebuilt on its own copies of the variables where it
reads only variables (a weight regularizer, which the first replica alone adds, as it alone
makes the variables: replica_regularizers.py), and hidden where it reads anything else (an
activity regularizer, which each replica adds for itself: the second replica counted the
first's too).  The plain Estimator's `train_distribute` keeps TensorFlow's shared
collections, as the original's did.
"""
import contextlib
import re
import threading
import weakref

import tensorflow as tf

from tpu_estimator.distribute import replica_regularizers

_v1 = tf.compat.v1
# MOVING_AVERAGE_VARIABLES: `ExponentialMovingAverage.apply(var_list)` adds its variables
# there, and tensorflow/tpu's MobileNet and Inception v3 pass it
# `trainable_variables() + moving_average_variables()`: the second replica's list held the
# first replica's entries again, and the replicas' updates of the averages disagreed in number.
PER_REPLICA = (_v1.GraphKeys.LOSSES, _v1.GraphKeys.UPDATE_OPS,
               _v1.GraphKeys.MOVING_AVERAGE_VARIABLES)
_REGULARIZATION = _v1.GraphKeys.REGULARIZATION_LOSSES
_RECORDED = PER_REPLICA + (_REGULARIZATION,)

_local = threading.local()  # .replica: the replica whose model_fn this thread is building
_owners = weakref.WeakKeyDictionary()  # graph -> {(collection, id(entry)): replica}
_rebuilt = weakref.WeakKeyDictionary()  # graph -> {(id(loss), replica): (loss, its copy)}
_before = weakref.WeakKeyDictionary()  # graph -> {collection: ids there as replica 0 began}
_installed = []


def _replica():
  return getattr(_local, 'replica', None)


def _install():
  """Makes `tf.Graph`'s collection reads and writes replica-aware (graphs have no instance
  attributes to set, and a loop body's FuncGraph has collections of its own).  Outside
  `own_collections()` they behave exactly as TensorFlow's."""
  if _installed:
    return
  get, add = tf.Graph.get_collection, tf.Graph.add_to_collection

  def add_to_collection(graph, name, value):  # add_to_collections calls it too
    if name in _RECORDED and _replica() is not None:
      _owners.setdefault(_outermost(graph), {})[(name, id(value))] = _replica()
    return add(graph, name, value)

  def get_collection(graph, name, scope=None):
    me = _replica()
    if me is None or name not in _RECORDED:
      return get(graph, name, scope)
    items = _in_scope(get(graph, name), scope, me)
    owners = _owners.get(_outermost(graph), {})
    if name == _REGULARIZATION:
      return _regularization_losses(items, owners, me)
    return [item for item in items if _owner(graph, name, item, owners) in (None, me)]

  tf.Graph.add_to_collection = add_to_collection
  tf.Graph.get_collection = get_collection
  _installed.append(True)


def _owner(graph, name, item, owners):
  """The replica that added `item` to collection `name`, None where no replica did.  Entries
  appended to `get_collection_ref`'s list directly (tf_keras's legacy layers add their
  batch-norm updates so) have no recorded owner: one that was not in the collection when the
  first replica began (`own_collections`) is the replica's its name scope names
  (`replica_1/...`), else the first replica's."""
  owner = owners.get((name, id(item)))
  if owner is not None:
    return owner
  before = _before.get(graph, {}).get(name)
  if before is None or id(item) in before:  # there before the replicas: everyone's
    return None
  return replica_regularizers.maker(item) if isinstance(getattr(item, 'name', None), str) else 0


def _in_scope(items, scope, me):
  """`items` whose name `scope` matches (as `tf.Graph.get_collection` filters them) once the
  replica's own name scope is taken out: on a TPU the one traced `model_fn` named its ops
  without it, and programs filter by the variable scope they built in (TF-GAN's
  `get_collection(UPDATE_OPS, generator_scope.name)` missed the second replica's batch-norm
  updates, 'replica_1/Generator/...', and stopped on them as unused)."""
  if scope is None:
    return items
  pattern, prefix = re.compile(scope), 'replica_%d/' % me
  kept = []
  for item in items:
    name = getattr(item, 'name', None)
    if not isinstance(name, str):  # as TensorFlow's filter: an item with no name is left out
      continue
    if pattern.match(name[len(prefix):] if name.startswith(prefix) else name):
      kept.append(item)
  return kept


def _regularization_losses(items, owners, me):
  """`items` of REGULARIZATION_LOSSES as replica `me` sees them (see the module's doc)."""
  rebuilt = _rebuilt.setdefault(_v1.get_default_graph(), {})  # where the copies are made
  seen, copies = [], None
  for item in items:
    if not isinstance(item, tf.Tensor):  # get_variable's lazy loss: made again where read
      seen.append(item)
      continue
    key = (id(item), me)
    if key not in rebuilt:
      copies = copies or replica_regularizers.copies_for(me)
      rebuilt[key] = (item, replica_regularizers.for_replica(item, copies))
    if rebuilt[key][1] is not None:  # a weight regularizer, on this replica's copies
      seen.append(rebuilt[key][1])
      continue
    # tf_keras adds its layers' losses through get_collection_ref: no owner recorded.
    owner = owners.get((_REGULARIZATION, id(item)))
    if (replica_regularizers.maker(item) if owner is None else owner) == me:
      seen.append(item)
  return seen


def _outermost(graph):
  """The graph a loop body's FuncGraph is built in: it reads that graph's collections, and
  an entry may be added there (`ExponentialMovingAverage.apply` adds under `init_scope`)."""
  while getattr(graph, 'outer_graph', None) is not None:
    graph = graph.outer_graph
  return graph


@contextlib.contextmanager
def own_collections():
  """Within: the calling replica's reads of `PER_REPLICA` collections skip the entries other
  replicas added.  A no-op outside several replicas."""
  context = tf.distribute.get_replica_context()
  replica = None
  if context is not None and context.num_replicas_in_sync > 1:
    replica = tf.get_static_value(context.replica_id_in_sync_group)
  if replica is None:
    yield
    return
  _install()
  if int(replica) == 0:
    graph = _v1.get_default_graph()
    _before[graph] = {name: {id(item) for item in graph.get_collection_ref(name)}
                      for name in PER_REPLICA}
  previous = _replica()
  _local.replica = int(replica)
  try:
    yield
  finally:
    _local.replica = previous
