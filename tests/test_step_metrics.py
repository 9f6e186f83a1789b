"""A sharded evaluation updates `metric_fn` once per step, over that step's global batch, as
the original's TPU host did from its outfeed (core/step_metrics.py): a per-batch statistic
equals one device's, whatever `iterations_per_loop` groups into one `session.run`; a step that
ran out of input updates nothing; a `drop_remainder` input gives `metric_fn` the global batch's
static size (tensorflow/tpu's UNet 3D counts with `tf.size(..., out_type=tf.float32)`)."""
import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te

v1 = tf.compat.v1
ROWS, BATCH = 80, 8  # 10 global batches: loops of 4 group them 4, 4, 2


def _metric_fn(labels, x):
  """Per-batch statistics: their mean over batches is not a mean over rows."""
  return {
      'batch_max_label': v1.metrics.mean(tf.reduce_max(labels, keepdims=True)),
      'batch_mean_x': v1.metrics.mean(tf.reduce_mean(x, keepdims=True)),
      'rows_counted': v1.metrics.mean(tf.size(labels, out_type=tf.float32) if
                                      tf.compat.dimension_value(labels.shape[0]) is not None
                                      else tf.cast(tf.size(labels), tf.float32)),
  }


def _model_fn(seen_shapes):
  inner = h.make_model_fn(tpu=True)

  def model_fn(features, labels, mode, params):
    spec = inner(features, labels, mode, params)
    if mode != te.ModeKeys.EVAL:
      return spec

    def metric_fn(labels, x):
      seen_shapes.append(labels.shape.as_list())
      return _metric_fn(labels, x)

    return te.TPUEstimatorSpec(mode, loss=spec.loss, eval_metrics=(
        metric_fn, [labels, tf.reduce_sum(features['x'], axis=1)]))

  return model_fn


def _expected(x, y, batch):
  batches = [slice(i, i + batch) for i in range(0, len(y), batch)]
  return {'batch_max_label': np.mean([y[b].max() for b in batches]),
          'batch_mean_x': np.mean([x[b].sum(axis=1).mean() for b in batches]),
          'rows_counted': np.mean([len(y[b]) for b in batches])}


@pytest.mark.parametrize('shards,xla', [(1, None), (2, None), (2, True)])
def test_per_batch_metrics_equal_one_devices_over_grouped_steps(tmp_path, shards, xla):
  x, y = h.make_data(ROWS - 4)  # the last global batch is short: 4 rows
  seen = []
  est = te.TPUEstimator(_model_fn(seen), config=h.tpu_config(shards, 4, model_dir=str(tmp_path),
                                                             xla=xla),
                        train_batch_size=BATCH, eval_batch_size=BATCH)
  est.train(h.dataset_input_fn(x, y), steps=1)
  got = est.evaluate(h.dataset_input_fn(x, y, repeat=False))
  one_device = te.TPUEstimator(_model_fn([]), config=h.tpu_config(model_dir=str(tmp_path)),
                               use_tpu=False, train_batch_size=BATCH,
                               eval_batch_size=BATCH).evaluate(
                                   h.dataset_input_fn(x, y, repeat=False))
  for key, value in _expected(x, y, BATCH).items():
    np.testing.assert_allclose(got[key], value, rtol=1e-5, err_msg=key)
    np.testing.assert_allclose(one_device[key], value, rtol=1e-5, err_msg=key)
  np.testing.assert_allclose(got['loss'], one_device['loss'], rtol=1e-5)
  assert got['global_step'] == 1


@pytest.mark.parametrize('shards', [1, 2])
def test_drop_remainder_input_gives_metric_fn_the_global_batch_statically(tmp_path, shards):
  x, y = h.make_data(ROWS)
  seen = []
  est = te.TPUEstimator(_model_fn(seen), config=h.tpu_config(shards, 4, model_dir=str(tmp_path)),
                        train_batch_size=BATCH, eval_batch_size=BATCH)
  est.train(h.dataset_input_fn(x, y), steps=1)
  # steps past the end of the data: the 11th and 12th steps get no rows and update nothing.
  got = est.evaluate(h.dataset_input_fn(x, y, repeat=False, drop_remainder=True), steps=12)
  assert seen and all(shape == [BATCH] for shape in seen)
  for key, value in _expected(x, y, BATCH).items():
    np.testing.assert_allclose(got[key], value, rtol=1e-5, err_msg=key)


@pytest.fixture
def v1_shapes():
  """Shapes of `tf.compat.v1.Dimension`s, as a TF1 program's `disable_v2_behavior()` makes."""
  v1.disable_v2_tensorshape()
  try:
    yield
  finally:
    v1.enable_v2_tensorshape()


def _one_element_a_replica(tmp_path, input_mode, metric_fn_of):
  """An estimator on 2 shards with `input_mode`, trained a step, and its evaluate(x, y) over
  batches of 4 rows a replica, shard i reading elements i, i + 2, ... with PER_SHARD_V1."""
  est = te.TPUEstimator(metric_fn_of, config=h.tpu_config(
      2, 4, model_dir=str(tmp_path), per_host_input_for_training=input_mode),
                        train_batch_size=BATCH, eval_batch_size=BATCH)
  est.train(h.dataset_input_fn(*h.make_data(16)), steps=1)

  def evaluate(x, y):
    def input_fn(params):
      dataset = h.dataset_input_fn(x, y, repeat=False, drop_remainder=True)(params)
      if input_mode == te.InputPipelineConfig.PER_SHARD_V1:
        _, shard, shards, fed = params['context'].current_input_fn_deployment()
        assert fed == 1  # one shard's input per call
        dataset = dataset.shard(shards, shard)
      return dataset
    return est.evaluate(input_fn)

  return evaluate


