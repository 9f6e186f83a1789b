"""Shared model and data code for the speed benchmarks.

Two MLPs, the same four ways:

  SMALL    64-256-10, batch 128, Adam(1e-3)        (overhead-bound: ~0.1 MFLOP per step)
  COMPUTE  784-1024-1024-10, batch 256, Adam(1e-3) (compute-bound: ~2.9 GFLOP per step)

  (a) `make_model_fn`: a TPUEstimator `model_fn` (tf.compat.v1.get_variable + tf.matmul +
      tf.compat.v1.train.AdamOptimizer, or the same Adam as element-wise ops like Keras'
      Adam: `elementwise_adam`), with `train_input_fn`/`eval_input_fn`/
      `predict_input_fn`.  It imports nothing from `tpu_estimator`: the spec class is passed
      in, so the same code runs against the original `tf.compat.v1.estimator.tpu` (TF 2.15).
  (b) `SessionLoop`: the same graph driven by a plain `tf.compat.v1.Session.run` loop (one
      step per run, one-shot iterator), and `WhileLoop` (info only): a hand-built graph
      `while_loop` (control flow v2 or v1) doing 100 steps per `session.run`, what a device
      loop can reach at best.
  (c) `TFFunctionLoop`: eager TF2, `tf.Variable`s and a `tf.function` train step, called once
      per step from Python or running 100 steps per call in a `tf.range` loop; Adam either
      fused (`ResourceApplyAdam`, the kernel the v1 AdamOptimizer uses) or
      `keras.optimizers.Adam`.
  (d) `KerasFit`: Keras 3 `model.fit(steps_per_execution=100)`, optionally with XLA.

Data: synthetic numpy arrays from a fixed seed.  A pool of examples (2048 small / 1024
compute) is embedded with `from_tensor_slices` and repeated, so graphs (and the graph.pbtxt an
Estimator writes) stay small; evaluation/prediction take `repeat(k)` of the pool.

Every runner has `run(n) -> seconds` for n training steps (after the object is built, so
callers choose their own warm-up) on the same `tf.data` pipeline:
`from_tensor_slices(pool).repeat().batch(batch, drop_remainder=True)`.
"""
import collections
import os
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

v1 = tf.compat.v1

ModelSpec = collections.namedtuple('ModelSpec', ['name', 'sizes', 'batch', 'pool', 'lr'])
SMALL = ModelSpec('small', (64, 256, 10), 128, 2048, 1e-3)
COMPUTE = ModelSpec('compute', (784, 1024, 1024, 10), 256, 1024, 1e-3)
SPECS = {'small': SMALL, 'compute': COMPUTE}
SEED = 1234


def flops_per_step(spec):
  """Forward + backward matmul FLOPs (approx. 3x forward)."""
  macs = sum(a * b for a, b in zip(spec.sizes[:-1], spec.sizes[1:]))
  return 3 * 2 * macs * spec.batch


def make_data(spec, n=None, seed=SEED):
  """(x float32 [n, in], y int64 [n]): labels from a fixed random linear teacher."""
  n = n or spec.pool
  rng = np.random.RandomState(seed)
  x = rng.randn(n, spec.sizes[0]).astype(np.float32)
  w = rng.randn(spec.sizes[0], spec.sizes[-1]).astype(np.float32)
  y = np.argmax(x @ w, axis=1).astype(np.int64)
  return x, y


def train_dataset(spec, batch=None, as_dict=False):
  x, y = make_data(spec)
  features = {'x': x} if as_dict else x
  ds = tf.data.Dataset.from_tensor_slices((features, y)).repeat()
  return ds.batch(batch or spec.batch, drop_remainder=True)


# ---------------------------------------------------------------------------------------------
# (a) Estimator model_fn and input_fns

def _graph_logits(spec, x):
  """The MLP with tf.compat.v1.get_variable + tf.matmul (Glorot-uniform, fixed seeds)."""
  h = x
  layers = list(zip(spec.sizes[:-1], spec.sizes[1:]))
  for i, (fan_in, fan_out) in enumerate(layers):
    kernel = v1.get_variable('dense_%d/kernel' % i, [fan_in, fan_out],
                             initializer=v1.glorot_uniform_initializer(seed=SEED + i))
    bias = v1.get_variable('dense_%d/bias' % i, [fan_out], initializer=v1.zeros_initializer())
    h = tf.matmul(h, kernel) + bias
    if i < len(layers) - 1:
      h = tf.nn.relu(h)
  return h


