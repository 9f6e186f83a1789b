"""Which checkpoint of a model_dir is the latest, never silently wrong.

TensorFlow's `tf.train.latest_checkpoint` answers None when the `checkpoint` state file is
unreadable (a torn or hand-edited file), and None for a moment while a trainer replaces the
checkpoint it names; a trainer then started again from step 0 beside its own checkpoints, and
an evaluator failed with "no checkpoint".  `latest` reads the state file, checks that the
checkpoint it names is complete (index readable, every data shard present and long enough), and
otherwise takes the newest complete `<prefix>-<step>` checkpoint on disk, with a warning, as
checkpoint managers that scan their directory do (Orbax, TF2's `CheckpointManager` on restore).
Only the trainer (`repair=True`, which holds the model_dir lock) rewrites the state file.
"""
import fnmatch
import glob
import os
import re

import tensorflow as tf
from google.protobuf import text_format

from tpu_estimator import _tf_internals

_log = tf.get_logger()
_STATE_FILE = 'checkpoint'
_STEP = re.compile(r'-(\d+)$')
_SHARD = re.compile(r'\.data-(\d+)-of-(\d+)$')
_RETRIES = 5


class CorruptCheckpointError(ValueError):
  """A checkpoint's files are truncated, zero-filled or missing a part."""


def _is_remote(path):
  return '://' in path


def _matching(directory, pattern):
  """The paths in `directory` whose names match `pattern` (fnmatch's, as `tf.io.gfile.glob`
  matches a path's last part).  A local directory is listed by Python: ~20 us against
  TensorFlow's ~200 us, and every call looks for and checks its checkpoint."""
  if _is_remote(directory):
    return tf.io.gfile.glob(os.path.join(glob.escape(directory), pattern))
  try:
    names = os.listdir(directory or '.')
  except (FileNotFoundError, NotADirectoryError):  # as TensorFlow's glob: nothing
    return []
  return [os.path.join(directory, name) for name in fnmatch.filter(names, pattern)]


def read_state(model_dir):
  """(CheckpointState with absolute paths, or None when there is no state file, problem text
  or None).  Never raises for a damaged file: the problem is returned."""
  path = os.path.join(model_dir, _STATE_FILE)
  try:
    if not tf.io.gfile.exists(path):
      return None, None
    with tf.io.gfile.GFile(path, 'r') as f:
      text = f.read()
    state = text_format.Parse(text, _tf_internals.CheckpointState())
  except (tf.errors.OpError, text_format.ParseError, UnicodeDecodeError, ValueError) as e:
    return None, '%s: %s' % (type(e).__name__, str(e)[:200])
  if not state.model_checkpoint_path:
    return None, 'it names no checkpoint'

  def absolute(p):
    return p if os.path.isabs(p) or _is_remote(p) else os.path.join(model_dir, p)

  state.model_checkpoint_path = absolute(state.model_checkpoint_path)
  for i, p in enumerate(state.all_model_checkpoint_paths):
    state.all_model_checkpoint_paths[i] = absolute(p)
  return state, None


def step_of(prefix):
  match = _STEP.search(os.path.basename(prefix))
  return int(match.group(1)) if match else None


def problem(prefix, read_tensors=False):
  """None when the checkpoint at `prefix` is complete, else what is wrong with it.

  Cheap by default: the index opens, every data shard `.data-i-of-n` exists, and together they
  hold at least the bytes of the fixed-size tensors.  `read_tensors` also reads every tensor,
  which checks each one's CRC (about 0.5 s per GB): zero-filled data passes the cheap checks."""
  index = prefix + '.index'
  try:
    if not tf.io.gfile.exists(index):
      return 'its index file %s is missing' % index
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
  except (tf.errors.OpError, ValueError) as e:
    return 'its index %s cannot be read (%s)' % (index, str(e).splitlines()[0][:200])
  shards = {}
  for path in _matching(os.path.dirname(prefix),
                        glob.escape(os.path.basename(prefix)) + '.data-*-of-*'):
    match = _SHARD.search(path)
    if match:
      shards[int(match.group(1))] = (int(match.group(2)), path)
  counts = {n for n, _ in shards.values()}
  if shapes and (len(counts) != 1 or set(shards) != set(range(counts.pop()))):
    return 'data shards are missing (found %s)' % (
        sorted(os.path.basename(p) for _, p in shards.values()) or 'none')
  need = 0
  for name, shape in shapes.items():
    dtype = dtypes[name]
    if dtype != tf.string and dtype.is_numpy_compatible:
      count = 1
      for dim in shape:
        count *= dim
      need += count * dtype.size
  try:
    have = sum(tf.io.gfile.stat(p).length for _, p in shards.values())
  except tf.errors.NotFoundError:
    return 'its data files are gone'  # deleted meanwhile (a trainer rotating checkpoints)
  if have < need:
    # The estimate counts each key's full shape; the slot of one part of a partitioned
    # variable (`.../part_1/Ftrl`, `.../t_1/Adagrad`) is stored under a key with the whole
    # variable's shape but holds only its slice.  So a short count is only damage when a
    # tensor fails to read (once per checkpoint: the verdict is kept).
    failed = _unreadable(prefix, reader, shapes)
    if failed:
      return 'its data files hold %d bytes, fewer than the %d its tensors need (truncated; %s)' % (
          have, need, failed)
  elif read_tensors:
    return _unreadable(prefix, reader, shapes)
  return None


