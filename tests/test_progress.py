"""Progress reporting (tpu_estimator.progress): the one-line bar on terminals, silence on pipes
where the INFO `loss = ..., step = ...` lines remain, and `examples/sec`.

The hooks are wired here through `hooks=[...]` (the Estimator wires them from
`RunConfig.progress_bar`); tensors the Estimator builds are found in `begin()`."""
import fcntl
import io
import logging
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

import tensorflow as tf

import helpers as h
import tpu_estimator as te
from tpu_estimator.hooks import progress

v1 = tf.compat.v1
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------------------------------------
# Pieces

# What a terminal shows: rich's escape sequences interpreted ('\r', ESC[2K erase line, ESC[K
# erase to its end; colours and cursor codes change no text).
_CLEAR = '\r\x1b[2K'
_ESCAPE = re.compile(r'(\x1b\[[0-9;?]*[A-Za-z]|\r|\n)')


def _plain(text):
  return re.sub(r'\x1b\[[0-9;?]*[A-Za-z]', '', text)


def _screen(output):
  """The lines a terminal shows after `output` was written to it."""
  lines, column = [''], 0
  for token in _ESCAPE.split(output):
    if token == '\r':
      column = 0
    elif token == '\n':
      lines.append('')
      column = 0
    elif token == '\x1b[2K':
      lines[-1] = ''
    elif token == '\x1b[K':
      lines[-1] = lines[-1][:column]
    elif token and not token.startswith('\x1b['):
      line = lines[-1].ljust(column)
      lines[-1] = line[:column] + token + line[column + len(token):]
      column += len(token)
  return lines


def _draws(output, label):
  """The bar as drawn at each update, in order."""
  return [_plain(part).split('\r')[0].split('\n')[0] for part in output.split(_CLEAR)[1:]
          if _plain(part).startswith(label + ' ')]


def _console(width, file=None, **kwargs):
  from rich.console import Console  # pylint: disable=import-outside-toplevel
  return Console(file=file or io.StringIO(), force_terminal=True, width=width, **kwargs)


def test_line_with_target():
  line = progress.Painter(_console(120)).line('train', 40, 100, 'steps', rate=12.5,
                              loss=0.34123)
  # The widest bar (40 cells, 16 of them done), then the figures.
  assert line.plain == ('train ' + '━' * 16 + '╺' + '━' * 23 + '  40/100 steps  40% • '
                        '12.5 steps/s • loss 0.3412 • ETA 0:05')
  final = progress.Painter(_console(120)).line('train', 100, 100, 'steps', rate=12.5,
                               loss=0.3, elapsed=8.2, final=True)
  assert final.plain == ('train ' + '━' * 40 + ' 100/100 steps 100% • 12.5 steps/s • '
                         'loss 0.3 • 0:08 elapsed')
  # In colour (rich's progress styles), and what is written is what the terminal shows.
  colour = progress.Painter(_console(120, color_system='standard')).line(
      'train', 40, 100, 'steps', rate=12.5, loss=0.34123)
  assert _plain(colour.ansi) == colour.plain == line.plain
  assert '\x1b[32m  40/100 steps\x1b[0m\x1b[35m  40%\x1b[0m' in colour.ansi, repr(colour.ansi)
  assert '\x1b[31m12.5 steps/s\x1b[0m' in colour.ansi and '\x1b[36mETA 0:05' in colour.ansi
  assert colour.ansi.count('\x1b[') >= 12  # the bar's done and left parts differ too
  none = progress.Painter(_console(120, no_color=True)).line('train', 40, 100, 'steps')
  assert not re.search(r'\x1b\[[0-9;]*3[0-9]', none.ansi), repr(none.ansi)  # no colour


