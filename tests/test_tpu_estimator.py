"""TPUEstimator: sharding on 1, 2 and 4 logical CPU devices behaves like one device."""

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te

v1 = tf.compat.v1
SHARDS = (1, 2, 4)


def _tpu_est(model_dir, shards, model_fn=None, use_tpu=True, ipl=4, batch=16, **kwargs):
  per_host = kwargs.pop('per_host_input_for_training', True)
  return te.TPUEstimator(
      model_fn or h.make_model_fn(tpu=True), use_tpu=use_tpu,
      config=h.tpu_config(shards, ipl, model_dir=str(model_dir),
                          per_host_input_for_training=per_host),
      train_batch_size=batch, eval_batch_size=batch, predict_batch_size=batch, **kwargs)


def _recording_model_fn(seen):
  inner = h.make_model_fn(tpu=True)

  def model_fn(features, labels, mode, params):
    seen.append(('model_fn', params['batch_size'], features['x'].shape.as_list()[0]))
    return inner(features, labels, mode, params)

  return model_fn


def _recording_input_fn(x, y, seen):
  def input_fn(params):
    seen.append(('input_fn', params['batch_size']))
    return tf.data.Dataset.from_tensor_slices(({'x': x}, y)).repeat().batch(
        params['batch_size'], drop_remainder=True)
  return input_fn


@pytest.mark.parametrize('shards', SHARDS)
@pytest.mark.parametrize('mode,expected_input', [
    (True, 'global'),
    (te.InputPipelineConfig.PER_HOST_V2, 'shard'),
    (te.InputPipelineConfig.PER_SHARD_V1, 'shard'),
])
def test_batch_sizes_seen_by_input_fn_and_model_fn(tmp_path, shards, mode, expected_input):
  x, y = h.make_data(64)
  seen = []
  est = _tpu_est(tmp_path, shards, _recording_model_fn(seen), per_host_input_for_training=mode)
  est.train(_recording_input_fn(x, y, seen), steps=2)
  input_sizes = [s[1] for s in seen if s[0] == 'input_fn']
  model_calls = [s for s in seen if s[0] == 'model_fn']
  expected = 16 if expected_input == 'global' else 16 // shards
  calls = shards if mode is not True and mode == te.InputPipelineConfig.PER_SHARD_V1 else 1
  assert input_sizes == [expected] * calls
  assert len(model_calls) == shards  # once per replica
  assert all(c[1] == 16 // shards and c[2] == 16 // shards for c in model_calls)
  assert est.get_variable_value('global_step') == 2


def test_params_as_hparams_get_the_batch_size_set_in_a_copy(tmp_path):
  """The original set its keys in an HParams `params` with set_hparam/add_hparam (TF 1.x
  programs built their hyperparameters as one, `tf.contrib.training.HParams`)."""
  from tpu_estimator.compat.contrib import training  # pylint: disable=import-outside-toplevel
  x, y = h.make_data(64)
  seen = []
  inner = h.make_model_fn(tpu=True)

  def model_fn(features, labels, mode, params):
    seen.append(('model_fn', params.batch_size, params.lr))
    return inner(features, labels, mode, {})

  def input_fn(params):
    seen.append(('input_fn', params.batch_size, params.context.num_replicas,
                 params.context.num_of_replicas_per_host))
    return h.dataset_input_fn(x, y)({'batch_size': params.batch_size})

  hparams = training.HParams(lr=0.1)
  est = _tpu_est(tmp_path, 2, model_fn, params=hparams)
  est.train(input_fn, steps=2)
  assert seen == [('input_fn', 16, 2, 2), ('model_fn', 8, 0.1), ('model_fn', 8, 0.1)]
  assert hparams.values() == {'lr': 0.1}  # the caller's object is left as it was
  with pytest.raises(ValueError, match='reserved'):
    _tpu_est(tmp_path, 2, model_fn, params=training.HParams(batch_size=8))


@pytest.mark.parametrize('per_host,expected', [
    (True, [('/cpu:0', 0, 1, 2)]),  # PER_HOST_V1: one call feeding the host's 2 shards
    (te.InputPipelineConfig.PER_SHARD_V1, [('/cpu:0', 0, 2, 1), ('/cpu:0', 1, 2, 1)]),
])
def test_input_fn_deployment_as_the_original(tmp_path, per_host, expected):
  """`params['context'].current_input_fn_deployment()` in input_fn: (host device, invocation
  index, invocations, replicas this invocation feeds), the original's four values
  (tensorflow/tpu's embedding sample unpacks them)."""
  x, y = h.make_data(64)
  seen, inner = [], h.dataset_input_fn(x, y)

  def input_fn(params):
    seen.append(params['context'].current_input_fn_deployment())
    return inner(params)

  _tpu_est(tmp_path, 2, per_host_input_for_training=per_host).train(input_fn, steps=1)
  assert seen == expected


def test_a_sharded_model_fn_gets_the_replicas_in_params_context(tmp_path):
  """As the original's model_fn on TPU: params['context'] says how many replicas there are;
  where the input goes is input_fn's to ask.  One device (use_tpu=False) has no context."""
  x, y = h.make_data(64)
  seen = []
  inner = h.make_model_fn(tpu=True)

  def model_fn(features, labels, mode, params):
    context = params.get('context')
    if context is not None:
      seen.append((context.num_replicas, context.num_hosts, context.num_of_replicas_per_host))
      with pytest.raises(RuntimeError, match='input_fn'):
        context.current_input_fn_deployment()
    else:
      seen.append(None)
    return inner(features, labels, mode, params)

  _tpu_est(tmp_path / 'sharded', 2, model_fn).train(h.dataset_input_fn(x, y), steps=2)
  _tpu_est(tmp_path / 'one', 2, model_fn, use_tpu=False).train(h.dataset_input_fn(x, y),
                                                                steps=2)
  assert seen == [(2, 1, 2), (2, 1, 2), None]


@pytest.mark.parametrize('shards', [1, 2])
def test_cross_replica_sum_sums_over_the_shards(tmp_path, shards):
  """tf.compat.v1.tpu.cross_replica_sum as on a TPU (TensorFlow's op has no CPU kernel): each
  replica gets the sum over all of them, and gradients flow through it."""
  from tpu_estimator.distribute import cross_replica  # pylint: disable=import-outside-toplevel
  cross_replica_sum = cross_replica.cross_replica_sum
  x, y = h.make_data(64)
  inner = h.make_model_fn(tpu=True)

  def model_fn(features, labels, mode, params):
    spec = inner(features, labels, mode, params)
    rows = tf.cast(tf.shape(features['x'])[0], tf.float32)
    total = cross_replica_sum(rows)
    if mode == te.ModeKeys.TRAIN:  # a zero term whose gradient passes through the sum
      kernel = [v for v in v1.trainable_variables() if 'kernel' in v.name][0]
      loss = spec.loss + 0.0 * cross_replica_sum(tf.reduce_sum(kernel))
      optimizer = te.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.1))
      return te.TPUEstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(
          loss, v1.train.get_global_step()))
    return te.TPUEstimatorSpec(mode, loss=spec.loss, eval_metrics=(
        lambda total: {'rows_summed': v1.metrics.mean(total)}, [tf.reshape(total, [1])]))

  est = _tpu_est(tmp_path, shards, model_fn)
  est.train(h.dataset_input_fn(x, y), steps=2)
  metrics = est.evaluate(h.dataset_input_fn(x, y, repeat=False, drop_remainder=True))
  assert metrics['rows_summed'] == 16.0  # the global batch, whatever the shards
  with pytest.raises(ValueError, match='group_assignment'):
    with tf.Graph().as_default():
      cross_replica_sum(tf.constant(1.0), group_assignment=[[0], [1]])