@pytest.mark.parametrize('input_mode,shapes', [
    (te.InputPipelineConfig.PER_HOST_V2, 'v2'), (te.InputPipelineConfig.PER_SHARD_V1, 'v2'),
    (te.InputPipelineConfig.PER_HOST_V2, 'v1')])
def test_one_element_a_replica_gives_metric_fn_static_shapes_in_whole_steps(
    tmp_path, request, input_mode, shapes):
  # 19 elements of 4 rows over 2 shards: 9 whole steps of 8 rows, whose metric_fn sees the
  # length statically, as on a TPU; then one of 4, where one replica has rows.
  if shapes == 'v1':  # google-research/simclr's evaluation stopped on Dimensions
    request.getfixturevalue('v1_shapes')
  x, y = h.make_data(ROWS - 4)
  seen = []
  got = _one_element_a_replica(tmp_path, input_mode, _model_fn(seen))(x, y)
  assert [BATCH] in seen and all(shape in ([BATCH], [None]) for shape in seen), seen
  for key, value in _expected(x, y, BATCH).items():
    np.testing.assert_allclose(got[key], value, rtol=1e-5, err_msg=key)


def _global_batch_model_fn(features, labels, mode, params):
  """UNet 3D's way: metric_fn reshapes to the global batch and counts with tf.size(...,
  out_type=tf.float32), which builds only for a static shape."""
  spec = h.make_model_fn(tpu=True)(features, labels, mode, params)
  if mode != te.ModeKeys.EVAL:
    return spec

  def metric_fn(labels):
    rows = tf.reshape(tf.cast(labels, tf.float32), [BATCH, -1])
    return {'per_row': v1.metrics.mean(tf.size(rows, out_type=tf.float32) / BATCH),
            'label_mean': v1.metrics.mean(rows)}

  return te.TPUEstimatorSpec(mode, loss=spec.loss, eval_metrics=(metric_fn, [labels]))


def test_a_metric_fn_for_the_global_batch_runs_whole_steps_and_refuses_a_short_one(tmp_path):
  evaluate = _one_element_a_replica(tmp_path, te.InputPipelineConfig.PER_HOST_V2,
                                    _global_batch_model_fn)
  x, y = h.make_data(ROWS)  # 20 elements: 10 whole steps
  got = evaluate(x, y)
  assert got['per_row'] == 1.0
  np.testing.assert_allclose(got['label_mean'], y.mean(), rtol=1e-5)
  with pytest.raises(tf.errors.InvalidArgumentError, match='whole steps'):
    evaluate(*h.make_data(ROWS - 4))  # the last step has rows on one shard


def test_py_func_metric_sees_each_step_once(tmp_path):
  """A metric whose update is a Python function (tensorflow/tpu RetinaNet's COCO evaluator
  accumulates detections with `tf.py_func`) runs inside the host loop: once per step with
  rows, each time on that step's rows."""
  x, y = h.make_data(ROWS - 4)
  calls = []

  def model_fn(features, labels, mode, params):
    spec = h.make_model_fn(tpu=True)(features, labels, mode, params)
    if mode != te.ModeKeys.EVAL:
      return spec

    def metric_fn(labels):
      def record(values):
        calls.append(len(values))
        return np.int64(len(values))
      update = v1.py_func(record, [labels], tf.int64)
      return {'rows_seen': (tf.constant(0.0), update)}

    return te.TPUEstimatorSpec(mode, loss=spec.loss, eval_metrics=(metric_fn, [labels]))

  est = te.TPUEstimator(model_fn, config=h.tpu_config(2, 4, model_dir=str(tmp_path)),
                        train_batch_size=BATCH, eval_batch_size=BATCH)
  est.train(h.dataset_input_fn(x, y), steps=1)
  est.evaluate(h.dataset_input_fn(x, y, repeat=False), steps=12)
  assert calls == [BATCH] * 9 + [4]


class _PythonSum:
  """A metric whose state is a Python list (as EfficientDet's COCO metric keeps detections)."""

  def __init__(self):
    self.rows = []

  def update(self, values):
    self.rows.extend(values.tolist())
    return np.int64(0)

  def result(self):
    return np.float32(sum(self.rows) if self.rows else -1.)


@pytest.mark.parametrize('shards', [1, 2])
def test_a_metric_fn_with_python_state_gets_every_rows_update(tmp_path, shards):
  """A metric_fn keeping its state in a Python object it makes (tf.numpy_function): its
  values read the object every update reached, over grouped steps and a short last batch
  (ours called metric_fn twice: the values read an object no update had reached, silently).
  Called again, evaluate() starts from a new object (the graph is not kept)."""
  x, y = h.make_data(ROWS - 4)
  inner = h.make_model_fn(tpu=True)

  def metric_fn(labels):
    metric = _PythonSum()
    update = tf.numpy_function(metric.update, [labels], tf.int64)
    return {'python_sum': (tf.numpy_function(metric.result, [], tf.float32), update),
            'mean': v1.metrics.mean(labels)}

  def model_fn(features, labels, mode, params):
    spec = inner(features, labels, mode, params)
    if mode != te.ModeKeys.EVAL:
      return spec
    return te.TPUEstimatorSpec(mode, loss=spec.loss, eval_metrics=(metric_fn, [labels]))

  est = te.TPUEstimator(model_fn, config=h.tpu_config(shards, 4, model_dir=str(tmp_path)),
                        train_batch_size=BATCH, eval_batch_size=BATCH)
  est.train(h.dataset_input_fn(x, y), steps=1)
  for _ in range(2):
    result = est.evaluate(h.dataset_input_fn(x, y, repeat=False))
    np.testing.assert_allclose(result['python_sum'], y.sum(), rtol=1e-6)
    np.testing.assert_allclose(result['mean'], y.mean(), rtol=1e-6)