def test_line_unknown_target_and_narrow_terminals():
  assert progress.Painter(_console(100)).line('predict', 7, None, 'batches', rate=3.0,
                              elapsed=3725).plain == (
      'predict 7 batches • 3.00 batches/s • 1:02:05 elapsed')
  assert progress.Painter(_console(100)).line('train', 0, 10, 'steps').plain == (
      'train ' + '━' * 40 + '  0/10 steps   0% • ETA ?')
  # The bar shrinks with the terminal, goes below 10 cells, then whole parts go from the end.
  widths = {}
  for columns in (100, 80, 66, 40):
    widths[columns] = progress.Painter(_console(columns)).line('train', 5, 10, 'steps',
                                           rate=1.0, loss=1.0).plain
  assert [len(w) <= c - 1 for c, w in widths.items()] == [True] * 4, widths
  bar = lambda line: line.split(' ')[1]  # pylint: disable=unnecessary-lambda-assignment
  assert len(bar(widths[100])) == 40 and len(bar(widths[80])) == 21, widths
  assert widths[80].endswith('  5/10 steps  50% • 1.00 steps/s • loss 1 • ETA 0:05')
  assert widths[66] == 'train  5/10 steps  50% • 1.00 steps/s • loss 1 • ETA 0:05'
  assert widths[40] == 'train  5/10 steps  50% • 1.00 steps/s'
  # A terminal that cannot show '•' or box drawing gets '|' and rich's ASCII bar.
  ascii_console = _console(100, io.TextIOWrapper(io.BytesIO(), encoding='ascii'))
  ascii_line = progress.Painter(ascii_console).line('train', 5, 10, 'steps', rate=1.0)
  assert ascii_line.plain.startswith('train ' + '-' * 20) and '━' not in ascii_line.plain
  assert ascii_line.plain.endswith('-  5/10 steps  50% | 1.00 steps/s | ETA 0:05')


class _Terminal(io.StringIO):

  def isatty(self):
    return True


def test_bar_enabled():
  assert progress.bar_enabled(None, _Terminal())
  assert not progress.bar_enabled(None, io.StringIO())
  assert progress.bar_enabled(True, io.StringIO())
  assert not progress.bar_enabled(False, _Terminal())
  closed = io.StringIO()
  closed.close()
  assert not progress.is_terminal(closed)


# ---------------------------------------------------------------------------------------------
# In process, on a real Estimator

def _loss_tensor():
  """The training loss: the input of the Estimator's `loss` summary."""
  ops = [op for op in v1.get_default_graph().get_operations()
         if op.type == 'ScalarSummary' and op.name == 'loss']
  return ops[0].inputs[1]


def test_hooks_draw_only_on_terminals_or_when_forced(tmp_path, monkeypatch):
  monkeypatch.setenv('COLUMNS', '100')
  x, y = h.make_data()
  est = te.Estimator(h.make_model_fn(), config=te.EstimatorRunConfig(
      model_dir=str(tmp_path), progress_bar=False))
  pipe, forced, terminal = io.StringIO(), io.StringIO(), _Terminal()
  hooks = [progress.ProgressBarHook(counter=v1.train.get_global_step, loss=_loss_tensor,
                                    num_steps=6, stream=stream, enabled=enabled,
                                    min_interval=0)
           for stream, enabled in ((pipe, None), (forced, True), (terminal, None))]
  est.train(h.dataset_input_fn(x, y, batch_size=8), steps=6, hooks=hooks)
  assert pipe.getvalue() == ''
  for stream in (forced, terminal):
    text = stream.getvalue()
    updates = _draws(text, 'train')
    assert len(updates) == 7, updates  # one per step, then the final line
    # (The global step fetched beside the train op may be read before its increment: the
    # counts may lag one step until the final line, which reads it after the session.)
    counts = [int(u.split(' steps ')[0].split()[-1].split('/')[0]) for u in updates]
    assert counts == sorted(counts) and counts[-1] == 6 and counts[0] <= 1, updates
    assert all(len(u) <= 99 for u in updates)
    # What stays on the screen: the final line, the cursor on the next one.
    screen = _screen(text)
    assert screen[1:] == [''] and screen[0] == updates[-1], screen
    assert screen[0].startswith('train ━') and ' 6/6 steps 100% • ' in screen[0], screen
    assert 'loss ' in screen[0]
    assert screen[0].endswith(' elapsed')
    assert '\x1b[' in text.replace(_CLEAR, '')  # in colour

  # Evaluation and prediction on one device: one batch per run; both end with a newline.
  out = io.StringIO()
  est.evaluate(h.dataset_input_fn(x, y, batch_size=32, repeat=False), steps=2, hooks=[
      progress.ProgressBarHook(num_steps=2, label='evaluate', unit='batches', stream=out,
                               enabled=True, min_interval=0)])
  updates = _draws(out.getvalue(), 'evaluate')
  assert [u.split(' batches ')[0].split()[-1] for u in updates] == ['1/2', '2/2', '2/2']
  assert _screen(out.getvalue()) == [updates[-1], '']
  assert ' 2/2 batches 100% • ' in updates[-1]
  out = io.StringIO()
  predictions = list(est.predict(h.dataset_input_fn(x, None, batch_size=40, repeat=False),
                                 hooks=[progress.ProgressBarHook(
                                     label='predict', unit='batches', stream=out,
                                     enabled=True)]))
  assert len(predictions) == len(x)
  screen = _screen(out.getvalue())
  assert screen[0].startswith('predict 3 batches • ') and screen[1:] == [''], screen


