"""Child programs for the reliability tests, started from a fork server, and the kill-trial
harness shared by `tests/test_reliability.py` and `benchmarks/kill_trials.py`.

Starting TensorFlow costs several seconds per process, so the parent starts this file once as
a *fork server*: it imports TensorFlow and `tpu_estimator` (no session, no op run) and then
forks one child per request.  A forked child is a real, separate process: it can be killed
with SIGKILL at any moment or sent SIGTERM, and its model_dir is then checked by the parent.

Protocol (the server's stdin/stdout; every line written with one `os.write`, so lines from
several processes never interleave):

    parent -> server   {"tag": "...", "program": "<name in PROGRAMS>", "args": {...}}
    server -> parent   Z READY | Z PID <tag> <pid> | Z EXIT <pid> <exit code, -N = signal N>
    child  -> parent   <pid> <WORD> <text>      e.g. "1234 SAVED 17", "1234 SESSION 16"

On end of stdin the server SIGKILLs the children it still has (by pid) and exits.
"""
import collections
import json
import logging
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)


# =============================================================================================
# Child side (runs in the fork server and its children)

def say(word, *parts):
  text = ' '.join(str(p) for p in (os.getpid(), word) + parts)
  os.write(1, (text.replace('\n', ' ') + '\n').encode())


def _imports():
  for path in (ROOT, TESTS):
    if path not in sys.path:
      sys.path.insert(0, path)
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tpu_estimator as te  # pylint: disable=import-outside-toplevel
  import helpers as h  # pylint: disable=import-outside-toplevel
  return tf, te, h


def make_estimator(kind, model_dir, save_steps=None, save_secs=None, keep=2, ipl=2,
                   learning_rate=0.1):
  """(estimator, train input_fn, eval input_fn, serving receiver fn) for the tiny linear model
  of tests/helpers.py.  kind: 'estimator' (one step per run) or 'tpu' (TPUEstimator,
  use_tpu=True, 2 shards, `ipl` steps per device loop)."""
  tf, te, h = _imports()
  x, y = h.make_data(96)
  common = dict(model_dir=model_dir, save_checkpoints_steps=save_steps,
                save_checkpoints_secs=save_secs, keep_checkpoint_max=keep,
                save_summary_steps=0, log_step_count_steps=None)
  if kind == 'estimator':
    est = te.Estimator(h.make_model_fn(learning_rate=learning_rate),
                       params={'batch_size': 16}, config=te.EstimatorRunConfig(**common))
  elif kind == 'tpu':
    est = te.TPUEstimator(
        h.make_model_fn(tpu=True, learning_rate=learning_rate), use_tpu=True,
        train_batch_size=16, eval_batch_size=16, predict_batch_size=16,
        config=te.RunConfig(tpu_config=te.TPUConfig(iterations_per_loop=ipl, num_shards=2),
                            **common))
  else:
    raise ValueError(kind)
  receiver = te.export.build_raw_serving_input_receiver_fn(
      {'x': tf.zeros([1, h.NUM_FEATURES])})
  return (est, h.dataset_input_fn(x, y), h.dataset_input_fn(x[:32], y[:32], repeat=False),
          receiver)


def _hooks(tf):
  v1 = tf.compat.v1

  class SessionReport(v1.train.SessionRunHook):
    """Reports the global step each new session starts from, and (optionally) after each
    run, read with a separate `session.run` after the step or device loop."""

    def __init__(self, every_run=False):
      self._every_run = every_run

    def begin(self):
      self._step = v1.train.get_global_step()

    def after_create_session(self, session, coord):
      say('SESSION', int(session.run(self._step)))

    def after_run(self, run_context, run_values):
      if self._every_run:
        say('STEP', int(run_context.session.run(self._step)))

  class SaveMarks(v1.train.CheckpointSaverListener):

    def before_save(self, session, global_step_value):
      say('SAVING', global_step_value)

    def after_save(self, session, global_step_value):
      say('SAVED', global_step_value)

  return SessionReport, SaveMarks


