"""Evaluate/predict examples/s, time to first training step, and peak-RSS growth.

  .venv/bin/python benchmarks/eval_predict.py [--quick] [--rounds R] [--skip eval,again,ttfs,rss]

Small MLP (64-256-10), batch 128 for train/eval/predict, three configurations of ours:
  tpu1   TPUEstimator(use_tpu=True), 1 shard, iterations_per_loop=100
  tpu1x  the same with TPUConfig(xla=True): evaluation/prediction loops compiled by XLA
  tpu2   TPUEstimator(use_tpu=True), 2 logical CPU shards, iterations_per_loop=100
  tpu2x  the same with TPUConfig(xla=True): one computation over both replicas
  cpu    TPUEstimator(use_tpu=False)
1. evaluate / predict examples/s on one checkpoint: a warm-up call, then R (default 5) rounds
   of calls over N1 and N2 examples: steady = examples between the first and last session.run
   of the N2 call / time (hook: the steady state inside one call); diff = (N2 - N1) /
   (t(N2) - t(N1)) over two whole calls (noisier); per call = N2 / t(N2).
   predict consumes every per-example dict the generator yields.
2. time to first training step: train(steps=100) on a fresh model_dir, a hook timing the
   first after_run ("1st run": 1 step for cpu, one device loop of 100 steps for tpu1/tpu2;
   "return": the call returned, after its final checkpoint).  Warm process (TF already used in this process), and
   process-level: a fresh `python` subprocess, from before it is spawned to the first run.
3. peak RSS: a subprocess runs 10 cycles of train(steps=50) + evaluate (2048 examples, one
   input_fn: its graph and session are kept between evaluations) on one estimator; peak RSS
   after cycle 2 and cycle 10, growth in %.  Peak = VmHWM: the child's
   getrusage ru_maxrss is printed too, but on Linux it starts at the spawning parent's peak
   (it survives fork+exec), so it hides the child's own growth.
4. ("again") evaluate / predict called again with the same input_fn and no hooks, so the graph
   and session of the previous call are kept: examples/s per call over 4096 and 40960
   examples, tpu1 (uncompiled by default) and tpu1x (compiled once, at the warm-up call).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import _common  # noqa: F401
from _common import fmt, spread, verdict
import models as M

CONFIGS = {
    'tpu1': dict(use_tpu=True, num_shards=1),
    'tpu1x': dict(use_tpu=True, num_shards=1, xla=True),
    'tpu2': dict(use_tpu=True, num_shards=2),
    'tpu2x': dict(use_tpu=True, num_shards=2, xla=True),
    'cpu': dict(use_tpu=False, num_shards=None),
}
LABELS = {'tpu1': 'ours use_tpu=True 1 shard ipl=100',
          'tpu1x': 'ours use_tpu=True 1 shard ipl=100 xla=True',
          'tpu2': 'ours use_tpu=True 2 shards ipl=100',
          'tpu2x': 'ours use_tpu=True 2 shards ipl=100 xla=True',
          'cpu': 'ours use_tpu=False'}
SPEC = M.SMALL


def _estimator(te, config, model_dir):
  return M.make_estimator(te, SPEC, model_dir, ipl=100, **CONFIGS[config])


def run_eval(est, n):
  hook = M.TimingHook()
  start = time.perf_counter()
  est.evaluate(M.eval_input_fn(SPEC, n), hooks=[hook])
  return time.perf_counter() - start, hook


def run_predict(est, n, with_labels=False):
  hook = M.TimingHook()
  start = time.perf_counter()
  count = sum(1 for _ in est.predict(M.predict_input_fn(SPEC, n, with_labels), hooks=[hook]))
  elapsed = time.perf_counter() - start
  assert count == n, (count, n)
  return elapsed, hook


def in_call_rate(hook, n, per_run):
  """Examples/s between the first and the last session.run of one call (`per_run` examples
  per run: a batch, or iterations_per_loop batches)."""
  if len(hook.after) < 2:
    return None
  return (n - min(per_run, n)) / (hook.after[-1] - hook.after[0])


def bench_eval_predict(te, args):
  n1, n2 = (4096, 40960) if args.quick else (8192, 163840)
  rounds = args.rounds or (1 if args.quick else 5)
  print('\n## evaluate / predict examples/s (batch %d; N1=%d N2=%d examples; %d round(s))' %
        (SPEC.batch, n1, n2, rounds), flush=True)
  model_dir = tempfile.mkdtemp(prefix='bench_evalpred_')
  M.make_estimator(te, SPEC, model_dir, use_tpu=False).train(M.train_input_fn(SPEC), steps=100)
  ests = {c: _estimator(te, c, model_dir) for c in CONFIGS}
  labelled = {}  # configs whose predict needs (features, labels) input (see below)
  for c, est in ests.items():
    run_eval(est, n1)
    try:
      run_predict(est, n1)
      labelled[c] = False
    except ValueError as e:
      # Known failure: sharded predict on a features-only dataset raises in
      # inputs.HostInput._distribute (labels None).  Measure with labelled input instead.
      print('  NOTE %s: predict on features-only input FAILED (%s: %s); predict below uses '
            '(features, labels) input, marked *' % (c, type(e).__name__, str(e)[:90]))
      labelled[c] = True
      run_predict(est, n1, True)
  res = {(c, k, m): [] for c in CONFIGS for k in ('eval', 'predict')
         for m in ('call', 'diff', 'steady')}
  for r in range(rounds):
    for c, est in ests.items():
      per_run = SPEC.batch * (100 if CONFIGS[c]['use_tpu'] else 1)
      predict = lambda est, n, c=c: run_predict(est, n, labelled[c])
      for kind, fn in (('eval', run_eval), ('predict', predict)):
        t1, _ = fn(est, n1)
        t2, hook = fn(est, n2)
        res[(c, kind, 'call')].append(n2 / t2)
        res[(c, kind, 'diff')].append((n2 - n1) / (t2 - t1) if t2 > t1 else None)
        res[(c, kind, 'steady')].append(in_call_rate(hook, n2, per_run))
    print('  round %d done' % (r + 1), flush=True)
  print('\n  %-38s | %-26s | %-26s' % ('examples/s (median)', 'evaluate', 'predict'))
  print('  %-38s | %8s %8s %8s | %8s %8s %8s' % ('', 'steady', 'diff', 'per call',
                                                 'steady', 'diff', 'per call'))
  for c in CONFIGS:
    med = lambda kind, m, c=c: fmt(M.median(res[(c, kind, m)]))
    print('  %-38s | %8s %8s %8s | %8s %8s %8s' % (
        LABELS[c] + (' *' if labelled[c] else ''), med('eval', 'steady'),
        med('eval', 'diff'), med('eval', 'call'), med('predict', 'steady'),
        med('predict', 'diff'), med('predict', 'call')))
  print('  steady ranges: ' + '; '.join('%s eval %s predict %s' % (
      c, spread(res[(c, 'eval', 'steady')]), spread(res[(c, 'predict', 'steady')]))
                                        for c in CONFIGS))
  def ratio(c, kind, measure):
    a, b = M.median(res[(c, kind, measure)]), M.median(res[('cpu', kind, measure)])
    return a / b if a and b else None

  compiled = [fmt(_ratio(res, 'tpu1x', 'tpu1', kind, m), 2)
              for kind in ('eval', 'predict') for m in ('steady', 'call')]
  print('  tpu1x / tpu1 (compiled / uncompiled, per-round ratios): eval %s steady, %s per '
        'call; predict %s steady, %s per call' % tuple(compiled))
  for c in ('tpu1', 'tpu2'):
    print('  %s / use_tpu=False: eval %s steady, %s per call; predict %s steady, %s per call' % (
        c, fmt(ratio(c, 'eval', 'steady'), 2), fmt(ratio(c, 'eval', 'call'), 2),
        fmt(ratio(c, 'predict', 'steady'), 2), fmt(ratio(c, 'predict', 'call'), 2)))


def bench_again(te, args):
  """evaluate()/predict() again with the same input_fn and no hooks: the graph and session of
  the previous call are kept (graph_cache), so a compiled loop is not compiled again."""
  sizes = (4096, 40960)
  rounds = args.rounds or (1 if args.quick else 5)
  print('\n## evaluate / predict again, graph kept (examples/s per call; %d round(s))' % rounds,
        flush=True)
  model_dir = tempfile.mkdtemp(prefix='bench_again_')
  M.make_estimator(te, SPEC, model_dir, use_tpu=False).train(M.train_input_fn(SPEC), steps=100)
  configs = ('tpu1', 'tpu1x')
  res = {(c, k, n): [] for c in configs for k in ('eval', 'predict') for n in sizes}
  calls = {}
  for c in configs:
    est = _estimator(te, c, model_dir)
    for n in sizes:
      eval_fn, predict_fn = M.eval_input_fn(SPEC, n), M.predict_input_fn(SPEC, n)
      calls[(c, 'eval', n)] = lambda est=est, fn=eval_fn: est.evaluate(fn)
      calls[(c, 'predict', n)] = lambda est=est, fn=predict_fn: sum(1 for _ in est.predict(fn))
  # An estimator keeps one graph per mode: each call's repeats run one after the other (a
  # call with another input_fn in between would build and compile anew).
  for key, call in calls.items():
    call()  # builds (and compiles) the graph the timed calls reuse
    for _ in range(rounds):
      start = time.perf_counter()
      call()
      res[key].append(key[2] / (time.perf_counter() - start))
  for kind in ('eval', 'predict'):
    for n in sizes:
      line = ', '.join('%s %s' % (c, fmt(M.median(res[(c, kind, n)]))) for c in configs)
      ratio = _ratio(res, 'tpu1x', 'tpu1', kind, n)  # of calls of the same index
      print('  %-7s again, %6d examples: %s; tpu1x/tpu1 %s' % (kind, n, line, fmt(ratio, 2)))


def _ratio(res, a, b, kind, measure):
  """The median of per-round ratios a/b (robust to load drifting between rounds)."""
  pairs = [x / y for x, y in zip(res[(a, kind, measure)], res[(b, kind, measure)]) if x and y]
  return M.median(pairs) if pairs else None


# ---------------------------------------------------------------------------------------------
def first_step(te, config):
  """train(steps=100) on a fresh model_dir: (to session, to first run) seconds from the call."""
  est = _estimator(te, config, tempfile.mkdtemp(prefix='bench_ttfs_'))
  hook = M.TimingHook()
  start = time.perf_counter()
  est.train(M.train_input_fn(SPEC), steps=100, hooks=[hook])
  return hook.created - start, hook.after[0] - start, time.perf_counter() - start


def child_ttfs(args):
  """Subprocess: prints JSON with seconds from the parent's t0 to import / first run."""
  t_child = time.time()
  _common.quiet_tf()
  import tpu_estimator as te  # pylint: disable=import-outside-toplevel
  t_import = time.time()
  est = _estimator(te, args.config, tempfile.mkdtemp(prefix='bench_ttfs_'))
  hook = M.TimingHook()
  start_wall, start = time.time(), time.perf_counter()
  est.train(M.train_input_fn(SPEC), steps=100, hooks=[hook])
  first_wall = start_wall + (hook.after[0] - start)
  print('RESULT ' + json.dumps({
      'python_start': t_child - args.t0, 'imported': t_import - args.t0,
      'first_run': first_wall - args.t0, 'call_to_first_run': hook.after[0] - start}))