def test_layer_regularizers_on_shards_train_as_one_device(tmp_path):
  """A v1 layer's weight regularizer (tf.compat.v1.layers, tf-slim's layers: tensorflow/models'
  object detection) is added once, by the first shard, which makes the weights: every shard's
  loss now takes it on its own copy of the weights (the others' gradients missed it, and on
  2 shards weight decay was halved, silently). An activity regularizer, which each shard adds
  for itself, counts once a shard (the second shard counted the first's too)."""
  from tf_keras.api._v1.keras import __internal__ as keras_v1  # pylint: disable=import-outside-toplevel
  x, _ = h.make_data(64)
  y = x[:, :1] * 2.0

  def model_fn(features, labels, mode, params):
    del params
    dense = keras_v1.legacy.layers.dense
    net = dense(features['x'], 4, kernel_regularizer=lambda w: 0.5 * tf.reduce_sum(w * w),
                # the layer divides it by the shard's batch: each shard's mean of the sums
                activity_regularizer=lambda a: 0.1 * tf.reduce_sum(a * a),
                kernel_initializer=v1.glorot_uniform_initializer(seed=1))
    out = dense(net, 1, kernel_regularizer=lambda w: 0.5 * tf.reduce_sum(w * w),
                kernel_initializer=v1.glorot_uniform_initializer(seed=2))
    loss = v1.losses.mean_squared_error(labels, out) + v1.losses.get_regularization_loss()
    if mode == te.ModeKeys.EVAL:
      return te.TPUEstimatorSpec(mode, loss=loss)
    train_op = te.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.1)).minimize(
        loss, v1.train.get_global_step())
    return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

  weights, losses = [], []
  for shards in (1, 2):
    est = _tpu_est(tmp_path / str(shards), shards, model_fn)
    input_fn = h.dataset_input_fn(x, y.astype(np.float32))
    est.train(input_fn, steps=4)
    weights.append({n: est.get_variable_value(n) for n in est.get_variable_names()})
    losses.append(est.evaluate(input_fn, steps=2)['loss'])
  assert weights[0].keys() == weights[1].keys()
  np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
  for name, value in weights[0].items():
    np.testing.assert_allclose(weights[1][name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_model_parallel_settings_run_each_replica_whole(tmp_path):
  """A program's TPU model parallelism (tensorflow/tpu's UNet 3D cloud configs: spatial
  partitioning over 16 cores a replica) runs with each replica whole on one device: num_shards
  replicas, the results of the same run without those settings."""
  x, y = h.make_data(64)
  kernels = []
  for name, extra in (('plain', {}), ('partitioned', dict(
      num_cores_per_replica=4, input_partition_dims=[[1, 4], [1]]))):
    config = te.RunConfig(model_dir=str(tmp_path / name), tf_random_seed=1,
                          tpu_config=te.TPUConfig(
                              iterations_per_loop=4, num_shards=2,
                              per_host_input_for_training=te.InputPipelineConfig.PER_HOST_V2,
                              **extra))
    est = te.TPUEstimator(h.make_model_fn(tpu=True), config=config, train_batch_size=16)
    est.train(h.dataset_input_fn(x, y), steps=4)
    kernels.append({n: est.get_variable_value(n) for n in est.get_variable_names()})
  assert kernels[0].keys() == kernels[1].keys()
  for name, value in kernels[0].items():
    np.testing.assert_allclose(kernels[1][name], value, rtol=1e-6)


def test_cross_replica_sum_within_groups_and_its_gradient(tmp_path):
  """group_assignment (TPU batch normalization over groups of cores): each replica gets its
  group's sum, and the gradient of a replica's input is the sum of its group's gradients, as
  the TPU op's.  Replica k gives x = w * (k + 1), w = 1, and takes the loss s**2 / 2 of its
  group's sum s: groups [[0, 1], [2, 3]] sum to 3 and 7, so replica k's gradient of w is
  2 * s * (k + 1): 6, 12, 42, 56."""
  from tpu_estimator.distribute import cross_replica  # pylint: disable=import-outside-toplevel
  x, y = h.make_data(64)
  inner = h.make_model_fn(tpu=True)

  def model_fn(features, labels, mode, params):
    spec = inner(features, labels, mode, params)
    w = v1.get_variable('w', [], initializer=v1.ones_initializer(), trainable=False)
    if mode == te.ModeKeys.TRAIN:
      return spec
    k = tf.cast(cross_replica.replica_id(), tf.float32)
    summed = cross_replica.cross_replica_sum(w * (k + 1.0), [[0, 1], [2, 3]])
    gradient = tf.gradients(0.5 * tf.square(summed), w)[0]
    rows = tf.shape(features['x'])[:1]
    return te.TPUEstimatorSpec(mode, loss=spec.loss, eval_metrics=(
        lambda s, g: {'sum': v1.metrics.mean(s), 'gradient': v1.metrics.mean(g),
                      'gradient_sq': v1.metrics.mean(tf.square(g))},
        [tf.fill(rows, summed), tf.fill(rows, gradient)]))

  est = _tpu_est(tmp_path, 4, model_fn)
  est.train(h.dataset_input_fn(x, y), steps=1)
  metrics = est.evaluate(h.dataset_input_fn(x, y, repeat=False, drop_remainder=True))
  assert metrics['sum'] == pytest.approx(5.0)  # 3 on replicas 0 and 1, 7 on 2 and 3
  assert metrics['gradient'] == pytest.approx((6 + 12 + 42 + 56) / 4)
  assert metrics['gradient_sq'] == pytest.approx((36 + 144 + 1764 + 3136) / 4)
  with pytest.raises(ValueError, match='exactly once, in groups of one size'):
    with tf.Graph().as_default():
      cross_replica.cross_replica_sum(tf.constant(1.0), group_assignment=[[0, 1], [1]])


def test_cross_replica_batch_norm_trains_as_one_device(tmp_path):
  """Batch statistics summed over the shards (TPU cross-replica batch normalization, as
  EfficientNet and EfficientDet use): on 2 shards the sum's gradient is the sum of the
  replicas' gradients, as the TPU op's, so training ends where one device does."""
  from tpu_estimator.distribute import cross_replica  # pylint: disable=import-outside-toplevel
  x, y = h.make_data(64)

  def normalized(t):
    count = cross_replica.cross_replica_sum(tf.cast(tf.shape(t)[0], tf.float32))
    mean = cross_replica.cross_replica_sum(tf.reduce_sum(t, 0)) / count
    variance = cross_replica.cross_replica_sum(tf.reduce_sum(tf.square(t - mean), 0)) / count
    return (t - mean) * tf.math.rsqrt(variance + 1e-3)

  def model_fn(features, labels, mode, params):
    del params
    net = features['x']
    for i in range(2):
      net = tf.nn.relu(normalized(tf.matmul(net, v1.get_variable(
          'w%d' % i, [net.shape[1], 8], initializer=v1.glorot_uniform_initializer(seed=i)))))
    logits = tf.matmul(net, v1.get_variable('out', [8, h.NUM_CLASSES], initializer=v1.zeros_initializer()))
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = te.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.5)).minimize(
        loss, v1.train.get_global_step())
    return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

  kernels = []
  for shards in (1, 2):
    est = _tpu_est(tmp_path / str(shards), shards, model_fn)
    est.train(h.dataset_input_fn(x, y), steps=8)
    kernels.append([est.get_variable_value(n) for n in ('w0', 'w1', 'out')])
  initial = v1.glorot_uniform_initializer(seed=0)([x.shape[1], 8]).numpy()
  assert np.abs(kernels[0][0] - initial).max() > 1e-3  # it trained
  for one, two in zip(*kernels):
    np.testing.assert_allclose(two, one, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('shards', [1, 2])
def test_xla_replica_id_is_each_shards_index(tmp_path, shards):
  """XLA's replica_id() (SimCLR's contrastive loss offsets its labels by it), installed by
  compat.install(): each replica's index, as each TPU core's (TensorFlow's op, uncompiled on
  a CPU, crashed the process)."""
  from tpu_estimator.distribute import cross_replica  # pylint: disable=import-outside-toplevel
  x, y = h.make_data(64)
  inner = h.make_model_fn(tpu=True)

  def model_fn(features, labels, mode, params):
    spec = inner(features, labels, mode, params)
    if mode == te.ModeKeys.TRAIN:
      return spec
    ids = tf.fill([tf.shape(features['x'])[0]], cross_replica.replica_id())
    return te.TPUEstimatorSpec(mode, loss=spec.loss, eval_metrics=(
        lambda ids: {'ids': v1.metrics.mean(tf.cast(ids, tf.float32))}, [ids]))

  est = _tpu_est(tmp_path, shards, model_fn)
  est.train(h.dataset_input_fn(x, y), steps=1)
  metrics = est.evaluate(h.dataset_input_fn(x, y, repeat=False, drop_remainder=True))
  assert metrics['ids'] == pytest.approx((shards - 1) / 2)  # rows evenly over 0..shards-1


def test_each_shard_sees_its_own_losses_and_update_ops(tmp_path):
  """On a TPU model_fn was traced once, so `tf.compat.v1.losses.get_total_loss()` held one
  replica's loss (google-research/simclr, tf-slim models); each shard here adds only its own
  to LOSSES and UPDATE_OPS, sees the shared regularization losses, and trains and evaluates as
  one device (on 2 shards the second replica summed the first's loss too, and with a
  cross_replica_sum in its forward pass could not differentiate it)."""
  from tpu_estimator.distribute import cross_replica  # pylint: disable=import-outside-toplevel
  x, y = h.make_data(64)
  y = (x[:, :1] * 2.0).astype(np.float32)
  counts = []

  def model_fn(features, labels, mode, params):
    del params
    kernel = v1.get_variable('kernel', [x.shape[1], 1], initializer=v1.zeros_initializer(),
                             regularizer=lambda w: 0.01 * tf.reduce_sum(tf.square(w)))
    out = tf.matmul(features['x'], kernel)
    out += 0.0 * cross_replica.cross_replica_sum(tf.reduce_sum(out))
    with v1.variable_scope('gen') as scope:
      v1.add_to_collection(v1.GraphKeys.UPDATE_OPS, tf.no_op())
      # As tf_keras's legacy layers add their batch-norm updates: no add_to_collection.
      v1.get_collection_ref(v1.GraphKeys.UPDATE_OPS).append(tf.no_op(name='appended'))
      v1.losses.mean_squared_error(labels, out)
    # Read by the variable scope too (TF-GAN's: a replica's ops are named 'replica_1/gen/..').
    counts.append((len(v1.get_collection(v1.GraphKeys.LOSSES)),
                   len(v1.get_collection(v1.GraphKeys.UPDATE_OPS)),
                   len(v1.losses.get_regularization_losses()),
                   len(v1.get_collection(v1.GraphKeys.UPDATE_OPS, scope.name)),
                   len(v1.losses.get_losses(scope=scope.name))))
    loss = v1.losses.get_total_loss()
    train_op = te.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.05)).minimize(
        loss, v1.train.get_global_step())
    if mode == te.ModeKeys.TRAIN:  # as tensorflow/tpu's MobileNet and Inception v3
      counts.append(len(v1.moving_average_variables()))
      with tf.control_dependencies([train_op]):
        train_op = v1.train.ExponentialMovingAverage(0.5).apply(
            v1.trainable_variables() + v1.moving_average_variables())
    return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

  results = []
  for shards in (1, 2):
    del counts[:]
    est = _tpu_est(tmp_path / str(shards), shards, model_fn)
    est.train(h.dataset_input_fn(x, y), steps=3)
    # Each replica: one loss, two update ops, one regularizer; no average (the 2nd saw the
    # 1st's).
    assert sorted(map(str, counts)) == sorted(map(str, [(1, 2, 1, 2, 1), 0] * shards)), counts
    metrics = est.evaluate(h.dataset_input_fn(x, y, repeat=False, drop_remainder=True))
    results.append((est.get_variable_value('kernel'), metrics['loss'],
                    est.get_variable_value('kernel/ExponentialMovingAverage')))
  assert not np.allclose(results[0][0], 0.0)  # trained
  np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5)
  assert not np.allclose(results[0][2], 0.0)
  np.testing.assert_allclose(results[1][2], results[0][2], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize('shards', [1, 2])
def test_model_fn_sees_the_tpu_contexts_shard_count(tmp_path, shards):
  """TPU-era programs read `tpu_function.get_tpu_context().number_of_shards` in model_fn
  (SimCLR's cross-replica batch norm and contrastive loss scatter over it): the shard count
  in every mode of a sharded call, as while a TPU computation was built; None with
  use_tpu=False, as on the original's CPU path."""
  from tensorflow.python.tpu import tpu_function  # pylint: disable=g-direct-tensorflow-import
  x, y = h.make_data(64)
  inner = h.make_model_fn(tpu=True)
  seen = []

  def model_fn(features, labels, mode, params):
    seen.append((mode, tpu_function.get_tpu_context().number_of_shards))
    return inner(features, labels, mode, params)

  for use_tpu in (True, False):
    del seen[:]
    est = _tpu_est(tmp_path / str(use_tpu), shards, model_fn, use_tpu=use_tpu)
    est.train(h.dataset_input_fn(x, y), steps=1)
    est.evaluate(h.dataset_input_fn(x, y, repeat=False), steps=1)
    list(est.predict(h.dataset_input_fn(x, y, repeat=False)))
    expected = shards if use_tpu else None
    assert {mode for mode, _ in seen} == {'train', 'eval', 'infer'}
    assert {count for _, count in seen} == {expected}
  assert tpu_function.get_tpu_context().number_of_shards is None  # reset after the calls


def test_use_tpu_false_is_one_device_with_global_batch(tmp_path):
  x, y = h.make_data(64)
  seen = []
  est = _tpu_est(tmp_path, 4, _recording_model_fn(seen), use_tpu=False)
  est.train(_recording_input_fn(x, y, seen), steps=3)
  assert [s[1] for s in seen] == [16, 16]
  assert est.get_variable_value('global_step') == 3


def _train_weights(model_dir, shards, cross_shard, use_tpu=True, steps=20):
  x, y = h.make_data(160)
  est = _tpu_est(model_dir, shards, h.make_model_fn(tpu=True, cross_shard=cross_shard),
                 use_tpu=use_tpu, ipl=5)
  est.train(h.dataset_input_fn(x, y), steps=steps)
  return est.get_variable_value('dense/kernel'), est.get_variable_value('dense/bias')


@pytest.mark.parametrize('cross_shard', [False, True])
def test_sharding_invariance_of_trained_weights(tmp_path, cross_shard):
  reference = _train_weights(tmp_path / 'one', 1, cross_shard, use_tpu=False)
  for shards in SHARDS:
    weights = _train_weights(tmp_path / str(shards), shards, cross_shard)
    for got, want in zip(weights, reference):
      np.testing.assert_allclose(got, want, atol=1e-4)
  # the model really moved away from its initial value
  assert not np.allclose(reference[1], 0.0, atol=1e-3)


@pytest.mark.parametrize('summed_loss_call', [False, True])
def test_cross_shard_optimizer_sum_reduction_scales_update(tmp_path, summed_loss_call):
  """MEAN: the shards' mean, one device's update on the global batch; SUM: the shards' sum.
  Also where model_fn's last tf.compat.v1.losses call summed before it normalized the sum
  (tensorflow/tpu's RetinaNet): TensorFlow's own loss scaling reads that call's reduction."""
  x, y = h.make_data(64)

  def model_fn(reduction):
    base = h.make_model_fn(tpu=True)

    def fn(features, labels, mode, params):
      spec = base(features, labels, mode, params)
      if mode != te.ModeKeys.TRAIN:
        return spec
      loss = spec.loss
      if summed_loss_call:  # the same mean, through a summing tf.compat.v1.losses call
        with v1.variable_scope(v1.get_variable_scope(), reuse=True):
          logits = h._logits(features)
        per_example = v1.losses.sparse_softmax_cross_entropy(
            labels, logits, reduction=v1.losses.Reduction.SUM)
        loss = per_example / tf.cast(tf.shape(labels)[0], tf.float32)
      opt = te.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.1), reduction=reduction)
      return spec._replace(loss=loss, train_op=opt.minimize(loss, v1.train.get_global_step()))
    return fn

  deltas = {}
  for name, shards, reduction in (('one', 1, v1.losses.Reduction.MEAN),
                                  ('mean', 2, v1.losses.Reduction.MEAN),
                                  ('sum', 2, v1.losses.Reduction.SUM)):
    est = _tpu_est(tmp_path / name, shards, model_fn(reduction))
    est.train(h.dataset_input_fn(x, y), steps=1)
    deltas[name] = est.get_variable_value('dense/bias')
  np.testing.assert_allclose(deltas['mean'], deltas['one'], rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(deltas['sum'], 2 * deltas['mean'], rtol=1e-5)


def _eval_all(model_dir, shards, use_tpu, n, steps=None):
  x, y = h.make_data(200)
  est = _tpu_est(model_dir, shards, use_tpu=use_tpu)
  est.train(h.dataset_input_fn(x, y), steps=6)
  return est.evaluate(h.dataset_input_fn(x[:n], y[:n], repeat=False), steps=steps)


@pytest.mark.parametrize('n', [96, 90])  # 90: a final partial batch of 10
def test_sharded_eval_metrics_equal_single_device(tmp_path, n):
  reference = _eval_all(tmp_path / 'one', 1, False, n)
  for shards in SHARDS:
    got = _eval_all(tmp_path / str(shards), shards, True, n)
    # the original's order: metric names sorted (loss among them), then global_step
    assert list(got) == list(reference) == ['accuracy', 'loss', 'mean_label', 'global_step']
    assert got['global_step'] == reference['global_step'] == 6
    for key in ('accuracy', 'mean_label', 'loss'):
      np.testing.assert_allclose(got[key], reference[key], atol=1e-6, err_msg=key)


def test_sharded_eval_steps_counts_global_batches(tmp_path):
  reference = _eval_all(tmp_path / 'one', 1, False, 96, steps=2)
  got = _eval_all(tmp_path / 'four', 4, True, 96, steps=2)
  for key in ('accuracy', 'mean_label', 'loss'):
    np.testing.assert_allclose(got[key], reference[key], atol=1e-6)


@pytest.mark.parametrize('shards', SHARDS)
def test_predict_count_and_order(tmp_path, shards):
  x, y = h.make_data(520)

  def model_fn(features, labels, mode, params):
    h._logits(features)  # a variable so there is something to restore
    return te.TPUEstimatorSpec(mode, predictions={'x': features['x'],
                                                  'row': tf.reduce_sum(features['x'], 1)})

  est = te.TPUEstimator(model_fn, config=h.tpu_config(shards, model_dir=str(tmp_path)),
                        train_batch_size=64, predict_batch_size=64)
  preds = list(est.predict(h.dataset_input_fn(x, y, repeat=False)))
  assert len(preds) == 520
  np.testing.assert_allclose(np.stack([p['x'] for p in preds]), x)
  batches = list(est.predict(h.dataset_input_fn(x, y, repeat=False),
                             yield_single_examples=False))
  assert sum(len(b['row']) for b in batches) == 520


@pytest.mark.parametrize('shards', [1, 2])
def test_host_call_writes_tf1_and_tf2_summaries_every_step(tmp_path, shards):
  x, y = h.make_data(64)
  est = _tpu_est(tmp_path, shards, h.make_model_fn(tpu=True, host_call=True), ipl=3)
  est.train(h.dataset_input_fn(x, y), steps=7)
  tf2 = h.scalar_summaries(str(tmp_path), 'host_loss')
  tf1 = h.scalar_summaries(str(tmp_path), 'v1_host_loss')
  # at the step each update was computed at (the global step model_fn read), as the original
  assert sorted(tf2) == list(range(0, 7))
  assert sorted(tf1) == list(range(0, 7))
  assert all(np.isfinite(v) for v in tf2.values())


def _global_step_read_after_minimize(features, labels, mode, params):
  """The TPUEstimator docs' host_call pattern: `tf.reshape(global_step, [1])` built after
  `minimize`, which on a TPU reads the step the update was computed at."""
  del params
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=h._logits(features)))
  step = v1.train.get_or_create_global_step()
  train_op = te.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.1)).minimize(loss, step)

  def host_fn(global_step, host_loss):
    tf.summary.scalar('host_loss', tf.reduce_mean(host_loss), step=global_step[0])

  return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op, host_call=(
      host_fn, [tf.reshape(step, [1]), tf.reshape(loss, [1])]))


