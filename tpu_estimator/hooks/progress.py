"""Progress reporting for `train`, `evaluate` and `predict`.

`ProgressBarHook` draws one updating line on an interactive terminal (steps done/target,
steps/s, loss, ETA) with rich's colours, bar and terminal width (`Painter`), redrawn after
each `session.run` (with device loops the count jumps by
`iterations_per_loop`).  `RunConfig(progress_bar=None)` means a bar only when the stream is a
terminal; non-interactive runs keep the original's INFO lines (`loss = ..., step = ...`).

`ExamplesPerSecondHook` is the original TPUEstimator's: a `StepCounterHook` that writes
`examples/sec` (= global_step/sec * global batch size) next to `global_step/sec`.
"""
import collections
import logging
import re
import sys
import time

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import quiet

_v1 = tf.compat.v1
_log = tf.get_logger()


def is_terminal(stream):
  """Whether `stream` is an interactive terminal (False for pipes, files, closed streams)."""
  isatty = getattr(stream, 'isatty', None)
  if isatty is None:
    return False
  try:
    return bool(isatty())
  except (ValueError, OSError):
    return False


def bar_enabled(setting, stream=None):
  """`RunConfig.progress_bar` resolved: True/False as given, None: `stream` (default
  sys.stderr) is a terminal."""
  if setting is not None:
    return bool(setting)
  return is_terminal(sys.stderr if stream is None else stream)


def _duration(seconds):
  seconds = int(round(max(seconds, 0)))
  hours, rest = divmod(seconds, 3600)
  minutes, seconds = divmod(rest, 60)
  if hours:
    return '%d:%02d:%02d' % (hours, minutes, seconds)
  return '%d:%02d' % (minutes, seconds)


def _rate(value):
  if value is None:
    return '?'
  if value >= 100:
    return '%.0f' % value
  if value >= 10:
    return '%.1f' % value
  return '%.2f' % value


# The widest bar, and the narrowest worth drawing (below it the line goes without one).
_BAR_MAX, _BAR_MIN = 40, 10
# Back to the line's start and blank it (what rich's live display writes for a one-line view).
CLEAR = '\r\x1b[2K'
_SGR = re.compile('\x1b\\[[0-9;]*m')  # colours and attributes: no cells on the screen


def console_for(stream):
  """A rich Console drawing on `stream` as on a terminal (the bar is drawn only on one, or
  where `progress_bar=True` forces it). Its width is read from the terminal at every line
  (`COLUMNS` when set); colours follow rich's rules (`NO_COLOR`, `FORCE_COLOR`, `TERM`)."""
  from rich.console import Console  # pylint: disable=import-outside-toplevel
  # Not rich's Jupyter output (a new output cell per redraw): a notebook that forces the bar
  # gets the text and its '\r', as on a terminal.
  return Console(file=stream, force_terminal=True, force_jupyter=False, highlight=False)


class Line(collections.namedtuple('Line', ['plain', 'ansi'])):
  """A progress line or a piece of one: its text as the terminal shows it, and what is
  written (with colours)."""


_SPACE = Line(' ', ' ')


