"""SIGTERM's one handler in the process: the package installs no other.

Two uses, which nest:
  `deferred(message)`: for the block, SIGTERM only sets the yielded flag's `received` (and logs
    `message`); when the block ends normally the signal goes on as if it had just arrived.
    `train` runs in one, so it stops at a loop boundary and saves its checkpoint first
    (`hooks.preemption`).
  `cleanup_on_sigterm(fn)`: for the block, SIGTERM first calls `fn()` (once), then goes on.
    Pinned checkpoint snapshots are removed so (`pinning`).

"Goes on" means: the registered cleanups run, then the innermost deferral block takes the
signal; with none, the handler ours replaced is put back and the signal sent again, so a process
with the default handler exits with status 143 (128 + SIGTERM) and a program's own handler is
called.  Handlers can only be set from the main thread: a deferral elsewhere yields a flag that
stays False, and a cleanup registered elsewhere runs on SIGTERM only while the handler is
installed (by a block of the main thread).  Once nothing is registered, the replaced handler is
put back (from the main thread, and only if ours is still the one installed).

This module imports nothing of the package, so any concern can use it.
"""
import contextlib
import os
import signal
import threading

import tensorflow as tf

_log = tf.get_logger()

_lock = threading.RLock()  # re-entrant: the handler runs in the main thread, maybe inside a block
_cleanups = {}  # token: cleanup, of the open `cleanup_on_sigterm` blocks
_deferrals = []  # (flag, message) of the open `deferred` blocks, innermost last
_previous = []  # the handler ours replaced, while ours is installed


class Flag:
  """Whether SIGTERM was received during a `deferred` block."""
  received = False


def _main_thread():
  return threading.current_thread() is threading.main_thread()


def _install():
  """Installs the handler (main thread only) unless it is, remembering the one it replaces."""
  if _previous or not _main_thread():
    return
  current = signal.getsignal(signal.SIGTERM)
  _previous.append(signal.SIG_DFL if current is None else current)
  signal.signal(signal.SIGTERM, _handle)


def _uninstall():
  """Puts the replaced handler back once no block needs ours (main thread only)."""
  if _cleanups or _deferrals or not _previous or not _main_thread():
    return
  if signal.getsignal(signal.SIGTERM) is _handle:
    signal.signal(signal.SIGTERM, _previous[-1])
  _previous.pop()


def _run_cleanups():
  with _lock:
    cleanups = list(_cleanups.values())
    _cleanups.clear()
  for cleanup in cleanups:
    cleanup()


def _deliver(signum):
  """The signal goes on: the cleanups run, then the innermost deferral takes it, or the
  handler ours replaced gets it (put back, and the signal sent again)."""
  _run_cleanups()
  with _lock:
    if _deferrals:
      flag, message = _deferrals[-1]
      flag.received = True
      if message:
        _log.warning(message)
      return
    previous = _previous.pop() if _previous else signal.SIG_DFL
    if signal.getsignal(signal.SIGTERM) is _handle:
      signal.signal(signal.SIGTERM, previous)
  os.kill(os.getpid(), signum)


def _handle(signum, frame):
  del frame
  _deliver(signum)


@contextlib.contextmanager
def deferred(message=None):
  """Defers SIGTERM for the block (main thread only); yields a `Flag`.  A SIGTERM received
  during it is delivered when the block ends normally (not when it raises)."""
  flag = Flag()
  if not _main_thread():
    yield flag
    return
  entry = (flag, message)
  with _lock:
    _deferrals.append(entry)
    _install()
  deliver = False
  try:
    yield flag
    deliver = flag.received
  finally:
    with _lock:
      _deferrals.remove(entry)
      if not deliver:
        _uninstall()
  if deliver:
    _deliver(signal.SIGTERM)


@contextlib.contextmanager
def cleanup_on_sigterm(cleanup):
  """For the block, a SIGTERM first calls `cleanup()` (at most once; it must not raise), then
  goes on.  The block's end does not call it."""
  token = object()
  with _lock:
    _cleanups[token] = cleanup
    _install()
  try:
    yield
  finally:
    with _lock:
      _cleanups.pop(token, None)
      _uninstall()
