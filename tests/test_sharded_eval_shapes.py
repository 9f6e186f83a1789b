"""Sharded evaluation and prediction with tensors that are not simply [batch, ...]:
- `eval_metrics` tensors whose first axis is not the batch (BERT/ALBERT pretraining's masked-LM
  tensors, [batch * max_predictions_per_seq]) are concatenated whole over the shards, as the
  original did, while batch-major ones stay exact over a short final batch;
- images fed batch-last ([H, W, C, N], tensorflow/tpu resnet's `--transpose_input`) keep
  their static shapes in evaluate/predict, including on the stand-in batch a replica gets
  when the data runs out, so a model_fn that reads them (a pool size) builds.
Each sharded result is compared with `use_tpu=False` on one device (the original's graph)
and with numpy."""
import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te

v1 = tf.compat.v1
SEQ, PREDS, VOCAB = 6, 3, 5  # tokens per example, masked positions per example, vocabulary
_RNG = np.random.RandomState(11)
EMBEDDINGS, OUT = _RNG.randn(VOCAB, 4), _RNG.randn(4, VOCAB)

# ---------------------------------------------------------------------------------------------
# eval_metrics tensors of [batch * PREDS] rows (BERT's masked-LM pattern)


def _lm_data(n):
  rng = np.random.RandomState(3)
  tokens = rng.randint(0, VOCAB, (n, SEQ)).astype(np.int32)
  positions = np.stack([rng.choice(SEQ, PREDS, replace=False) for _ in range(n)]).astype(
      np.int32)
  weights = (rng.rand(n, PREDS) > 0.3).astype(np.float32)
  next_sentence = rng.randint(0, 2, n).astype(np.int32)
  return {'tokens': tokens, 'positions': positions, 'weights': weights,
          'next_sentence': next_sentence}


def _lm_model_fn(features, labels, mode, params):
  del labels, params
  embeddings = v1.get_variable('embeddings', [VOCAB, 4],
                               initializer=tf.constant_initializer(EMBEDDINGS))
  out = v1.get_variable('out', [4, VOCAB], initializer=tf.constant_initializer(OUT))
  hidden = tf.nn.embedding_lookup(embeddings, features['tokens'])         # [b, SEQ, 4]
  picked = tf.gather(hidden, features['positions'], batch_dims=1)         # [b, PREDS, 4]
  logits = tf.matmul(tf.reshape(picked, [-1, 4]), out)                    # [b * PREDS, VOCAB]
  targets = tf.reshape(tf.gather(features['tokens'], features['positions'], batch_dims=1),
                       [-1])
  weights = tf.reshape(features['weights'], [-1])
  per_position = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)
  loss = tf.reduce_sum(per_position * weights) / (tf.reduce_sum(weights) + 1e-5)
  ns_logits = tf.reduce_mean(hidden, [1, 2])                              # [b]

  def metric_fn(lm_loss, lm_logits, lm_targets, lm_weights, ns_logits, ns_labels):
    # As run_pretraining.py: the masked-LM tensors are [batch * PREDS] (reshaped to [-1]).
    predicted = tf.argmax(tf.reshape(lm_logits, [-1, VOCAB]), axis=-1, output_type=tf.int32)
    return {
        'lm_accuracy': v1.metrics.accuracy(tf.reshape(lm_targets, [-1]), predicted,
                                           weights=tf.reshape(lm_weights, [-1])),
        'lm_loss': v1.metrics.mean(tf.reshape(lm_loss, [-1]),
                                   weights=tf.reshape(lm_weights, [-1])),
        'ns_mean': v1.metrics.mean(ns_logits),
        'ns_label_mean': v1.metrics.mean(tf.cast(ns_labels, tf.float32)),
    }

  eval_metrics = (metric_fn, [per_position, logits, targets, weights, ns_logits,
                              features['next_sentence']])
  return te.TPUEstimatorSpec(mode, loss=loss, train_op=_no_update(mode),
                             eval_metrics=eval_metrics)


def _no_update(mode):
  """A train_op that only counts the step: the checkpoint holds the initial weights, which
  the numpy expectations use."""
  if mode != te.ModeKeys.TRAIN:
    return None
  return v1.assign_add(v1.train.get_global_step(), 1)


