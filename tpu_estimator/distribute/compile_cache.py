"""XLA executables kept on disk across processes (issue 29): a restarted or resumed job loads
its compiled training loop instead of compiling it again.

This is TensorFlow's own persistent cache of XLA-compiled graphs (`TF_XLA_FLAGS=
--tf_xla_persistent_cache_directory=DIR`, which graph-mode `tf.xla.experimental.compile` and
auto-clustering both use), turned on for the process when `distribute/xla.py` is imported,
before TensorFlow reads its XLA flags (once per process).  A compilation first looks up a
file named by the computation's signature and HLO fingerprint; on a miss it compiles and writes
one (to a temporary file, renamed), on a hit it loads it.  Keys repeat between processes that
build the same graphs in the same order (function names carry a per-process counter): the
first `train()` of a restarted job finds the entry its first run wrote.

Importing this module turns it on (`activate`): `distribute/xla.py` imports it just before the
line that makes TensorFlow read its XLA flags.

* Off unless asked for: TensorFlow 2.21 logs ERROR lines on every entry it loads (a text-format
  parse before the binary one; on some Intel CPUs a "could lead to ... SIGILL" line about LLVM
  tuning flags), which `TF_CPP_MIN_LOG_LEVEL=2` does not hide and Python cannot; for the
  0.5-1.5 s a restart saves on CPU, that noise, and writing into the user's home at import,
  are not a default (docs/design-decisions.md).
* Where: `$TPU_ESTIMATOR_XLA_CACHE=<dir>`, or `=on` (`1`, `true`, `yes`) for
  `$XDG_CACHE_HOME/tpu-estimator/xla` or `~/.cache/tpu-estimator/xla`; entries go in a
  subdirectory per TensorFlow build and CPU (`tf-2.21.0-<hash>`): an executable compiled for
  another CPU (a shared home directory) or by another TensorFlow is never loaded.
* A `tf_xla_persistent_cache_*` flag in the user's own `TF_XLA_FLAGS` wins: nothing is added.
* CPU compilations only (`--tf_xla_persistent_cache_device_types=CPU`): GPU executables were not
  measured here (no GPU in that session); set TensorFlow's flags yourself for them.
* Never an error: a directory that cannot be created or written (or whose path has spaces,
  which `TF_XLA_FLAGS` cannot carry) means no cache and one debug log.
* TensorFlow fails the compilation on an entry it cannot parse (a truncated one even raises
  `OutOfRangeError`, which ends training as if the input had ended): entries whose protocol
  buffer framing does not add up are removed here first.  The cache is kept under
  `MAX_BYTES`, the oldest entries removed first.
"""
import hashlib
import logging
import os
import platform
import tempfile
import time

import tensorflow as tf

from tpu_estimator import _tf_internals

_log = logging.getLogger('tpu_estimator')

ENV = 'TPU_ESTIMATOR_XLA_CACHE'
OFF = ('off', '0', 'false', 'no')
ON = ('on', '1', 'true', 'yes')
MAX_BYTES = 1 << 30
_ENTRY_PREFIX = 'xla_compile_cache'  # TensorFlow's `tf_xla_persistent_cache_prefix` default
_TAG_PREFIX = 'tf-'
_STALE_TEMP_SECS = 3600
_state = {'directory': None}


def directory():
  """The directory this process's XLA executables are kept in, or None (no cache)."""
  return _state['directory']


def activate():
  """Turns the cache on for this process (see the module docstring); once, before TensorFlow
  reads its XLA flags.  Returns the directory, or None."""
  found, flags = settings(os.environ)
  if flags:
    _tf_internals.read_xla_flags_with(flags)
  _state['directory'] = found
  return found


def settings(environ):
  """(directory, TF_XLA_FLAGS to add) for the environment `environ`; (None, '') for no cache.
  Creates the directory, checks it can be written, removes damaged entries and prunes."""
  if 'tf_xla_persistent_cache' in environ.get('TF_XLA_FLAGS', ''):
    _log.debug('XLA compilation cache: TF_XLA_FLAGS sets its own; not adding one.')
    return None, ''
  base = base_directory(environ)
  if base is None:
    return None, ''
  found = os.path.join(base, build_tag())
  if any(c.isspace() for c in found):
    _log.debug('XLA compilation cache off: TF_XLA_FLAGS cannot carry the path %r.', found)
    return None, ''
  try:
    _writable(found)
    remove_damaged(found)
    prune(base, MAX_BYTES)
  except OSError as e:
    _log.debug('XLA compilation cache off: %s cannot be used (%s).', found, e)
    return None, ''
  return found, ('--tf_xla_persistent_cache_directory=%s '
                 '--tf_xla_persistent_cache_device_types=CPU' % found)


