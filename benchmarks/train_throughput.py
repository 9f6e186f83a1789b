"""Training steps/s: ours vs in-run anchors, for the small and the compute-bound MLP.

  .venv/bin/python benchmarks/train_throughput.py [--quick] [--models small,compute]
                                                  [--rounds R] [--no-keras-xla]
                                                  [--wait-load SECONDS]

Ours: `TPUEstimator(use_tpu=True)`, TPUConfig(num_shards=1, iterations_per_loop=100) with the
default xla=None (the issue's target: the whole loop compiled from the first call repeating an
input_fn), a row with xla=False (uncompiled) and one with xla=True (compiled from the first call),
checkpoints/summaries/step logging effectively off, running the model_fn with
`tf.compat.v1.train.AdamOptimizer` (one fused `ResourceApplyAdam` kernel per variable) and,
second row, the same model_fn with the same Adam written as element-wise ops (how
`keras.optimizers.Adam` updates).  Ratios are printed against the best anchor of any kind (the
issue's target) and against the best anchor doing the same kind of Adam update.  Anchors (same process, same data
pipeline): plain `Session.run` loop, hand-written `tf.function` loops (1 step per call with the
fused v1 Adam kernel or keras Adam; 100 steps per call in a `tf.range` loop, either Adam), Keras 3
`fit(steps_per_execution=100)` with and without XLA.  Info rows: a bare graph `while_loop` of
100 steps per `session.run`, control flow v2 (what our device loop builds) and v1 (the legacy
loop): the ceiling for a device loop.  The compute-bound run leaves out tf.function 1
step/call with keras Adam, Keras XLA and the v1 loop (slow, and never the best there).
--quick also drops Keras XLA and the v1 loop for the small MLP, and for the compute-bound MLP
keeps only Session.run, tf.function 100/call (fused Adam) and ours.

Every runner is built and warmed up (first calls excluded), then measured in R interleaved
rounds of one call of N2 steps each (ours also one of N1 steps):
  steady     the steady-state rate inside one long call.  Ours: steps between the first and
             the last device loop of the train(steps=N2) call / time, from a hook's after_run
             timestamps.  Keras fit: the same between the first and last execution
             (on_train_batch_end).  Loops without a per-call cost: N2 / t(N2).
  diff       ours only: (N2 - N1) / (t(N2) - t(N1)) over two whole train() calls (fixed
             per-call costs cancel; noisier).
  per call   N2 / t(N2); for ours one whole train(steps=N2) call: start and end checkpoints
             included; graph, session and restore too where a call builds them (since session
             5, a repeated call reuses the previous call's graph and session: the warm-up
             calls build them).
Medians and best-of-rounds (noise on a shared 2-core machine only slows runs down); the ratio
ours / best anchor is also taken per round (median shown), robust to load drifting between
rounds.
"""
import argparse
import tempfile

import _common  # noqa: F401  (sys.path, TF_CPP_MIN_LOG_LEVEL)
from _common import fmt, spread, verdict
import models as M

# ours (defaults) / best anchor: (steady, per train() call), issue 29.
TARGETS = {'small': (1.3, 1.1), 'compute': (1.1, 1.1)}
OURS = 'ours TPUEstimator 1 shard ipl=100'
OURS_ELEMENTWISE = 'ours, element-wise Adam model_fn'
OURS_OFF = 'ours xla=False (uncompiled)'
OURS_XLA = 'ours xla=True (compiled loop)'
# Which Adam update each row runs: the fused v1 kernel (ResourceApplyAdam, what
# tf.compat.v1.train.AdamOptimizer uses) or element-wise ops (keras.optimizers.Adam, and the
# benchmark's element-wise model_fn).
ELEMENTWISE = ('keras Adam', 'Keras fit', OURS_ELEMENTWISE)


def update_kind(name):
  return 'element-wise' if any(key in name for key in ELEMENTWISE) else 'fused'


def in_call_rate(hook, n, ipl):
  """Steps/s between the first and the last device loop of one train(steps=n) call."""
  if hook is None or len(hook.after) < 2:
    return None
  first = min(ipl, n)
  return (n - first) / (hook.after[-1] - hook.after[0])


def _best(values):
  values = [v for v in values if v]
  return max(values) if values else None


