"""tf_slim 1.1.0 on current TensorFlow: the functions that called names TensorFlow removed from
its internal modules (control_flow_ops.cond, array_ops.stack, ops.IndexedSlices,
variable_scope.variable, ...) run once tf_slim is loaded through the compat layer
(slim_loader.prepare()), and compute TF 1.x's values."""
import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator.compat.contrib import slim_loader

tf_slim = pytest.importorskip('tf_slim')
_v1 = tf.compat.v1


@pytest.fixture(scope='module', autouse=True)
def loaded():
  return slim_loader.load_tf_slim()


def test_prepare_supplies_only_missing_names_and_keeps_existing_ones():
  from tensorflow.python.ops import array_ops  # pylint: disable=import-outside-toplevel
  from tensorflow.python.ops import control_flow_ops  # pylint: disable=import-outside-toplevel
  assert control_flow_ops.cond is _v1.cond and array_ops.stack is tf.stack
  assert array_ops.reshape is tf.reshape  # an existing name is left as it was
  assert slim_loader.prepare() == []  # idempotent


def _session_run(build, feeds=({},)):
  """Builds in a fresh graph; runs `update` once per feed dict (by placeholder name) after the
  initialisers, then fetches `value` (with the last feed, as an evaluation loop does)."""
  with tf.Graph().as_default() as graph:
    value, update = build()
    with _v1.Session() as sess:
      sess.run([_v1.global_variables_initializer(), _v1.local_variables_initializer()])
      for feed in feeds:
        feed_dict = {graph.get_tensor_by_name(k + ':0'): v for k, v in feed.items()}
        sess.run(update, feed_dict)
      return sess.run(value, feed_dict)


def test_streaming_dynamic_auc_and_concat_accumulate_over_batches():
  """metric_ops' streaming_concat (array_ops.stack, control_flow_ops.cond) and
  streaming_dynamic_auc (control_flow_ops.cond) over two batches."""
  def build():
    labels = _v1.placeholder(tf.int64, [2], name='labels')
    predictions = _v1.placeholder(tf.float32, [2], name='predictions')
    auc, auc_update = tf_slim.metrics.streaming_dynamic_auc(labels, predictions)
    concat, concat_update = tf_slim.metrics.streaming_concat(predictions)
    return (auc, concat), tf.group(auc_update, concat_update)
  auc, concat = _session_run(build, [{'labels': [0, 1], 'predictions': [0.1, 0.35]},
                                     {'labels': [0, 1], 'predictions': [0.4, 0.8]}])
  # positives 0.35, 0.8 vs negatives 0.1, 0.4: 3 of 4 pairs ordered right
  np.testing.assert_allclose(auc, 0.75, atol=1e-6)
  np.testing.assert_allclose(np.sort(concat), [0.1, 0.35, 0.4, 0.8], atol=1e-6)


def test_smart_cond_with_a_tensor_predicate():
  def build():
    training = _v1.placeholder_with_default(True, [])
    out = tf_slim.layers.utils.smart_cond(training, lambda: tf.constant(1.),
                                          lambda: tf.constant(2.))
    return out, tf.no_op()
  assert _session_run(build) == 1.


def test_learning_gradient_helpers_on_indexed_slices_and_local_variables():
  """slim.learning.clip_gradient_norms / multiply_gradients check ops.IndexedSlices;
  slim.local_variable creates through variable_scope.variable."""
  def build():
    var = _v1.get_variable('v', initializer=tf.zeros([3, 2]))
    counter = tf_slim.local_variable(tf.constant(5.), name='counter')
    sparse = tf.IndexedSlices(tf.constant([[3., 4.]]), tf.constant([1]), tf.constant([3, 2]))
    clipped = tf_slim.learning.clip_gradient_norms([(sparse, var)], max_norm=1.)
    scaled = tf_slim.learning.multiply_gradients([(tf.ones([3, 2]), var)], {var: 3.})
    assert isinstance(clipped[0][0], tf.IndexedSlices)
    assert counter in _v1.local_variables()
    return (clipped[0][0].values, scaled[0][0], counter), tf.no_op()
  clipped, scaled, counter = _session_run(build)
  np.testing.assert_allclose(clipped, [[0.6, 0.8]], atol=1e-6)
  np.testing.assert_allclose(scaled, np.full([3, 2], 3.))
  assert counter == 5.