def program_kill_trainer(model_dir, export_base, kind, train_steps=4, export=True):
  """Trains `train_steps` steps (a checkpoint every step or two, keep 2), exports, repeats,
  forever: a kill lands in graph building, restores, steps, checkpoint writes or exports."""
  tf, _, _ = _imports()
  save_steps = 1 if kind == 'estimator' else 2
  est, input_fn, _, receiver = make_estimator(kind, model_dir, save_steps=save_steps, keep=2,
                                              ipl=1)
  session_report, save_marks = _hooks(tf)
  say('STARTED')
  while True:
    say('PHASE', 'train')
    est.train(input_fn, steps=train_steps, hooks=[session_report()],
              saving_listeners=[save_marks()])
    if export:
      say('PHASE', 'export')
      path = est.export_saved_model(export_base, receiver)
      say('EXPORTED', os.fsdecode(path))


def program_resume_once(model_dir, kind, steps=1):
  """One short `train`: reports the step it resumed from and the step it ended at."""
  tf, _, _ = _imports()
  est, input_fn, _, _ = make_estimator(kind, model_dir, save_steps=1 if kind == 'estimator'
                                       else 2, keep=2, ipl=1)
  session_report, _ = _hooks(tf)
  est.train(input_fn, steps=steps, hooks=[session_report()])
  say('DONE', int(est.get_variable_value('global_step')))


def program_resume_when_told(model_dir, go_file, steps=2):
  """Waits for `go_file` (the parent attaches a tracer meanwhile), then resumes training."""
  tf, _, _ = _imports()
  est, input_fn, _, _ = make_estimator('estimator', model_dir, save_steps=1, keep=2)
  session_report, save_marks = _hooks(tf)
  say('WAITING')
  while not os.path.exists(go_file):
    time.sleep(0.02)
  est.train(input_fn, steps=steps, hooks=[session_report()], saving_listeners=[save_marks()])
  say('DONE', int(est.get_variable_value('global_step')))


def program_wrong_batch_trainer(model_dir):
  """TPUEstimator (2 shards, train_batch_size=16) whose input_fn batches 10 rows, repeated."""
  tf, _, h = _imports()
  est, _, _, _ = make_estimator('tpu', model_dir, save_steps=1, keep=2)
  x, y = h.make_data(96)
  say('STARTED')
  est.train(lambda params: tf.data.Dataset.from_tensor_slices(({'x': x}, y)).repeat().batch(10),
            steps=3)
  say('RETURNED', int(est.get_variable_value('global_step')))


def program_sigterm_trainer(model_dir, kind, own_handler=False, ipl=5):
  """Trains "forever" with a checkpoint only at the start and the end (save_checkpoints_secs
  is an hour), reporting the global step after every run; SIGTERM is sent by the parent."""
  tf, _, _ = _imports()
  est, input_fn, _, _ = make_estimator(kind, model_dir, save_secs=3600, keep=5, ipl=ipl)
  session_report, _ = _hooks(tf)
  if own_handler:
    def handler(signum, frame):
      del frame
      latest = tf.train.latest_checkpoint(model_dir)
      step = int(tf.train.load_variable(latest, 'global_step')) if latest else None
      say('HANDLER', signum, step)
    signal.signal(signal.SIGTERM, handler)
  say('STARTED')
  est.train(input_fn, steps=10 ** 8, hooks=[session_report(every_run=True)])
  say('RETURNED', int(est.get_variable_value('global_step')))


def program_train_forever(model_dir, kind='estimator'):
  """A trainer writing a checkpoint every step and keeping only the latest one."""
  tf, _, _ = _imports()
  est, input_fn, _, _ = make_estimator(kind, model_dir, save_steps=1, keep=1, ipl=1)
  session_report, save_marks = _hooks(tf)
  say('STARTED')
  est.train(input_fn, steps=10 ** 8, hooks=[session_report()], saving_listeners=[save_marks()])