def _checkpoint(model_dir, model_fn, input_fn):
  """A checkpoint of the initial weights at step 1, written on one device."""
  est = te.TPUEstimator(model_fn, config=te.RunConfig(model_dir=str(model_dir)),
                        use_tpu=False, train_batch_size=8)
  est.train(input_fn, steps=1)
  return est.latest_checkpoint()


def _lm_numpy(data):
  """What the metrics are over the whole data set, computed in numpy."""
  hidden = EMBEDDINGS[data['tokens']]
  rows = np.arange(len(hidden))[:, None]
  picked = hidden[rows, data['positions']].reshape(-1, 4)
  logits = picked @ OUT
  targets = data['tokens'][rows, data['positions']].reshape(-1)
  weights = data['weights'].reshape(-1)
  shifted = logits - logits.max(1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
  per_position = -log_probs[np.arange(len(targets)), targets]
  return {
      'lm_accuracy': np.sum((logits.argmax(1) == targets) * weights) / weights.sum(),
      'lm_loss': np.sum(per_position * weights) / weights.sum(),
      'ns_mean': hidden.mean(axis=(1, 2)).mean(),
      'ns_label_mean': data['next_sentence'].mean(),
  }


def _lm_input_fn(data):
  def input_fn(params):
    return tf.data.Dataset.from_tensor_slices(data).batch(params['batch_size'])
  return input_fn


@pytest.mark.parametrize('per_host', [True, te.InputPipelineConfig.PER_HOST_V2])
def test_eval_metrics_not_batch_major_are_concatenated_whole(tmp_path, per_host):
  """20 examples, eval batch 8: batches 8, 8, 4, so one replica of the last step has no rows
  (PER_HOST_V1: the 4 rows go to the first replica; V2: 5 per-replica batches of 4)."""
  data = _lm_data(20)
  checkpoint = _checkpoint(tmp_path / 'init', _lm_model_fn, _lm_input_fn(data))
  results = {}
  for name, use_tpu in (('one', False), ('sharded', True)):
    config = te.RunConfig(model_dir=str(tmp_path / name), tpu_config=te.TPUConfig(
        iterations_per_loop=2, num_shards=2, per_host_input_for_training=per_host))
    est = te.TPUEstimator(_lm_model_fn, config=config, use_tpu=use_tpu, train_batch_size=8,
                          eval_batch_size=8)
    results[name] = est.evaluate(_lm_input_fn(data), checkpoint_path=checkpoint)
  expected = _lm_numpy(data)
  for key, value in expected.items():
    np.testing.assert_allclose(results['one'][key], value, rtol=1e-5, err_msg=key)
    np.testing.assert_allclose(results['sharded'][key], value, rtol=1e-5, err_msg=key)
  assert 0.0 < expected['lm_accuracy'] < 1.0


# ---------------------------------------------------------------------------------------------
# Images fed [H, W, C, N] (tensorflow/tpu resnet's --transpose_input)

SIZE, CHANNELS, CLASSES = 6, 2, 3


def _image_data(n):
  rng = np.random.RandomState(5)
  images = rng.rand(n, SIZE, SIZE, CHANNELS).astype(np.float32)
  labels = rng.randint(0, CLASSES, n).astype(np.int32)
  return images, labels


def _image_model_fn(features, labels, mode, params):
  images = features
  # As resnet_main: the input pipeline transposed them, except for prediction (here also for
  # prediction with batch_axis, which applies to every mode's input).
  if mode != te.ModeKeys.PREDICT or params.get('batch_axis_set'):
    images = tf.transpose(images, [3, 0, 1, 2])
  # As resnet_model's final pool: the pool size is read from the static image size.
  height, width = images.shape[1], images.shape[2]
  if height is None or width is None:
    raise ValueError('static image size lost: %s' % images.shape)
  pooled = tf.nn.avg_pool2d(images, ksize=[height, width], strides=1, padding='VALID')
  kernel = v1.get_variable('dense', [CHANNELS, CLASSES], initializer=tf.constant_initializer(
      np.linspace(-1, 1, CHANNELS * CLASSES).reshape(CHANNELS, CLASSES)))
  logits = tf.matmul(tf.reshape(pooled, [-1, CHANNELS]), kernel)
  if mode == te.ModeKeys.PREDICT:
    return te.TPUEstimatorSpec(mode, predictions={'logits': logits})
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits))
  metric_fn = lambda labels, logits: {
      'accuracy': v1.metrics.accuracy(labels, tf.argmax(logits, 1, output_type=tf.int32))}
  return te.TPUEstimatorSpec(mode, loss=loss, train_op=_no_update(mode),
                             eval_metrics=(metric_fn, [labels, logits]))


