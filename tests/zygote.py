"""The Python programs tests start, forked from a process that has already imported TensorFlow.

Importing TensorFlow costs each fresh process 5-8 s of CPU on the suite's 2-core machine, and
the tests start dozens of programs (differential sides, cluster tasks): most of what they
cost.  `Popen(argv, ...)` takes the place of `subprocess.Popen` for `[python, program.py,
args...]`: it asks a *zygote* (this file run by that python, one per python and environment,
kept for the rest of the test process) to fork a child, which sets up its file descriptors,
environment, working directory, `sys.argv` and `sys.path[0]` as that command line would, and
runs the program as `__main__`.  The child is a
separate process (killed, signalled and waited for like one; its exit code is the program's,
or -N after signal N) and ends as a program ends (non-daemon threads joined, `atexit` run),
but without tearing its modules down (`_run`).  Its standard input is /dev/null.

What a forked child does not share with a fresh process: TensorFlow was imported before the
program ran, so a variable TensorFlow or Python reads at start-up must be the zygote's (every
variable but `RUNTIME`'s is part of a zygote's identity: a child with other values gets its own
zygote), and the children of one zygote share its string-hash seed.  Tests that check start-up
itself (imports, import time, start-up logs) start real processes.  `TESTS_FORK=0` turns the
whole mechanism off.

Protocol (a SOCK_SEQPACKET socket pair; the zygote's end is the fd its argument names):
    client -> zygote   {"fork": tag, "argv", "env", "cwd"} with the child's fds 0, 1, 2 attached
                       {"signal": tag, "signum"}
    zygote -> client   PID tag pid | EXIT tag code
The zygote is the children's parent and reaps them, so a signal goes through it: it is sent
only to a child not reaped yet, whose pid cannot have been reused.  When the client's end
closes (the test process ended), the zygote kills the children still running and exits.
Standard library only: the zygote also runs in the reference venv.
"""
import atexit
import gc
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import threading
import traceback
import types

# Variables read after start-up by the programs tests fork: they may differ between the
# children of one zygote.
RUNTIME = frozenset(['TF_CONFIG', 'PYTEST_CURRENT_TEST', 'SESSION_TIMEOUT_SECS',
                     'OPERATION_TIMEOUT_MS'])
MAX_MESSAGE = 1 << 20


# =============================================================================================
# The zygote (run as `python zygote.py`)

def _serve(sock):
  """Forks a child per request; returns that request in the child, None in the zygote when
  the client has gone."""
  children = {}  # tag -> pid, until reaped
  while True:
    readable, _, _ = select.select([sock], [], [], 0.02)
    for tag, pid in list(children.items()):
      done, status = os.waitpid(pid, os.WNOHANG)
      if done:
        del children[tag]
        sock.sendall(('EXIT %s %d' % (tag, os.waitstatus_to_exitcode(status))).encode())
    if not readable:
      continue
    data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 3)
    if not data:
      for pid in children.values():
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
      return None
    request = json.loads(data)
    if 'signal' in request:
      if request['signal'] in children:
        os.kill(children[request['signal']], request['signum'])
      continue
    pid = os.fork()
    if pid == 0:
      sock.close()
      for target, fd in enumerate(fds):
        os.dup2(fd, target)
      for fd in set(fds) - {0, 1, 2}:
        os.close(fd)
      return request
    for fd in fds:
      os.close(fd)
    children[request['fork']] = pid
    sock.sendall(('PID %s %d' % (request['fork'], pid)).encode())


def _become(request):
  """In the child: the state `python ARGV` would start the program in."""
  os.environ.clear()
  os.environ.update(request['env'])
  os.chdir(request['cwd'])
  if 'numpy' in sys.modules:  # a fresh process seeds numpy's global generator anew
    sys.modules['numpy'].random.seed()
  sys.argv = list(request['argv'])
  path = os.path.abspath(sys.argv[0])
  sys.path.insert(0, os.path.dirname(os.path.realpath(path)))
  return path


def _run(path):
  """Runs the program as `__main__` and ends the process as a program's end would: its exit
  code, non-daemon threads joined, `atexit` functions run, the standard streams flushed.  The
  modules are not torn down (os._exit, as multiprocessing's forked children end): in a child
  of the zygote that would touch, and so copy, most of the memory the zygote shares with it;
  Python does not promise that `__del__` methods run at exit anyway."""
  code = 0
  try:
    runpy.run_path(path, run_name='__main__')
  except SystemExit as e:
    if e.code is None or isinstance(e.code, int):
      code = e.code or 0
    else:
      print(e.code, file=sys.stderr)
      code = 1
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
    code = 1
  threading._shutdown()  # pylint: disable=protected-access
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):
      pass
  os._exit(code)  # pylint: disable=protected-access


def _main(fd):
  sock = socket.socket(fileno=fd)
  here = os.path.dirname(os.path.abspath(__file__))
  sys.path[:] = [p for p in sys.path if os.path.abspath(p or '.') != here]  # the child's own
  import tensorflow  # pylint: disable=import-outside-toplevel,unused-import
  # What the import made is never collected, so the children's collections do not touch (and
  # copy) its pages: Python's advice for a process that forks without exec (gc.freeze).
  gc.freeze()
  request = _serve(sock)
  if request is not None:
    _run(_become(request))


# =============================================================================================
# The test process's side

