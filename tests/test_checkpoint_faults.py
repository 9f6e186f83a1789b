"""Damaged model_dirs never give silently wrong results (issue 16): an unreadable `checkpoint`
state file, truncated or zero-filled checkpoint files, a model whose shapes differ from its
checkpoint, unwritable checkpoint directories, stale snapshots, and a second trainer."""
import errno
import glob
import json
import os
import socket
import subprocess

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te
from tpu_estimator.checkpoints import lock as model_dir_lock
from tpu_estimator.checkpoints import pinning
from tpu_estimator.checkpoints import state as checkpoint_state

v1 = tf.compat.v1
X, Y = h.make_data(96)
CorruptCheckpointError = checkpoint_state.CorruptCheckpointError


def _estimator(model_dir, kind='estimator', num_classes=h.NUM_CLASSES, extra_variable=False):
  def model_fn(features, labels, mode, params):
    del params
    kernel = v1.get_variable('dense/kernel', [h.NUM_FEATURES, num_classes])
    bias = v1.get_variable('dense/bias', [num_classes], initializer=tf.zeros_initializer())
    logits = tf.matmul(features['x'], kernel) + bias
    if extra_variable:
      logits += v1.get_variable('extra', [], initializer=tf.zeros_initializer())
    spec = te.TPUEstimatorSpec if kind == 'tpu' else te.EstimatorSpec
    if mode == te.ModeKeys.PREDICT:
      return spec(mode, predictions={'logits': logits})
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, v1.train.get_global_step()) if mode == te.ModeKeys.TRAIN else None
    return spec(mode, loss=loss, train_op=train_op)

  if kind == 'tpu':
    return te.TPUEstimator(model_fn, use_tpu=True, train_batch_size=16, eval_batch_size=16,
                           predict_batch_size=16,
                           config=h.tpu_config(2, 2, model_dir=str(model_dir),
                                               save_checkpoints_steps=2, keep_checkpoint_max=10))
  return te.Estimator(model_fn, model_dir=str(model_dir), params={'batch_size': 16},
                      config=te.EstimatorRunConfig(save_checkpoints_steps=2,
                                                   keep_checkpoint_max=10))


def _train(est, steps):
  est.train(h.dataset_input_fn(X, Y), steps=steps)
  return est


def _eval_input(params):
  return h.dataset_input_fn(X[:32], Y[:32], repeat=False)(params)


def _receiver():
  return te.export.build_raw_serving_input_receiver_fn({'x': tf.zeros([1, h.NUM_FEATURES])})


def _call(est, what, tmp_path, checkpoint_path=None):
  if what == 'train':
    return est.train(h.dataset_input_fn(X, Y), steps=1)
  if what == 'evaluate':
    return est.evaluate(_eval_input, checkpoint_path=checkpoint_path)
  if what == 'predict':
    return np.stack([r['logits'] for r in est.predict(_eval_input,
                                                        checkpoint_path=checkpoint_path)])
  if what == 'export':
    return est.export_saved_model(str(tmp_path / 'export'), _receiver(),
                                  checkpoint_path=checkpoint_path)
  if what == 'get_variable_value':
    return est.get_variable_value('dense/kernel')
  raise ValueError(what)


class _FirstStep(v1.train.SessionRunHook):

  def after_create_session(self, session, coord):
    self.first = int(session.run(v1.train.get_global_step()))


