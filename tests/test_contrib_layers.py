"""tf.contrib.layers (and slim/framework through tf_slim): TF 1.x variable names and
scopes, and the documented formulas checked with numpy."""
import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator.compat.contrib import framework
from tpu_estimator.compat.contrib import layers
from tpu_estimator.compat.contrib import slim

v1 = tf.compat.v1


def _run(build, feeds=None):
  """Builds `build()` in a fresh graph, initialises variables, returns (values, graph)."""
  graph = tf.Graph()
  with graph.as_default():
    fetches = build()
    with v1.Session() as session:
      session.run(v1.global_variables_initializer())
      values = session.run(fetches, feeds(graph) if feeds else None)
  return values, graph


def _names(graph, key=v1.GraphKeys.GLOBAL_VARIABLES):
  return [v.op.name for v in graph.get_collection(key)]


def test_variable_names_and_scope_uniquification_match_tf1():
  def build():
    x = tf.zeros([2, 6, 6, 3])
    net = layers.conv2d(x, 4, 3)
    net = layers.conv2d(net, 4, [3, 3], normalizer_fn=layers.batch_norm)
    net = layers.flatten(net)
    net = layers.fully_connected(net, 5)
    net = layers.fully_connected(net, 5)
    net = layers.layer_norm(net)
    layers.fully_connected(net, 2, scope='logits')
    layers.embed_sequence(tf.constant([[1, 2]]), vocab_size=7, embed_dim=3)
    return []
  _, graph = _run(build)
  assert _names(graph) == [
      'Conv/weights', 'Conv/biases',
      'Conv_1/weights', 'Conv_1/BatchNorm/beta', 'Conv_1/BatchNorm/moving_mean',
      'Conv_1/BatchNorm/moving_variance',
      'fully_connected/weights', 'fully_connected/biases',
      'fully_connected_1/weights', 'fully_connected_1/biases',
      'LayerNorm/beta', 'LayerNorm/gamma',
      'logits/weights', 'logits/biases', 'EmbedSequence/embeddings']
  # moving statistics are model variables but not trainable, as in TF 1.x
  trainable = _names(graph, v1.GraphKeys.TRAINABLE_VARIABLES)
  assert 'Conv_1/BatchNorm/moving_mean' not in trainable
  assert 'Conv_1/BatchNorm/moving_mean' in _names(graph, v1.GraphKeys.MODEL_VARIABLES)


def test_layer_norm_matches_formula_and_param_axes():
  x = np.random.RandomState(0).randn(3, 4, 5).astype(np.float32)

  def build_ok():
    with v1.variable_scope('a'):
      out = layers.layer_norm(tf.constant(x))
    with v1.variable_scope('b'):
      out_axis2 = layers.layer_norm(tf.constant(x), begin_norm_axis=2, begin_params_axis=1)
    return out, out_axis2

  (out, out_axis2), graph = _run(build_ok)
  shapes = [v.shape.as_list() for v in graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES)]
  mean = x.mean(axis=(1, 2), keepdims=True)
  var = x.var(axis=(1, 2), keepdims=True)
  np.testing.assert_allclose(out, (x - mean) / np.sqrt(var + 1e-12), rtol=1e-4, atol=1e-5)
  mean2 = x.mean(axis=2, keepdims=True)
  var2 = x.var(axis=2, keepdims=True)
  np.testing.assert_allclose(out_axis2, (x - mean2) / np.sqrt(var2 + 1e-12), rtol=1e-4,
                             atol=1e-5)
  assert shapes == [[5], [5], [4, 5], [4, 5]]


