"""Kill trials: SIGKILL a training process at random moments, N times, and count how often the
model survives.

  .venv/bin/python benchmarks/kill_trials.py [--trials N] [--seed S] [--kinds estimator,tpu]
                                             [--max-delay SECS] [--keep DIR] [--verbose]

Each trial forks a child (from a fork server that imported TensorFlow once) that trains a tiny
model in a loop -- a checkpoint every step (Estimator) or every 2 steps (TPUEstimator,
use_tpu=True, 2 shards), keep_checkpoint_max=2, train(steps=4), export_saved_model, repeat --
and SIGKILLs it: after a random delay from its start, at a random moment inside a checkpoint
write, or inside a SavedModel write (rotating).  After each kill the model_dir's latest
checkpoint must load with every variable readable and finite, at a step >= the last checkpoint
the child reported saved; every timestamped export must be complete and load with
tf.saved_model.load (temp-* leftovers are allowed); and the next child of that kind must resume
from exactly that checkpoint.  A trial that meets all of this "resumed"; otherwise it is "lost".

Prints per-trial lines with --verbose, where the kills landed, and the summary line
`N runs, N resumed, N lost`.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

import _common  # noqa: F401  (sys.path, TF_CPP_MIN_LOG_LEVEL)

sys.path.insert(0, os.path.join(_common.ROOT, 'tests'))
from reliability_programs import forkserver as fs  # noqa: E402


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--trials', type=int, default=100)
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--kinds', default='estimator,tpu')
  parser.add_argument('--max-delay', type=float, default=2.5,
                      help='upper bound of the random delay after start (seconds)')
  parser.add_argument('--keep', default=None, help='keep model_dirs/exports under this dir')
  parser.add_argument('--verbose', action='store_true')
  args = parser.parse_args()
  _common.quiet_tf()
  kinds = tuple(k for k in args.kinds.split(',') if k)
  workdir = args.keep or tempfile.mkdtemp(prefix='kill_trials_')
  os.makedirs(workdir, exist_ok=True)
  started = time.time()
  log = (lambda line: print(line, flush=True)) if args.verbose else None
  print('kill trials: %d, seed %d, kinds %s, workdir %s' % (args.trials, args.seed,
                                                            ','.join(kinds), workdir),
        flush=True)
  with fs.ForkServer(os.path.join(workdir, 'forkserver.log')) as server:
    summary = fs.run_kill_trials(server, workdir, args.trials, seed=args.seed, kinds=kinds,
                                 log=log, max_delay=args.max_delay)
  for record in summary['results']:
    if not record['resumed']:
      print('LOST trial %d (%s, kill %s, landed in %s): %s' % (
          record['trial'], record['kind'], record['mode'], record.get('phase'),
          (record['error'] or '')[:2000]))
  print('kills landed in: %s' % ', '.join('%s %d' % kv for kv in sorted(
      summary['phases'].items())))
  print('temp-* export leftovers at most: %d; %.0f s' % (summary['max_temp_exports'],
                                                         time.time() - started))
  print('%d runs, %d resumed, %d lost' % (summary['runs'], summary['resumed'], summary['lost']))
  if not args.keep:
    shutil.rmtree(workdir, ignore_errors=True)
  return 1 if summary['lost'] else 0


if __name__ == '__main__':
  sys.exit(main())