def _damage(prefix, how):
  """Truncates or zero-fills a checkpoint's data file, or zero-fills its index."""
  path = prefix + '.index' if how == 'zero_index' else glob.glob(prefix + '.data-*')[0]
  with open(path, 'rb') as f:
    data = f.read()
  with open(path, 'wb') as f:
    f.write(data[:len(data) // 2] if how == 'truncate' else b'\0' * len(data))


def _state(model_dir):
  return checkpoint_state.read_state(str(model_dir))[0]


# ---------------------------------------------------------------------------------------------
# The `checkpoint` state file

@pytest.mark.parametrize('content', ['garbage {{{', '', 'model_checkpoint_path: "model.ckpt-99"'])
def test_unreadable_state_file_resumes_from_newest_checkpoint_never_from_zero(tmp_path,
                                                                             content):
  """A torn, empty or wrong state file: train resumes from the newest complete checkpoint,
  rewrites the state file and saves on; predict serves the trained weights."""
  est = _train(_estimator(tmp_path), 4)
  trained = est.get_variable_value('dense/kernel')
  with open(str(tmp_path / 'checkpoint'), 'w') as f:
    f.write(content)
  # Readers use the newest checkpoint (there is nothing newer).
  assert est.latest_checkpoint() == str(tmp_path / 'model.ckpt-4')
  np.testing.assert_allclose(est.get_variable_value('dense/kernel'), trained)
  first = _FirstStep()
  est.train(h.dataset_input_fn(X, Y), steps=2, hooks=[first])
  assert first.first == 4
  assert _state(tmp_path).model_checkpoint_path == str(tmp_path / 'model.ckpt-6')
  assert est.get_variable_value('global_step') == 6
  assert [os.path.basename(p) for p in _state(tmp_path).all_model_checkpoint_paths] == [
      'model.ckpt-%d' % s for s in (0, 2, 4, 6)]


def test_missing_state_file_beside_checkpoints_is_recovered(tmp_path):
  est = _train(_estimator(tmp_path), 4)
  os.remove(str(tmp_path / 'checkpoint'))
  first = _FirstStep()
  est.train(h.dataset_input_fn(X, Y), steps=1, hooks=[first])
  assert first.first == 4


def test_state_naming_a_deleted_checkpoint_takes_the_newest_on_disk(tmp_path):
  """The moment an evaluator read while a trainer rotated checkpoints (keep 1): the state file
  still names the checkpoint just deleted, the next one exists.  Used to raise
  NoCheckpointError in evaluate."""
  est = _train(_estimator(tmp_path), 4)
  state = _state(tmp_path)
  for path in glob.glob(str(tmp_path / 'model.ckpt-4.*')):
    os.remove(path)
  with open(str(tmp_path / 'checkpoint'), 'w') as f:
    f.write('model_checkpoint_path: "model.ckpt-4"\n')
  del state
  assert est.evaluate(_eval_input)['global_step'] == 2


def test_all_checkpoints_damaged_refuses_to_restart_from_zero(tmp_path):
  est = _train(_estimator(tmp_path), 2)
  for prefix in ('model.ckpt-0', 'model.ckpt-2'):
    _damage(str(tmp_path / prefix), 'zero_index')
  with pytest.raises(CorruptCheckpointError, match=r'No intact checkpoint.*model\.ckpt-2'):
    est.train(h.dataset_input_fn(X, Y), steps=1)
  assert not glob.glob(str(tmp_path / 'model.ckpt-1.*'))


# ---------------------------------------------------------------------------------------------
# Damaged checkpoint files

@pytest.mark.parametrize('how', ['truncate', 'zero_fill', 'zero_index'])
@pytest.mark.parametrize('what', ['evaluate', 'predict', 'export', 'get_variable_value'])
def test_damaged_latest_checkpoint_is_a_clear_error_for_readers(tmp_path, how, what):
  est = _train(_estimator(tmp_path), 4)
  latest = str(tmp_path / 'model.ckpt-4')
  _damage(latest, how)
  with pytest.raises(CorruptCheckpointError) as info:
    _call(est, what, tmp_path)
  message = str(info.value)
  assert 'Checkpoint %s is damaged' % latest in message, message
  assert 'model.ckpt-2' in message and 'delete' in message, message  # the way out
  assert '.pinned' not in message, message
  assert not glob.glob(str(tmp_path / '.pinned-*'))


@pytest.mark.parametrize('what', ['evaluate', 'predict', 'export'])
def test_damaged_checkpoint_path_is_a_clear_error(tmp_path, what):
  est = _train(_estimator(tmp_path), 4)
  _damage(str(tmp_path / 'model.ckpt-2'), 'zero_fill')
  with pytest.raises(CorruptCheckpointError, match=r'model\.ckpt-2 is damaged.*model\.ckpt-0'):
    _call(est, what, tmp_path, checkpoint_path=str(tmp_path / 'model.ckpt-2'))
  _call(est, what, tmp_path, checkpoint_path=str(tmp_path / 'model.ckpt-4'))  # others work


def test_checkpoint_without_its_data_file_is_a_clear_error(tmp_path):
  est = _train(_estimator(tmp_path), 4)
  for path in glob.glob(str(tmp_path / 'model.ckpt-2.data-*')):
    os.remove(path)
  with pytest.raises(CorruptCheckpointError, match=r'model\.ckpt-2 is damaged: data shards are '
                     r'missing \(found none\)'):
    est.evaluate(_eval_input, checkpoint_path=str(tmp_path / 'model.ckpt-2'))
  assert est.evaluate(_eval_input)['global_step'] == 4  # its neighbours are intact


@pytest.mark.parametrize('how', ['truncate', 'zero_fill'])
def test_train_falls_back_past_a_damaged_latest_checkpoint(tmp_path, how, caplog):
  """Decision: train resumes from the newest intact checkpoint (warning), names it in the
  state file, and replaces the damaged one when it reaches that step again."""
  est = _train(_estimator(tmp_path), 4)
  _damage(str(tmp_path / 'model.ckpt-4'), how)
  first = _FirstStep()
  est.train(h.dataset_input_fn(X, Y), steps=3, hooks=[first])
  assert first.first == 2
  assert 'model.ckpt-4' in caplog.text and 'damaged' in caplog.text
  assert checkpoint_state.problem(str(tmp_path / 'model.ckpt-4'), read_tensors=True) is None
  assert est.latest_checkpoint() == str(tmp_path / 'model.ckpt-5')
  assert est.get_variable_value('global_step') == 5


# ---------------------------------------------------------------------------------------------
# A model whose shapes differ from its checkpoint

@pytest.mark.parametrize('kind', ['estimator', 'tpu'])
@pytest.mark.parametrize('what', ['train', 'evaluate', 'predict', 'export'])
def test_shape_mismatched_restore_raises(tmp_path, kind, what):
  """3 classes saved, 5 built: restoring used to succeed (one device), and predict then
  returned 3-wide logits from a model built for 5 classes."""
  _train(_estimator(tmp_path, kind), 2)
  est = _estimator(tmp_path, kind, num_classes=5)
  with pytest.raises(ValueError) as info:
    _call(est, what, tmp_path)
  message = str(info.value)
  for part in ("'dense/kernel': [4, 5] in the model, [4, 3] in the checkpoint",
               "'dense/bias': [5] in the model, [3] in the checkpoint",
               str(tmp_path / 'model.ckpt-2')):
    assert part in message, message
  assert '.pinned' not in message


def test_missing_variable_error_names_the_real_checkpoint(tmp_path):
  _train(_estimator(tmp_path), 2)
  est = _estimator(tmp_path, extra_variable=True)
  with pytest.raises(tf.errors.NotFoundError) as info:
    est.evaluate(_eval_input)
  assert str(tmp_path / 'model.ckpt-2') in str(info.value)
  assert '.pinned' not in str(info.value)


# ---------------------------------------------------------------------------------------------
# Pinned snapshots

def test_pin_in_unwritable_directory_restores_in_place(tmp_path, monkeypatch):
  """A checkpoint directory that cannot be written (read-only mount, another user's): evaluate
  used to fail with OSError creating its `.pinned-*` snapshot."""
  est = _train(_estimator(tmp_path), 2)
  real_mkdtemp = pinning.tempfile.mkdtemp

  def read_only(*args, **kwargs):
    if kwargs.get('dir') == str(tmp_path):
      raise OSError(errno.EROFS, 'Read-only file system', str(tmp_path))
    return real_mkdtemp(*args, **kwargs)

  monkeypatch.setattr(pinning.tempfile, 'mkdtemp', read_only)
  assert est.evaluate(_eval_input)['global_step'] == 2
  assert len(list(est.predict(_eval_input))) == 32
  assert est.export_saved_model(str(tmp_path / 'export'), _receiver())


def test_stale_pinned_snapshots_of_dead_processes_are_swept(tmp_path):
  est = _train(_estimator(tmp_path), 2)
  dead = subprocess.Popen(['true'])
  dead.wait()
  host = socket.gethostname()
  stale = tmp_path / ('.pinned-%s-%d-abc123' % (host, dead.pid))
  alive = tmp_path / ('.pinned-%s-%d-def456' % (host, os.getppid()))
  other_host = tmp_path / ('.pinned-%s-%d-ghi789' % ('elsewhere', dead.pid))
  for d in (stale, alive, other_host):
    d.mkdir()
    (d / 'model.ckpt-2.index').write_bytes(b'x')
  est.evaluate(_eval_input)
  assert not stale.exists()
  assert alive.exists() and other_host.exists()  # a live owner's, and another host's


# ---------------------------------------------------------------------------------------------
# One trainer per model_dir

def test_second_trainer_is_refused_while_the_first_holds_the_model_dir(tmp_path):
  est = _train(_estimator(tmp_path), 2)
  with model_dir_lock.held(str(tmp_path)):
    with pytest.raises(model_dir_lock.ModelDirLockedError) as info:
      est.train(h.dataset_input_fn(X, Y), steps=1)
  message = str(info.value)
  assert 'pid %d' % os.getpid() in message and socket.gethostname() in message, message
  assert model_dir_lock.FORCE_ENV in message
  assert est.get_variable_value('global_step') == 2
  est.train(h.dataset_input_fn(X, Y), steps=1)  # released
  assert not os.path.exists(str(tmp_path / model_dir_lock.LOCK_FILE))


def test_stale_lock_file_of_a_dead_trainer_is_taken_over(tmp_path):
  dead = subprocess.Popen(['true'])
  dead.wait()
  tmp_path.mkdir(exist_ok=True)
  with open(str(tmp_path / model_dir_lock.LOCK_FILE), 'w') as f:
    json.dump({'pid': dead.pid, 'host': socket.gethostname(), 'started': 'then'}, f)
  _train(_estimator(tmp_path), 2)


def test_forced_second_trainer_never_moves_the_state_back(tmp_path, monkeypatch):
  """Forced (TPU_ESTIMATOR_SHARED_MODEL_DIR=1) onto a model_dir whose other trainer is ahead:
  its saves never make the state file name an older step (it went 60 -> 45)."""
  est = _train(_estimator(tmp_path), 2)
  monkeypatch.setenv(model_dir_lock.FORCE_ENV, '1')

  class OtherTrainerAhead(v1.train.SessionRunHook):

    def after_create_session(self, session, coord):
      for path in glob.glob(str(tmp_path / 'model.ckpt-2.*')):
        dst = path.replace('model.ckpt-2.', 'model.ckpt-60.')
        with open(path, 'rb') as src, open(dst, 'wb') as out:
          out.write(src.read())
      with open(str(tmp_path / 'checkpoint'), 'w') as f:
        f.write('model_checkpoint_path: "model.ckpt-60"\n')

  with model_dir_lock.held(str(tmp_path)):
    est.train(h.dataset_input_fn(X, Y), steps=3, hooks=[OtherTrainerAhead()])
  assert os.path.exists(str(tmp_path / 'model.ckpt-5.index'))  # its checkpoints are written
  assert _state(tmp_path).model_checkpoint_path == str(tmp_path / 'model.ckpt-60')


def _partitioned_model_fn(features, labels, mode):
  """A kernel in 2 partitions trained by Adagrad, inside the kernel's variable scope as the
  original's canned estimators did: each part's slot is saved under a key with the whole
  kernel's shape that holds only that part (`kernel/t_0/Adagrad`, `kernel/t_1/Adagrad`)."""
  v1 = tf.compat.v1
  with v1.variable_scope('dnn', partitioner=v1.fixed_size_partitioner(2)):
    kernel = v1.get_variable('kernel', [h.NUM_FEATURES, h.NUM_CLASSES])
  logits = tf.matmul(features['x'], kernel)
  if mode == te.ModeKeys.PREDICT:
    return te.EstimatorSpec(mode, predictions={'logits': logits})
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits))
  with v1.variable_scope('dnn'):
    train_op = v1.train.AdagradOptimizer(0.1).minimize(loss, v1.train.get_global_step())
  return te.EstimatorSpec(mode, loss=loss, train_op=train_op)


def test_partitioned_variables_slots_are_not_taken_for_damage(tmp_path):
  est = te.Estimator(_partitioned_model_fn, model_dir=str(tmp_path))
  est.train(h.dataset_input_fn(X, Y, batch_size=16), steps=3)
  latest = est.latest_checkpoint()
  assert 'dnn/kernel/t_1/Adagrad' in est.get_variable_names()
  assert checkpoint_state.problem(latest) is None
  assert checkpoint_state.problem(latest, read_tensors=True) is None
  est.train(h.dataset_input_fn(X, Y, batch_size=16), steps=2)  # resumes, not "truncated"
  assert est.get_variable_value('global_step') == 5
  assert 'loss' in est.evaluate(h.dataset_input_fn(X, Y, batch_size=16, repeat=False))
  assert len(list(est.predict(h.dataset_input_fn(X, Y, batch_size=16, repeat=False)))) == 96
