"""Sessions that plan a run's fetches once per fetch structure, not at every run.

Every `Session.run` turns its fetches into a plan before anything runs: it walks the
structure, looks each element up in the graph, drops duplicates, and records how to rebuild
the structure from the values (TensorFlow's `_FetchHandler`).  A MonitoredSession's run
fetches a dict of the caller's fetches and every hook's request, the same one at nearly every
step, so a training or evaluation loop of one step per run made the same plan thousands of
times: about 50 µs a run on the 2-core CPU, an eighth of the small benchmark MLP's step
(docs/design-decisions.md, "Fetch plans made once").  `PlannedSession` keeps the plan of each
fetch structure it has seen and reuses it when the same structure comes again.

A plan is reused only where it is provably the one the run would make:
* the run feeds nothing (a feed can replace a fetched value) and is not a partial run;
* the structure holds only plain lists, tuples, namedtuples and dicts, down to tensors,
  operations and tensor names; anything else (a variable, a sparse tensor, an attrs class,
  a dict subclass) is planned at that run, as by TensorFlow;
* the structure's key names its containers' types and its elements by identity (names by
  value), and the plan keeps those elements alive, so an identity cannot be reused by another
  object while the plan is kept;
* the plan is made from a copy of the structure's dicts: TensorFlow's plan of a dict
  reads that dict's keys again when it rebuilds results, and a caller may change its dict
  after the run.
A session forgets its plans when it is closed, and a session kept for later calls when each
call closes it: a MonitoredSession keys its hooks' requests by the hook, so plans hold the
call's hooks, which must not outlive the call (a hook may hold whatever the call gave it).
"""
import tensorflow as tf

from tpu_estimator import _tf_internals

_v1 = tf.compat.v1

# Plans kept per session at most: a hook alternating its requests (every N steps) adds a few;
# more distinct structures than this means they do not repeat, and the plans start over.
MAX_PLANS = 64


class _Unplanned(Exception):
  """The structure holds something a plan is not reused for."""


def _element_key(fetch, keep):
  if type(fetch) is str:  # pylint: disable=unidiomatic-typecheck
    return fetch
  if isinstance(fetch, (tf.Tensor, tf.Operation)):
    keep.append(fetch)
    return id(fetch)
  raise _Unplanned()


def _dict_key(key, keep):
  """A dict key as it enters the plan's key: strings and ints by value, anything else (a
  MonitoredSession keys its hooks' requests by the hook) by identity, kept alive."""
  if type(key) in (str, int):  # pylint: disable=unidiomatic-typecheck
    return key
  keep.append(key)
  return ('id', id(key))


def structure_key(fetches, keep):
  """A hashable key equal for two fetch structures exactly when TensorFlow would plan them
  alike; appends to `keep` the objects it names by identity.  `_Unplanned` for anything else."""
  kind = type(fetches)
  if kind is dict:
    return (dict,) + tuple((_dict_key(k, keep), structure_key(v, keep))
                           for k, v in fetches.items())
  if kind is list or kind is tuple or (issubclass(kind, tuple) and hasattr(kind, '_fields')):
    return (kind,) + tuple(structure_key(f, keep) for f in fetches)
  return _element_key(fetches, keep)


def _copied(fetches):
  """The structure with each dict in it copied, and the lists and tuples that hold one
  rebuilt around the copy (the rest, elements included, shared)."""
  kind = type(fetches)
  if kind is dict:
    return {k: _copied(v) for k, v in fetches.items()}
  if kind is list or issubclass(kind, tuple):  # (structure_key let no other sequence through)
    items = [_copied(f) for f in fetches]
    if all(new is old for new, old in zip(items, fetches)):
      return fetches
    if kind is list:
      return items
    return tuple(items) if kind is tuple else kind._make(items)  # a namedtuple
  return fetches


class PlannedSession(_tf_internals.SessionOfPlannedRuns):
  """A v1 Session whose runs without feeds reuse the plan made for the same fetch structure.
  What a run computes and returns is unchanged: only TensorFlow's bookkeeping is skipped."""

  def _plan_for(self, fetches):
    plans = self.__dict__.get('_fetch_plans')
    if plans is None:
      plans = self._fetch_plans = {}
    keep = []
    try:
      key = structure_key(fetches, keep)
      found = plans.get(key)
    except _Unplanned:
      return None
    if found is not None:
      return found[0]
    plan = _tf_internals.fetch_plan(self.graph, _copied(fetches))
    if len(plans) >= MAX_PLANS:
      plans.clear()
    plans[key] = (plan, keep)
    return plan

  def forget_plans(self):
    self.__dict__.pop('_fetch_plans', None)

  def close(self):
    self.forget_plans()
    super().close()


def planned(session, kind=PlannedSession):
  """`session` (made by TensorFlow's SessionManager) as a `kind` (`PlannedSession` or a
  subclass of it); any other kind of session is returned as it is."""
  if type(session) is _v1.Session:  # pylint: disable=unidiomatic-typecheck
    session.__class__ = kind
  return session


class PlannedSessions(_v1.train.SessionCreator):
  """Creates sessions with `creator`, each a `PlannedSession` (`planned`)."""

  def __init__(self, creator):
    self._creator = creator

  def create_session(self):
    return planned(self._creator.create_session())
