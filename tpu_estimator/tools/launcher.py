"""A local multi-worker launcher for testing and development (not a cluster manager).

`launch(argv, num_workers, num_ps=0, evaluator=False)` starts one copy of a Python program per
task on this machine, each with a `TF_CONFIG` naming a loopback port per cluster task: task 0
is the `chief`, then `num_workers - 1` `worker`s, `num_ps` parameter servers (`ps`) and, with
`evaluator=True`, an `evaluator` (which, as in TensorFlow, is not listed in the cluster).  It
waits for the chief, workers and evaluator, then stops the parameter servers (which serve until
stopped); if a task fails it stops the others.  Returns the exit codes in task order.

`Cluster` is the same run in steps (`start()`, `processes`, `wait()`, `stop()`), for tests that
reach into the tasks (kill one, read its TF_CONFIG).  This module imports only the standard
library.
"""
import json
import numbers
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

# How long a port handed out by free_ports stays claimed against other calls on this machine:
# long enough for the tasks it was chosen for to start (a TensorFlow import) and bind it.
_CLAIM_SECS = 300


def free_ports(count):
  """`count` distinct free TCP ports on 127.0.0.1, below the system's ephemeral range where it
  can: a port picked there can be taken, before its task binds it, by an outgoing connection
  of another task (measured: a ps task then failed to start its server).  A port handed out
  is claimed for `_CLAIM_SECS` against every other call on this machine, in any process: until
  its task binds it, it still looks free (seen once: two test processes launching clusters at
  the same time, and a chief that could not bind its port)."""
  low, _ = _ephemeral_range()
  candidates = list(range(max(1024, low - 12000), low))
  random.shuffle(candidates)
  chosen = []
  for port in candidates:
    if len(chosen) == count:
      return chosen
    if _bindable(port) and _claim(port):
      chosen.append(port)
  return chosen + _any_free_ports(count - len(chosen), exclude=chosen)


def _ephemeral_range():
  try:
    with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
      low, high = (int(v) for v in f.read().split())
    return low, high
  except (OSError, ValueError):
    return 32768, 60999


def _bindable(port):
  sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
  try:
    sock.bind(('127.0.0.1', port))
    return True
  except OSError:
    return False
  finally:
    sock.close()