class Painter:
  """Progress lines for a rich Console. Rich decides how they look: the colours (its theme's
  `progress.*` styles in the terminal's colour system, none under `NO_COLOR`), the bar (its
  `ProgressBar`, in ASCII where the encoding has no box drawing) and the width (the
  terminal's, read for every line). What rich renders is kept, each style's escape codes and
  the bar at each fill, so a redraw joins strings: rich rendering the whole line took ~1.3 ms,
  15 times the hand-drawn line, and the bar is drawn after every device loop."""

  def __init__(self, console):
    self.console = console
    self.separator = ' • ' if (console.encoding or '').lower().startswith('utf') else ' | '
    self._separator = Line(self.separator, self.separator)
    self._codes = {}  # style name: (start, end) escape codes
    self._bars = {}  # (width, filled halves): Line

  def _ansi(self, renderable):
    with self.console.capture() as captured:
      self.console.print(renderable, end='')
    return captured.get()

  def styled(self, text, style):
    """`text` in `style` (a style name of rich's theme)."""
    codes = self._codes.get(style)
    if codes is None:
      from rich.text import Text  # pylint: disable=import-outside-toplevel
      codes = self._codes[style] = tuple(self._ansi(Text('X', style=style)).split('X'))
    return Line(text, codes[0] + text + codes[1])

  def bar(self, width, done, total):
    """rich's bar, `width` cells, `done` of `total` filled (by halves of a cell)."""
    halves = width * 2 if total <= 0 else int(width * 2 * min(max(done, 0), total) / total)
    line = self._bars.get((width, halves))
    if line is None:
      from rich.progress_bar import ProgressBar  # pylint: disable=import-outside-toplevel
      ansi = self._ansi(ProgressBar(total=width * 2, completed=halves, width=width))
      line = self._bars[(width, halves)] = Line(_SGR.sub('', ansi), ansi)
    return line

  def line(self, label, done, total, unit, rate=None, loss=None, elapsed=None, final=False):
    """One progress line, at most `console.width - 1` cells wide:

        train ━━━━━━━━━━━━━━━━╺━━━━━━━━━━━━━━━━━━━━━━━  40/100 steps  40% • 12.5 steps/s • loss 0.3412 • ETA 0:05

    The bar takes what the terminal leaves (up to 40 cells) and is left out below 10; on a
    terminal too narrow even then, whole parts go from the end. Without a `total` there is no
    bar, percentage or ETA; when `final`, the elapsed time replaces the ETA.
    """
    width = self.console.width
    parts = []  # (text, style)
    if rate is not None or done:
      parts.append(('%s %s/s' % (_rate(rate), unit), 'progress.data.speed'))
    if loss is not None:
      parts.append(('loss %.4g' % loss, 'bold'))
    if final or total is None:
      if elapsed is not None:
        parts.append(('%s elapsed' % _duration(elapsed), 'progress.elapsed'))
    elif rate:
      parts.append(('ETA %s' % _duration(max(total - done, 0) / rate), 'progress.remaining'))
    else:
      parts.append(('ETA ?', 'progress.remaining'))
    pieces = [self.styled(label, 'progress.description')]
    if total is None:
      pieces.append(self.styled(' %d %s' % (done, unit), 'progress.download'))
    else:
      fraction = min(max(done / total, 0.0), 1.0) if total > 0 else 1.0
      count = ' %*d/%d %s' % (len(str(total)), done, total, unit)
      percent = ' %3d%%' % int(fraction * 100)
      tail = sum(len(self.separator) + len(p) for p, _ in parts)
      bar_width = min(_BAR_MAX, width - 2 - len(label) - len(count) - len(percent) - tail)
      if bar_width >= _BAR_MIN:
        pieces += [_SPACE, self.bar(bar_width, done, total)]
      pieces += [self.styled(count, 'progress.download'),
                 self.styled(percent, 'progress.percentage')]
    room = width - 1 - sum(len(p.plain) for p in pieces)
    if room < 0:  # narrower than the label and count: those, cut, without colours
      plain = ''.join(p.plain for p in pieces)[:max(width - 1, 1)]
      return Line(plain, plain)
    # Too narrow for every part: whole parts go, from the end, rather than half of one.
    for text, style in parts:
      room -= len(self.separator) + len(text)
      if room < 0:
        break
      pieces += [self._separator, self.styled(text, style)]
    return Line(''.join(p.plain for p in pieces), ''.join(p.ansi for p in pieces))


def _resolve(value):
  return value() if callable(value) else value


