"""Ours vs the original TPUEstimator (TF 2.15 + tensorflow-estimator), same program file.

  .venv/bin/python benchmarks/vs_original.py [--quick] [--rounds R] [--reference PYTHON]
                                             [--optimizer v1_adam|elementwise_adam]
                                             [--keep-optional] [--ttfs-only]

Runs benchmarks/original_compat_program.py as subprocesses (one fresh process per sample):
  orig       reference venv, tf.compat.v1.estimator.tpu, use_tpu=False (the original cannot
             shard on CPU)
  ours cpu   this venv, tpu_estimator, use_tpu=False
  ours tpu1  this venv, tpu_estimator, use_tpu=True, 1 shard, iterations_per_loop=100
R interleaved rounds (default 5; --quick 1 with shorter runs); medians, then ratios ours/orig
(of the medians, and of the best-of-rounds values).  Verdicts use the ratio of medians.
steady: the rate between the first and last session.run of one long call (hook timestamps);
diff: (N2 - N1) / (t(N2) - t(N1)) over two whole calls; per call: N2 / t(N2).
The reference python is --reference, $REFERENCE_PYTHON, or the one `bash scripts/reference-venv.sh`
builds (once, outside the checkout) and prints.

Targets (issue): train (small MLP) >= 2.5x original; evaluate and predict examples/s >= 1.5x
original (calls with a new input_fn on the estimator that trained, and a new estimator's first
call, which builds its graph in both); time to first step <= original's; evaluate() called again (same input_fn, no hooks:
train_and_evaluate's evaluations) >= 5x the original's per-call examples/s (issue 29; 3x in issue 17).
`--optimizer elementwise_adam` runs every config with the model_fn whose Adam is element-wise
ops instead of tf.compat.v1.train.AdamOptimizer's fused kernel (see models.py).
scikit-learn, pandas and scipy are hidden from every process unless --keep-optional (see
original_compat_program.py).  `--ttfs-only`: only the time to the first step (a few seconds a
sample; default 9 rounds).  Before the rounds each interpreter byte-compiles the program and
(ours) the package, as an installed package is: where PYTHONDONTWRITEBYTECODE is set, every fresh
process would otherwise compile this checkout's modules again (~0.05 s), while both
TensorFlows and tensorflow-estimator come compiled.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import _common
from _common import fmt, verdict
import models as M

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, 'original_compat_program.py')
REFERENCE_SCRIPT = os.path.join(os.path.dirname(HERE), 'scripts', 'reference-venv.sh')

METRICS = [
    # key, label, digits, higher is better
    ('train_steady', 'train steps/s, steady', 0, True),
    ('train_diff', 'train steps/s, diff', 0, True),
    ('train_call', 'train steps/s, per call', 0, True),
    ('eval_steady', 'eval examples/s, steady', 0, True),
    ('eval_diff', 'eval examples/s, diff', 0, True),
    ('eval_call', 'eval examples/s, per call', 0, True),
    ('eval_first_call', 'eval, new estimator, per call', 0, True),
    ('eval_again_call', 'evaluate() again, examples/s', 0, True),
    ('predict_steady', 'predict examples/s, steady', 0, True),
    ('predict_diff', 'predict examples/s, diff', 0, True),
    ('predict_call', 'predict examples/s, per call', 0, True),
    ('predict_first_call', 'predict, new estimator, per call', 0, True),
    ('ttfs_call_to_first_run', 'train() call -> 1st run (s)', 3, False),
    ('ttfs_call_to_step_100', 'train() call -> step 100 done (s)', 3, False),
    ('tf_imported', 'spawn -> TF imported (s)', 2, False),
    ('imported', 'spawn -> estimator imported (s)', 2, False),
    ('import_only', 'TF -> estimator imported (s)', 3, False),
    ('ttfs_process_to_first_run', 'spawn -> 1st run (s)', 2, False),
]
TTFS_KEYS = ('ttfs_call_to_first_run', 'ttfs_call_to_step_100', 'tf_imported', 'imported',
             'import_only', 'ttfs_process_to_first_run')
TARGETS = {  # metric -> (target ratio ours/orig, higher is better)
    'train_steady': (2.5, True), 'train_diff': (2.5, True), 'train_call': (2.5, True),
    'eval_steady': (1.5, True), 'eval_diff': (1.5, True), 'eval_call': (1.5, True),
    'eval_first_call': (1.5, True),
    'predict_steady': (1.5, True), 'predict_diff': (1.5, True), 'predict_call': (1.5, True),
    'predict_first_call': (1.5, True),
    'eval_again_call': (5.0, True),
    'ttfs_call_to_first_run': (1.0, False), 'ttfs_process_to_first_run': (1.0, False),
}


def spawn(python, extra, quick):
  cmd = [python, PROGRAM] + extra + (['--quick'] if quick else [])
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  t0 = time.time()
  proc = subprocess.run(cmd + ['--t0', repr(t0)], env=env, capture_output=True, text=True,
                        check=False, cwd=os.path.dirname(HERE))
  for line in proc.stdout.splitlines():
    if line.startswith('RESULT '):
      return json.loads(line[len('RESULT '):])
  raise RuntimeError('%s failed (%d):\n%s\n%s' % (' '.join(cmd), proc.returncode, proc.stdout,
                                                  proc.stderr[-4000:]))


def precompile(python, paths):
  """Byte-compiles `paths` with `python` (what installing a package does)."""
  subprocess.run([python, '-m', 'compileall', '-q'] + paths, check=False, capture_output=True,
                 cwd=os.path.dirname(HERE))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true', help='short smoke run (< 1 min)')
  parser.add_argument('--rounds', type=int, default=None)
  parser.add_argument('--reference', default=os.environ.get('REFERENCE_PYTHON'),
                      help='the original\'s python (default: built by scripts/reference-venv.sh)')
  parser.add_argument('--optimizer', choices=M.OPTIMIZERS, default='v1_adam')
  parser.add_argument('--keep-optional', '--keep-sklearn', action='store_true',
                      help="don't hide scikit-learn, pandas and scipy from the processes (see "
                           'original_compat_program.py)')
  parser.add_argument('--ttfs-only', action='store_true',
                      help='only the time to the first step')
  parser.add_argument('--xla', action='store_true',
                      help='also ours tpu1x: use_tpu=True, 1 shard, ipl=100, xla=True')
  args = parser.parse_args()
  if args.reference is None:
    proc = subprocess.run(['bash', REFERENCE_SCRIPT], stdout=subprocess.PIPE, text=True,
                          check=False)
    if proc.returncode != 0:
      sys.exit('%s could not provide the reference python (exit %d); pass --reference PYTHON'
               % (REFERENCE_SCRIPT, proc.returncode))
    args.reference = proc.stdout.strip().splitlines()[-1]
  if not os.path.exists(args.reference):
    sys.exit('reference python not found: %s (bash scripts/reference-venv.sh builds one)'
             % args.reference)
  rounds = args.rounds or (1 if args.quick else 9 if args.ttfs_only else 5)
  optimizer = ['--optimizer', args.optimizer]
  if args.keep_optional:
    optimizer.append('--keep-optional')
  if args.ttfs_only:
    optimizer.append('--ttfs-only')
  configs = [
      ('orig', args.reference, ['--impl', 'orig'] + optimizer),
      ('ours cpu', sys.executable, ['--impl', 'ours'] + optimizer),
      ('ours tpu1', sys.executable, ['--impl', 'ours', '--use-tpu', '--num-shards', '1',
                                     '--ipl', '100'] + optimizer),
  ]
  if args.xla:
    configs.append(('ours tpu1x', sys.executable, configs[-1][2] + ['--xla']))
  _common.header('vs_original: the same program under the original (TF 2.15) and ours%s' %
                 (' (--quick)' if args.quick else ''))
  print('orig: %s, use_tpu=False | ours cpu: use_tpu=False | ours tpu1: use_tpu=True, 1 shard, '
        'ipl=100\nsmall MLP 64-256-10, batch 128, optimizer %s; %d round(s) of fresh '
        'processes; %s' % (
            args.reference, args.optimizer, rounds,
            'scikit-learn, pandas, scipy importable' if args.keep_optional else
            'scikit-learn, pandas, scipy hidden in every process (the reference venv has none)'),
        flush=True)
  precompile(args.reference, [HERE])
  precompile(sys.executable, [HERE, os.path.join(os.path.dirname(HERE), 'tpu_estimator')])
  results = {name: [] for name, _, _ in configs}
  for r in range(rounds):
    for name, python, extra in configs:
      results[name].append(spawn(python, extra, args.quick))
    print('  round %d done (%s)' % (r + 1, M.load_note()), flush=True)
  tf_versions = {name: results[name][0]['tf'] for name, _, _ in configs}
  metrics = [m for m in METRICS if not args.ttfs_only or m[0] in TTFS_KEYS]
  med = {name: {k: M.median([res.get(k) for res in results[name]]) for k, _, _, _ in metrics}
         for name, _, _ in configs}
  names = [name for name, _, _ in configs]
  print('\n  TF: ' + ', '.join('%s %s' % kv for kv in tf_versions.items()))
  print('  1st run = 1 step for orig and ours cpu; one 100-step device loop for ours tpu1.\n')
  best = {}
  for name in names:
    best[name] = {}
    for key, _, _, higher in metrics:
      values = [res.get(key) for res in results[name] if res.get(key)]
      best[name][key] = (max(values) if higher else min(values)) if values else None
  print('  ratios: of medians, and [of best-of-rounds]; best = max rate / min time.')
  ours = [n for n in names if n != 'orig']
  columns = ' '.join(['%10s'] * len(names)) + ' | ' + ' '.join(['%15s'] * len(ours))
  print(('  %-34s ' + columns + ' | %s') % (
      ('median',) + tuple(names) + tuple(n[5:] + '/orig' for n in ours) + ('target',)))
  for key, label, digits, _ in metrics:
    row = [fmt(med[n][key], digits) for n in names]
    ratios, shown = [], []
    for n in ours:
      a, b = med[n][key], med['orig'][key]
      ratios.append(a / b if a and b else None)
      ba, bb = best[n][key], best['orig'][key]
      shown.append('%s [%s]' % (fmt(ratios[-1], 2), fmt(ba / bb if ba and bb else None, 2)))
    target = TARGETS.get(key)
    note = ''
    if target:
      value, higher = target
      note = '%s %.1fx: cpu %s, tpu1 %s' % ('>=' if higher else '<=', value,
                                             verdict(ratios[0], value, higher),
                                             verdict(ratios[1], value, higher))
    print(('  %-34s ' + columns + ' | %s') % ((label,) + tuple(row) + tuple(shown) + (note,)))


if __name__ == '__main__':
  main()
