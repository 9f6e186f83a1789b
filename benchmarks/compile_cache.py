"""The XLA compilation cache across processes: the first train() call of a fresh process, with
an empty (cold) and a filled (warm) cache.

  .venv/bin/python benchmarks/compile_cache.py [--quick] [--rounds R] [--models mlp,cnn]

Each measurement is a fresh `python` subprocess training `TPUEstimator(use_tpu=True,
TPUConfig(xla=True))` (one replica: the whole training loop is one XLA computation) with
`TPU_ESTIMATOR_XLA_CACHE` set.  Per round and model, three processes in this order:
  off   the cache turned off (`TPU_ESTIMATOR_XLA_CACHE=off`): compiles, writes nothing
        (left out by --quick: one round of cold and warm, under a minute),
  cold  an empty cache directory: compiles and writes the executable,
  warm  the same directory again: loads the executable instead of compiling.
Printed: the whole first `train()` call (graph, session, compile, the steps, checkpoints) and
its first `session.run` (the compilation and one loop), medians over the rounds, warm/cold
ratios, and the entry's size on disk.  Models: `mlp`, the small MLP 64-256-10 (batch 128,
iterations_per_loop=100, 100 steps); `cnn`, three 3x3 convolutions (32-64-64, max-pooling) and
a 128-unit dense layer on 28x28x1 inputs, Adam (batch 8, iterations_per_loop=2, 2 steps: the
steps are slow on XLA's CPU convolutions, the compilation does not depend on their number).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import _common
from _common import fmt

MODELS = ('mlp', 'cnn')
MODES = ('off', 'cold', 'warm')


def _cnn_model_fn(te, tf):
  v1 = tf.compat.v1

  def model_fn(features, labels, mode, params):
    del mode, params
    x, channels = features['x'], 1
    for i, width in enumerate((32, 64, 64)):
      kernel = v1.get_variable('conv%d' % i, [3, 3, channels, width],
                               initializer=v1.glorot_uniform_initializer(seed=i))
      x = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(x, kernel, 1, 'SAME')), 2, 2, 'VALID')
      channels = width
    x = tf.reshape(x, [-1, 3 * 3 * 64])
    hidden = v1.get_variable('dense0', [576, 128], initializer=v1.glorot_uniform_initializer(3))
    out = v1.get_variable('dense1', [128, 10], initializer=v1.glorot_uniform_initializer(4))
    logits = tf.matmul(tf.nn.relu(tf.matmul(x, hidden)), out)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    train_op = v1.train.AdamOptimizer(1e-3).minimize(loss,
                                                     global_step=v1.train.get_global_step())
    return te.TPUEstimatorSpec('train', loss=loss, train_op=train_op)

  return model_fn


def _cnn_input_fn(tf):
  import numpy as np  # pylint: disable=import-outside-toplevel
  rng = np.random.RandomState(0)
  x = rng.rand(64, 28, 28, 1).astype(np.float32)
  y = rng.randint(0, 10, 64).astype(np.int64)

  def input_fn(params):
    ds = tf.data.Dataset.from_tensor_slices(({'x': x}, y)).repeat()
    return ds.batch(params['batch_size'], drop_remainder=True)

  return input_fn


def child(args):
  """One fresh process: the first train() call; prints RESULT {json}."""
  _common.quiet_tf()
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import models as M  # pylint: disable=import-outside-toplevel
  import tpu_estimator as te  # pylint: disable=import-outside-toplevel
  from tpu_estimator.distribute import compile_cache  # pylint: disable=import-outside-toplevel
  model_dir = tempfile.mkdtemp(prefix='compile_cache_bench_')
  if args.model == 'mlp':
    est = M.make_estimator(te, M.SMALL, model_dir, xla=True, ipl=100)
    input_fn, steps = M.train_input_fn(M.SMALL), 100
  else:
    config = M.estimator_config(te, model_dir, ipl=2, xla=True)
    est = te.TPUEstimator(_cnn_model_fn(te, tf), config=config, use_tpu=True,
                          train_batch_size=8)
    input_fn, steps = _cnn_input_fn(tf), 2
  hook = M.TimingHook()
  start = time.perf_counter()
  est.train(input_fn, steps=steps, hooks=[hook])
  total = time.perf_counter() - start
  shutil.rmtree(model_dir, ignore_errors=True)
  print('RESULT ' + json.dumps({'train': total, 'first_run': hook.after[0] - hook.created,
                                'directory': compile_cache.directory()}))


def _run_child(model, cache):
  env = dict(os.environ, TPU_ESTIMATOR_XLA_CACHE=cache)
  env.pop('TF_XLA_FLAGS', None)
  proc = subprocess.run([sys.executable, os.path.abspath(__file__), '--child', '--model', model],
                        env=env, capture_output=True, text=True, timeout=600, check=False)
  lines = [l for l in proc.stdout.splitlines() if l.startswith('RESULT ')]
  if proc.returncode or not lines:
    raise RuntimeError('child failed (%d):\n%s\n%s' % (proc.returncode, proc.stdout,
                                                       proc.stderr[-3000:]))
  return json.loads(lines[-1][len('RESULT '):])


def _entry_bytes(directory):
  return sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory))


def measure(models, modes, rounds):
  """{model: {mode: [result per round]}}, rounds interleaved (`modes` in order each round)."""
  results = {m: {mode: [] for mode in modes} for m in models}
  for r in range(rounds):
    for model in models:
      cache = tempfile.mkdtemp(prefix='compile_cache_bench_xla_')
      try:
        for mode in modes:
          got = _run_child(model, 'off' if mode == 'off' else cache)
          if mode != 'off':
            got['bytes'] = _entry_bytes(got['directory'])
          results[model][mode].append(got)
          print('  round %d %-4s %-5s train() %6.2f s, first run %6.2f s' % (
              r + 1, model, mode, got['train'], got['first_run']), flush=True)
      finally:
        shutil.rmtree(cache, ignore_errors=True)
  return results


def _median(values):
  values = sorted(values)
  middle = len(values) // 2
  return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def report(results, modes, rounds):
  print('\n## first train() call of a fresh process, seconds (median of %d; [min..max])' %
        rounds)
  print('  %-5s %-10s %20s %20s %20s | %9s %9s %9s' % (
      'model', 'measure', *[m if m in modes else '-' for m in MODES], 'warm/cold',
      'saved s', 'entry KiB'))
  for model, by_mode in results.items():
    for key in ('train', 'first_run'):
      cells = {m: [got[key] for got in by_mode.get(m, [])] for m in MODES}
      med = {m: _median(v) if v else None for m, v in cells.items()}
      size = _median([got['bytes'] for got in by_mode['cold']]) / 1024
      print('  %-5s %-10s %s | %9s %9s %9s' % (
          model, key, ' '.join('%6s %-13s' % (fmt(med[m], 2), _common.spread(cells[m], 2))
                               for m in MODES),
          fmt(med['warm'] / med['cold'], 2), fmt(med['cold'] - med['warm'], 2), fmt(size)))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true', help='short smoke run (< 1 min)')
  parser.add_argument('--rounds', type=int, default=None)
  parser.add_argument('--models', default=','.join(MODELS))
  parser.add_argument('--child', action='store_true', help=argparse.SUPPRESS)
  parser.add_argument('--model', default='mlp', help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    return child(args)
  models = [m for m in args.models.split(',') if m]
  assert set(models) <= set(MODELS), models
  rounds = args.rounds or (1 if args.quick else 5)
  modes = MODES[1:] if args.quick else MODES
  _common.header('compile_cache: the first train() of a fresh process, cold vs warm XLA '
                 'cache%s' % (' (--quick)' if args.quick else ''))
  report(measure(models, modes, rounds), modes, rounds)
  return None


if __name__ == '__main__':
  main()