def program_evaluator(model_dir, count, kind='estimator', call='evaluate'):
  """Calls `evaluate` (or `predict`, `export_saved_model`; latest checkpoint) `count` times;
  reports each result or error, and how many times the library retried because the chosen
  checkpoint vanished."""
  import logging  # pylint: disable=import-outside-toplevel
  tf, _, _ = _imports()
  est, _, eval_input_fn, receiver = make_estimator(kind, model_dir, save_steps=1, keep=1)
  export_base = model_dir + '-exports'

  def evaluate():
    if call == 'evaluate':
      return est.evaluate(eval_input_fn)
    if call == 'predict':
      rows = list(est.predict(eval_input_fn))
      assert len(rows) == 32, len(rows)
    else:
      est.export_saved_model(export_base, receiver)
    return {'global_step': 0, 'loss': 0.0}

  class Count(logging.Handler):
    retries = 0

    def emit(self, record):
      if 'disappeared' in record.getMessage():
        Count.retries += 1

  tf.get_logger().setLevel(logging.WARNING)
  tf.get_logger().addHandler(Count())
  while not tf.train.latest_checkpoint(model_dir):
    time.sleep(0.05)
  say('STARTED')
  for i in range(count):
    started = time.time()
    try:
      result = evaluate()
      say('EVAL', json.dumps({'i': i, 'ok': True, 'global_step': int(result['global_step']),
                              'loss': float(result['loss']), 'retries': Count.retries,
                              'secs': round(time.time() - started, 3)}))
    except Exception as e:  # pylint: disable=broad-except
      say('EVAL', json.dumps({'i': i, 'ok': False, 'retries': Count.retries,
                              'error': '%s: %s' % (type(e).__name__, str(e)[:400])}))
  say('EVALDONE', Count.retries)


def program_pinned_evaluator(model_dir):
  """Evaluates the latest checkpoint, reporting PINNED and sleeping while its snapshot exists
  (in a hook's after_create_session, i.e. during the restore); SIGTERM comes from the parent."""
  tf, _, _ = _imports()
  est, _, eval_input_fn, _ = make_estimator('estimator', model_dir, save_steps=1, keep=1)

  class Stall(tf.compat.v1.train.SessionRunHook):

    def after_create_session(self, session, coord):
      say('PINNED')
      time.sleep(60)

  est.evaluate(eval_input_fn, hooks=[Stall()])
  say('RETURNED')


PROGRAMS = {
    'pinned_evaluator': program_pinned_evaluator,
    'kill_trainer': program_kill_trainer,
    'resume_once': program_resume_once,
    'resume_when_told': program_resume_when_told,
    'sigterm_trainer': program_sigterm_trainer,
    'wrong_batch_trainer': program_wrong_batch_trainer,
    'train_forever': program_train_forever,
    'evaluator': program_evaluator,
}


def _child(request):
  code = 0
  try:
    os.setpgid(0, 0)  # its own group: a terminal's Ctrl-C reaches the parent only
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    PROGRAMS[request['program']](**request['args'])
  except BaseException as e:  # pylint: disable=broad-except
    traceback.print_exc()
    say('ERROR', '%s: %s' % (type(e).__name__, e))
    code = 1
  finally:
    try:
      sys.stderr.flush()
    finally:
      os._exit(code)  # pylint: disable=protected-access


def serve():
  tf, _, _ = _imports()  # the expensive part, done once
  # The children's logs stay short.  Here, not in _imports: the tests call make_estimator in
  # their own process too, whose later tests (the progress bar's) need TensorFlow's warnings.
  tf.get_logger().setLevel(logging.ERROR)
  children = set()
  os.write(1, b'Z READY\n')
  buffer = b''
  try:
    while True:
      readable, _, _ = select.select([0], [], [], 0.02)
      for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
          children.discard(pid)
          os.write(1, ('Z EXIT %d %d\n' % (pid, os.waitstatus_to_exitcode(status))).encode())
      if not readable:
        continue
      data = os.read(0, 65536)
      if not data:
        return
      buffer += data
      while b'\n' in buffer:
        line, buffer = buffer.split(b'\n', 1)
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
          _child(request)
        children.add(pid)
        os.write(1, ('Z PID %s %d\n' % (request['tag'], pid)).encode())
  finally:
    for pid in children:
      try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
      except (ProcessLookupError, ChildProcessError):
        pass


# =============================================================================================
# Parent side