def bench_model(spec, args, te):
  quick = args.quick
  # All step counts are multiples of 100 (Keras fit and the 100-step loops run whole
  # executions).
  if spec.name == 'small':
    warm, warm_calls, n1, n2 = (200, 1, 200, 600) if quick else (200, 2, 1000, 3000)
  else:
    warm, warm_calls, n1, n2 = (100, 1, 100, 200) if quick else (100, 1, 100, 300)
  rounds = args.rounds or (1 if quick else 3)
  ipl = 100
  print('\n## %s MLP %s, batch %d (~%.2f GFLOP/step); N1=%d N2=%d, %d round(s)' % (
      spec.name, '-'.join(map(str, spec.sizes)), spec.batch, M.flops_per_step(spec) / 1e9,
      n1, n2, rounds), flush=True)

  builders = [
      ('Session.run loop (1 step/run)', 'anchor', lambda: M.SessionLoop(spec)),
      ('tf.function 1 step/call, fused Adam', 'anchor', lambda: M.TFFunctionLoop(spec)),
      ('tf.function 1 step/call, keras Adam', 'anchor',
       lambda: M.TFFunctionLoop(spec, 'keras')),
      ('tf.function 100 steps/call, fused Adam', 'anchor',
       lambda: M.TFFunctionLoop(spec, 'fused', 100)),
      ('tf.function 100 steps/call, keras Adam', 'anchor',
       lambda: M.TFFunctionLoop(spec, 'keras', 100)),
      ('Keras fit spe=100', 'anchor', lambda: M.KerasFit(spec)),
      ('Keras fit spe=100 XLA', 'anchor', lambda: M.KerasFit(spec, jit_compile=True)),
      ('graph while_loop v2 100/run (info)', 'info', lambda: M.WhileLoop(spec, 100)),
      ('graph while_loop v1 100/run (info)', 'info', lambda: M.WhileLoop(spec, 100, 'v1')),
      ('ours, element-wise Adam model_fn', 'ours', lambda: M.EstimatorTrain(
          M.make_estimator(te, spec, tempfile.mkdtemp(prefix='bench_'), use_tpu=True,
                           num_shards=1, ipl=ipl, optimizer='elementwise_adam'),
          spec, per_run=ipl)),
      (OURS, 'ours', lambda: M.EstimatorTrain(
          M.make_estimator(te, spec, tempfile.mkdtemp(prefix='bench_'), use_tpu=True,
                           num_shards=1, ipl=ipl), spec, per_run=ipl)),
      (OURS_OFF, 'ours', lambda: M.EstimatorTrain(
          M.make_estimator(te, spec, tempfile.mkdtemp(prefix='bench_'), use_tpu=True,
                           num_shards=1, ipl=ipl, xla=False), spec, per_run=ipl)),
      (OURS_XLA, 'ours', lambda: M.EstimatorTrain(
          M.make_estimator(te, spec, tempfile.mkdtemp(prefix='bench_'), use_tpu=True,
                           num_shards=1, ipl=ipl, xla=True), spec, per_run=ipl)),
  ]
  if not args.keras_xla:
    builders = [b for b in builders if 'XLA' not in b[0]]
  if spec.name == 'compute':  # keep the run short: two slow anchors and an info row go
    builders = [b for b in builders if '1 step/call, keras' not in b[0] and
                'v1 100' not in b[0] and 'Keras fit spe=100 XLA' != b[0]]
  if quick:
    builders = [b for b in builders if 'v1 100/run' not in b[0]]
  if quick and spec.name == 'compute':  # keep --quick under a minute
    builders = [b for b in builders
                if b[0].startswith(('Session', 'tf.function 100 steps/call, fused', 'ours'))]
  runners = []
  for name, kind, build in builders:
    runner = build()
    for _ in range(warm_calls):
      runner.run(warm)  # first calls: tracing, graph building, initial checkpoint
    runners.append((name, kind, runner))

  results = {name: {'call': [], 'steady': [], 'diff': []} for name, _, _ in runners}
  ratio_keys = ('steady', 'call', 'diff', 'same_update', 'elementwise', 'best_ours',
                'xla_steady', 'xla_call', 'xla_vs_best', 'xla_call_vs_best', 'off_steady',
                'off_call')
  ratios = {key: [] for key in ratio_keys}
  for r in range(rounds):
    best = {'all': 0.0, 'fused': 0.0, 'element-wise': 0.0}
    for name, kind, runner in runners:
      t1 = runner.run(n1) if kind == 'ours' else None
      t2 = runner.run(n2)
      steady = runner.in_call_rate(n2) if hasattr(runner, 'in_call_rate') else n2 / t2
      results[name]['call'].append(n2 / t2)
      results[name]['steady'].append(steady)
      if t1 is not None:
        results[name]['diff'].append((n2 - n1) / (t2 - t1) if t2 > t1 else None)
      if kind == 'anchor' and steady:
        best['all'] = max(best['all'], steady)
        best[update_kind(name)] = max(best[update_kind(name)], steady)
    ours, ours_ew = results[OURS], results[OURS_ELEMENTWISE]
    for key in ('steady', 'call', 'diff'):
      ratios[key].append(_ratio(ours[key][-1], best['all']))
    ratios['same_update'].append(_ratio(ours['steady'][-1], best['fused']))
    ratios['elementwise'].append(_ratio(ours_ew['steady'][-1], best['element-wise']))
    ratios['best_ours'].append(_ratio(_best([ours['steady'][-1], ours_ew['steady'][-1]]),
                                      best['all']))
    ours_xla, ours_off = results[OURS_XLA], results[OURS_OFF]
    ratios['xla_steady'].append(_ratio(ours_xla['steady'][-1], ours_off['steady'][-1]))
    ratios['xla_call'].append(_ratio(ours_xla['call'][-1], ours_off['call'][-1]))
    ratios['off_steady'].append(_ratio(ours_off['steady'][-1], best['all']))
    ratios['off_call'].append(_ratio(ours_off['call'][-1], best['all']))
    ratios['xla_vs_best'].append(_ratio(ours_xla['steady'][-1], best['all']))
    ratios['xla_call_vs_best'].append(_ratio(ours_xla['call'][-1], best['all']))
    print('  round %d done: ours/best anchor steady %s, same Adam update %s, element-wise '
          'model_fn/element-wise anchors %s  (%s)' % (
              r + 1, fmt(ratios['steady'][-1], 2), fmt(ratios['same_update'][-1], 2),
              fmt(ratios['elementwise'][-1], 2), M.load_note()), flush=True)
  for _, _, runner in runners:
    if hasattr(runner, 'close'):
      runner.close()

  print('\n  %-40s %8s %8s %8s %8s  %-8s %s' % ('steps/s', 'steady', 'steady', 'diff',
                                                'per call', 'Adam', 'steady'))
  print('  %-40s %8s %8s %8s %8s  %-8s %s' % ('', 'median', 'best', 'median', 'median',
                                                'update', 'range'))
  best_med, best_max = (None, 0.0), (None, 0.0)
  for name, kind, _ in runners:
    res = results[name]
    steady, top = M.median(res['steady']), _best(res['steady'])
    if kind == 'anchor' and steady and steady > best_med[1]:
      best_med = (name, steady)
    if kind == 'anchor' and top and top > best_max[1]:
      best_max = (name, top)
    print('  %-40s %8s %8s %8s %8s  %-8s %s' % (
        name, fmt(steady), fmt(top), fmt(M.median(res['diff'])), fmt(M.median(res['call'])),
        update_kind(name)[:8], spread(res['steady'])))
  steady_target, call_target = TARGETS[spec.name]
  ours = results[OURS]
  print('\n  best anchor (steady): median %s (%s steps/s); best-of-rounds %s (%s steps/s)' % (
      best_med[0], fmt(best_med[1]), best_max[0], fmt(best_max[1])))
  top = _best(ours['steady'])
  lines = [
      ('ours / best anchor, steady, median of per-round ratios', M.median(ratios['steady']),
       steady_target),
      ('ours / best anchor, steady, best / best',
       top / best_max[1] if top and best_max[1] else None, steady_target),
      ('ours / best anchor, diff, median of per-round ratios', M.median(ratios['diff']),
       steady_target),
      ('ours / best anchor, per train() call, median ratio', M.median(ratios['call']),
       call_target),
      ('ours / best anchor with the same fused Adam kernel, steady',
       M.median(ratios['same_update']), steady_target),
      ('ours element-wise model_fn / best element-wise anchor, steady',
       M.median(ratios['elementwise']), steady_target),
      ('best of ours (either model_fn) / best anchor, steady', M.median(ratios['best_ours']),
       steady_target),
  ]
  for label, value, target in lines:
    print('  %-62s %5s  (target >= %.2f: %s)' % (label, fmt(value, 2), target,
                                                  verdict(value, target)))
  for label, key in (('ours xla=True / best anchor, steady', 'xla_vs_best'),
                     ('ours xla=True / best anchor, per train() call', 'xla_call_vs_best'),
                     ('ours xla=False / best anchor, steady', 'off_steady'),
                     ('ours xla=False / best anchor, per train() call', 'off_call')):
    print('  %-62s %5s  (info)' % (label, fmt(M.median(ratios[key]), 2)))
  print('  %-62s %5s  (info: XLA on/off, same run)' % (
      'ours xla=True / xla=False, steady', fmt(M.median(ratios['xla_steady']), 2)))
  print('  %-62s %5s  (info: compiles in the first call only; later calls reuse its graph)' % (
      'ours xla=True / xla=False, per train() call', fmt(M.median(ratios['xla_call']), 2)))
  return results, ratios


def _ratio(value, base):
  return value / base if value and base else None


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true', help='short smoke run (< 1 min)')
  parser.add_argument('--models', default='small,compute')
  parser.add_argument('--rounds', type=int, default=None)
  parser.add_argument('--no-keras-xla', dest='keras_xla', action='store_false')
  parser.add_argument('--wait-load', type=float, default=0.0, metavar='SECONDS',
                      help='first wait up to this long for the 1-min load average < 1')
  args = parser.parse_args()
  M.wait_for_low_load(1.0, args.wait_load)
  if args.quick:
    args.keras_xla = False
  _common.quiet_tf()
  import tpu_estimator as te  # pylint: disable=import-outside-toplevel
  _common.header('train_throughput: steps/s, ours vs in-run anchors%s' %
                 (' (--quick)' if args.quick else ''))
  for name in args.models.split(','):
    bench_model(M.SPECS[name], args, te)


if __name__ == '__main__':
  main()