_verdicts = {}  # the checkpoint's files with their sizes and mtimes -> what _unreadable found


def _unreadable(prefix, reader, names):
  """None when every tensor of the checkpoint reads (CRCs checked), else which one failed.
  Keys holding a single slice of a partitioned variable cannot be read whole and are
  skipped."""
  key = None
  if '://' not in prefix:  # local files: their identity (tf.io.gfile's mtime is in seconds)
    files = [prefix + '.index'] + sorted(glob.glob(glob.escape(prefix) + '.data-*'))
    try:
      key = tuple((f, st.st_ino, st.st_size, st.st_mtime_ns) for f, st in
                  ((f, os.stat(f)) for f in files))
    except OSError:
      key = None
  if key is None or key not in _verdicts:
    verdict = None
    for name in names:
      try:
        reader.get_tensor(name)
      except ValueError as e:
        if 'sufficient slices' not in str(e):
          verdict = 'reading tensor %r failed (%s)' % (name, str(e).splitlines()[0][:200])
          break
      except (tf.errors.OpError, IndexError) as e:
        verdict = 'reading tensor %r failed (%s)' % (name, str(e).splitlines()[0][:200])
        break
    if key is None:
      return verdict
    _verdicts[key] = verdict
  return _verdicts[key]


def candidates(model_dir):
  """The `<prefix>-<step>` checkpoints with an index in `model_dir`, newest step first."""
  found = []
  for index in _matching(model_dir, '*-*.index'):
    prefix = index[:-len('.index')]
    step = step_of(prefix)
    if step is not None and not os.path.basename(prefix).startswith('.'):
      found.append((step, prefix))
  return [p for _, p in sorted(found, reverse=True)]


def _write_state(model_dir, latest, others):
  """The state file naming `latest` and `others` (oldest first), written atomically, with
  paths relative to the model_dir as the default Saver writes them."""
  state = _tf_internals.CheckpointState()
  rel = lambda p: os.path.relpath(p, model_dir) if not _is_remote(p) else p
  state.model_checkpoint_path = rel(latest)
  for p in others + [latest]:
    state.all_model_checkpoint_paths.append(rel(p))
    state.all_model_checkpoint_timestamps.append(tf.io.gfile.stat(p + '.index').mtime_nsec / 1e9)
  state.last_preserved_timestamp = state.all_model_checkpoint_timestamps[0]
  _tf_internals.atomic_write_string_to_file(os.path.join(model_dir, _STATE_FILE),
                                            text_format.MessageToString(state))


def corrupt_error(checkpoint_path, wrong, intact=None):
  """The CorruptCheckpointError for a damaged `checkpoint_path`, with the way out: the newest
  intact older checkpoint (`intact`, else looked up beside it)."""
  if intact is None:
    step = step_of(checkpoint_path)
    directory = os.path.dirname(checkpoint_path)
    older = [p for p in candidates(directory) if step is not None and step_of(p) < step] \
        if directory else []
    intact = next((p for p in older if problem(p) is None), None)
  way_out = ('pass checkpoint_path=%r (the newest intact one), or delete %s.* so that the '
             'model_dir falls back to it (train() falls back to it by itself)' % (
                 intact, checkpoint_path)) if intact else \
      'restore its files from a backup, or delete %s.* and train again' % checkpoint_path
  return CorruptCheckpointError(
      'Checkpoint %s is damaged: %s. Received: checkpoint_path=%r. Fix: %s.' % (
          checkpoint_path, wrong, checkpoint_path, way_out))