def test_host_call_global_step_read_after_minimize_is_the_step_before_the_update(tmp_path):
  """Unordered, the read raced with the increment and some summaries landed a step late
  (about one run in six of 30 steps); every run must give each step exactly once."""
  x, y = h.make_data(64)
  for run in range(3):
    model_dir = tmp_path / str(run)
    est = te.TPUEstimator(_global_step_read_after_minimize, config=te.RunConfig(
        model_dir=str(model_dir), tpu_config=te.TPUConfig(iterations_per_loop=5, num_shards=2)),
        train_batch_size=8)
    est.train(h.dataset_input_fn(x, y), steps=30)
    assert sorted(h.scalar_summaries(str(model_dir), 'host_loss')) == list(range(30))


def test_host_call_every_n_steps(tmp_path):
  x, y = h.make_data(64)
  est = te.TPUEstimator(
      h.make_model_fn(tpu=True, host_call=True),
      config=te.RunConfig(model_dir=str(tmp_path), tpu_config=te.TPUConfig(
          iterations_per_loop=5, num_shards=2, experimental_host_call_every_n_steps=3)),
      train_batch_size=16)
  est.train(h.dataset_input_fn(x, y), steps=10)
  assert sorted(h.scalar_summaries(str(tmp_path), 'host_loss')) == [0, 3, 6, 9]