@pytest.mark.parametrize('shape', [(6, 3), (4, 2, 2, 3)])
def test_batch_norm_training_inference_and_moving_averages(shape):
  x = np.random.RandomState(1).randn(*shape).astype(np.float32) * 2 + 1
  decay, eps = 0.9, 0.001

  def build():
    inputs = tf.constant(x)
    train_out = layers.batch_norm(inputs, decay=decay, epsilon=eps, scale=True,
                                  is_training=True, scope='bn')
    updates = v1.get_collection(v1.GraphKeys.UPDATE_OPS)
    return train_out, updates

  graph = tf.Graph()
  with graph.as_default():
    train_out, updates = build()
    infer_out = layers.batch_norm(tf.constant(x), decay=decay, epsilon=eps, scale=True,
                                  is_training=False, scope='bn', reuse=True)
    moving = [v for v in v1.global_variables() if 'moving' in v.op.name]
    with v1.Session() as session:
      session.run(v1.global_variables_initializer())
      out = session.run(train_out)
      session.run(updates)
      moving_mean, moving_var = session.run(moving)
      inferred = session.run(infer_out)
  axes = tuple(range(len(shape) - 1))
  n = np.prod([shape[a] for a in axes])
  mean, var = x.mean(axis=axes), x.var(axis=axes)
  np.testing.assert_allclose(out, (x - mean) / np.sqrt(var + eps), rtol=1e-4, atol=1e-4)
  # moving averages: m = decay * m + (1 - decay) * batch, with the unbiased batch variance
  np.testing.assert_allclose(moving_mean, (1 - decay) * mean, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(moving_var, decay + (1 - decay) * var * n / (n - 1), rtol=1e-4)
  np.testing.assert_allclose(inferred, (x - moving_mean) / np.sqrt(moving_var + eps),
                             rtol=1e-4, atol=1e-4)


def test_batch_norm_updates_in_place_with_updates_collections_none():
  def build():
    out = layers.batch_norm(tf.constant([[1.0], [3.0]]), decay=0.5, updates_collections=None)
    return out, v1.get_collection(v1.GraphKeys.UPDATE_OPS)

  graph = tf.Graph()
  with graph.as_default():
    out, updates = build()
    mean = [v for v in v1.global_variables() if v.op.name == 'BatchNorm/moving_mean'][0]
    with v1.Session() as session:
      session.run(v1.global_variables_initializer())
      session.run(out)
      assert updates == []
      np.testing.assert_allclose(session.run(mean), [1.0])  # 0.5 * 0 + 0.5 * 2


def test_fully_connected_and_conv2d_compute_the_documented_formula():
  x = np.random.RandomState(2).randn(2, 3).astype(np.float32)
  w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10.0 - 0.5
  b = np.array([0.1, -0.2, 0.3, 0.0], np.float32)

  def build():
    relu = layers.fully_connected(tf.constant(x), 4,
                                  weights_initializer=tf.constant_initializer(w),
                                  biases_initializer=tf.constant_initializer(b))
    linear = layers.fully_connected(tf.constant(x), 4, activation_fn=None,
                                    weights_initializer=tf.constant_initializer(w),
                                    biases_initializer=None)
    image = tf.reshape(tf.range(16.0), [1, 4, 4, 1])
    conv = layers.conv2d(image, 1, 2, padding='VALID', activation_fn=None,
                         weights_initializer=tf.ones_initializer())
    return relu, linear, conv
  (relu, linear, conv), graph = _run(build)
  np.testing.assert_allclose(relu, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(linear, x @ w, rtol=1e-5, atol=1e-6)
  grid = np.arange(16.0).reshape(4, 4)
  expected = grid[:-1, :-1] + grid[1:, :-1] + grid[:-1, 1:] + grid[1:, 1:]
  np.testing.assert_allclose(conv[0, :, :, 0], expected)
  assert 'fully_connected_1/biases' not in _names(graph)


def test_regularizers_and_apply_regularization():
  w = np.array([[1.0, -2.0], [3.0, -4.0]], np.float32)

  def build():
    weights = tf.constant(w)
    l1 = layers.l1_regularizer(0.5)(weights)
    l2 = layers.l2_regularizer(0.5)(weights)
    both = layers.l1_l2_regularizer(0.5, 0.5)(weights)
    total = layers.apply_regularization(layers.l2_regularizer(0.5), [weights, weights])
    return l1, l2, both, total, v1.get_collection(v1.GraphKeys.REGULARIZATION_LOSSES)
  (l1, l2, both, total, collected), _ = _run(build)
  assert l1 == pytest.approx(0.5 * 10)
  assert l2 == pytest.approx(0.5 * 30 / 2)
  assert both == pytest.approx(5 + 7.5)
  assert total == pytest.approx(15) and collected == [pytest.approx(15)]
  assert layers.l2_regularizer(0.0)(tf.constant(w)) is None
  with pytest.raises(ValueError, match='scale'):
    layers.l1_regularizer(1)
  with pytest.raises(ValueError, match='scale'):
    layers.l2_regularizer(-0.1)
  with tf.Graph().as_default(), pytest.raises(ValueError, match='No weights'):
    layers.apply_regularization(layers.l2_regularizer(0.1))


def test_weights_regularizer_adds_to_regularization_losses():
  def build():
    layers.fully_connected(tf.ones([1, 2]), 3, weights_regularizer=layers.l2_regularizer(1.0),
                           weights_initializer=tf.ones_initializer())
    return v1.losses.get_regularization_losses()
  (losses,), _ = _run(build)
  assert losses == pytest.approx(3.0)  # sum(1^2 over 6 weights) / 2


@pytest.mark.parametrize('mode, factor, uniform', [('FAN_IN', 2.0, False),
                                                   ('FAN_AVG', 1.0, True)])
def test_variance_scaling_initializer_variance(mode, factor, uniform):
  shape = [3, 3, 64, 32]
  init = layers.variance_scaling_initializer(factor, mode, uniform, seed=1)
  values, _ = _run(lambda: init(shape))
  fan_in, fan_out = 9 * 64, 9 * 32
  n = fan_in if mode == 'FAN_IN' else (fan_in + fan_out) / 2
  if uniform:
    assert np.abs(values).max() <= np.sqrt(3 * factor / n) + 1e-6
    assert values.var() == pytest.approx(factor / n, rel=0.05)
  else:  # truncated normal with stddev sqrt(1.3 factor / n): variance ~0.774 of that
    assert np.abs(values).max() <= 2 * np.sqrt(1.3 * factor / n) + 1e-6
    assert values.var() == pytest.approx(1.3 * factor / n * 0.774, rel=0.05)
  with pytest.raises(TypeError, match='mode'):
    layers.variance_scaling_initializer(mode='fan_in')


def test_dropout_and_embed_sequence():
  def build():
    x = tf.ones([200, 10])
    dropped = layers.dropout(x, keep_prob=0.5, seed=3)
    kept = layers.dropout(x, is_training=False)
    ids = tf.constant([[0, 2], [2, 1]])
    embedded = layers.embed_sequence(ids, vocab_size=3, embed_dim=2,
                                     initializer=tf.constant_initializer(
                                         [[0, 0], [1, 1], [2, 2]]))
    return dropped, kept, embedded
  (dropped, kept, embedded), _ = _run(build)
  assert set(np.unique(dropped)) == {0.0, 2.0} and 0.4 < (dropped == 0).mean() < 0.6
  np.testing.assert_array_equal(kept, np.ones([200, 10]))
  np.testing.assert_array_equal(embedded, [[[0, 0], [2, 2]], [[2, 2], [1, 1]]])


def test_slim_arg_scope_applies_to_contrib_layers():
  def build():
    with framework.arg_scope([layers.fully_connected], activation_fn=None,
                             weights_initializer=tf.ones_initializer()):
      out = slim.fully_connected(tf.constant([[-1.0, -2.0]]), 1)
    with slim.arg_scope([slim.conv2d], padding='VALID'):
      conv = slim.conv2d(tf.ones([1, 3, 3, 1]), 2, 3)
    return out, conv
  (out, conv), graph = _run(build)
  np.testing.assert_allclose(out, [[-3.0]])  # no relu: the arg_scope default applied
  assert conv.shape == (1, 1, 1, 2)
  assert slim.conv2d is layers.conv2d
  assert [v.op.name for v in graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES)] == [
      'fully_connected/weights', 'fully_connected/biases', 'Conv/weights', 'Conv/biases']


def test_names_outside_contrib_layers_come_from_tf_slim_and_unknown_ones_fail_clearly():
  with tf.Graph().as_default():
    out = layers.conv2d_transpose(tf.ones([1, 2, 2, 1]), 1, 2)  # tf_slim's
    assert out.shape.as_list() == [1, 2, 2, 1]
    assert [v.op.name for v in framework.get_variables_to_restore()] == [
        'Conv2d_transpose/weights', 'Conv2d_transpose/biases']
  with pytest.raises(AttributeError, match='real_valued_column.*tf.feature_column'):
    layers.real_valued_column  # pylint: disable=pointless-statement


def test_without_tf_slim_the_error_names_the_extra(monkeypatch):
  import sys  # pylint: disable=import-outside-toplevel
  monkeypatch.setitem(sys.modules, 'tf_slim', None)
  with pytest.raises(AttributeError, match=r'tpu-estimator\[legacy\]'):
    framework.get_variables_to_restore  # pylint: disable=pointless-statement
  with pytest.raises(AttributeError, match=r'tf.contrib.slim.losses.*tpu-estimator\[legacy\]'):
    slim.losses  # pylint: disable=pointless-statement
  # the layers implemented here need no tf_slim
  assert slim.fully_connected is layers.fully_connected
  assert framework.get_or_create_global_step is v1.train.get_or_create_global_step


def test_same_names_shapes_and_values_as_tf_slims_own_layers():
  """tf_slim kept TF 1.x's contrib layers (built on tf_keras' legacy layers): the same
  network built with them and with ours has the same variables and, from the same weights,
  the same outputs and moving-statistics updates."""
  pytest.importorskip('tf_keras')
  tf_slim = slim.load_tf_slim()
  x = np.random.RandomState(4).randn(4, 5, 5, 2).astype(np.float32)

  def network(ops):
    inputs = tf.constant(x)
    net = ops.conv2d(inputs, 3, 3, normalizer_fn=ops.batch_norm,
                     normalizer_params={'scale': True, 'decay': 0.9})
    net = ops.layer_norm(ops.flatten(net))
    net = ops.fully_connected(net, 2, weights_initializer=tf.ones_initializer())
    return net

  results = []
  for ops in (tf_slim.layers, layers):
    graph = tf.Graph()
    with graph.as_default():
      v1.set_random_seed(0)
      out = network(ops)
      variables = graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES)
      updates = graph.get_collection(v1.GraphKeys.UPDATE_OPS)
      with v1.Session() as session:
        session.run(v1.global_variables_initializer())
        # the same weights for both: conv kernel from a fixed pattern
        kernel = [v for v in variables if v.op.name == 'Conv/weights'][0]
        session.run(kernel.assign(np.linspace(-1, 1, 54).reshape(3, 3, 2, 3)))
        value = session.run(out)
        session.run(updates)
        stats = session.run([v for v in variables if 'moving' in v.op.name])
    results.append(([(v.op.name, v.shape.as_list()) for v in variables], value, stats))
  (slim_vars, slim_out, slim_stats), (our_vars, our_out, our_stats) = results
  assert sorted(our_vars) == sorted(slim_vars)  # (creation order may differ)
  np.testing.assert_allclose(our_out, slim_out, rtol=1e-4, atol=1e-4)
  for ours, theirs in zip(our_stats, slim_stats):
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-6)


