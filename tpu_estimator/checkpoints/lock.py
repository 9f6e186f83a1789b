"""One trainer per model_dir: a lock file with the owner's pid, host and start time.

Two trainers on one model_dir interleave their checkpoints: the `checkpoint` state went back
from step 60 to 45, and one crashed on the other's `_temp` files.  `train` therefore holds
`<model_dir>/.trainer.lock` (an exclusive `flock`, released by the kernel when the process
dies, so a lock of a killed trainer is simply taken over) and a second trainer is refused with
the owner's pid, host and start time.  Where `flock` is unsupported (some network file
systems), the file's content decides: a lock of a dead pid on this host is taken over.

Set `TPU_ESTIMATOR_SHARED_MODEL_DIR=1` to train anyway (e.g. a deliberate second writer);
remote model_dirs (`gs://...`) are not locked.
"""
import contextlib
import errno
import json
import os
import socket
import time

import tensorflow as tf

try:
  import fcntl
except ImportError:  # not POSIX
  fcntl = None

LOCK_FILE = '.trainer.lock'
FORCE_ENV = 'TPU_ESTIMATOR_SHARED_MODEL_DIR'
_log = tf.get_logger()


class ModelDirLockedError(RuntimeError):
  """Another live trainer holds the model_dir."""


def _owner_text():
  return json.dumps({'pid': os.getpid(), 'host': socket.gethostname(),
                     'started': time.strftime('%Y-%m-%dT%H:%M:%S%z')})


def _read_owner(path):
  try:
    with open(path) as f:
      return json.loads(f.read() or '{}')
  except (OSError, ValueError):
    return {}


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except (PermissionError, OverflowError):
    return True
  return True


def _refuse(model_dir, owner):
  return ModelDirLockedError(
      'Another trainer is training in model_dir %r: pid %s on host %s, started %s (lock file '
      '%s). Received: a second train() on the same model_dir. Two trainers interleave their '
      'checkpoints. Wait for it to finish, stop it, or train in another model_dir; set %s=1 to '
      'train anyway.' % (model_dir, owner.get('pid', '?'), owner.get('host', '?'),
                         owner.get('started', '?'), os.path.join(model_dir, LOCK_FILE),
                         FORCE_ENV))


def _flock(path, model_dir):
  """The open, flock-ed lock file (the same inode as `path`), or raises."""
  while True:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      os.close(fd)
      if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
        raise _refuse(model_dir, _read_owner(path)) from None
      raise
    try:
      same = os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
      same = False
    if same:
      return fd
    os.close(fd)  # the previous owner removed the file meanwhile: lock the new one


def _by_content(path, model_dir):
  """Lock by exclusive creation, for file systems without flock; takes over a dead pid's."""
  for _ in range(3):
    try:
      fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
      return fd
    except FileExistsError:
      owner = _read_owner(path)
      if owner.get('host') == socket.gethostname() and isinstance(owner.get('pid'), int) and \
          not _alive(owner['pid']):
        _log.warning('Taking over the lock of model_dir %s from pid %s, which is no longer '
                     'running.', model_dir, owner['pid'])
        with contextlib.suppress(FileNotFoundError):
          os.remove(path)
        continue
      raise _refuse(model_dir, owner) from None
  raise _refuse(model_dir, _read_owner(path))


@contextlib.contextmanager
def held(model_dir):
  """Holds the model_dir's trainer lock for the block."""
  if not model_dir or '://' in model_dir or os.environ.get(FORCE_ENV, '') not in ('', '0'):
    yield
    return
  os.makedirs(model_dir, exist_ok=True)
  path = os.path.join(model_dir, LOCK_FILE)
  fd = None
  if fcntl is not None:
    try:
      fd = _flock(path, model_dir)
    except OSError as e:
      if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
        raise
      if not _read_owner(path):  # the empty file the flock attempt created
        with contextlib.suppress(OSError):
          os.remove(path)
  if fd is None:
    fd = _by_content(path, model_dir)
  try:
    os.ftruncate(fd, 0)
    os.write(fd, _owner_text().encode())
    yield
  finally:
    with contextlib.suppress(OSError):
      os.remove(path)
    os.close(fd)