def test_eval_summaries_written_to_eval_dir(tmp_path):
  _eval_all(tmp_path, 2, True, 64)
  assert h.scalar_summaries(str(tmp_path / 'eval'), 'accuracy')
  x, y = h.make_data(64)
  est = _tpu_est(tmp_path, 2)
  est.evaluate(h.dataset_input_fn(x, y, repeat=False), name='holdout')
  assert 6 in h.scalar_summaries(str(tmp_path / 'eval_holdout'), 'loss')


def test_scaffold_fn_called_on_host_and_used(tmp_path):
  x, y = h.make_data(64)
  source = _tpu_est(tmp_path / 'src', 1, use_tpu=False)
  source.train(h.dataset_input_fn(x, y), steps=5)
  trained = source.get_variable_value('dense/kernel')
  calls = []

  def model_fn(features, labels, mode, params):
    spec = h.make_model_fn(tpu=True, learning_rate=0.0)(features, labels, mode, params)

    def scaffold_fn():
      calls.append(tf.distribute.has_strategy())
      v1.train.init_from_checkpoint(str(tmp_path / 'src'), {'dense/': 'dense/'})
      return v1.train.Scaffold()
    return spec._replace(scaffold_fn=scaffold_fn)

  est = _tpu_est(tmp_path / 'dst', 2, model_fn)
  est.train(h.dataset_input_fn(x, y), steps=1)
  assert calls == [False]  # once, on the host, not once per replica
  np.testing.assert_allclose(est.get_variable_value('dense/kernel'), trained, atol=1e-6)


