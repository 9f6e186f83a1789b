"""What TensorBoard shows for a TPUEstimator run: the demo's model (with a host_call) trained a
few steps and evaluated twice; its event files hold loss, global_step/sec, examples/sec, the
host_call scalars and the eval metrics per eval dir, and a real `tensorboard` server on
127.0.0.1 serves the loss series."""
import glob
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import tensorflow as tf
from google.protobuf import text_format

import tpu_estimator as te
from tpu_estimator.hooks import progress
from tpu_estimator.tools import demo

STEPS = 20
EVERY = 5
BIN = os.path.dirname(sys.executable)


def _scalars(logdir):
  """{tag: {step: value}} over the event files directly in `logdir` (TF1 simple values and
  TF2 scalar tensors)."""
  tags = {}
  for path in glob.glob(os.path.join(logdir, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.HasField('simple_value'):
          number = value.simple_value
        elif value.HasField('tensor') and value.tensor.dtype != tf.string.as_datatype_enum:
          number = float(tf.make_ndarray(value.tensor))
        else:
          continue
        tags.setdefault(value.tag, {})[event.step] = number
  return tags


@pytest.fixture(scope='module')
def run(tmp_path_factory):
  model_dir = str(tmp_path_factory.mktemp('tensorboard') / 'model')
  (x_train, y_train), (x_test, y_test) = demo.load_data()
  config = te.RunConfig(model_dir=model_dir, tf_random_seed=0, save_summary_steps=EVERY,
                        log_step_count_steps=EVERY, progress_bar=False,
                        tpu_config=te.TPUConfig(iterations_per_loop=EVERY, num_shards=2))
  est = te.TPUEstimator(model_fn=demo.model_fn, config=config, use_tpu=True,
                        params={'learning_rate': demo.LEARNING_RATE},
                        train_batch_size=demo.TRAIN_BATCH_SIZE,
                        eval_batch_size=demo.EVAL_BATCH_SIZE)
  # What the Estimator wires for a TPUEstimator: examples/sec next to global_step/sec.
  examples = progress.ExamplesPerSecondHook(demo.TRAIN_BATCH_SIZE, every_n_steps=EVERY,
                                            output_dir=model_dir, steps_per_sec=False)
  est.train(demo.train_input_fn(x_train, y_train, 0), steps=STEPS, hooks=[examples])
  metrics = est.evaluate(demo.eval_input_fn(x_test, y_test))
  holdout = est.evaluate(demo.eval_input_fn(x_test[:100], y_test[:100]), name='holdout')
  return {'model_dir': model_dir, 'metrics': metrics, 'holdout': holdout}


def test_event_files(run):
  model_dir = run['model_dir']
  tags = _scalars(model_dir)
  # The training loss (SummarySaverHook): after the first device loop, then on loop
  # boundaries (which ones depends on the hook's step read; see the report on its race).
  assert 5 in tags['loss'] and set(tags['loss']) <= {5, 10, 15, 20}, tags['loss']
  # Steps and examples per second (StepCounterHook, ExamplesPerSecondHook).
  for tag in ('global_step/sec', 'examples/sec'):
    assert tags[tag] and all(0 < s <= STEPS for s in tags[tag]), (tag, tags.get(tag))
    assert all(v > 0 for v in tags[tag].values())
  # The host_call's TF2 summary, one per training step (at the step it was computed at).
  assert sorted(tags['host_call/loss']) == list(range(STEPS))
  # Evaluation metrics, per eval directory, at the checkpoint's step.
  for name, result in (('eval', run['metrics']), ('eval_holdout', run['holdout'])):
    evals = _scalars(os.path.join(model_dir, name))
    assert set(evals) == {'accuracy', 'loss'}, (name, evals)
    for key in ('accuracy', 'loss'):
      assert evals[key] == {STEPS: pytest.approx(float(result[key]), rel=1e-6)}


def test_graph_written_by_the_time_train_returns(run):
  # TensorBoard's graph tab reads the graph event; graph.pbtxt is the text copy.  Both are
  # written while the first loop runs, and complete (no temporary file left) after train().
  model_dir = run['model_dir']
  assert not glob.glob(os.path.join(model_dir, 'graph.pbtxt.tmp*'))
  with open(os.path.join(model_dir, 'graph.pbtxt')) as f:
    graph_def = text_format.Parse(f.read(), tf.compat.v1.GraphDef())
  names = {node.name for node in graph_def.node}
  assert 'global_step' in names and any(name.startswith('conv') for name in names), names
  kinds = set()
  for path in glob.glob(os.path.join(model_dir, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      kinds.add(event.WhichOneof('what'))
  assert {'graph_def', 'meta_graph_def'} <= kinds, kinds


def _free_port():
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _get_json(url):
  with urllib.request.urlopen(url, timeout=5) as response:
    return json.loads(response.read().decode('utf-8'))


def test_tensorboard_serves_the_loss(run, tmp_path):
  model_dir = run['model_dir']
  port = _free_port()
  base = 'http://127.0.0.1:%d' % port
  log = open(tmp_path / 'tensorboard.log', 'w+')
  server = subprocess.Popen(
      [os.path.join(BIN, 'tensorboard'), '--logdir', model_dir, '--host', '127.0.0.1',
       '--port', str(port), '--load_fast', 'false', '--reload_interval', '1'],
      stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
  try:
    tags = {}
    deadline = time.time() + 60
    while time.time() < deadline:
      assert server.poll() is None, 'tensorboard exited: %s' % (tmp_path / 'tensorboard.log')
      try:
        tags = _get_json(base + '/data/plugin/scalars/tags')
      except (urllib.error.URLError, ConnectionError, OSError):
        tags = {}
      if 'loss' in tags.get('.', {}) and 'accuracy' in tags.get('eval', {}):
        break
      time.sleep(0.5)
    log.seek(0)
    assert 'loss' in tags.get('.', {}), (tags, log.read()[-2000:])
    for tag in ('global_step/sec', 'examples/sec', 'host_call/loss'):
      assert tag in tags['.'], tags
    assert {'accuracy', 'loss'} <= set(tags['eval']) and {'accuracy', 'loss'} <= set(
        tags['eval_holdout']), tags

    query = urllib.parse.urlencode({'run': '.', 'tag': 'loss'})
    series = _get_json(base + '/data/plugin/scalars/scalars?' + query)
    expected = _scalars(model_dir)['loss']
    assert [(step, pytest.approx(value, rel=1e-6)) for _, step, value in series] == sorted(
        expected.items())
    query = urllib.parse.urlencode({'run': 'eval', 'tag': 'accuracy'})
    [(_, step, value)] = _get_json(base + '/data/plugin/scalars/scalars?' + query)
    assert (step, value) == (STEPS, pytest.approx(float(run['metrics']['accuracy']), rel=1e-6))
  finally:
    server.terminate()
    try:
      server.wait(timeout=10)
    except subprocess.TimeoutExpired:
      server.kill()
      server.wait()
    log.close()