def bench_ttfs(te, args):
  reps = 1 if args.quick else 3
  configs = ['tpu1', 'cpu'] if args.quick else list(CONFIGS)
  print('\n## time to first training step (train(steps=100), fresh model_dir; %d rep(s))' % reps,
        flush=True)
  warm = {c: [] for c in configs}
  for _ in range(reps):
    for c in configs:
      warm[c].append(first_step(te, c))
  proc = {c: [] for c in configs}
  for _ in range(reps):
    for c in configs:
      proc[c].append(_spawn(['--child-ttfs', '--config', c]))
  print('\n  %-36s | %-15s | %-29s' % ('seconds (median)', 'warm: call ->',
                                        'new process: spawn ->'))
  print('  %-36s | %7s %7s | %9s %9s %9s' % ('', '1st run', 'return', 'imported', '1st run',
                                             'call->1st'))
  for c in configs:
    w = [M.median([x[i] for x in warm[c]]) for i in range(3)]
    p = proc[c]
    print('  %-36s | %7.3f %7.3f | %9s %9s %9s' % (
        LABELS[c], w[1], w[2], fmt(M.median([x['imported'] for x in p]), 2),
        fmt(M.median([x['first_run'] for x in p]), 2),
        fmt(M.median([x['call_to_first_run'] for x in p]), 2)))


