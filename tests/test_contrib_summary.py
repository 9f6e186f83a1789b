"""tf.contrib.summary: TF 1.x graph-mode summaries, alone and in a TPUEstimator host_call
written as the TPUEstimator docs showed (own writer, always_record_summaries,
all_summary_ops), on one device and on 2 logical CPU shards."""
import glob
import os

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te
from tpu_estimator.compat.contrib import summary as contrib_summary

v1 = tf.compat.v1


def _events(directory):
  """{tag: {step: value}} from every event file under `directory`."""
  found = {}
  for path in glob.glob(os.path.join(directory, '**', 'events.out.tfevents.*'),
                        recursive=True):
    for event in v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.HasField('simple_value'):
          number = value.simple_value
        elif value.HasField('tensor'):
          number = tf.make_ndarray(value.tensor)
        else:
          number = value.WhichOneof('value')
        found.setdefault(value.tag, {})[event.step] = number
  return found


def test_graph_mode_writer_records_only_inside_a_recording_condition(tmp_path):
  with tf.Graph().as_default():
    step = v1.train.get_or_create_global_step()
    writer = contrib_summary.create_file_writer(str(tmp_path), max_queue=100)
    with writer.as_default():
      contrib_summary.scalar('ignored', 1.0)  # TF 1.x default: do not record
      with contrib_summary.always_record_summaries():
        contrib_summary.scalar('loss', tf.constant(2.5))
        contrib_summary.histogram('weights', tf.constant([1.0, 2.0, 3.0]))
        contrib_summary.image('picture', tf.zeros([1, 4, 4, 3]))
        contrib_summary.text('note', tf.constant('hello'))
      with contrib_summary.record_summaries_every_n_global_steps(2):
        contrib_summary.scalar('every_2', tf.cast(step, tf.float32))
      ops = contrib_summary.all_summary_ops()
      flush = contrib_summary.flush()
    increment = v1.assign_add(step, 1)
    with v1.Session() as session:
      session.run(v1.global_variables_initializer())
      with writer.as_default():
        contrib_summary.initialize(session=session)
      for _ in range(4):
        session.run(ops)
        session.run(increment)
      session.run(flush)
  events = _events(str(tmp_path))
  assert 'ignored' not in events
  assert events['loss'] == {0: 2.5, 1: 2.5, 2: 2.5, 3: 2.5}  # step: the global step
  assert events['every_2'] == {0: 0.0, 2: 2.0}
  assert sorted(events['weights']) == [0, 1, 2, 3]
  assert any(tag.startswith('picture') for tag in events)
  assert events['note'][0] == b'hello'


def test_summary_writer_initializer_op_lists_the_writers_created():
  with tf.Graph().as_default():
    assert contrib_summary.summary_writer_initializer_op() == []
    contrib_summary.create_file_writer('/tmp/unused-contrib-summary')
    assert len(contrib_summary.summary_writer_initializer_op()) == 1
    assert contrib_summary.create_file_writer(None) is not None  # a writer that writes nothing


def _model_fn_with_contrib_host_call(model_dir, iterations):
  base = h.make_model_fn(tpu=True)

  def model_fn(features, labels, mode, params):
    spec = base(features, labels, mode, params)
    if mode != te.ModeKeys.TRAIN:
      return spec

    def host_call_fn(gs, loss):
      with contrib_summary.create_file_writer(model_dir, max_queue=iterations).as_default():
        with contrib_summary.always_record_summaries():
          contrib_summary.scalar('contrib_loss', loss[0], step=gs[0])
          return contrib_summary.all_summary_ops()
    gs = tf.reshape(v1.train.get_global_step(), [1])
    return te.TPUEstimatorSpec(mode, loss=spec.loss, train_op=spec.train_op,
                               host_call=(host_call_fn, [gs, tf.reshape(spec.loss, [1])]))
  return model_fn


@pytest.mark.parametrize('shards', [1, 2])
def test_docs_host_call_pattern_writes_readable_events(tmp_path, shards):
  x, y = h.make_data(64)
  model_dir = str(tmp_path)
  est = te.TPUEstimator(
      _model_fn_with_contrib_host_call(model_dir, 3), use_tpu=True,
      config=h.tpu_config(shards, 3, model_dir=model_dir), train_batch_size=16)
  est.train(h.dataset_input_fn(x, y), steps=7)
  losses = _events(model_dir)['contrib_loss']
  # one value per step, at the step the loss was computed at (as the original wrote them)
  assert sorted(losses) == list(range(7))
  assert all(np.isfinite(v) and v > 0 for v in losses.values())


def _model_fn_with_its_own_writer(logdir):
  """tensorflow/tpu's MnasNet and EfficientNet with `--add_summaries`: model_fn creates a TF2
  writer itself and writes the loss at every step, with no host_call."""

  def model_fn(features, labels, mode, params):
    del params
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=h._logits(features)))
    step = v1.train.get_or_create_global_step()
    with tf.summary.create_file_writer(logdir).as_default(), tf.summary.record_if(True):
      tf.summary.scalar('own_loss', loss, step=step)
    with tf.control_dependencies(v1.summary.all_v2_summary_ops()):
      train_op = te.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.1)).minimize(
          loss, step)
    return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

  return model_fn


@pytest.mark.parametrize('use_tpu', [True, False])
def test_a_writer_model_fn_creates_itself_is_initialised_and_flushed_at_every_call(
    tmp_path, use_tpu):
  """The original's TPU session hook initialised every writer of the graph, host_call or not
  (without it: "Resource ... SummaryWriterInterface does not exist"); a kept graph's session
  stays open, so each call's end flushes them."""
  x, y = h.make_data(64)
  logdir = str(tmp_path / 'own')
  est = te.TPUEstimator(_model_fn_with_its_own_writer(logdir), use_tpu=use_tpu,
                        config=h.tpu_config(1, 2, model_dir=str(tmp_path / 'model')),
                        train_batch_size=16)
  input_fn = h.dataset_input_fn(x, y)
  est.train(input_fn, steps=4)
  assert sorted(h.scalar_summaries(logdir, 'own_loss')) == [0, 1, 2, 3]
  est.train(input_fn, steps=4)  # the graph kept: written before the call returns
  assert sorted(h.scalar_summaries(logdir, 'own_loss')) == list(range(8))
