"""Training with a host_call: the compiled loop against the uncompiled one (issue 29, part 2).

  .venv/bin/python benchmarks/host_call.py [--quick] [--rounds R] [--models small,compute]
                                           [--steps N]

Ours, `use_tpu=True`, 1 shard, `iterations_per_loop=100`, checkpoints and logging effectively
off, the model_fn of models.py returning the TPU-era host_call (loss and learning rate written
as TF2 summaries at every step).  Rows: that model uncompiled (`xla=False`) and compiled
(`xla=True`: the whole loop, host_call run on the host for each step after it), and the same
model without a host_call compiled.  Steps/s of a `train(steps=N)` call after a warm-up call
with the same input_fn (the graph is kept): steady (between the first and last loop of the
call) and per call.  Ratios are medians of the per-round ratios.
"""
import argparse
import tempfile

import _common
from _common import fmt
import models as M

import tpu_estimator as te

ROWS = (('host_call, xla=False', False, True), ('host_call, xla=True', True, True),
        ('no host_call, xla=True', True, False))


def _rates(spec, xla, host_call, steps):
  est = M.make_estimator(te, spec, tempfile.mkdtemp(prefix='bench_host_call_'), xla=xla,
                         host_call=host_call)
  runner = M.EstimatorTrain(est, spec, per_run=100)
  runner.run(200)  # builds and compiles; the timed call reuses its graph
  seconds = runner.run(steps)
  return runner.in_call_rate(steps), steps / seconds


def bench(spec, rounds, steps):
  rates = {label: [] for label, _, _ in ROWS}
  for _ in range(rounds):
    for label, xla, host_call in ROWS:
      rates[label].append(_rates(spec, xla, host_call, steps))
  print('\n## %s MLP: steps/s, median of %d rounds (steady / per call)' % (spec.name, rounds))
  for label, _, _ in ROWS:
    print('  %-24s %9s / %9s' % (label, fmt(M.median([r[0] for r in rates[label]])),
                                 fmt(M.median([r[1] for r in rates[label]]))))
  for what, a, b in (('host_call compiled / uncompiled', 1, 0),
                     ('host_call compiled / no host_call compiled', 1, 2)):
    for i, kind in enumerate(('steady', 'per call')):
      ratio = M.median([x[i] / y[i] for x, y in zip(rates[ROWS[a][0]], rates[ROWS[b][0]])])
      print('  %-44s %-8s %s' % (what, kind, fmt(ratio, 2)))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true', help='short smoke run (< 1 min)')
  parser.add_argument('--models', default='small')
  parser.add_argument('--rounds', type=int, default=None)
  parser.add_argument('--steps', type=int, default=None)
  args = parser.parse_args()
  _common.quiet_tf()
  _common.header('host_call: the compiled training loop with a host_call%s' %
                 (' (--quick)' if args.quick else ''))
  rounds = args.rounds or (1 if args.quick else 3)
  steps = args.steps or (300 if args.quick else 3000)
  for name in args.models.split(','):
    bench(M.SPECS[name], rounds, steps)


if __name__ == '__main__':
  main()