def test_end_of_input_inside_loop_counts_steps_run(tmp_path):
  x, y = h.make_data(80)  # 5 batches of 16, then the input ends
  est = _tpu_est(tmp_path, 2, ipl=4)
  est.train(h.dataset_input_fn(x, y, repeat=False))
  assert est.get_variable_value('global_step') == 5


@pytest.mark.parametrize('first,then,expected', [(None, 10, [4, 8, 10]), (3, 10, [7, 11, 13])])
def test_loops_clipped_to_step_target(tmp_path, first, then, expected):
  x, y = h.make_data(64)
  seen = []

  class Record(v1.train.SessionRunHook):
    def before_run(self, run_context):
      return v1.train.SessionRunArgs(v1.train.get_global_step())

    def end(self, session):
      seen.append(int(session.run(v1.train.get_global_step())))

  class Steps(v1.train.CheckpointSaverListener):
    def after_save(self, session, global_step_value):
      seen.append(('ckpt', global_step_value))

  est = te.TPUEstimator(h.make_model_fn(tpu=True), config=te.RunConfig(
      model_dir=str(tmp_path), save_checkpoints_steps=1,
      tpu_config=te.TPUConfig(iterations_per_loop=4, num_shards=2)), train_batch_size=16)
  if first:
    est.train(h.dataset_input_fn(x, y), steps=first)
  seen.clear()
  est.train(h.dataset_input_fn(x, y), steps=then, saving_listeners=[Steps()])
  ckpt_steps = [s[1] for s in seen if isinstance(s, tuple)]
  assert [s for s in ckpt_steps if s != (first or 0)] == expected


