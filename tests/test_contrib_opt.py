"""tf.contrib.opt: AdamW / MomentumW steps by hand (decoupled decay), LazyAdam touching only
the looked-up rows, and TF 1.x slot names."""
import time

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator.compat.contrib import opt

v1 = tf.compat.v1


def _steps(make_optimizer, init, loss_fn, steps=2, **minimize_kwargs):
  """Variable values after `steps` minimize steps, and the variable names in the graph."""
  with tf.Graph().as_default():
    var = v1.get_variable('w', initializer=tf.constant(init))
    train = make_optimizer().minimize(loss_fn(var), **minimize_kwargs)
    with v1.Session() as session:
      session.run(v1.global_variables_initializer())
      for _ in range(steps):
        session.run(train)
      return session.run(var), sorted(v.op.name for v in v1.global_variables())


def test_adamw_is_decay_then_adam_step():
  w0 = np.array([1.0, -2.0], np.float32)
  lr, wd, b1, b2, eps = 0.1, 0.01, 0.9, 0.999, 1e-8
  value, names = _steps(lambda: opt.AdamWOptimizer(wd, learning_rate=lr),
                        w0, lambda w: tf.reduce_sum(w ** 2))
  w, m, v = w0.astype(np.float64), 0.0, 0.0
  for t in (1, 2):
    g = 2 * w
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    w = w - wd * w  # decoupled: not scaled by the learning rate
    w = w - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps)
  np.testing.assert_allclose(value, w, rtol=1e-5)
  assert names == ['beta1_power', 'beta2_power', 'w', 'w/AdamW', 'w/AdamW_1']


def test_momentumw_and_decay_var_list():
  w0 = np.array([1.0, 3.0], np.float32)
  lr, wd, mom = 0.1, 0.05, 0.9
  value, names = _steps(lambda: opt.MomentumWOptimizer(wd, lr, mom), w0,
                        lambda w: tf.reduce_sum(w))
  w, acc = w0.astype(np.float64), 0.0
  for _ in range(2):
    acc = mom * acc + 1.0
    w = w - wd * w - lr * acc
  np.testing.assert_allclose(value, w, rtol=1e-6)
  assert names == ['w', 'w/MomentumW']
  # a variable outside decay_var_list is not decayed
  with tf.Graph().as_default():
    a = v1.get_variable('a', initializer=tf.constant([1.0]))
    b = v1.get_variable('b', initializer=tf.constant([1.0]))
    train = opt.MomentumWOptimizer(0.5, 0.0, 0.0).minimize(a + b, decay_var_list=[a])
    with v1.Session() as session:
      session.run(v1.global_variables_initializer())
      session.run(train)
      assert session.run([a, b]) == [pytest.approx([0.5]), pytest.approx([1.0])]


def test_extend_with_decoupled_weight_decay():
  sgdw = opt.extend_with_decoupled_weight_decay(v1.train.GradientDescentOptimizer)
  value, _ = _steps(lambda: sgdw(0.1, 0.5), np.array([2.0], np.float32),
                    lambda w: tf.reduce_sum(w), steps=1)
  np.testing.assert_allclose(value, [2.0 - 0.2 - 0.5])


def test_lazy_adam_updates_only_looked_up_rows():
  table = np.arange(8, dtype=np.float32).reshape(4, 2)
  lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-8

  def loss(var):
    return tf.reduce_sum(tf.nn.embedding_lookup(var, [1, 3, 3]))

  lazy, names = _steps(lambda: opt.LazyAdamOptimizer(lr), table, loss)
  np.testing.assert_array_equal(lazy[[0, 2]], table[[0, 2]])  # rows never looked up
  # looked-up rows: Adam on the (deduplicated, summed) gradient rows
  g = np.array([[1.0, 1.0], [2.0, 2.0]])  # row 1 once, row 3 twice
  rows, m, v = table[[1, 3]].astype(np.float64), 0.0, 0.0
  for t in (1, 2):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    rows = rows - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps)
  np.testing.assert_allclose(lazy[[1, 3]], rows, rtol=1e-5)
  assert names == ['beta1_power', 'beta2_power', 'w', 'w/Adam', 'w/Adam_1']


@pytest.mark.parametrize('lazy', [True, False])
def test_lazy_adam_leaves_a_row_alone_once_it_is_no_longer_looked_up(lazy):
  with tf.Graph().as_default():
    table = v1.get_variable('t', initializer=tf.ones([3, 2]))
    ids = v1.placeholder(tf.int32, [None])
    optimizer = opt.LazyAdamOptimizer(0.1) if lazy else v1.train.AdamOptimizer(0.1)
    train = optimizer.minimize(tf.reduce_sum(tf.nn.embedding_lookup(table, ids)))
    with v1.Session() as session:
      session.run(v1.global_variables_initializer())
      session.run(train, {ids: [0]})
      after_first = session.run(table)
      session.run(train, {ids: [2]})
      after_second = session.run(table)
  moved = not np.allclose(after_second[0], after_first[0])
  assert moved != lazy  # Adam keeps moving row 0 on its momentum; LazyAdam does not


def _slow_read(var, seconds=0.3):
  """`var`'s value, read only once a `seconds` sleep has ended: an update that does not wait
  for the gradient would run first."""
  sleep = tf.py_function(lambda: time.sleep(seconds) or 0.0, [], tf.float32)
  with tf.control_dependencies([sleep]):
    return tf.identity(var) if not hasattr(var, 'read_value') else var.read_value()


@pytest.mark.parametrize('resource', [True, False])
@pytest.mark.parametrize('sparse', [False, True])
def test_decay_waits_for_the_gradient(resource, sparse):
  """The gradient is taken at the weights before the decay, whatever order the ops are
  scheduled in: otherwise a slow forward pass (a loaded machine, a replica on another
  device) sees the decayed weights and results differ from run to run."""
  lr, wd = 0.1, 0.5
  with tf.Graph().as_default():
    var = v1.get_variable('w', initializer=tf.constant([[1.0], [2.0]]), use_resource=resource)
    value = _slow_read(var)
    if sparse:
      value = tf.gather(value, [0, 1])
    train = opt.MomentumWOptimizer(wd, lr, 0.0).minimize(0.5 * tf.reduce_sum(value ** 2))
    with v1.Session() as session:
      session.run(v1.global_variables_initializer())
      session.run(train)
      # gradient w0 (not (1 - wd) * w0): w1 = w0 - wd * w0 - lr * w0
      np.testing.assert_allclose(session.run(var), [[0.4], [0.8]], rtol=1e-6)
