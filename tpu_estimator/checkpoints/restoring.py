"""Restoring and reading checkpoints: which checkpoint a call restores (`resolve_checkpoint`), its
global step, shape checks before a restore, restore errors that name the checkpoint, and reading
variables (`get_variable_names`/`get_variable_value`)."""
import contextlib
import os

import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator.checkpoints import state as checkpoint_state
from tpu_estimator import errors

_v1 = tf.compat.v1
_log = tf.get_logger()


def latest_checkpoint(model_dir, repair=False, verify=False):
  """The latest complete checkpoint (see `checkpoint_state.latest`), or None."""
  return checkpoint_state.latest(model_dir, repair=repair, verify=verify)


def global_step_of(checkpoint_path):
  """The global step stored in a checkpoint (0 when it has none)."""
  if not checkpoint_path:
    return 0
  try:
    return int(tf.train.load_variable(checkpoint_path, _v1.GraphKeys.GLOBAL_STEP))
  except (tf.errors.NotFoundError, ValueError):
    return 0


def resolve_checkpoint(model_dir, checkpoint_path, what):
  """The checkpoint `evaluate`/`predict` restore: the given one, else the latest."""
  if checkpoint_path:
    if os.path.isdir(checkpoint_path):
      found = checkpoint_state.latest(checkpoint_path)
      if not found:
        raise errors.NoCheckpointError(
            'No checkpoint found in directory. Received: checkpoint_path=%r. Pass a '
            'checkpoint prefix or a directory with a `checkpoint` file.' % checkpoint_path)
      return found
    if not tf.io.gfile.exists(checkpoint_path + '.index'):
      raise errors.NoCheckpointError(
          'Checkpoint not found. Received: checkpoint_path=%r. Pass an existing checkpoint '
          'prefix such as model_dir/model.ckpt-100.' % checkpoint_path)
    wrong = checkpoint_state.problem(checkpoint_path)
    if wrong is not None:
      raise checkpoint_state.corrupt_error(checkpoint_path, wrong)
    return checkpoint_path
  found = latest_checkpoint(model_dir)
  if not found:
    raise errors.NoCheckpointError(
        'Cannot %s: no trained model in model_dir. Received: model_dir=%r, which has no '
        'checkpoint. Train first, or pass checkpoint_path=.' % (what, model_dir))
  return found


def check_shapes(checkpoint_path, reported_path=None, saver=None):
  """Raises a ValueError naming the variable, both shapes and the checkpoint when a variable
  the graph's Saver restores has another shape in the checkpoint.  (Restoring a resource
  variable assigns without a shape check: the model then silently runs with the saved shape.)"""
  savers = [saver] if saver is not None else _v1.get_collection(_v1.GraphKeys.SAVERS)
  var_list = _tf_internals.saver_var_list(savers[0]) if savers else None
  if var_list is None:
    return
  try:
    saved = tf.train.load_checkpoint(checkpoint_path).get_variable_to_shape_map()
  except (tf.errors.OpError, ValueError):
    return  # unreadable: the restore reports it
  items = var_list.items() if isinstance(var_list, dict) else [(None, v) for v in var_list]
  wrong = []
  for key, var in items:
    info = _tf_internals.save_slice_info(var)
    try:
      if key is None:
        # The name, not `var.op.name`: a replica-synchronised variable's `op` (ON_READ, such
        # as batch norm's moving statistics over several replicas) builds a cross-replica read,
        # and in a graph kept for a later call, finalized, that raised.
        key = info.full_name if info else var.name.split(':')[0]
      shape = tf.TensorShape(info.full_shape) if info else tf.TensorShape(var.shape)
    except (AttributeError, TypeError, ValueError):
      continue  # a SaveableObject or a partitioned variable: its own restore checks it
    if key not in saved or not shape.is_fully_defined():
      continue
    if shape.as_list() != list(saved[key]):
      wrong.append('%r: %s in the model, %s in the checkpoint' % (key, shape.as_list(),
                                                                  list(saved[key])))
  if wrong:
    raise ValueError(
        'The model does not match checkpoint %s: variable %s. Received: a model_fn building '
        'different shapes than the one that wrote the checkpoint. Build the model with the '
        'shapes it was trained with (e.g. the same number of classes), or train it in a new '
        'model_dir (warm start with WarmStartSettings(vars_to_warm_start=...) to reuse the '
        'matching variables).' % (reported_path or checkpoint_path, '; '.join(wrong)))


@contextlib.contextmanager
def restore_errors(checkpoint_path, reported_path=None):
  """Errors raised while restoring `checkpoint_path` (a pinned snapshot, perhaps) name
  `reported_path`, the checkpoint the user knows; a damaged checkpoint's become a
  CorruptCheckpointError saying what is wrong and the way out."""
  reported_path = reported_path or checkpoint_path
  try:
    yield
  except (tf.errors.OpError, IndexError) as e:
    if not checkpoint_path:
      raise
    wrong = checkpoint_state.problem(checkpoint_path, read_tensors=True)
    if wrong is not None:
      raise checkpoint_state.corrupt_error(
          reported_path, wrong.replace(checkpoint_path, reported_path)) from e
    if not isinstance(e, tf.errors.OpError):
      raise
    message = e.message.replace(checkpoint_path, reported_path)
    if reported_path not in message:
      message = 'Restoring checkpoint %s failed: %s' % (reported_path, message)
    raise type(e)(e.node_def, e.op, message) from e


def variable_names(model_dir):
  ckpt = resolve_checkpoint(model_dir, None, 'list variables')
  with restore_errors(ckpt):
    return [name for name, _ in tf.train.list_variables(ckpt)]


def variable_value(model_dir, name):
  ckpt = resolve_checkpoint(model_dir, None, 'read a variable')
  with restore_errors(ckpt):
    reader = tf.train.load_checkpoint(ckpt)
  if not reader.has_tensor(name):
    raise errors.value_error(
        'Variable %r is not in checkpoint %s.' % (name, ckpt),
        'Pick one of get_variable_names(): %s.' % sorted(reader.get_variable_to_shape_map())[:20],
        name=name)
  try:
    return reader.get_tensor(name)
  except (tf.errors.OpError, IndexError) as e:
    raise checkpoint_state.corrupt_error(ckpt, 'reading tensor %r failed (%s)' % (
        name, str(e).splitlines()[0][:200])) from e