def _image_input_fn(images, labels, transpose, drop_remainder):
  def input_fn(params):
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.batch(params['batch_size'], drop_remainder=drop_remainder)
    if transpose:
      dataset = dataset.map(lambda x, y: (tf.transpose(x, [1, 2, 3, 0]), y))
    return dataset
  return input_fn


def _image_numpy(images, labels):
  kernel = np.linspace(-1, 1, CHANNELS * CLASSES).reshape(CHANNELS, CLASSES)
  logits = images.mean(axis=(1, 2)) @ kernel
  shifted = logits - logits.max(1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
  per_example = -log_probs[np.arange(len(labels)), labels]
  # The loss metric is the mean over global batches (8 rows; the last one 4) of their loss.
  batch_losses = [per_example[i:i + 8].mean() for i in range(0, len(labels), 8)]
  return logits, {'accuracy': np.mean(logits.argmax(1) == labels),
                  'loss': np.mean(batch_losses)}


@pytest.mark.parametrize('layout', ['per_host_v2', 'per_host_v1_batch_axis'])
def test_batch_last_images_keep_static_shapes_in_sharded_eval_and_predict(tmp_path, layout):
  """PER_HOST_V2 (as resnet_main): 5 per-replica batches of 4 with drop_remainder, so the
  last step's second replica runs on a stand-in batch.  PER_HOST_V1 with
  batch_axis=(3, 0): host batches of 8 split along the image batch axis, the last one short
  (4 rows, no drop_remainder)."""
  images, labels = _image_data(20)
  v2 = layout == 'per_host_v2'
  per_host = te.InputPipelineConfig.PER_HOST_V2 if v2 else True
  kwargs = {} if v2 else {'batch_axis': (3, 0), 'params': {'batch_axis_set': True}}
  config = te.RunConfig(model_dir=str(tmp_path / 'sharded'), tpu_config=te.TPUConfig(
      iterations_per_loop=2, num_shards=2, per_host_input_for_training=per_host))
  est = te.TPUEstimator(_image_model_fn, config=config, use_tpu=True, train_batch_size=8,
                        eval_batch_size=8, predict_batch_size=8, **kwargs)
  checkpoint = _checkpoint(tmp_path / 'init', _image_model_fn,
                           _image_input_fn(images, labels, transpose=True, drop_remainder=True))
  got = est.evaluate(_image_input_fn(images, labels, transpose=True, drop_remainder=v2),
                     checkpoint_path=checkpoint)
  logits, expected = _image_numpy(images, labels)
  for key, value in expected.items():
    np.testing.assert_allclose(got[key], value, rtol=1e-5, err_msg=key)
  predictions = list(est.predict(_image_input_fn(images, labels, transpose=not v2,
                                                 drop_remainder=v2), checkpoint_path=checkpoint))
  assert len(predictions) == 20
  np.testing.assert_allclose(np.stack([p['logits'] for p in predictions]), logits, rtol=1e-5,
                             atol=1e-7)


# ---------------------------------------------------------------------------------------------
# Elements of (features, None): labels left out explicitly, as serving-style input_fns do


def _features_model_fn(features, labels, mode, params):
  del labels, params
  kernel = v1.get_variable('kernel', [SEQ, 2], initializer=tf.constant_initializer(
      np.linspace(-1, 1, SEQ * 2).reshape(SEQ, 2)))
  return te.TPUEstimatorSpec(mode, predictions={
      'logits': tf.matmul(tf.cast(features['tokens'], tf.float32), kernel)})


@pytest.mark.parametrize('labels_none', [False, True])
def test_sharded_predict_with_none_labels_keeps_every_row(tmp_path, labels_none):
  """13 rows in batches of 8 over 2 shards: the second batch leaves one replica a stand-in,
  which must be built for `(features, None)` elements too."""
  tokens = _lm_data(13)['tokens']

  def input_fn(params):
    ds = tf.data.Dataset.from_tensor_slices({'tokens': tokens}).batch(params['batch_size'])
    return ds.map(lambda f: (f, None)) if labels_none else ds

  est = te.TPUEstimator(_features_model_fn, config=te.RunConfig(
      model_dir=str(tmp_path), tpu_config=te.TPUConfig(num_shards=2)),
      train_batch_size=8, predict_batch_size=8)
  got = np.array([row['logits'] for row in est.predict(input_fn)])
  kernel = np.linspace(-1, 1, SEQ * 2).reshape(SEQ, 2)
  np.testing.assert_allclose(got, tokens.astype(np.float64) @ kernel, rtol=1e-5, atol=1e-5)


def _sliced_model_fn(features, labels, mode, params):
  """Predictions of a slice of the tokens whose width is static (`params['static']`) or known
  only at run time (a variable's value), and of a static [batch, 1] sum."""
  del labels
  tokens = tf.cast(features['tokens'], tf.float32)
  width = v1.get_variable('width', dtype=tf.int32, initializer=SEQ // 2,
                          trainable=False)  # read at run time
  width = SEQ // 2 if params['static'] else width.read_value()
  return te.TPUEstimatorSpec(mode, predictions={
      'head': tokens[:, :width], 'total': tf.reduce_sum(tokens, axis=1, keepdims=True)})


@pytest.mark.parametrize('static', [True, False])
def test_sharded_predict_rows_with_static_or_unknown_inner_shapes(tmp_path, static):
  """The loop's outputs come back whole whether their shapes past the first axis are static
  (taken out of the loop's queue at once, the short steps padded and the padding dropped) or
  not (drained step by step): 21 rows in batches of 8 over 2 shards, with a short final batch
  one replica gets no rows of, and two batches per run."""
  tokens = _lm_data(21)['tokens']

  def input_fn(params):
    return tf.data.Dataset.from_tensor_slices({'tokens': tokens}).batch(params['batch_size'])

  est = te.TPUEstimator(_sliced_model_fn, params={'static': static}, config=te.RunConfig(
      model_dir=str(tmp_path), tpu_config=te.TPUConfig(num_shards=2, iterations_per_loop=2)),
      train_batch_size=8, predict_batch_size=8)
  rows = list(est.predict(input_fn))
  assert len(rows) == 21
  np.testing.assert_allclose([r['head'] for r in rows], tokens[:, :SEQ // 2])
  np.testing.assert_allclose([r['total'] for r in rows], tokens.sum(axis=1, keepdims=True))


def _deep_model_fn(features, labels, mode, params):
  """Outputs of rank 5 (tensor2tensor's logits: [batch, length, 1, 1, vocab])."""
  del labels, params
  scale = v1.get_variable('scale', [], initializer=v1.ones_initializer())
  deep = tf.reshape(tf.cast(features['tokens'], tf.float32) * scale, [-1, SEQ, 1, 1, 1])
  deep = tf.tile(deep, [1, 1, 1, 1, 2])
  if mode == te.ModeKeys.PREDICT:
    return te.TPUEstimatorSpec(mode, predictions={'deep': deep})
  metric_fn = lambda deep: {'deep_mean': v1.metrics.mean(deep)}  # noqa: E731
  loss = tf.reduce_mean(deep)
  train_op = te.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.)).minimize(
      loss, v1.train.get_global_step())  # (a checkpoint to evaluate, scale kept at 1)
  return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                             eval_metrics=(metric_fn, [deep]))


