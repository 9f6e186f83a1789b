"""Keras 2 (tf_keras) object names in the replicas after the first.

tf_keras numbers the objects it names itself (`dense_features`, `dense_features_1`, ...) with
counters kept per graph.  The replicas of a sharded `model_fn` build in one graph, so a second
replica's layers got the numbers after the first's (`dense_features_3`).  Layers that make
their variables with `get_variable` (`tf.compat.v1.keras.layers.DenseFeatures`, which
`tensorflow.compat.v1` programs get) then looked up, under the replica's variable reuse, names
the first replica never made, and the build stopped.

Here each replica after the first numbers from a copy of the counters the first replica
started from, so every replica names its objects as the first did, as one device would; the
graph's own counters (the first replica's) end where one `model_fn` leaves them.  The
replicas of a graph-mode strategy run on threads of their own, one at a time between
synchronization points: the counters a thread sees are chosen by its thread.
tf_keras is never imported here: without it loaded there is nothing to number.
"""
import collections
import sys
import threading

import tensorflow as tf

_BACKEND = 'tf_keras.src.backend'


class _ByThread(collections.abc.MutableMapping):
  """A graph's name counters while its replicas build: the first replica's thread (and any
  other thread) counts in the graph's own, each later replica's thread in its copy."""

  def __init__(self, shared, start):
    self.shared = shared
    self.start = start
    self.copies = {}

  def _current(self):
    return self.copies.get(threading.get_ident(), self.shared)

  def __getitem__(self, key):
    return self._current()[key]  # a defaultdict(int): 0 for a name not numbered yet

  def __setitem__(self, key, value):
    self._current()[key] = value

  def __delitem__(self, key):
    del self._current()[key]

  def __iter__(self):
    return iter(self._current())

  def __len__(self):
    return len(self._current())


class Numbering:
  """One `Replicas.run`: `replica()` is entered by each replica's call, in the order the
  replicas start (the first is the strategy's first replica); `close()` puts the graph's own
  counters back."""

  def __init__(self):
    self._start = None  # the first replica's counters as it started
    self._graph = None
    self._installed = None
    self._entered = 0

  def replica(self):
    first = self._entered == 0
    self._entered += 1
    if first:
      self._graph = tf.compat.v1.get_default_graph()
      counters = self._counters()
      self._start = dict(counters) if counters is not None else {}
      return
    backend = sys.modules.get(_BACKEND)
    if backend is None:
      return  # no tf_keras: nothing was numbered
    if self._installed is None:
      shared = backend.get_default_graph_uid_map()
      self._installed = _ByThread(shared, self._start)
      backend.PER_GRAPH_OBJECT_NAME_UIDS[self._graph] = self._installed
    self._installed.copies[threading.get_ident()] = collections.defaultdict(
        int, self._start)

  def close(self):
    if self._installed is not None:
      sys.modules[_BACKEND].PER_GRAPH_OBJECT_NAME_UIDS[self._graph] = self._installed.shared

  def _counters(self):
    backend = sys.modules.get(_BACKEND)
    if backend is None:
      return None
    return backend.PER_GRAPH_OBJECT_NAME_UIDS.get(self._graph)
