"""loop_clock: the seconds per step that xla=None compares between a training loop compiled and
uncompiled leave out each new session's first run (session warm-up, XLA's compilation) and
divide each run by the steps it ran."""
from tpu_estimator.distribute import loop_clock


class _FakeTime:

  def __init__(self):
    self.now = 0.0

  def perf_counter(self):
    return self.now


def _run(clock, fake, seconds, steps):
  clock.run_started()
  fake.now += seconds
  clock.run_ended(steps)


def test_runs_are_timed_per_step_leaving_out_a_new_sessions_first(monkeypatch):
  fake = _FakeTime()
  monkeypatch.setattr(loop_clock, 'time', fake)
  clock = loop_clock.LoopClock()
  clock.call_started(new_session=True)
  _run(clock, fake, 30.0, 3)  # compiles: left out
  _run(clock, fake, 0.3, 3)
  _run(clock, fake, 0.1, 1)  # the call's last, shorter loop: the same 0.1 s a step
  assert clock.per_step() is None  # 2 runs timed, fewer than MIN_RUNS
  clock.call_started(new_session=False)  # a kept session: its first run is timed
  _run(clock, fake, 0.9, 3)
  _run(clock, fake, 5.0, 0)  # no step run: not timed
  assert abs(clock.per_step() - 0.1) < 1e-9  # median of 0.1, 0.1, 0.3


def test_compiled_and_uncompiled_are_compared_once_per_input_fn(monkeypatch):
  fake = _FakeTime()
  monkeypatch.setattr(loop_clock, 'time', fake)
  timings = loop_clock.Timings()
  make = lambda: (lambda params: params)  # a new, indistinguishable lambda per call
  calls = [make(), make()]
  for input_fn, compiled, seconds in zip(calls, (False, True), (0.1, 0.3)):
    clock = timings.clock(input_fn, compiled)
    clock.call_started(new_session=True)
    for _ in range(loop_clock.MIN_RUNS + 1):
      _run(clock, fake, seconds, 1)
  other = lambda params: None
  assert timings.compare(other) is None  # never timed
  compared = timings.compare(make())
  assert [round(v, 9) for v in compared] == [0.3, 0.1]
  assert timings.compare(make()) is None and timings.clock(make(), True) is None  # done