def test_arg_scope_is_shared_with_the_layers_slim_nets_call():
  """TF 1.x had one conv2d for tf.contrib.layers, slim and slim.nets: an arg_scope over the
  program's slim.conv2d sets the defaults of the nets' layers (tf_slim's), and the other way."""
  import tf_slim  # pylint: disable=import-outside-toplevel

  def build():
    images = tf.zeros([2, 8, 8, 3])
    with slim.arg_scope([slim.conv2d], normalizer_fn=slim.batch_norm,
                        weights_regularizer=slim.l2_regularizer(1e-4)):
      tf_slim.layers.conv2d(images, 4, 3, scope='net')  # as tf_slim.nets.inception builds
    with tf_slim.arg_scope([tf_slim.layers.conv2d, tf_slim.layers.fully_connected],
                           normalizer_fn=tf_slim.layers.batch_norm, activation_fn=None):
      slim.conv2d(images, 4, 3, scope='head')
      out = slim.fully_connected(tf.constant([[-1.0, -2.0]]), 1, scope='fc',
                                 weights_initializer=tf.ones_initializer())
    return out
  out, graph = _run(build)
  names = _names(graph)
  assert 'net/BatchNorm/moving_mean' in names and 'net/biases' not in names
  assert 'head/BatchNorm/moving_mean' in names and 'head/biases' not in names
  assert len(graph.get_collection(v1.GraphKeys.REGULARIZATION_LOSSES)) == 1
  assert out[0, 0] == 0.0  # batch-normalized over a batch of one, no relu