def test_max_steps_on_loops(tmp_path):
  x, y = h.make_data(64)
  est = _tpu_est(tmp_path, 2, ipl=4)
  est.train(h.dataset_input_fn(x, y), max_steps=6)
  assert est.get_variable_value('global_step') == 6
  est.train(h.dataset_input_fn(x, y), max_steps=6)  # already there: a no-op
  assert est.get_variable_value('global_step') == 6


def test_time_based_iterations_per_loop(tmp_path):
  x, y = h.make_data(64)
  est = _tpu_est(tmp_path, 2, ipl='1s')
  est.train(h.dataset_input_fn(x, y), steps=12)
  assert est.get_variable_value('global_step') == 12


def test_checkpoint_variable_names_same_as_one_device(tmp_path):
  x, y = h.make_data(64)
  names = []
  for shards, use_tpu in ((1, False), (4, True)):
    est = _tpu_est(tmp_path / str(shards), shards, h.make_model_fn(tpu=True, optimizer='adam'),
                   use_tpu=use_tpu)
    est.train(h.dataset_input_fn(x, y), steps=2)
    names.append(est.get_variable_names())
  assert names[0] == names[1]
  assert 'dense/kernel/Adam' in names[0]


def test_batch_axis_splits_along_given_axis(tmp_path):
  x, y = h.make_data(64)
  seen = []

  def input_fn(params):
    ds = tf.data.Dataset.from_tensor_slices(({'x': x}, y)).repeat().batch(params['batch_size'])
    # features batch-major on axis 1
    return ds.map(lambda f, l: ({'x': tf.transpose(f['x'])}, l))  # features batch on axis 1

  def model_fn(features, labels, mode, params):
    seen.append(features['x'].shape.as_list())
    return h.make_model_fn(tpu=True)({'x': tf.transpose(features['x'])}, labels, mode, params)

  est = _tpu_est(tmp_path, 2, model_fn, batch_axis=({'x': 1}, 0))
  est.train(input_fn, steps=1)
  assert seen == [[h.NUM_FEATURES, 8]] * 2