class Process:
  """The part of `subprocess.Popen` tests use, for a forked child."""

  def __init__(self, zygote, tag, args):
    self._zygote, self._tag, self.args = zygote, tag, args
    self.returncode = None

  @property
  def pid(self):
    return self._zygote.wait_for(lambda: self._zygote.pids.get(self._tag), None)

  def poll(self):
    with self._zygote.cond:
      self.returncode = self._zygote.exits.get(self._tag)
    return self.returncode

  def wait(self, timeout=None):
    self.returncode = self._zygote.wait_for(lambda: self._zygote.exits.get(self._tag), timeout)
    if self.returncode is None:
      raise subprocess.TimeoutExpired(self.args, timeout)
    return self.returncode

  def send_signal(self, signum):
    self._zygote.send({'signal': self._tag, 'signum': int(signum)})

  def kill(self):
    self.send_signal(signal.SIGKILL)

  def terminate(self):
    self.send_signal(signal.SIGTERM)


class _Zygote:

  def __init__(self, python, env):
    self.cond = threading.Condition()
    self.pids, self.exits, self.gone = {}, {}, False
    self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    self._count = 0
    # Its own start-up errors go to the test process's stderr; its children's, to theirs.
    self._proc = subprocess.Popen(
        [python, os.path.abspath(__file__), str(theirs.fileno())], env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=[theirs.fileno()])
    theirs.close()
    threading.Thread(target=self._read, daemon=True).start()

  def _read(self):
    while True:
      try:
        data = self._sock.recv(MAX_MESSAGE)
      except OSError:
        data = b''
      with self.cond:
        if not data:
          self.gone = True
        else:
          words = data.decode().split(' ')
          if words[0] == 'PID':
            self.pids[words[1]] = int(words[2])
          elif words[0] == 'EXIT':
            self.exits[words[1]] = int(words[2])
        self.cond.notify_all()
      if not data:
        return

  def wait_for(self, value, timeout):
    """`value()` once it is not None, or None after `timeout` seconds."""
    with self.cond:
      found = self.cond.wait_for(lambda: value() is not None or self.gone, timeout)
      if self.gone and value() is None:
        raise RuntimeError('the zygote (tests/zygote.py) ended; its exit code: %s' %
                           self._proc.poll())
      return value() if found else None

  def send(self, request, fds=()):
    socket.send_fds(self._sock, [json.dumps(request).encode()], list(fds))

  def fork(self, argv, env, cwd, fds):
    with self.cond:
      self._count += 1
      tag = str(self._count)
    self.send({'fork': tag, 'argv': argv, 'env': env, 'cwd': cwd}, fds)
    return tag


_ZYGOTES = {}
_LOCK = threading.Lock()


def _zygote(python, env):
  key = (python, tuple(sorted((k, v) for k, v in env.items() if k not in RUNTIME)))
  with _LOCK:
    if key not in _ZYGOTES or _ZYGOTES[key].gone:
      _ZYGOTES[key] = _Zygote(python, {k: v for k, v in env.items() if k not in RUNTIME})
    return _ZYGOTES[key]


def _program(argv):
  """argv without its python where it is a program this module can fork, else None.  Not
  `-m MODULE`: `python -m tpu_estimator run` sets TF_USE_LEGACY_KERAS before TensorFlow
  resolves Keras."""
  if os.path.basename(argv[0]).startswith('python') and argv[1:2] and argv[1].endswith('.py'):
    return argv[1:]
  return None


def _fd(stream, inherited, devnull):
  """The fd a child gets for a Popen `stdout`/`stderr` argument."""
  if stream is None:
    return inherited
  if stream == subprocess.DEVNULL:
    return devnull.fileno()
  return stream if isinstance(stream, int) else stream.fileno()


def Popen(argv, env=None, cwd=None, stdout=None, stderr=None,  # pylint: disable=invalid-name
          **kwargs):
  """`subprocess.Popen(argv, env=, cwd=, stdout=, stderr=)`, forked where it can be (a Python
  program; stdout/stderr None, DEVNULL, STDOUT (stderr) or a file; no other argument)."""
  argv = [str(a) for a in argv]
  program = _program(argv)
  if (program is None or kwargs or os.environ.get('TESTS_FORK') == '0' or
      subprocess.PIPE in (stdout, stderr)):
    return subprocess.Popen(argv, env=env, cwd=cwd, stdout=stdout, stderr=stderr, **kwargs)
  env = dict(os.environ if env is None else env)
  with open(os.devnull, 'r+b') as devnull:
    out = _fd(stdout, 1, devnull)
    err = out if stderr == subprocess.STDOUT else _fd(stderr, 2, devnull)
    zygote = _zygote(argv[0], env)
    tag = zygote.fork(program, env, os.path.abspath(cwd or os.getcwd()),
                      [devnull.fileno(), out, err])
  return Process(zygote, tag, argv)


def fork_launched_tasks(monkeypatch, launcher):
  """Makes `launcher` (tpu_estimator.tools.launcher, in this test process) start its tasks with
  `Popen` above: for tests whose subject is the cluster, not the launcher (tests/test_launcher.py
  and the `tpu-estimator launch` command's tests start real processes)."""
  monkeypatch.setattr(launcher, 'subprocess', types.SimpleNamespace(
      Popen=Popen, TimeoutExpired=subprocess.TimeoutExpired))


if __name__ == '__main__':
  _main(int(sys.argv[1]))