class _LogEachRun(v1.train.SessionRunHook):

  def after_run(self, run_context, run_values):
    tf.get_logger().warning('a log line')


def test_log_records_clear_the_bar_first(tmp_path, caplog):
  x, y = h.make_data()
  est = te.Estimator(h.make_model_fn(), config=te.EstimatorRunConfig(
      model_dir=str(tmp_path), progress_bar=False))
  out = _Terminal()
  # The log lines go to the bar's terminal, as TensorFlow's handler writes to stderr.
  handler = logging.StreamHandler(out)
  tf.get_logger().addHandler(handler)
  try:
    bar = progress.ProgressBarHook(counter=v1.train.get_global_step, num_steps=3, stream=out,
                                   min_interval=0)
    est.train(h.dataset_input_fn(x, y, batch_size=8), steps=3, hooks=[bar, _LogEachRun()])
  finally:
    tf.get_logger().removeHandler(handler)
  text = out.getvalue()
  # Each run: drawn, then blanked before the log line is written; the user sees the log
  # lines whole, one per line, and the bar under them.
  screen = _screen(text)
  assert screen[:3] == ['a log line'] * 3, screen
  assert ' 3/3 steps 100% • ' in screen[3] and screen[4:] == [''], screen
  assert len(_draws(text, 'train')) == 4
  assert sum('a log line' in r.getMessage() for r in caplog.records) == 3
  # The filter is gone after the session.
  filters = tf.get_logger().filters
  assert not [f for f in filters if type(f).__name__ == '_ClearLineFilter'], filters


def test_examples_per_second_hook_writes_both_rates(tmp_path):
  logdir = str(tmp_path)
  with tf.Graph().as_default():
    v1.train.get_or_create_global_step()
    hook = progress.ExamplesPerSecondHook(64, every_n_steps=5, output_dir=logdir)
    hook.begin()
    hook._log_and_record(10, 2.0, 10)  # pylint: disable=protected-access
    only = progress.ExamplesPerSecondHook(8, output_dir=logdir, steps_per_sec=False)
    only.begin()
    only._log_and_record(10, 2.0, 20)  # pylint: disable=protected-access
    v1.summary.FileWriterCache.get(logdir).flush()
  written = {}
  for path in tf.io.gfile.glob(os.path.join(logdir, 'events.out.tfevents.*')):
    for event in v1.train.summary_iterator(path):
      for value in event.summary.value:
        written[(event.step, value.tag)] = value.simple_value
  assert written == {(10, 'global_step/sec'): 5.0, (10, 'examples/sec'): 320.0,
                     (20, 'examples/sec'): 40.0}


# ---------------------------------------------------------------------------------------------
# Subprocesses: a terminal (pty) and pipes

PROGRAM = r'''
import sys
import tensorflow as tf
import helpers
import tpu_estimator as te
from tpu_estimator.hooks import progress
v1 = tf.compat.v1
terminal, model_dir = sys.argv[1] == 'tty', sys.argv[2]
if not terminal:
  tf.get_logger().setLevel('INFO')   # the library logs through the `tensorflow` logger

def loss_tensor():
  ops = [op for op in v1.get_default_graph().get_operations()
         if op.type == 'ScalarSummary' and op.name == 'loss']
  return ops[0].inputs[1]

def step_after_loop():
  # The device loop's loss is its last step's: a read after it sees the loop's steps.
  with tf.control_dependencies([loss_tensor()]):
    return tf.identity(v1.train.get_global_step())

x, y = helpers.make_data()
# progress_bar=False: the Estimator's own bar (once wired) stays off; this hook is the bar.
config = helpers.tpu_config(num_shards=2, iterations_per_loop=4, model_dir=model_dir,
                            log_step_count_steps=4, progress_bar=False)
est = te.TPUEstimator(helpers.make_model_fn(tpu=True), config=config, train_batch_size=16)
hook = progress.ProgressBarHook(counter=v1.train.get_global_step, step=step_after_loop,
                                loss=loss_tensor, num_steps=20, min_interval=0)
est.train(helpers.dataset_input_fn(x, y), steps=20, hooks=[hook])
print('FINISHED', file=sys.stderr, flush=True)
'''


