"""The measured half of `xla=None`'s "compile the training loop where it pays" (xla.Auto).

Op types do not tell every loop that XLA runs slower than TensorFlow: two transformer layers
whose feed-forward layers are `tf.einsum`s with GELU trained 2.2-2.9x slower compiled on the
2-core CPU (docs/design-decisions.md, "A compiled loop measured slower"), although no op type
in them is slower alone.  So the device-loop runs of one estimator's training calls are timed
per `input_fn` (`LoopControlHook` reports each run: its seconds and the steps it ran),
uncompiled and compiled, and their medians of seconds per step are compared once both are
known: a compiled loop `SLOWER` times the uncompiled one or more is not used again (the
estimator's later training calls run uncompiled).

* A compiled loop's first run in a new session is left out (it compiles); its time is known
  after `MIN_RUNS` runs, or fewer that took `MIN_SECONDS` in all (a long loop, one a call).
* Every uncompiled run counts, from its first: a first run's session warm-up can only make
  the uncompiled loop look slower, so a refusal stays sound, and a program whose calls are
  one loop each (tensorflow/tpu's train-then-evaluate loops) is compared too.

Only what the default decides is measured; a call in progress is never rebuilt (its hooks
would begin twice).  A loop compiled from its first call (one of `AUTO_MIN_STEPS` steps) has
no uncompiled runs to be compared with and stays compiled."""
import statistics
import weakref

from tpu_estimator.core import function_identity

# A compiled loop this many times slower a step than the uncompiled one (medians) is dropped.
SLOWER = 1.2
# A compiled loop's runs timed (beyond each new session's first) before it is compared, or
# fewer that took this many seconds in all.
MIN_RUNS = 3
MIN_SECONDS = 1.0
# Input functions whose loops are being timed, at most (the oldest are forgotten).
_RECORDS = 4


class LoopClock:
  """The seconds per step of the device-loop runs of training calls of one kind (compiled as a
  whole or not) with one `input_fn`.  `compiled`: a new session's first run is left out, and
  the time is known after `MIN_RUNS` runs or `MIN_SECONDS`; otherwise after one run."""

  def __init__(self, compiled):
    self._compiled = compiled
    self._runs = []  # (seconds, steps)
    self._skip = False

  def call_started(self, new_session):
    """A call begins its runs (`new_session`: in a session of its own)."""
    self._skip = new_session and self._compiled

  def ran(self, seconds, steps):
    """A run took `seconds` and ran `steps` steps (LoopControlHook times it)."""
    if self._skip:
      self._skip = False
    elif steps > 0:
      self._runs.append((seconds, steps))

  def per_step(self):
    """The median seconds per step over the timed runs, or None while too few are timed."""
    if not self._runs:
      return None
    if self._compiled and len(self._runs) < MIN_RUNS and \
        sum(seconds for seconds, _ in self._runs) < MIN_SECONDS:
      return None
    return statistics.median(seconds / steps for seconds, steps in self._runs)


class _Record:

  def __init__(self, input_fn):
    self.input_fn = weakref.ref(input_fn)
    self.clocks = {False: LoopClock(compiled=False), True: LoopClock(compiled=True)}
    self.judged = False


class Timings:
  """The `LoopClock`s of one estimator's training calls, per `input_fn` (the same object or one
  that calling cannot tell apart from it: function_identity.py)."""

  def __init__(self):
    self._records = []

  def _record(self, input_fn, add):
    for record in self._records:
      known = record.input_fn()
      if known is not None and function_identity.same_function(known, input_fn):
        return record
    if not add:
      return None
    try:
      record = _Record(input_fn)
    except TypeError:  # not weakly referenceable: never seen as the same, not timed
      return None
    self._records = [r for r in self._records if r.input_fn() is not None][-(_RECORDS - 1):]
    self._records.append(record)
    return record

  def clock(self, input_fn, compiled):
    """The clock timing a training call with `input_fn` (`compiled`: its loop is one XLA
    computation), or None where the comparison was made already."""
    record = self._record(input_fn, add=True)
    if record is None or record.judged:
      return None
    return record.clocks[compiled]

  def compare(self, input_fn):
    """(compiled, uncompiled) seconds per step, once both are known (then None again)."""
    record = self._record(input_fn, add=False)
    if record is None or record.judged:
      return None
    compiled, uncompiled = (record.clocks[kind].per_step() for kind in (True, False))
    if compiled is None or uncompiled is None:
      return None
    record.judged = True
    return compiled, uncompiled