def _claim(port):
  """True when no free_ports call on this machine handed out `port` in the last _CLAIM_SECS
  seconds; then it is this call's (a file per port under the temp dir, made exclusively, holds
  the claim).  Where no claim can be written, binding is the only check, as before."""
  directory = os.path.join(tempfile.gettempdir(), 'tpu-estimator-ports')
  path = os.path.join(directory, str(port))
  try:
    os.makedirs(directory, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    return True
  except FileExistsError:
    pass
  except OSError:
    return True
  try:
    if time.time() - os.path.getmtime(path) < _CLAIM_SECS:
      return False
    os.utime(path)  # an old claim: this call's now
    return True
  except OSError:
    return False


def _any_free_ports(count, exclude=()):
  """`count` ports the system hands out (from its ephemeral range), none in `exclude`."""
  sockets, ports = [], []
  try:
    while len(ports) < count:
      sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      sock.bind(('127.0.0.1', 0))
      sockets.append(sock)
      if sock.getsockname()[1] not in exclude:
        ports.append(sock.getsockname()[1])
    return ports
  finally:
    for sock in sockets:
      sock.close()


def _check_count(name, value, minimum, fix):
  if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
    raise ValueError('%s must be an integer >= %d. Received: %s=%r. %s'
                     % (name, minimum, name, value, fix))


def _tasks(num_workers, num_ps, evaluator):
  """[(type, index)] in task order: chief, workers, ps tasks, evaluator."""
  _check_count('num_workers', num_workers, 1,
               'Pass the number of training tasks, the chief included (1 runs a chief alone).')
  _check_count('num_ps', num_ps, 0, 'Pass 0 for no parameter servers.')
  return ([('chief', 0)] + [('worker', i) for i in range(num_workers - 1)]
          + [('ps', i) for i in range(num_ps)] + ([('evaluator', 0)] if evaluator else []))


def task_names(num_workers, num_ps=0, evaluator=False):
  """['chief:0', 'worker:0', ..., 'ps:0', ..., 'evaluator:0']: the tasks, in task order."""
  return ['%s:%d' % task for task in _tasks(num_workers, num_ps, evaluator)]


def tf_configs(num_workers, ports=None, num_ps=0, evaluator=False):
  """One TF_CONFIG dict per task, in task order (chief, workers, ps tasks, evaluator).

  The cluster has a `chief`, `num_workers - 1` `worker`s and `num_ps` `ps` tasks on loopback,
  at `ports` (`num_workers + num_ps` of them; default: free ones).  The evaluator gets the same
  cluster but, as TensorFlow expects, is not in it: it only appears as its own `task`.
  """
  tasks = _tasks(num_workers, num_ps, evaluator)
  needed = num_workers + num_ps
  ports = free_ports(needed) if ports is None else list(ports)
  if len(ports) != needed:
    raise ValueError('ports must name one port per chief, worker and ps task (%d). Received: '
                     'ports=%r. Pass %d ports, or None for free ones.' % (needed, ports, needed))
  addresses = ['127.0.0.1:%d' % p for p in ports]
  cluster = {'chief': addresses[:1]}
  if num_workers > 1:
    cluster['worker'] = addresses[1:num_workers]
  if num_ps:
    cluster['ps'] = addresses[num_workers:]
  return [{'cluster': cluster, 'task': {'type': t, 'index': i}} for t, i in tasks]


class Cluster:
  """The tasks of one local run: `python argv...` per TF_CONFIG of `tf_configs(...)`.

  `tf_configs` and `names` ('chief:0', ...) are known from construction, `processes` (the
  `subprocess.Popen`s, in the same order) after `start()`.  As a context manager it starts the
  tasks and, on leaving, kills any still running.
  """

  def __init__(self, argv, num_workers, env=None, num_ps=0, evaluator=False, ports=None):
    self.argv = list(argv)
    self.env = env
    self.tf_configs = tf_configs(num_workers, ports, num_ps=num_ps, evaluator=evaluator)
    self.names = task_names(num_workers, num_ps, evaluator)
    self.processes = []

  def start(self):
    """Starts every task (once); if one cannot be started, stops those already running."""
    if self.processes:
      raise RuntimeError('Cluster.start() was already called. Make a new Cluster to run again.')
    try:
      for tf_config in self.tf_configs:
        env = dict(os.environ if self.env is None else self.env, TF_CONFIG=json.dumps(tf_config))
        self.processes.append(subprocess.Popen([sys.executable] + self.argv, env=env))
    except BaseException:
      self.stop(0)
      raise
    return self

  def wait(self, timeout=None, stop_grace_secs=10, poll_secs=0.2):
    """Waits for the run to end; returns the exit codes in task order.

    The run ends well when every chief, worker and evaluator task has exited 0: the `ps` tasks
    still serving are then stopped and reported as 0 (a parameter server never exits on its
    own).  When any task exits non-zero (a `ps` included), or after `timeout` seconds, every
    task still running is stopped and the codes are as the processes report them (negative: the
    signal that stopped it).  Stopping sends SIGTERM, then SIGKILL after `stop_grace_secs`.
    """
    if not self.processes:
      raise RuntimeError('Cluster.wait() before start(). Call start() first, or use '
                         '`with Cluster(...) as cluster:`.')
    deadline = None if timeout is None else time.time() + timeout
    training = [not name.startswith('ps:') for name in self.names]
    while True:
      codes = [p.poll() for p in self.processes]
      failed = any(c not in (None, 0) for c in codes)
      if failed or (deadline is not None and time.time() > deadline):
        self.stop(stop_grace_secs)
        return [p.wait() for p in self.processes]
      if all(c is not None for c, t in zip(codes, training) if t):
        self.stop(stop_grace_secs)  # only ps tasks are left
        return [0 if c is None else c for c in codes]
      time.sleep(poll_secs)

  def stop(self, grace_secs=10):
    """Sends SIGTERM to the tasks still running, and SIGKILL to those left after `grace_secs`."""
    for process in self.processes:
      if process.poll() is None:
        process.terminate()
    deadline = time.time() + grace_secs
    for process in self.processes:
      try:
        process.wait(max(0.0, deadline - time.time()))
      except subprocess.TimeoutExpired:
        process.kill()
        process.wait()

  def __enter__(self):
    return self.start()

  def __exit__(self, *exc_info):
    self.stop(0)


def launch(argv, num_workers, env=None, timeout=None, stop_grace_secs=10, poll_secs=0.2,
           num_ps=0, evaluator=False):
  """Runs `python argv...` once per task (`env`: their environment, default os.environ; each
  gets its TF_CONFIG) and waits for them.

  Returns the list of exit codes in task order: the chief, the `num_workers - 1` workers, the
  `num_ps` ps tasks, then the evaluator when `evaluator` is True (`task_names` names them).
  All 0 is success: ps tasks still serving when the others are done are stopped and reported 0.
  When a task exits non-zero the others are stopped (SIGTERM, then SIGKILL after
  `stop_grace_secs`) and report their own codes (negative: the signal).  `timeout` bounds the
  whole run (tasks still running are stopped the same way).  See `Cluster.wait`.
  """
  with Cluster(argv, num_workers, env=env, num_ps=num_ps, evaluator=evaluator) as cluster:
    return cluster.wait(timeout, stop_grace_secs, poll_secs)