def _loss(labels, logits):
  return tf.reduce_mean(
      tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


def elementwise_adam(loss, lr, global_step, beta1=0.9, beta2=0.999, epsilon=1e-8):
  """Adam written as element-wise ops on each variable (the way `keras.optimizers.Adam`
  updates), where `tf.compat.v1.train.AdamOptimizer` runs one fused `ResourceApplyAdam` kernel
  per variable.  Same math as the v1 optimizer.  No cross-replica gradient aggregation: for
  one shard (or use_tpu=False) only."""
  params = v1.trainable_variables()
  grads = tf.gradients(loss, params)
  powers = [v1.get_variable(name, [], initializer=v1.ones_initializer(), trainable=False)
            for name in ('beta1_power', 'beta2_power')]
  b1_t = powers[0].assign(powers[0] * beta1)
  b2_t = powers[1].assign(powers[1] * beta2)
  lr_t = lr * tf.sqrt(1.0 - b2_t) / (1.0 - b1_t)
  updates = []
  for var, grad in zip(params, grads):
    m = v1.get_variable(var.op.name + '/Adam', var.shape, initializer=v1.zeros_initializer(),
                        trainable=False)
    v = v1.get_variable(var.op.name + '/Adam_1', var.shape,
                        initializer=v1.zeros_initializer(), trainable=False)
    m_t = m.assign_add((grad - m) * (1.0 - beta1))
    v_t = v.assign_add((tf.square(grad) - v) * (1.0 - beta2))
    updates.append(var.assign_sub(lr_t * m_t / (tf.sqrt(v_t) + epsilon)))
  with tf.control_dependencies(updates):
    return global_step.assign_add(1)


OPTIMIZERS = ('v1_adam', 'elementwise_adam')


def make_model_fn(spec, spec_cls, optimizer='v1_adam', host_call=False):
  """A TPUEstimator model_fn; `spec_cls` is the TPUEstimatorSpec of the implementation.
  `optimizer`: 'v1_adam' (tf.compat.v1.train.AdamOptimizer) or 'elementwise_adam'.
  `host_call`: training returns the TPU-era host_call (the loss and learning rate as TF2
  summaries at the step model_fn read, every step)."""
  assert optimizer in OPTIMIZERS, optimizer

  def model_fn(features, labels, mode, params):
    del params
    x = features['x'] if isinstance(features, dict) else features
    logits = _graph_logits(spec, x)
    if mode == 'infer':
      return spec_cls(mode, predictions={'classes': tf.argmax(logits, 1),
                                         'probabilities': tf.nn.softmax(logits)})
    loss = _loss(labels, logits)
    if mode == 'train':
      if optimizer == 'v1_adam':
        train_op = v1.train.AdamOptimizer(spec.lr).minimize(
            loss, global_step=v1.train.get_global_step())
      else:
        train_op = elementwise_adam(loss, spec.lr, v1.train.get_global_step())
      return spec_cls(mode, loss=loss, train_op=train_op,
                      host_call=_host_call(loss, spec.lr) if host_call else None)

    def metric_fn(labels, logits):
      return {'accuracy': v1.metrics.accuracy(labels, tf.argmax(logits, 1))}

    return spec_cls(mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))

  return model_fn


def _host_call(loss, lr):
  """(host_fn, tensors) as tensorflow/tpu's models wrote it: rank-1 tensors (concatenated over
  shards), summaries written on the host."""

  def host_fn(global_step, loss, lr):
    step = global_step[0]
    tf.summary.scalar('loss', loss[0], step=step)
    tf.summary.scalar('learning_rate', lr[0], step=step)

  return host_fn, [tf.reshape(v1.train.get_global_step(), [1]), tf.reshape(loss, [1]),
                   tf.reshape(tf.constant(lr, tf.float32), [1])]


def train_input_fn(spec):
  x, y = make_data(spec)

  def input_fn(params):
    ds = tf.data.Dataset.from_tensor_slices(({'x': x}, y)).repeat()
    return ds.batch(params['batch_size'], drop_remainder=True)

  return input_fn


