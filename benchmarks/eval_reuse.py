"""Repeated evaluate()/predict() on one estimator: the graph and session kept across calls.

  .venv/bin/python benchmarks/eval_reuse.py [--quick] [--rounds R]

Small MLP (64-256-10), batch 128, one checkpoint; ours in three configurations (cpu:
use_tpu=False; tpu1/tpu2: use_tpu=True on 1 or 2 logical CPU shards, iterations_per_loop=100).
1. examples/s of whole calls with the same input_fn and no hooks, on N examples:
     first    the estimator's first call (builds the graph and session),
     second   the following calls (median of R): the kept graph restores the checkpoint,
     rebuild  the same calls with RunConfig(reuse_eval_graphs=False): a new graph every call,
              as the original always did,
     anew     calls on the kept estimator whose input_fn is a lambda written anew in each call
              (`lambda params: input_fn(params)`) and which pass a hook (one that builds no
              ops): what `evaluate(input_fn=lambda: ...)` in a loop, or an EvalSpec with
              hooks, sees (median of R, after one such call built its graph).
   for evaluate and predict (every per-example dict consumed).
2. requests: predict() of R requests of 8 other rows each (a new input_fn over new arrays
   of the same structure, as a service calls it), ms per call on the kept estimator (it reads
   each request's input in the graph it kept, and restores nothing while the checkpoint is
   the one it holds) and with reuse_eval_graphs=False; the small MLP in each configuration,
   and a wide MLP (106M parameters, a 424 MB checkpoint, as large as BERT-base's) on cpu.
3. train_and_evaluate: K evaluations (one every 100 steps, N examples each) of the small MLP,
   wall time with reuse on and off.
benchmarks/vs_original.py reports the second evaluate() against the original's.
"""
import argparse
import shutil
import tempfile
import time

import _common
from _common import fmt
import models as M
import tensorflow as tf

import tpu_estimator as te

SPEC = M.SMALL
CONFIGS = {'cpu': dict(use_tpu=False, num_shards=None),
           'tpu1': dict(use_tpu=True, num_shards=1),
           'tpu2': dict(use_tpu=True, num_shards=2)}


def _estimator(model_dir, config, reuse, **overrides):
  settings = CONFIGS[config]
  run_config = M.estimator_config(te, model_dir, settings['num_shards'], 100).replace(
      reuse_eval_graphs=reuse, **overrides)
  return te.TPUEstimator(M.make_model_fn(SPEC, te.TPUEstimatorSpec), config=run_config,
                         use_tpu=settings['use_tpu'], train_batch_size=SPEC.batch,
                         eval_batch_size=SPEC.batch, predict_batch_size=SPEC.batch)


def _call(est, kind, input_fn, n, hooks=None):
  start = time.perf_counter()
  if kind == 'evaluate':
    est.evaluate(input_fn, hooks=hooks)
  else:
    count = sum(1 for _ in est.predict(input_fn, hooks=hooks))
    assert count == n, (count, n)
  return n / (time.perf_counter() - start)


def bench_calls(model_dir, sizes, rounds):
  print('\n## whole calls, examples/s (same input_fn, no hooks; second/rebuild/anew: median of '
        '%d calls)' % rounds)
  print('  %-8s %-6s %7s | %9s %9s %9s %9s | %13s %15s %13s' % (
      'call', 'config', 'N', 'first', 'second', 'rebuild', 'anew', 'second/first',
      'second/rebuild', 'anew/rebuild'))
  for kind in ('evaluate', 'predict'):
    for config in CONFIGS:
      for n in sizes:
        make_input = M.eval_input_fn if kind == 'evaluate' else M.predict_input_fn
        input_fn = make_input(SPEC, n)
        kept = _estimator(model_dir, config, True)
        first = _call(kept, kind, input_fn, n)
        second = M.median([_call(kept, kind, input_fn, n) for _ in range(rounds)])
        rebuilt = _estimator(model_dir, config, False)
        _call(rebuilt, kind, input_fn, n)  # the same first call, then the measured ones
        rebuild = M.median([_call(rebuilt, kind, input_fn, n) for _ in range(rounds)])
        anew_calls = [_call(kept, kind, lambda params: input_fn(params), n, [M.TimingHook()])
                      for _ in range(rounds + 1)]
        anew = M.median(anew_calls[1:])
        print('  %-8s %-6s %7d | %9s %9s %9s %9s | %12sx %14sx %12sx' % (
            kind, config, n, fmt(first), fmt(second), fmt(rebuild), fmt(anew),
            fmt(second / first, 2), fmt(second / rebuild, 2), fmt(anew / rebuild, 2)),
              flush=True)