@pytest.mark.parametrize('shards', [1, 2, 4])
def test_conv_model_short_final_batch_and_features_only_predict(tmp_path, shards):
  """No replica ever gets a 0-row batch (oneDNN's Conv2D mis-shapes empty inputs), and a
  features-only predict input_fn works sharded."""
  rng = np.random.RandomState(0)
  images = rng.rand(40, 8, 8, 1).astype(np.float32)
  labels = (images.mean(axis=(1, 2, 3)) > 0.5).astype(np.int64)

  def model_fn(features, labels, mode, params):
    kernel = v1.get_variable('conv', [3, 3, 1, 4], initializer=tf.constant_initializer(0.1))
    hidden = tf.reduce_mean(tf.nn.conv2d(features['image'], kernel, 1, 'SAME'), [1, 2])
    logits = tf.matmul(hidden, v1.get_variable('out', [4, 2]))
    if mode == te.ModeKeys.PREDICT:
      return te.TPUEstimatorSpec(mode, predictions={'logits': logits})
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss, v1.train.get_global_step())
    metric_fn = lambda labels, logits: {'acc': v1.metrics.accuracy(labels, tf.argmax(logits, 1))}
    return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                               eval_metrics=(metric_fn, [labels, logits]))

  def input_fn(params):
    return tf.data.Dataset.from_tensor_slices(({'image': images}, labels)).batch(
        params['batch_size'])

  est = te.TPUEstimator(model_fn, config=h.tpu_config(shards, model_dir=str(tmp_path)),
                        train_batch_size=8, eval_batch_size=16, predict_batch_size=16)
  est.train(lambda params: input_fn(params).repeat(), steps=2)
  assert est.evaluate(input_fn)['global_step'] == 2  # 40 rows: 16, 16, then 8
  features_only = lambda params: tf.data.Dataset.from_tensor_slices(
      {'image': images}).batch(params['batch_size'])
  assert len(list(est.predict(features_only))) == 40