def eval_input_fn(spec, num_examples):
  """`num_examples` (a multiple of the pool) labelled examples, then end of input."""
  x, y = make_data(spec)
  reps = max(1, num_examples // len(x))

  def input_fn(params):
    ds = tf.data.Dataset.from_tensor_slices(({'x': x}, y)).repeat(reps)
    return ds.batch(params['batch_size'])

  return input_fn


def predict_input_fn(spec, num_examples, with_labels=False):
  """Features only (the usual predict input), or (features, labels) with `with_labels`."""
  x, y = make_data(spec)
  reps = max(1, num_examples // len(x))

  def input_fn(params):
    elements = ({'x': x}, y) if with_labels else {'x': x}
    ds = tf.data.Dataset.from_tensor_slices(elements).repeat(reps)
    return ds.batch(params['batch_size'])

  return input_fn


class TimingHook(tf.compat.v1.train.SessionRunHook):
  """Records wall times: session created, and after every `session.run` of the loop."""

  def __init__(self):
    self.created = None
    self.after = []

  def after_create_session(self, session, coord):
    del session, coord
    self.created = time.perf_counter()

  def after_run(self, run_context, run_values):
    del run_context, run_values
    self.after.append(time.perf_counter())


def estimator_config(module, model_dir, num_shards=None, ipl=100, quiet=True, xla=None):
  """A TPU RunConfig with checkpoints, summaries and step logging effectively off
  (`quiet`), or at their defaults.  `xla`: TPUConfig(xla=...) (ours only; None: not passed)."""
  kwargs = {}
  if quiet:
    kwargs = dict(save_checkpoints_steps=10**8, save_summary_steps=10**8,
                  log_step_count_steps=10**8)
  tpu_kwargs = {} if xla is None else {'xla': xla}
  return module.RunConfig(model_dir=model_dir,
                          tpu_config=module.TPUConfig(iterations_per_loop=ipl,
                                                      num_shards=num_shards, **tpu_kwargs),
                          **kwargs)


def make_estimator(module, spec, model_dir, use_tpu=True, num_shards=None, ipl=100,
                   quiet=True, eval_batch=None, predict_batch=None, optimizer='v1_adam',
                   xla=None, host_call=False):
  """`module`: `tpu_estimator` or `tf.compat.v1.estimator.tpu`."""
  config = estimator_config(module, model_dir, num_shards, ipl, quiet, xla)
  return module.TPUEstimator(
      make_model_fn(spec, module.TPUEstimatorSpec, optimizer, host_call), config=config,
      use_tpu=use_tpu,
      train_batch_size=spec.batch, eval_batch_size=eval_batch or spec.batch,
      predict_batch_size=predict_batch or spec.batch)


class EstimatorTrain:
  """`run(n)`: one `train(steps=n)` call; `last_hook` has its TimingHook; `in_call_rate(n)`:
  steps/s between the first and the last `session.run` of that call (`per_run` steps each:
  iterations_per_loop with a device loop, else 1)."""

  def __init__(self, estimator, spec, per_run=1):
    self.estimator = estimator
    self.input_fn = train_input_fn(spec)
    self.last_hook = None
    self.per_run = per_run

  def in_call_rate(self, n):
    hook = self.last_hook
    if hook is None or len(hook.after) < 2:
      return None
    return (n - min(self.per_run, n)) / (hook.after[-1] - hook.after[0])

  def run(self, n):
    hook = TimingHook()
    start = time.perf_counter()
    self.estimator.train(self.input_fn, steps=n, hooks=[hook])
    elapsed = time.perf_counter() - start
    hook.start = start
    self.last_hook = hook
    return elapsed


# ---------------------------------------------------------------------------------------------
# (b) plain Session.run loop, and a hand-built graph while_loop (info)

class SessionLoop:
  """The model_fn's graph (same variables, same Adam) in a tf.Graph, `sess.run(train_op)` per
  step over a one-shot iterator."""

  def __init__(self, spec):
    self.graph = tf.Graph()
    with self.graph.as_default():
      v1.set_random_seed(SEED)
      x, y = v1.data.make_one_shot_iterator(train_dataset(spec)).get_next()
      loss = _loss(y, _graph_logits(spec, x))
      self.train_op = v1.train.AdamOptimizer(spec.lr).minimize(
          loss, global_step=v1.train.get_or_create_global_step())
      init = v1.global_variables_initializer()
    self.sess = v1.Session(graph=self.graph)
    self.sess.run(init)

  def run(self, n):
    start = time.perf_counter()
    for _ in range(n):
      self.sess.run(self.train_op)
    return time.perf_counter() - start

  def close(self):
    self.sess.close()


class WhileLoop:
  """`k` steps per `session.run` in a hand-built graph `tf.while_loop` over a one-shot
  iterator.  Info: roughly the ceiling of a device loop.  `control_flow='v2'` (TF 2's default
  in graphs, what tpu_estimator's device loop uses) or `'v1'` (the legacy Enter/Exit/NextIteration
  loop; variables and Adam slots are then created before the loop)."""

  def __init__(self, spec, k=100, control_flow='v2'):
    from tensorflow.python.ops import control_flow_util  # pylint: disable=import-outside-toplevel
    self.k = k
    self.graph = tf.Graph()
    saved = control_flow_util.ENABLE_CONTROL_FLOW_V2
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = control_flow == 'v2'
    try:
      with self.graph.as_default():
        v1.set_random_seed(SEED)
        iterator = v1.data.make_one_shot_iterator(train_dataset(spec))
        optimizer = v1.train.AdamOptimizer(spec.lr)
        global_step = v1.train.get_or_create_global_step()

        def train_op(x, y):
          with v1.variable_scope('model', reuse=v1.AUTO_REUSE):
            loss = _loss(y, _graph_logits(spec, x))
          return loss, optimizer.minimize(loss, global_step=global_step)

        if control_flow == 'v1':  # create variables, slots and beta powers outside the loop
          train_op(*iterator.get_next())

        def body(i, _):
          loss, op = train_op(*iterator.get_next())
          with tf.control_dependencies([op]):
            return i + 1, tf.identity(loss)

        self.loop = tf.while_loop(lambda i, _: i < k, body, (tf.constant(0), tf.constant(0.)),
                                  parallel_iterations=1)
        init = v1.global_variables_initializer()
    finally:
      control_flow_util.ENABLE_CONTROL_FLOW_V2 = saved
    self.sess = v1.Session(graph=self.graph)
    self.sess.run(init)

  def run(self, n):
    assert n % self.k == 0, (n, self.k)
    start = time.perf_counter()
    for _ in range(n // self.k):
      self.sess.run(self.loop)
    return time.perf_counter() - start

  def close(self):
    self.sess.close()


# ---------------------------------------------------------------------------------------------
# (c) hand-written tf.function loop (eager TF2)

class TFFunctionLoop:
  """tf.Variables + a `tf.function` train step that reads the iterator inside the function.
  `steps_per_call=1`: the function is called once per step from Python; `k > 1`: the function
  runs k steps in a `tf.range` loop per call (what Keras' steps_per_execution does).
  `optimizer='fused'`: v1 Adam's kernel (ResourceApplyAdam) with the same slots and beta
  powers; `'keras'`: keras.optimizers.Adam."""

  def __init__(self, spec, optimizer='fused', steps_per_call=1):
    import keras  # pylint: disable=import-outside-toplevel
    self.iterator = iter(train_dataset(spec))
    self.k = steps_per_call
    self.vars = []
    for i, (fan_in, fan_out) in enumerate(zip(spec.sizes[:-1], spec.sizes[1:])):
      init = keras.initializers.GlorotUniform(seed=SEED + i)
      self.vars.append(tf.Variable(init((fan_in, fan_out)), name='kernel_%d' % i))
      self.vars.append(tf.Variable(tf.zeros([fan_out]), name='bias_%d' % i))
    n_layers = len(spec.sizes) - 1
    lr, beta1, beta2, eps = spec.lr, 0.9, 0.999, 1e-8

    def loss_fn(x, y):
      h = x
      for i in range(n_layers):
        h = tf.matmul(h, self.vars[2 * i]) + self.vars[2 * i + 1]
        if i < n_layers - 1:
          h = tf.nn.relu(h)
      return _loss(y, h)

    if optimizer == 'fused':
      slots = [(tf.Variable(tf.zeros_like(v)), tf.Variable(tf.zeros_like(v)))
               for v in self.vars]
      b1p = tf.Variable(beta1)
      b2p = tf.Variable(beta2)

      def apply(grads):
        ops = []
        for var, (m, v), g in zip(self.vars, slots, grads):
          ops.append(tf.raw_ops.ResourceApplyAdam(
              var=var.handle, m=m.handle, v=v.handle, beta1_power=b1p.read_value(),
              beta2_power=b2p.read_value(), lr=lr, beta1=beta1, beta2=beta2, epsilon=eps,
              grad=g))
        with tf.control_dependencies(ops):
          b1p.assign(b1p * beta1)
          b2p.assign(b2p * beta2)
    else:
      opt = keras.optimizers.Adam(lr)

      def apply(grads):
        opt.apply_gradients(zip(grads, self.vars))

    def one_step(iterator):
      x, y = next(iterator)
      with tf.GradientTape() as tape:
        loss = loss_fn(x, y)
      apply(tape.gradient(loss, self.vars))
      return loss

    k = self.k
    if k == 1:
      self.step = tf.function(one_step)
    else:
      @tf.function
      def many_steps(iterator):
        loss = tf.constant(0.0)
        for _ in tf.range(k):
          loss = one_step(iterator)
        return loss

      self.step = many_steps

  def run(self, n):
    assert n % self.k == 0, (n, self.k)
    start = time.perf_counter()
    loss = None
    for _ in range(n // self.k):
      loss = self.step(self.iterator)
    loss.numpy()
    return time.perf_counter() - start


# ---------------------------------------------------------------------------------------------
# (d) Keras 3 fit

class KerasFit:
  """`run(n)`: one `model.fit(steps_per_epoch=n)`; `in_call_rate(n)`: steps/s between the
  first and the last execution of that call (from `on_train_batch_end`, called once per
  execution of `steps_per_execution` steps)."""

  def __init__(self, spec, steps_per_execution=100, jit_compile=False):
    import keras  # pylint: disable=import-outside-toplevel
    keras.utils.set_random_seed(SEED)
    layers = [keras.Input((spec.sizes[0],))]
    for i, width in enumerate(spec.sizes[1:]):
      last = i == len(spec.sizes) - 2
      layers.append(keras.layers.Dense(width, activation=None if last else 'relu'))
    self.model = keras.Sequential(layers)
    self.model.compile(optimizer=keras.optimizers.Adam(spec.lr),
                       loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                       steps_per_execution=steps_per_execution, jit_compile=jit_compile)
    self.dataset = train_dataset(spec)
    self.k = steps_per_execution
    self.times = []
    times = self.times

    class _Times(keras.callbacks.Callback):

      def on_train_batch_end(self, batch, logs=None):
        del batch, logs
        times.append(time.perf_counter())

    self.callback = _Times()

  def run(self, n):
    assert n % self.k == 0, (n, self.k)  # fit rounds steps up to whole executions
    del self.times[:]
    start = time.perf_counter()
    self.model.fit(self.dataset, epochs=1, steps_per_epoch=n, verbose=0,
                   callbacks=[self.callback])
    return time.perf_counter() - start

  def in_call_rate(self, n):
    if len(self.times) < 2:
      return None
    return (n - self.k) / (self.times[-1] - self.times[0])


# ---------------------------------------------------------------------------------------------
# small helpers shared by the scripts

def median(values):
  values = sorted(v for v in values if v is not None)
  if not values:
    return None
  mid = len(values) // 2
  return values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])


def load_note():
  """'load 1.23 (2 cores)', for headers: results are noisy when other work runs."""
  try:
    one, five, _ = os.getloadavg()
  except OSError:
    return 'load unknown'
  return 'load avg %.2f (1 min) %.2f (5 min), %d cores' % (one, five, os.cpu_count() or 0)


def wait_for_low_load(threshold=1.0, max_wait=0.0):
  """Waits up to `max_wait` s for the 1-min load average to fall below `threshold`."""
  deadline = time.time() + max_wait
  while time.time() < deadline and os.getloadavg()[0] >= threshold:
    time.sleep(5)
  return os.getloadavg()[0]


def rss_mb():
  """(VmRSS, VmHWM, ru_maxrss) of this process in MB (Linux).  VmHWM is this process image's
  peak RSS; ru_maxrss is the same peak but, on Linux, carries over the parent's peak across
  fork+exec, so in a child spawned by a big Python process it starts at the parent's size."""
  import resource  # pylint: disable=import-outside-toplevel
  maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
  values = {}
  try:
    with open('/proc/self/status') as f:
      for line in f:
        key, _, rest = line.partition(':')
        if key in ('VmRSS', 'VmHWM'):
          values[key] = int(rest.split()[0]) / 1024.0
  except OSError:
    pass
  return values.get('VmRSS'), values.get('VmHWM'), maxrss