def base_directory(environ):
  """The cache's root for `environ` (absolute), or None when it is off (the default: see the
  module docstring)."""
  chosen = environ.get(ENV, '').strip()
  if not chosen or chosen.lower() in OFF:
    return None
  if chosen.lower() not in ON:
    return os.path.abspath(os.path.expanduser(chosen))
  root = environ.get('XDG_CACHE_HOME') or os.path.join(
      environ.get('HOME') or os.path.expanduser('~'), '.cache')
  return os.path.abspath(os.path.join(root, 'tpu-estimator', 'xla'))


def build_tag():
  """`tf-<version>-<hash>`: the subdirectory of one TensorFlow build on one kind of CPU."""
  what = '\n'.join([tf.version.VERSION, tf.version.GIT_VERSION, platform.machine(),
                    _cpu_signature()])
  return '%s%s-%s' % (_TAG_PREFIX, tf.version.VERSION,
                      hashlib.sha256(what.encode()).hexdigest()[:12])


def _cpu_signature():
  """The CPU's model and instruction-set flags (Linux: x86, Arm, others' names for them), else
  what `platform` says of it."""
  try:
    with open('/proc/cpuinfo', encoding='utf-8', errors='replace') as f:
      lines = f.read().split('\n\n')[0].splitlines()
  except OSError:
    return platform.processor()
  keep = ('model name', 'flags', 'features', 'cpu model', 'isa', 'cpu implementer',
          'cpu part', 'cpu variant')
  return '\n'.join(l for l in lines if l.split(':')[0].strip().lower() in keep)


def _writable(path):
  os.makedirs(path, exist_ok=True)
  with tempfile.TemporaryFile(dir=path):
    pass


def _entries(path):
  try:
    names = os.listdir(path)
  except OSError:
    return []
  return [os.path.join(path, n) for n in names if n.startswith(_ENTRY_PREFIX)]


def remove_damaged(path):
  """Removes the entries in `path` that are not whole (`is_whole`), and the temporary files
  of writes that never finished (older than an hour).  Returns how many it removed."""
  removed = 0
  for entry in _entries(path):
    try:
      if entry.endswith('.tmp'):
        damaged = time.time() - os.path.getmtime(entry) > _STALE_TEMP_SECS
      else:
        damaged = entry.endswith('.pb') and not is_whole(entry)
      if damaged:
        os.remove(entry)
        removed += 1
    except OSError:
      continue  # gone meanwhile (another process), or unreadable: TensorFlow will say
  if removed:
    _log.warning('XLA compilation cache: removed %d damaged entries from %s.', removed, path)
  return removed


def _varint(f):
  value, shift = 0, 0
  while shift < 64:
    byte = f.read(1)
    if not byte:
      return None
    value |= (byte[0] & 0x7f) << shift
    if byte[0] < 0x80:
      return value
    shift += 7
  return None


def is_whole(path):
  """Whether the file is framed as TensorFlow's cache entry: its three length-delimited fields
  (key, HLO module, executable; a non-empty executable) filling the file exactly.  Reads a few
  bytes per field: it finds truncated or overwritten files, not a flipped bit inside a field."""
  size = os.path.getsize(path)
  lengths = {}
  with open(path, 'rb') as f:
    while f.tell() < size:
      tag = _varint(f)
      if tag is None or tag & 7 != 2 or tag >> 3 not in (1, 2, 3):
        return False
      length = _varint(f)
      if length is None or f.tell() + length > size:
        return False
      lengths[tag >> 3] = length
      f.seek(length, os.SEEK_CUR)
  return sorted(lengths) == [1, 2, 3] and lengths[3] > 0


def prune(base, max_bytes):
  """Removes the oldest entries under `base` (every build's subdirectory) until they take at
  most `max_bytes`.  Returns how many it removed."""
  found = []
  for tag in os.listdir(base):
    if tag.startswith(_TAG_PREFIX):
      for entry in _entries(os.path.join(base, tag)):
        try:
          stat = os.stat(entry)
        except OSError:
          continue
        found.append((stat.st_mtime, stat.st_size, entry))
  total, removed = sum(size for _, size, _ in found), 0
  for _, size, entry in sorted(found):
    if total <= max_bytes:
      break
    try:
      os.remove(entry)
    except OSError:
      continue
    total -= size
    removed += 1
  return removed


activate()
