"""loop_clock: the seconds per step that xla=None compares between a training loop compiled and
uncompiled.  A compiled loop's first run in a new session (its compilation) is left out and
its time is known after 3 runs or a second of them; every uncompiled run counts, its first
too (warm-up can only make it look slower); each run is divided by the steps it ran."""
from tpu_estimator.distribute import loop_clock


def test_a_compiled_loop_is_timed_without_its_compilation():
  clock = loop_clock.LoopClock(compiled=True)
  clock.call_started(new_session=True)
  clock.ran(30.0, 3)  # compiles: left out
  clock.ran(0.3, 3)
  clock.ran(0.1, 1)  # the call's last, shorter loop: the same 0.1 s a step
  assert clock.per_step() is None  # 2 runs, 0.4 s: too few
  clock.call_started(new_session=False)  # a kept session: its first run is timed
  clock.ran(0.9, 3)
  clock.ran(5.0, 0)  # no step run: not timed
  assert abs(clock.per_step() - 0.1) < 1e-9  # median of 0.1, 0.1, 0.3

  long_loop = loop_clock.LoopClock(compiled=True)  # one loop a call
  for _ in range(2):
    long_loop.call_started(new_session=True)
    long_loop.ran(60.0, 1000)
  assert long_loop.per_step() is None  # each call's one run compiled
  long_loop.call_started(new_session=False)
  long_loop.ran(1.2, 1000)  # over MIN_SECONDS: known
  assert abs(long_loop.per_step() - 0.0012) < 1e-12


def test_every_uncompiled_run_counts():
  clock = loop_clock.LoopClock(compiled=False)
  clock.call_started(new_session=True)
  assert clock.per_step() is None
  clock.ran(2.0, 1000)  # one loop, its session's warm-up included
  assert abs(clock.per_step() - 0.002) < 1e-12


def test_compiled_and_uncompiled_are_compared_once_per_input_fn():
  timings = loop_clock.Timings()
  make = lambda: (lambda params: params)  # a new, indistinguishable lambda per call
  calls = [make(), make()]
  for input_fn, compiled, seconds in zip(calls, (False, True), (0.1, 0.3)):
    clock = timings.clock(input_fn, compiled)
    clock.call_started(new_session=True)
    for _ in range(loop_clock.MIN_RUNS + 1):
      clock.ran(seconds, 1)
  other = lambda params: None
  assert timings.compare(other) is None  # never timed
  compared = timings.compare(make())
  assert [round(v, 9) for v in compared] == [0.3, 0.1]
  assert timings.compare(make()) is None and timings.clock(make(), True) is None  # done