def _env():
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  for name in ('COLUMNS', 'LINES', 'NO_COLOR', 'FORCE_COLOR', 'TTY_COMPATIBLE'):
    env.pop(name, None)  # the terminal's own size and rich's defaults
  env['TERM'] = 'xterm-256color'
  env['PYTHONPATH'] = os.pathsep.join(p for p in (REPO, TESTS, env.get('PYTHONPATH')) if p)
  return env


def _run_in_pty(argv, timeout=120, columns=120):
  """(exit code, everything written to the terminal)."""
  master, slave = pty.openpty()
  fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', 40, columns, 0, 0))
  proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=_env(), cwd=REPO,
                          close_fds=True)
  os.close(slave)
  chunks = []
  deadline = time.time() + timeout
  try:
    while time.time() < deadline:
      ready, _, _ = select.select([master], [], [], 0.5)
      if ready:
        try:
          data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
          break
        if not data:
          break
        chunks.append(data)
      elif proc.poll() is not None:
        break
    else:
      proc.kill()
    code = proc.wait(timeout=30)
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
    os.close(master)
  return code, b''.join(chunks).decode('utf-8', 'replace')


def test_bar_on_a_terminal(tmp_path):
  code, output = _run_in_pty([sys.executable, '-c', PROGRAM, 'tty', str(tmp_path / 'm')])
  assert code == 0, output
  assert 'FINISHED' in output, output
  # Redrawn in place after every device loop of 4 steps, then a newline (the terminal shows
  # '\n' as '\r\n').
  bar = output[output.index(_CLEAR):output.index('FINISHED')]
  updates = _draws(bar, 'train')
  counts = [u.split(' steps ')[0].split()[-1] for u in updates]
  assert counts == ['4/20', '8/20', '12/20', '16/20', '20/20', '20/20'], updates
  assert all(' steps/s • loss ' in u for u in updates), updates
  assert all(len(u) < 120 for u in updates)
  assert '• ETA ' in updates[0]
  assert '━' * 40 + ' 20/20 steps 100% •' in updates[-1] and updates[-1].endswith('elapsed')
  assert bar.endswith('\r\n'), repr(bar[-80:])
  assert '\x1b[38;5;' in bar  # 256 colours, as TERM says
  # The screen: the final bar alone on its line, then the program's last line.
  screen = [line for line in _screen(output.replace('\r\n', '\n')) if line]
  assert screen[-2:] == [updates[-1], 'FINISHED'], screen[-3:]
  assert 'loss = ' not in output  # INFO is off by default: no log lines under the bar


def test_no_bar_on_pipes_but_info_lines(tmp_path):
  proc = subprocess.run([sys.executable, '-c', PROGRAM, 'pipe', str(tmp_path / 'm')],
                        env=_env(), cwd=REPO, capture_output=True, text=True, timeout=120,
                        check=False)
  assert proc.returncode == 0, proc.stderr
  assert 'FINISHED' in proc.stderr
  assert '\r' not in proc.stderr + proc.stdout
  assert 'train [' not in proc.stderr + proc.stdout
  steps = [line.split('step = ')[1].split()[0] for line in proc.stderr.splitlines()
           if 'loss = ' in line and 'step = ' in line]
  assert steps == ['4', '8', '12', '16', '20'], proc.stderr
  assert 'INFO:tensorflow:loss = ' in proc.stderr


def test_one_step_runs_log_the_step_each_run_started_at(tmp_path, caplog):
  """As the original: `loss = ..., step = 0` for the first step of a fresh model_dir, then
  every `log_step_count_steps` (a device loop logs the step it ended at instead)."""
  x, y = h.make_data()
  est = te.Estimator(h.make_model_fn(), config=te.EstimatorRunConfig(
      model_dir=str(tmp_path), progress_bar=False, log_step_count_steps=2))
  caplog.set_level(logging.INFO, logger='tensorflow')
  est.train(h.dataset_input_fn(x, y, batch_size=8), steps=5)
  steps = [r.getMessage().split('step = ')[1].split()[0] for r in caplog.records
           if r.getMessage().startswith('loss = ')]
  assert steps == ['0', '2', '4']