def test_sharded_outputs_of_rank_five_come_back_whole(tmp_path):
  """The loop's queue copies elements of rank <= 4 only: deeper outputs go through it
  flattened, and come back with their shapes, every row, in evaluate and predict (21 rows in
  batches of 8 over 2 shards, two batches a run)."""
  tokens = _lm_data(21)['tokens']

  def input_fn(params):
    data = tf.data.Dataset.from_tensor_slices({'tokens': tokens}).batch(params['batch_size'])
    return data.map(lambda f: (f, tf.zeros([tf.shape(f['tokens'])[0]])))

  est = te.TPUEstimator(_deep_model_fn, config=te.RunConfig(
      model_dir=str(tmp_path), tpu_config=te.TPUConfig(num_shards=2, iterations_per_loop=2)),
      train_batch_size=8, eval_batch_size=8, predict_batch_size=8)
  est.train(input_fn, max_steps=1)
  rows = [r['deep'] for r in est.predict(input_fn)]
  assert len(rows) == 21 and rows[0].shape == (SEQ, 1, 1, 2)
  np.testing.assert_allclose(np.array(rows)[..., 0, 0, 0], tokens)
  result = est.evaluate(input_fn)
  np.testing.assert_allclose(result['deep_mean'], tokens.mean(), rtol=1e-6)