# ---------------------------------------------------------------------------------------------
def child_rss(args):
  _common.quiet_tf()
  import tpu_estimator as te  # pylint: disable=import-outside-toplevel
  est = _estimator(te, args.config, tempfile.mkdtemp(prefix='bench_rss_'))
  out = []
  eval_fn = M.eval_input_fn(SPEC, 2048)  # one input_fn, as train_and_evaluate: graph kept
  for _ in range(args.cycles):
    est.train(M.train_input_fn(SPEC), steps=50)
    est.evaluate(eval_fn)
    out.append(M.rss_mb())
  print('RESULT ' + json.dumps(out))


def bench_rss(args):
  cycles = 4 if args.quick else 10
  configs = ['tpu1'] if args.quick else list(CONFIGS)
  print('\n## peak RSS over %d cycles of train(steps=50) + evaluate (one process each)' % cycles,
        flush=True)
  print('\n  %-36s %8s %8s %7s | %8s %8s %7s | %s' % (
      'MB', 'peak@2', 'peak@%d' % cycles, 'growth', 'rss@2', 'rss@%d' % cycles, 'growth',
      'ru_maxrss@2,@%d' % cycles))
  for c in configs:
    out = _spawn(['--child-rss', '--config', c, '--cycles', str(cycles)])
    (cur2, peak2, max2), (curn, peakn, maxn) = out[1], out[-1]
    growth = 100.0 * (peakn - peak2) / peak2
    print('  %-36s %8.0f %8.0f %6.1f%% | %8.0f %8.0f %6.1f%% | %.0f, %.0f  (target < 10%%: %s)'
          % (LABELS[c], peak2, peakn, growth, cur2, curn, 100.0 * (curn - cur2) / cur2, max2,
             maxn, verdict(growth, 10.0, higher=False)))
    print('    peak (VmHWM) per cycle: %s' % ' '.join('%.0f' % v[1] for v in out), flush=True)


