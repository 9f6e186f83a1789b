"""`xla=None` on a model XLA runs slower than TensorFlow, where no op type tells: repeated
train() calls with the default against xla=False and xla=True, in one process.

  .venv/bin/python benchmarks/measured_fallback.py [--quick] [--calls N] [--steps S]
                                                   [--models einsum-gelu,matmul-gelu,mlp]

Models (TPUEstimator(use_tpu=True), one replica, iterations_per_loop=5, plain SGD):
  einsum-gelu  two transformer feed-forward blocks on [8, 128, 256] activations, each
               `x + einsum(gelu(einsum(x, W1[256, 1024])), W2)` with `tf.einsum('bth,hf->btf')`
               (XLA's CPU backend copies the 3-D gradients into transposed layouts and runs
               GELU's derivative twice: ~2.7x slower compiled on the 2-core CPU);
  matmul-gelu  the same blocks reshaped to 2-D `MatMul`s (compiled about as fast);
  mlp          the small MLP 64-256-10, batch 128, Adam (faster compiled).
The three estimators' calls of `--steps` steps (25 for the blocks, 500 for the MLP) with the
same input_fn are interleaved; the first two calls of each are left out (the default's first
runs uncompiled, its second compiles and is timed against it: distribute/loop_clock.py).
Printed: the median seconds of the later calls, whether the default's ran compiled, and
default / xla=False and default / xla=True.  The default should be no slower than the faster
of the two (target: <= 1.1x the best of xla=False and xla=True).
"""
import argparse
import statistics
import tempfile
import time

import _common
from _common import fmt, verdict

TARGET = 1.1
KINDS = (('default', None), ('xla=False', False), ('xla=True', True))


def _ffn_model_fn(te, tf, einsum):
  v1 = tf.compat.v1

  def model_fn(features, labels, mode, params):
    del mode, params
    x = features
    batch, tokens, hidden = x.shape
    for i in range(2):
      w1 = v1.get_variable('w1_%d' % i, [hidden, 4 * hidden],
                           initializer=v1.glorot_uniform_initializer(seed=2 * i))
      w2 = v1.get_variable('w2_%d' % i, [4 * hidden, hidden],
                           initializer=v1.glorot_uniform_initializer(seed=2 * i + 1))
      if einsum:
        x = x + tf.einsum('btf,fh->bth', tf.nn.gelu(tf.einsum('bth,hf->btf', x, w1)), w2)
      else:
        flat = tf.reshape(x, [batch * tokens, hidden])
        x = x + tf.reshape(tf.matmul(tf.nn.gelu(tf.matmul(flat, w1)), w2),
                           [batch, tokens, hidden])
    loss = tf.reduce_mean(tf.square(x - labels))
    train_op = v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=v1.train.get_global_step())
    return te.TPUEstimatorSpec('train', loss=loss, train_op=train_op)

  return model_fn


def _ffn_input_fn(tf):
  def input_fn(params):
    x = tf.random.stateless_normal([32, 128, 256], seed=[1, 2])
    return tf.data.Dataset.from_tensor_slices((x, x)).repeat().batch(
        params['batch_size'], drop_remainder=True)
  return input_fn


def _models(te, tf):
  import models as M  # pylint: disable=import-outside-toplevel
  spec = M.SMALL
  return {
      'einsum-gelu': (_ffn_model_fn(te, tf, True), _ffn_input_fn(tf), 8, 25),
      'matmul-gelu': (_ffn_model_fn(te, tf, False), _ffn_input_fn(tf), 8, 25),
      'mlp': (M.make_model_fn(spec, te.TPUEstimatorSpec), M.train_input_fn(spec),
              spec.batch, 500),
  }


def _estimator(te, model_fn, batch, xla):
  config = te.RunConfig(model_dir=tempfile.mkdtemp(), save_checkpoints_steps=10 ** 9,
                        save_summary_steps=0, log_step_count_steps=None,
                        tpu_config=te.TPUConfig(iterations_per_loop=5, xla=xla))
  return te.TPUEstimator(model_fn, config=config, use_tpu=True, train_batch_size=batch)


def measure(te, tf, name, calls, steps=None):
  """(median seconds a call per kind, steps a call)."""
  model_fn, input_fn, batch, model_steps = _models(te, tf)[name]
  steps = steps or model_steps
  estimators = {kind: _estimator(te, model_fn, batch, xla) for kind, xla in KINDS}
  seconds = {kind: [] for kind, _ in KINDS}
  for call in range(calls):
    for kind, _ in KINDS:
      started = time.perf_counter()
      estimators[kind].train(input_fn, steps=steps)
      if call >= 2:
        seconds[kind].append(time.perf_counter() - started)
  auto = estimators['default']._xla_auto  # pylint: disable=protected-access
  refused = auto._refused.get('train')  # pylint: disable=protected-access
  return ({kind: statistics.median(values) for kind, values in seconds.items()}, steps,
          'uncompiled (%s)' % refused if refused else 'compiled')


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--quick', action='store_true')
  parser.add_argument('--calls', type=int, default=None)
  parser.add_argument('--steps', type=int, default=None)
  parser.add_argument('--models', default='einsum-gelu,matmul-gelu,mlp')
  args = parser.parse_args()
  _common.header('measured_fallback: xla=None on a model slower compiled%s' %
                 (' (--quick)' if args.quick else ''))
  _common.quiet_tf()
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tpu_estimator as te  # pylint: disable=import-outside-toplevel
  calls = args.calls or (5 if args.quick else 10)
  for name in args.models.split(','):
    result, steps, default_loop = measure(te, tf, name, calls, args.steps)
    best = min(result['xla=False'], result['xla=True'])
    ratio = result['default'] / best
    print('\n## %s: train(steps=%d), calls 3-%d, median seconds a call' % (name, steps, calls))
    for kind, _ in KINDS:
      print('  %-10s %7s s' % (kind, fmt(result[kind], 3)))
    print('  the default\'s later calls: %s' % default_loop)
    print('  default / xla=False      %5s  (info)' % fmt(result['default'] / result['xla=False'],
                                                          2))
    print('  default / xla=True       %5s  (info)' % fmt(result['default'] / result['xla=True'],
                                                          2))
    print('  default / best of both   %5s  (target <= %.1f: %s)' % (
        fmt(ratio, 2), TARGET, verdict(ratio, TARGET, higher=False)), flush=True)


if __name__ == '__main__':
  main()