def _request(seed, rows=8):
  """A predict input_fn over `rows` new examples (a request), of the usual structure."""
  x, _ = M.make_data(SPEC, rows, seed=seed)
  return lambda params: tf.data.Dataset.from_tensor_slices({'x': x}).batch(params['batch_size'])


WIDE = 10240  # the wide model's hidden layers: 106M parameters, a 424 MB checkpoint


def _wide_model_fn(features, labels, mode, params):
  """64-10240-10240-10 (no optimizer: its one training step only writes a checkpoint)."""
  del labels, params
  net = features['x']
  for index, units in enumerate((WIDE, WIDE, SPEC.sizes[-1])):
    kernel = tf.compat.v1.get_variable('dense%d/kernel' % index, [net.shape[1], units])
    net = tf.matmul(net, kernel)
    net = tf.nn.relu(net) if units == WIDE else net
  if mode == te.ModeKeys.PREDICT:
    return te.EstimatorSpec(mode, predictions={'classes': tf.argmax(net, 1)})
  step = tf.compat.v1.train.get_global_step()
  return te.EstimatorSpec(mode, loss=tf.reduce_mean(net),
                          train_op=tf.compat.v1.assign_add(step, 1))


def _wide(model_dir, reuse):
  config = M.estimator_config(te, model_dir, None, 100).replace(reuse_eval_graphs=reuse)
  return te.Estimator(_wide_model_fn, config=config, params={'batch_size': 8})


def bench_requests(model_dir, rounds):
  print('\n## requests: predict() of 8 new rows per call, ms per call (median of %d)' % rounds)
  print('  %-11s %9s %9s | %12s' % ('model', 'kept', 'rebuild', 'rebuild/kept'))
  wide_dir = tempfile.mkdtemp(prefix='bench_reuse_wide_')
  _wide(wide_dir, True).train(_request(0), steps=1)
  rows = [('small ' + config, lambda reuse, c=config: _estimator(model_dir, c, reuse))
          for config in CONFIGS]
  rows.append(('wide cpu', lambda reuse: _wide(wide_dir, reuse)))
  for label, make in rows:
    times = {}
    for reuse in (True, False):
      est = make(reuse)
      requests = [_request(seed) for seed in range(100, 101 + rounds)]
      calls = [8 / _call(est, 'predict', input_fn, 8) for input_fn in requests]
      times[reuse] = M.median(calls[1:]) * 1e3  # after the call that built the graph
    print('  %-11s %9s %9s | %11sx' % (label, fmt(times[True], 1), fmt(times[False], 1),
                                        fmt(times[False] / times[True], 2)), flush=True)
  shutil.rmtree(wide_dir, ignore_errors=True)


def bench_train_and_evaluate(evaluations, n):
  print('\n## train_and_evaluate: %d evaluations of %d examples, one every 100 steps '
        '(wall s)' % (evaluations, n))
  print('  %-6s %9s %9s | %8s' % ('config', 'reuse', 'rebuild', 'ratio'))
  for config in CONFIGS:
    walls = {}
    for reuse in (True, False):
      est = _estimator(tempfile.mkdtemp(prefix='bench_reuse_tae_'), config, reuse,
                       save_checkpoints_steps=100)
      start = time.perf_counter()
      te.train_and_evaluate(
          est, te.TrainSpec(M.train_input_fn(SPEC), max_steps=100 * evaluations),
          te.EvalSpec(M.eval_input_fn(SPEC, n), steps=None, throttle_secs=0))
      walls[reuse] = time.perf_counter() - start
    print('  %-6s %9s %9s | %7sx' % (config, fmt(walls[True], 2), fmt(walls[False], 2),
                                      fmt(walls[True] / walls[False], 2)), flush=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true', help='short run (about a minute)')
  parser.add_argument('--rounds', type=int, default=None)
  args = parser.parse_args()
  _common.quiet_tf()
  _common.header('eval_reuse: repeated evaluate()/predict() on one estimator%s' %
                 (' (--quick)' if args.quick else ''))
  rounds = args.rounds or (3 if args.quick else 7)
  sizes = (2048, 8192) if args.quick else (2048, 8192, 40960)  # multiples of the 2048-row pool
  model_dir = tempfile.mkdtemp(prefix='bench_reuse_')
  _estimator(model_dir, 'cpu', True).train(M.train_input_fn(SPEC), steps=100)
  bench_calls(model_dir, sizes, rounds)
  bench_requests(model_dir, rounds * 3)
  bench_train_and_evaluate(5 if args.quick else 10, 2048)


if __name__ == '__main__':
  main()