class Child:
  """One forked program: its output lines, exit code, and signals."""

  def __init__(self, server, tag, pid):
    self.server = server
    self.tag = tag
    self.pid = pid

  def lines(self, word=None):
    """[(time received, word, text)] so far."""
    with self.server.cond:
      found = list(self.server.output[self.pid])
    return [l for l in found if word is None or l[1] == word]

  def wait_for(self, predicate, timeout, what='a line'):
    """The first line (time, word, text) matching `predicate(word, text)`."""
    deadline = time.time() + timeout
    with self.server.cond:
      seen = 0
      while True:
        lines = self.server.output[self.pid]
        for line in lines[seen:]:
          if predicate(line[1], line[2]):
            return line
        seen = len(lines)
        if self.pid in self.server.exits:
          raise AssertionError('child %s (%s) exited with %s before %s:\n%s' % (
              self.pid, self.tag, self.server.exits[self.pid], what, self.server.log_tail()))
        left = deadline - time.time()
        if left <= 0:
          raise AssertionError('child %s (%s): no %s within %ss:\n%s' % (
              self.pid, self.tag, what, timeout, self.server.log_tail()))
        self.server.cond.wait(min(left, 0.5))

  def wait_word(self, word, timeout):
    return self.wait_for(lambda w, t: w == word, timeout, word)

  def wait_exit(self, timeout):
    deadline = time.time() + timeout
    with self.server.cond:
      while self.pid not in self.server.exits:
        left = deadline - time.time()
        if left <= 0:
          raise AssertionError('child %s (%s) still running after %ss' % (self.pid, self.tag,
                                                                          timeout))
        self.server.cond.wait(min(left, 0.5))
      return self.server.exits[self.pid]

  @property
  def exited(self):
    with self.server.cond:
      return self.pid in self.server.exits

  def signal(self, signum):
    with self.server.cond:
      if self.pid in self.server.exits:
        return False
      try:
        os.kill(self.pid, signum)  # not reported reaped yet, so still ours
      except ProcessLookupError:
        return False  # reaped a moment ago; the server's report is on its way
      return True

  def kill(self):
    """SIGKILL, then wait until the server reaped it (no file is written after this)."""
    self.signal(signal.SIGKILL)
    return self.wait_exit(30)