# ---------------------------------------------------------------------------------------------
def _spawn(extra):
  cmd = [sys.executable, os.path.abspath(__file__)] + extra
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  t0 = time.time()
  proc = subprocess.run(cmd + ['--t0', repr(t0)], env=env, capture_output=True, text=True,
                        check=False)
  for line in proc.stdout.splitlines():
    if line.startswith('RESULT '):
      return json.loads(line[len('RESULT '):])
  raise RuntimeError('child failed (%d):\n%s\n%s' % (proc.returncode, proc.stdout,
                                                     proc.stderr[-3000:]))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true', help='short smoke run (< 1 min)')
  parser.add_argument('--rounds', type=int, default=None)
  parser.add_argument('--skip', default='', help='comma list of eval,again,ttfs,rss')
  parser.add_argument('--child-ttfs', action='store_true', help=argparse.SUPPRESS)
  parser.add_argument('--child-rss', action='store_true', help=argparse.SUPPRESS)
  parser.add_argument('--config', default='tpu1', help=argparse.SUPPRESS)
  parser.add_argument('--cycles', type=int, default=10, help=argparse.SUPPRESS)
  parser.add_argument('--t0', type=float, default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child_ttfs:
    return child_ttfs(args)
  if args.child_rss:
    return child_rss(args)
  skip = set(args.skip.split(','))
  _common.quiet_tf()
  import tpu_estimator as te  # pylint: disable=import-outside-toplevel
  _common.header('eval_predict: evaluate/predict examples/s, time to first step, RSS%s' %
                 (' (--quick)' if args.quick else ''))
  if 'eval' not in skip:
    bench_eval_predict(te, args)
  if 'again' not in skip:
    bench_again(te, args)
  if 'ttfs' not in skip:
    bench_ttfs(te, args)
  if 'rss' not in skip:
    bench_rss(args)
  return None


if __name__ == '__main__':
  main()