class ProgressBarHook(_v1.train.SessionRunHook):
  """A one-line progress bar drawn with rich on `stream` (default sys.stderr), redrawn in place
  after each `session.run` (at most every `min_interval` seconds) and ended with a newline in
  `end()`.

  What counts (each may be a tensor or a callable returning one, called in `begin()`):
    counter: a variable holding the count (e.g. the global step), read when the session
      starts (the starting point of `num_steps`) and at the end (the exact final count);
    step: a tensor fetched with every run giving the count after it (default: `counter`),
      e.g. the global step read after a device loop;
    advance: a tensor fetched with every run whose value is what the run added (when there
      is no `step`); with neither, every run adds 1;
    loss: a scalar tensor fetched with every run and shown.
  The target: `last_step` (absolute) or `num_steps` more than the starting count; None for
  unknown (no bar, no ETA).

  `enabled`: None draws only when `stream` is a terminal, True always (forced), False never.
  """

  def __init__(self, counter=None, step=None, loss=None, last_step=None, num_steps=None,
               advance=None, label='train', unit='steps', stream=None, enabled=None,
               min_interval=0.1):
    self._counter_arg = counter
    self._step_arg = step
    self._loss_arg = loss
    self._advance_arg = advance
    self._last_step = last_step
    self._num_steps = num_steps
    self._label = label
    self._unit = unit
    self._stream_arg = stream
    self._enabled_arg = enabled
    self._min_interval = min_interval
    self._active = False

  # -- SessionRunHook -------------------------------------------------------------------------
  def begin(self):
    self._stream = sys.stderr if self._stream_arg is None else self._stream_arg
    self._active = bar_enabled(self._enabled_arg, self._stream)
    if not self._active:
      return
    self._painter = Painter(console_for(self._stream))
    self._counter = _resolve(self._counter_arg)
    self._step = _resolve(self._step_arg)
    if self._step is None:
      self._step = self._counter
    self._advance = _resolve(self._advance_arg) if self._step is None else None
    self._loss = _resolve(self._loss_arg)
    self._start = 0
    self._done = 0
    self._total = self._last_step
    self._loss_value = None
    self._first = None  # (time, count) at the first run's end: rates exclude start-up
    self._rate = None
    self._last_draw = None
    self._drawn = False
    # Log records of the `tensorflow` logger (INFO lines when enabled, warnings) would be
    # appended to the bar's line: clear it first; the next update redraws it.
    self._log_filter = _ClearLineFilter(self)
    _log.addFilter(self._log_filter)

  def after_create_session(self, session, coord):
    del coord
    if not self._active:
      return
    if self._counter is not None:
      self._start = int(session.run(self._counter))
    self._done = self._start
    if self._num_steps is not None:
      self._total = self._start + self._num_steps
    self._created = time.time()

  def before_run(self, run_context):
    del run_context
    if not self._active:
      return None
    fetches = {}
    if self._step is not None:
      fetches['step'] = self._step
    elif self._advance is not None:
      fetches['advance'] = self._advance
    if self._loss is not None:
      fetches['loss'] = self._loss
    return _v1.train.SessionRunArgs(fetches)

  def after_run(self, run_context, run_values):
    del run_context
    if not self._active:
      return
    results = run_values.results or {}
    if 'step' in results:
      self._done = int(results['step'])
    elif 'advance' in results:
      self._done += int(sum(_flat(results['advance'])))
    else:
      self._done += 1
    if 'loss' in results:
      self._loss_value = float(results['loss'])
    now = time.time()
    if self._first is None:
      self._first = (now, self._done)
      elapsed = now - self._created
      self._rate = (self._done - self._start) / elapsed if elapsed > 0 else None
    elif now > self._first[0]:
      self._rate = (self._done - self._first[1]) / (now - self._first[0])
    if (self._last_draw is None or now - self._last_draw >= self._min_interval or
        (self._total is not None and self._done >= self._total)):
      self._draw(final=False)
      self._last_draw = now

  def end(self, session):
    if not self._active:
      return
    if self._counter is not None:
      try:
        self._done = int(session.run(self._counter))
      except Exception:  # pylint: disable=broad-except
        pass
    self._draw(final=True)
    self._write('\n')
    self._drawn = False
    self._active = False
    _log.removeFilter(self._log_filter)

  def clear_line(self):
    """Blanks the bar's line (the cursor back at its start) if a bar is showing."""
    if self._active and self._drawn:
      self._write(CLEAR)
      self._drawn = False

  # -- drawing ----------------------------------------------------------------------------------
  def _draw(self, final):
    line = self._painter.line(self._label, self._done, self._total, self._unit,
                              rate=self._rate, loss=self._loss_value,
                              elapsed=time.time() - self._created, final=final)
    self._write(CLEAR + line.ansi)  # one write: the line is never seen half drawn
    self._drawn = True

  def _write(self, text):
    self._stream.write(text)
    self._stream.flush()


class _ClearLineFilter(logging.Filter):
  """Clears the bar before a log record is written (it passes every record), except for the
  notes `quiet.internal_calls()` drops: the checkpoint hook's graph writing logs those from its
  background thread while the bar is showing."""

  def __init__(self, hook):
    super().__init__()
    self._hook = hook

  def filter(self, record):
    if not quiet.dropped(record):
      self._hook.clear_line()
    return True


def _flat(value):
  try:
    return list(value.reshape(-1))
  except AttributeError:
    return [value]


class ExamplesPerSecondHook(_tf_internals.StepCounterHook):
  """Writes `examples/sec` (global_step/sec * `batch_size`, the global batch) every
  `every_n_steps` steps (or `every_n_secs`) to `output_dir`'s summary writer
  (`FileWriterCache.get(output_dir)`) and logs it at INFO, as the original TPUEstimator did.

  With `steps_per_sec=True` (default) it also writes and logs `global_step/sec`, so it
  replaces the Estimator's `StepCounterHook`; with False it adds `examples/sec` only.
  """

  def __init__(self, batch_size, every_n_steps=100, every_n_secs=None, output_dir=None,
               summary_writer=None, steps_per_sec=True):
    if every_n_steps is None and every_n_secs is None:
      every_n_steps = 100
    super().__init__(every_n_steps=every_n_steps, every_n_secs=every_n_secs,
                     output_dir=output_dir, summary_writer=summary_writer)
    self._batch_size = batch_size
    self._write_steps_per_sec = steps_per_sec

  def record(self, steps_per_sec, global_step):
    examples_per_sec = steps_per_sec * self._batch_size
    if self.summary_writer is not None:
      summary = _v1.Summary()
      if self._write_steps_per_sec:
        summary.value.add(tag=self.summary_tag, simple_value=steps_per_sec)
      summary.value.add(tag='examples/sec', simple_value=examples_per_sec)
      self.summary_writer.add_summary(summary, global_step)
    if self._write_steps_per_sec:
      _log.info('%s: %g', self.summary_tag, steps_per_sec)
    _log.info('examples/sec: %g', examples_per_sec)