def _state_choice(model_dir, verify, damaged):
  """(state, what is wrong with it, its checkpoint when complete).  Reads the state again when a
  trainer replaced it meanwhile; a damaged checkpoint it names is added to `damaged`."""
  state, state_problem = None, None
  for _ in range(_RETRIES):
    state, state_problem = read_state(model_dir)
    if state is None:
      break
    named = state.model_checkpoint_path
    wrong = problem(named, read_tensors=verify)
    if wrong is None:
      return state, None, named
    again, _ = read_state(model_dir)
    if again is not None and again.model_checkpoint_path != named:
      continue  # a trainer moved on meanwhile: look at its new latest
    if tf.io.gfile.exists(named + '.index'):
      damaged.append((named, wrong))
      state_problem = 'the checkpoint it names, %s, is damaged' % named
    else:
      state_problem = 'the checkpoint it names, %s, is gone' % named
    break
  return state, state_problem, None


def _why_not_the_state(state, state_problem):
  if state is None and state_problem is None:
    return 'there is no `checkpoint` state file'
  if state is None:
    return 'the `checkpoint` state file is unreadable (%s)' % state_problem
  return 'in the `checkpoint` state file, ' + state_problem


def latest(model_dir, repair=False, verify=False):
  """The latest complete checkpoint of `model_dir`, or None when it has none.

  The state file's choice when that checkpoint is complete.  When a trainer replaced it
  between reading the state and checking the files, the state is read again.  When the state
  file is missing or unreadable, or names a checkpoint that is gone, the newest checkpoint on
  disk is taken, with a warning.  A damaged checkpoint (newer than the one that would be taken)
  raises CorruptCheckpointError naming it and the way out, except with `repair` (the trainer,
  holding the model_dir lock): it falls back to the newest complete checkpoint and rewrites the
  state file to name it.  `verify` reads every tensor of the chosen checkpoint (the trainer
  does: resuming from a damaged checkpoint would crash or restart it).
  """
  if not model_dir or not tf.io.gfile.isdir(model_dir):
    return None
  damaged = []  # (prefix, what is wrong), newest first
  state, state_problem, named = _state_choice(model_dir, verify, damaged)
  if named is not None:
    return named
  found = candidates(model_dir)
  if state is None and state_problem is None and not found:
    return None  # a fresh model_dir
  chosen = None
  for prefix in found:
    wrong = problem(prefix, read_tensors=verify)
    if wrong is None:
      chosen = prefix
      break
    if prefix not in [p for p, _ in damaged] and tf.io.gfile.exists(prefix + '.index'):
      damaged.append((prefix, wrong))  # (not one deleted while it was looked at)
  if damaged and not repair:
    raise corrupt_error(damaged[0][0], damaged[0][1], intact=chosen)
  if chosen is None:
    if not found and not damaged:
      _log.warning('%s, and no checkpoint files exist in %s: starting as a fresh model_dir.',
                   'The `checkpoint` state file is unreadable (%s)' % state_problem
                   if state is None else 'In the `checkpoint` state file, ' + state_problem,
                   model_dir)
      return None
    raise CorruptCheckpointError(
        'No intact checkpoint in model_dir %r: %s. Received: damaged checkpoints %s. Restore '
        'them from a backup, or delete them (training then starts again from step 0).' % (
            model_dir, state_problem or 'no state file',
            '; '.join('%s (%s)' % d for d in damaged)))
  _log.warning('Using checkpoint %s, the newest intact one in %s, because %s.%s', chosen,
               model_dir, _why_not_the_state(state, state_problem),
               ' Skipped, damaged: %s.' % '; '.join('%s (%s)' % d for d in damaged)
               if damaged else '')
  if repair:
    older = [p for p in reversed(found) if step_of(p) < step_of(chosen) and
             problem(p) is None]
    _write_state(model_dir, chosen, older)
    _log.warning('Rewrote %s to name %s.', os.path.join(model_dir, _STATE_FILE), chosen)
  return chosen