class ForkServer:
  """Starts `forkserver.py` as a subprocess; `start(program, **args)` forks a child."""

  def __init__(self, log_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONUNBUFFERED='1')
    self.log_path = log_path
    self._log = open(log_path, 'wb')
    self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), 'serve'],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=self._log, cwd=ROOT, env=env)
    self.cond = threading.Condition()
    self.output = collections.defaultdict(list)
    self.exits = {}
    self.pids = {}
    self.ready = False
    self._counter = 0
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()

  def _read(self):
    for raw in self.proc.stdout:
      now = time.time()
      parts = raw.decode(errors='replace').rstrip('\n').split(' ', 2)
      with self.cond:
        if parts[0] == 'Z':
          if parts[1] == 'READY':
            self.ready = True
          elif parts[1] == 'PID':
            self.pids[parts[2].split(' ')[0]] = int(parts[2].split(' ')[1])
          elif parts[1] == 'EXIT':
            pid, code = parts[2].split(' ')
            self.exits[int(pid)] = int(code)
        elif len(parts) >= 2 and parts[0].isdigit():
          self.output[int(parts[0])].append((now, parts[1], parts[2] if len(parts) > 2 else ''))
        self.cond.notify_all()
    with self.cond:
      self.ready = None
      self.cond.notify_all()

  def log_tail(self, chars=3000):
    try:
      with open(self.log_path, 'rb') as f:
        data = f.read().decode(errors='replace')
    except OSError:
      return ''
    lines = [l for l in data.splitlines() if 'WARNING' not in l and 'Instructions' not in l
             and 'deprecat' not in l]
    return '\n'.join(lines)[-chars:]

  def wait_ready(self, timeout=180):
    deadline = time.time() + timeout
    with self.cond:
      while not self.ready:
        if self.ready is None or time.time() > deadline:
          raise AssertionError('fork server did not start:\n' + self.log_tail())
        self.cond.wait(0.5)

  def start(self, program, **args):
    self.wait_ready()
    self._counter += 1
    tag = '%s-%d' % (program, self._counter)
    self.proc.stdin.write((json.dumps({'tag': tag, 'program': program, 'args': args}) +
                           '\n').encode())
    self.proc.stdin.flush()
    with self.cond:
      deadline = time.time() + 30
      while tag not in self.pids:
        if time.time() > deadline:
          raise AssertionError('fork server did not fork %s:\n%s' % (tag, self.log_tail()))
        self.cond.wait(0.5)
      return Child(self, tag, self.pids[tag])

  def close(self):
    """SIGKILLs every child still running (by pid), then stops the server."""
    with self.cond:
      running = [pid for pid in self.pids.values() if pid not in self.exits]
    for pid in running:
      try:
        os.kill(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
    try:
      self.proc.stdin.close()
    except OSError:
      pass
    try:
      self.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
      self.proc.kill()
      self.proc.wait()
    self._log.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


# ---------------------------------------------------------------------------------------------
# Checking a model_dir after a kill

def step_of(checkpoint):
  return int(checkpoint.rsplit('-', 1)[1])


def check_model_dir(model_dir):
  """The latest checkpoint's path and global step, after loading it and reading every
  variable (all finite); (None, None) when there is none yet."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  latest = tf.train.latest_checkpoint(model_dir)
  if latest is None:
    return None, None
  reader = tf.train.load_checkpoint(latest)
  names = sorted(reader.get_variable_to_shape_map())
  assert {'global_step', 'dense/kernel', 'dense/bias'} <= set(names), names
  for name in names:
    value = reader.get_tensor(name)
    assert np.all(np.isfinite(value)), (latest, name, value)
  step = int(reader.get_tensor('global_step'))
  assert step == step_of(latest), (latest, step)
  return latest, step


def check_exports(export_base, loaded):
  """Every timestamped export is complete and loads (`loaded`: paths already loaded, skipped);
  returns (complete exports, temp-* leftovers)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  if not os.path.isdir(export_base):
    return [], []
  complete, temps = [], []
  for name in sorted(os.listdir(export_base)):
    path = os.path.join(export_base, name)
    if name.startswith('temp-'):
      temps.append(name)
      continue
    assert name.isdigit(), 'unexpected entry in export_dir_base: %s' % path
    assert os.path.isfile(os.path.join(path, 'saved_model.pb')), 'incomplete export ' + path
    assert os.path.isfile(os.path.join(path, 'variables', 'variables.index')), \
        'incomplete export ' + path
    if path not in loaded:
      tf.saved_model.load(path, tags=['serve'])
      loaded.add(path)
    complete.append(name)
  return complete, temps


def _phase_at(child, kill_time):
  """Where the kill landed: from the last progress marker the child printed before it."""
  phase = 'startup'
  for when, word, text in child.lines():
    if when > kill_time:
      break
    if word == 'STARTED':
      phase = 'build'
    elif word == 'PHASE':
      phase = 'train-build/restore' if text == 'train' else 'export'
    elif word in ('SESSION', 'SAVED'):
      phase = 'train-steps'
    elif word == 'SAVING':
      phase = 'checkpoint-write'
    elif word == 'EXPORTED':
      phase = 'train-build/restore'
  return phase


def _temp_exports(export_base):
  try:
    return [n for n in os.listdir(export_base) if n.startswith('temp-')]
  except OSError:
    return []


KILL_MODES = ('random', 'checkpoint', 'export')


def run_kill_trials(server, workdir, trials, seed=0, kinds=('estimator', 'tpu'), log=None,
                    max_delay=2.5):
  """`trials` SIGKILLs of `program_kill_trainer` children, alternating `kinds` (one model_dir
  and export base per kind).  Kill points rotate over: a random delay after the child reports
  it started; a random moment inside a checkpoint write (a delay after a SAVING marker); a
  random moment inside an export.  After each kill the model_dir and exports are checked, and
  the next child of that kind must resume from the latest checkpoint, at a step >= the last
  checkpoint the killed child reported saved.  Returns a summary dict."""
  rng = random.Random(seed)
  log = log or (lambda *a: None)
  dirs = {k: (os.path.join(workdir, k, 'model'), os.path.join(workdir, k, 'export'))
          for k in kinds}
  loaded = set()
  pending = {}  # kind -> (trial, step the resume must equal, step it must be >= )
  results = []
  phases = collections.Counter()
  temps_seen = 0

  def settle(kind, child, resumed_line):
    """Checks the child resumed what the previous kill left."""
    trial, latest_step, saved_step = pending.pop(kind)
    resumed = int(resumed_line[2])
    ok = resumed == (latest_step or 0) and resumed >= saved_step
    results[trial]['resumed'] = ok
    results[trial]['resumed_step'] = resumed
    if not ok:
      results[trial]['error'] = ('resumed at step %d; latest checkpoint after the kill was %s, '
                                 'last reported save %s' % (resumed, latest_step, saved_step))
    log('  trial %d resumed at %d (latest after kill %s)' % (trial, resumed, latest_step))

  for trial in range(trials):
    kind = kinds[trial % len(kinds)]
    mode = KILL_MODES[trial % len(KILL_MODES)]
    model_dir, export_base = dirs[kind]
    record = {'trial': trial, 'kind': kind, 'mode': mode, 'resumed': None, 'error': None}
    results.append(record)
    temps_before = len(_temp_exports(export_base))
    child = server.start('kill_trainer', model_dir=model_dir, export_base=export_base,
                         kind=kind)
    try:
      child.wait_word('STARTED', 60)
      if kind in pending:
        settle(kind, child, child.wait_word('SESSION', 60))
      if mode == 'random':
        time.sleep(rng.uniform(0.0, max_delay))
      elif mode == 'checkpoint':
        nth = rng.randint(1, 4)
        count = [0]

        def nth_saving(word, text, count=count, nth=nth):
          del text
          if word == 'SAVING':
            count[0] += 1
          return count[0] >= nth
        child.wait_for(nth_saving, 60, 'SAVING #%d' % nth)
        time.sleep(rng.uniform(0.0, 0.03))
      else:
        # Inside the SavedModel write: once its temp-* directory exists (the export before it
        # waits for a fresh timestamp), within the next 40 ms (the write takes 30-120 ms).
        delay = rng.uniform(0.0, 0.04)
        child.wait_for(lambda w, t: w == 'PHASE' and t == 'export', 60, 'export')
        before = set(_temp_exports(export_base))
        deadline = time.time() + 10
        while not set(_temp_exports(export_base)) - before and time.time() < deadline:
          time.sleep(0.002)
        record['temp_wait'] = round(time.time() - deadline + 10, 3)
        time.sleep(delay)
      kill_time = time.time()
      saved = [int(t) for _, w, t in child.lines('SAVED')]
      code = child.kill()
      record['phase'] = _phase_at(child, kill_time)
      if len(_temp_exports(export_base)) > temps_before:
        record['phase'] = 'export-write'  # it left a partial SavedModel in temp-*
      phases[record['phase']] += 1
      if code != -signal.SIGKILL:
        raise AssertionError('child was not killed by SIGKILL (exit %s):\n%s' % (
            code, server.log_tail()))
      saved_before = max(saved) if saved else 0
      latest, latest_step = check_model_dir(model_dir)
      if saved and latest is None:
        raise AssertionError('checkpoints were saved but the model_dir has no latest one')
      if latest is not None and latest_step < saved_before:
        raise AssertionError('latest checkpoint step %d < step %d saved before the kill' % (
            latest_step, saved_before))
      complete, temps = check_exports(export_base, loaded)
      temps_seen = max(temps_seen, len(temps))
      record.update(latest_step=latest_step, saved_before=saved_before,
                    exports=len(complete), temps=len(temps))
      pending[kind] = (trial, latest_step, saved_before)
      log('trial %d %-9s kill=%-10s landed in %-19s latest=%s saved_before=%s exports=%d '
          'temp=%d%s' % (trial, kind, mode, record['phase'], latest_step, saved_before,
                         len(complete), len(temps),
                         ' (export began after %ss)' % record['temp_wait']
                         if 'temp_wait' in record else ''))
    except Exception as e:  # pylint: disable=broad-except  (e.g. a checkpoint that won't load)
      record['error'] = '%s: %s' % (type(e).__name__, e)
      record['resumed'] = False
      log('trial %d FAILED: %s' % (trial, record['error']))
      pending.pop(kind, None)
    finally:
      if not child.exited:
        child.kill()
  # The last kill of each kind: one more (uninterrupted) run must resume from it.
  for kind in list(pending):
    child = server.start('resume_once', model_dir=dirs[kind][0], kind=kind)
    try:
      settle(kind, child, child.wait_word('SESSION', 60))
      done = child.wait_word('DONE', 60)
      assert child.wait_exit(30) == 0
      log('  final %s run ended at step %s' % (kind, done[2]))
    except Exception as e:  # pylint: disable=broad-except
      trial = pending.pop(kind, (None,))[0]
      if trial is not None:
        results[trial].update(resumed=False, error='%s: %s' % (type(e).__name__, e))
    finally:
      if not child.exited:
        child.kill()
  resumed = sum(1 for r in results if r['resumed'])
  return {'runs': len(results), 'resumed': resumed, 'lost': len(results) - resumed,
          'results': results, 'phases': dict(phases), 'max_temp_exports': temps_seen}


if __name__ == '__main__':
  if sys.argv[1:] == ['serve']:
    serve()
  else:
    raise SystemExit('usage: forkserver.py serve')
