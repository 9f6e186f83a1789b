"""Pinning a checkpoint while it is restored: a private hard-linked snapshot that a trainer
rotating checkpoints cannot pull away, removed when done, at exit and on SIGTERM (through
`sigterm`, the process's one SIGTERM handler)."""
import atexit
import contextlib
import os
import shutil
import socket
import tempfile
import threading

import tensorflow as tf

from tpu_estimator.checkpoints import restoring
from tpu_estimator.checkpoints import sigterm

_v1 = tf.compat.v1
_log = tf.get_logger()

RETRIES = 10  # pins of the latest checkpoint, when a trainer deleted it first each time


_PIN_PREFIX = '.pinned-'
_live_pins = set()
_pins_lock = threading.RLock()  # re-entrant: SIGTERM's cleanup runs in the main thread


def _pin_owner(name):
  """(host, pid) of a `.pinned-<host>-<pid>-<random>` directory, or None."""
  parts = name[len(_PIN_PREFIX):].rsplit('-', 2)
  if len(parts) != 3 or not parts[1].isdigit():
    return None
  return parts[0], int(parts[1])


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def sweep_stale_pins(directory):
  """Removes `.pinned-*` snapshots left by dead processes of this host (SIGKILL, a crash)."""
  host = socket.gethostname()
  try:
    names = os.listdir(directory or '.')
  except OSError:
    return
  for name in names:
    owner = _pin_owner(name) if name.startswith(_PIN_PREFIX) else None
    if owner and owner[0] == host and not _alive(owner[1]):
      shutil.rmtree(os.path.join(directory, name), ignore_errors=True)


def _remove_live_pins():
  with _pins_lock:
    live = list(_live_pins)
    _live_pins.clear()
  for temp in live:
    shutil.rmtree(temp, ignore_errors=True)


atexit.register(_remove_live_pins)


def _remove_pin(temp):
  with _pins_lock:
    _live_pins.discard(temp)
  shutil.rmtree(temp, ignore_errors=True)


class CheckpointGone(tf.errors.NotFoundError):
  """The checkpoint to restore was deleted (by a trainer rotating checkpoints) before it could
  be pinned."""

  def __init__(self, checkpoint_path):
    super().__init__(None, None, 'Checkpoint %s is gone.' % checkpoint_path)


@contextlib.contextmanager
def pinned(checkpoint_path):
  """A private hard-linked (or copied) snapshot of a checkpoint's files, so a trainer deleting
  it (small keep_checkpoint_max) cannot pull it away while it is being restored.  Raises
  NotFoundError when the checkpoint is already gone.

  The snapshot is `.pinned-<host>-<pid>-<random>` beside the checkpoint; it is removed when the
  block ends, at exit and on SIGTERM (then the signal goes on to the handler it replaced), and
  snapshots of dead processes of this host are swept by the next pin.  Where the checkpoint's
  directory is not writable (read-only, or another user's), no trainer of ours can rotate it
  either: the checkpoint is restored in place."""
  directory, name = os.path.split(checkpoint_path)
  directory = directory or '.'
  if '://' in checkpoint_path or not os.path.isdir(directory):
    yield checkpoint_path  # a remote file system: restore in place
    return
  files = [f for f in os.listdir(directory) if f.startswith(name + '.')]
  if not any(f == name + '.index' for f in files):
    raise CheckpointGone(checkpoint_path)
  sweep_stale_pins(directory)
  try:
    temp = tempfile.mkdtemp(prefix='%s%s-%d-' % (_PIN_PREFIX, socket.gethostname(),
                                                 os.getpid()), dir=directory)
  except OSError:
    yield checkpoint_path  # a directory we cannot write: nothing of ours can rotate it
    return
  with _pins_lock:
    _live_pins.add(temp)
  try:
    with sigterm.cleanup_on_sigterm(_remove_live_pins):
      for f in files:
        source, target = os.path.join(directory, f), os.path.join(temp, f)
        try:
          os.link(source, target)
        except FileNotFoundError:
          raise CheckpointGone(checkpoint_path)  # pylint: disable=raise-missing-from
        except OSError:
          shutil.copyfile(source, target)
      yield os.path.join(temp, name)
  finally:
    _remove_pin(temp)


def with_latest_pinned(model_dir, checkpoint, explicit, what, use):
  """`use(checkpoint, snapshot)` with `checkpoint` pinned, and its result.  When `checkpoint`
  is the latest (not an `explicit` one) and a trainer deletes it before it could be pinned, the
  new latest is used instead (`RETRIES` times at most), and `use` gets that one.  `what` is the
  call ('evaluate', 'export', ...) that errors and the warning name."""
  for attempt in range(RETRIES):
    try:
      with pinned(checkpoint) as snapshot:
        return use(checkpoint, snapshot)
    except CheckpointGone:
      if explicit or attempt == RETRIES - 1:
        raise
      _log.warning('Checkpoint %s disappeared before %s could restore it; using the latest.',
                   checkpoint, what)
      checkpoint = restoring.resolve_checkpoint(model_dir, None, what)
  raise AssertionError('unreachable')
