"""Sharding overhead: ours with 1, 2 and 4 logical CPU shards at the same global batch.

  .venv/bin/python benchmarks/shards.py [--quick] [--models small,compute] [--rounds R]
                                        [--shards 1,2,4]

`TPUEstimator(use_tpu=True)`, TPUConfig(num_shards=S, iterations_per_loop=100), global batch
128 (small MLP) / 256 (compute-bound MLP) split over S replicas of a MirroredStrategy on logical
CPU devices (one physical 2-core CPU: more shards do not add compute, so this measures what
replication costs).  Each configuration: one warm-up train() call, then R interleaved rounds
of train(steps=N1) and train(steps=N2):
  steady    steps between the first and last device loop of the N2 call / time (hook):
            the steady-state rate inside one call;
  diff      (N2 - N1) / (t(N2) - t(N1)) over two whole calls (noisier);
  per call  N2 / t(N2) (graph, session, checkpoints included).
Medians over rounds, and the ratio to 1 shard (per round, median shown).
"""
import argparse
import tempfile

import _common  # noqa: F401
from _common import fmt, spread
import models as M
from train_throughput import in_call_rate


def bench_model(spec, args, te):
  quick = args.quick
  if spec.name == 'small':
    warm, n1, n2 = (100, 200, 600) if quick else (200, 1000, 3000)
  else:
    warm, n1, n2 = (100, 100, 200) if quick else (100, 100, 300)
  rounds = args.rounds or (1 if quick else 3)
  ipl = 100
  shard_counts = [int(s) for s in args.shards.split(',')]
  print('\n## %s MLP %s, global batch %d; N1=%d N2=%d, %d round(s)' % (
      spec.name, '-'.join(map(str, spec.sizes)), spec.batch, n1, n2, rounds), flush=True)
  runners = {}
  for shards in shard_counts:
    est = M.make_estimator(te, spec, tempfile.mkdtemp(prefix='bench_shards_'), use_tpu=True,
                           num_shards=shards, ipl=ipl)
    runners[shards] = M.EstimatorTrain(est, spec)
    runners[shards].run(warm)
  res = {s: {'call': [], 'steady': [], 'diff': []} for s in shard_counts}
  ratio = {s: {'call': [], 'steady': [], 'diff': []} for s in shard_counts}
  for r in range(rounds):
    for shards in shard_counts:
      runner = runners[shards]
      t1 = runner.run(n1)
      t2 = runner.run(n2)
      res[shards]['call'].append(n2 / t2)
      res[shards]['diff'].append((n2 - n1) / (t2 - t1) if t2 > t1 else None)
      res[shards]['steady'].append(in_call_rate(runner.last_hook, n2, ipl))
    base = shard_counts[0]
    for shards in shard_counts:
      for key in ('call', 'steady', 'diff'):
        a, b = res[shards][key][-1], res[base][key][-1]
        ratio[shards][key].append(a / b if a and b else None)
    print('  round %d done' % (r + 1), flush=True)

  print('\n  %-8s %9s %9s %9s %9s | %-22s | %s' % (
      'shards', 'steady', 'steady', 'diff', 'per call', 'ratio to %d shard' % shard_counts[0],
      'steady range'))
  print('  %-8s %9s %9s %9s %9s | %6s %7s %7s |' % ('', 'median', 'best', 'median', 'median',
                                                   'steady', 'diff', 'call'))
  for shards in shard_counts:
    med = {k: M.median(v) for k, v in res[shards].items()}
    rat = {k: M.median(v) for k, v in ratio[shards].items()}
    best = max([v for v in res[shards]['steady'] if v] or [0]) or None
    print('  %-8s %9s %9s %9s %9s | %6s %7s %7s | %s' % (
        shards, fmt(med['steady']), fmt(best), fmt(med['diff']), fmt(med['call']),
        fmt(rat['steady'], 2), fmt(rat['diff'], 2), fmt(rat['call'], 2),
        spread(res[shards]['steady'])))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true', help='short smoke run (< 1 min)')
  parser.add_argument('--models', default=None, help='default small,compute (--quick: small)')
  parser.add_argument('--rounds', type=int, default=None)
  parser.add_argument('--shards', default='1,2,4')
  args = parser.parse_args()
  models = args.models or ('small' if args.quick else 'small,compute')
  _common.quiet_tf()
  import tpu_estimator as te  # pylint: disable=import-outside-toplevel
  _common.header('shards: ours with 1/2/4 logical CPU shards, same global batch%s' %
                 (' (--quick)' if args.quick else ''))
  for name in models.split(','):
    bench_model(M.SPECS[name], args, te)


if __name__ == '__main__':
  main()