@pytest.mark.parametrize('shards', (1, 2))
def test_an_input_fn_returning_tensors_gives_every_step_of_a_loop_its_own_batch(tmp_path,
                                                                                shards):
  """tensorflow/tpu's MobileNet and SqueezeNet return a one-shot iterator's `get_next()`: a
  device loop of 4 steps read those tensors once, so each of its steps trained (and evaluated)
  the same batch, silently.  Every label 1..32 is seen once by 4 steps of 8 rows."""
  def model_fn(features, labels, mode, params):
    seen = v1.get_variable('seen', [33], initializer=v1.zeros_initializer(), trainable=False,
                           aggregation=tf.VariableAggregation.SUM)
    w = v1.get_variable('w', [], initializer=v1.zeros_initializer())
    loss = tf.reduce_mean(features) * 0 + w * 0
    if mode == te.ModeKeys.TRAIN:
      with tf.control_dependencies([v1.assign_add(seen, tf.reduce_sum(tf.one_hot(labels, 33),
                                                                         0))]):
        train_op = v1.assign_add(v1.train.get_global_step(), 1)
      return te.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)
    return te.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(
        lambda labels: {'mean_label': v1.metrics.mean(labels)}, [labels]))

  def input_fn(params):
    ds = tf.data.Dataset.range(1, 33).map(lambda i: (tf.cast(i, tf.float32),
                                                     tf.cast(i, tf.int32)))
    ds = ds.repeat().batch(params['batch_size'], drop_remainder=True)
    return v1.data.make_one_shot_iterator(ds).get_next()

  est = _tpu_est(tmp_path, shards, model_fn=model_fn, ipl=4, batch=8)
  est.train(input_fn, max_steps=4)
  np.testing.assert_array_equal(est.get_variable_value('seen'), [0] + [1] * 32)
  assert est.evaluate(input_fn, steps=4)['mean_label'] == pytest.approx(16.5)
