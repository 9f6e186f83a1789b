"""Parameter-server training steps/s on loopback clusters, against one process without a cluster.

  .venv/bin/python benchmarks/ps_throughput.py [--quick] [--rounds R] [--steps N]
                                               [--wait-load SECONDS]

Model: wide-and-deep as users ran it on parameter servers, the v1 canned
`DNNLinearCombinedClassifier` (`tpu_estimator.canned.v1`, what
`tf.compat.v1.estimator.DNNLinearCombinedClassifier` is under `compat.install()`), batch 256:
  linear (Ftrl)    a hashed crossed column item x category (100,000 buckets) and the category;
  DNN (Adagrad)    an embedding of 100,000 items x 16, one of the category (1,000 hash buckets
                   x 8) and 8 dense floats, hidden layers 128-64;
every input-layer variable (embeddings, linear weights) partitioned with
`tf.compat.v1.fixed_size_partitioner(max(num_ps, 1))`.  Synthetic data: a fixed pool of 4,096
examples (item ids skewed towards small ids, as real traffic is) repeated.

Shapes, each a fresh run of this file (`--task`) through `train_and_evaluate` on every task,
started by `tpu_estimator.tools.launcher.launch` (which stops the ps tasks at the end; the whole
run is bounded by a timeout, sessions by `session_creation_timeout_secs`; each task's output
goes to a log, printed if a task fails):
  1 process     no TF_CONFIG: the in-run baseline (variables in the process);
  1w+1ps ...    a chief (1 worker) or a chief and a worker (2 workers), with 1 or 2 ps tasks,
                asynchronous updates (no SyncReplicasOptimizer).
Each shape trains to a fixed global step, set so that each trains ~10 s on 2 cores (`--steps`
1000: 5500 steps in one process, 1300-2200 on a cluster; --quick 250: a quarter), with
checkpoints, summaries and step logging only at the start and the end.  Every training task
records (time, global step) after each of its steps (a SessionRunHook, written to JSON at the
end).  The steady window starts when every training task has done 15 % of its own steps
(process start-up, session creation, the chief's initialization and the first steps are
outside it) and ends when the first task reaches its last 5 %; the rate is the chief's global
step over that window (examples/s: x 256, each global step being one worker's batch).  R
interleaved rounds (every shape once per round), medians; the ratio to the one-process
baseline is taken within each round (median shown).

What this shows: on a 2-core machine all tasks (workers and ps tasks) share the same 2 cores,
so this shows the overhead of the gRPC/parameter-server path (every variable read and every
update a remote call over loopback, serialized and copied), not scaling: a second worker or ps
task only adds processes competing for the same cores.  At 100 workers, each on its own
machine, ps bandwidth per step is (parameters touched per step) x (workers).  Sparse embedding
lookups send only the rows a batch touches (the gather runs on the ps: here at most 256 x 16
floats out, as many gradient rows back), so the embedding side stays small per worker.  The
dense layers' full weights are read from, and their full gradients sent to, the ps every step
by every worker (here ~12.5k floats, 50 KB, each way; x 100 workers), so dense parameters
saturate a ps first, and more ps tasks do not help unless they are partitioned too; the global
step, on one ps task, is read and incremented by every step of every worker.  Partitioning
spreads one big table (memory, lookups, updates) over the ps tasks, but not a hot row (the
default 'div' strategy cuts the ids into contiguous ranges: skewed small ids all land on the
first part).  Checkpoints: the Estimator's Saver is sharded, so when the chief saves, each ps
task writes its own variables into the shared model_dir (an unsharded Saver would pull every
variable to the chief); the cost grows with the model, not with the workers.  Asynchronous
updates get staler as workers are added (a gradient lands ~workers updates after the values it
was computed from were read); SyncReplicasOptimizer removes the staleness, but each step then
waits for the slowest of the workers it aggregates.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import _common  # noqa: F401  (sys.path, TF_CPP_MIN_LOG_LEVEL)
from _common import fmt, spread

BATCH = 256
POOL = 4096
VOCAB = 100000
EMBED_DIM = 16
CATEGORIES = 1000
HIDDEN = [128, 64]
WARMUP_FRACTION = 0.15
TAIL_FRACTION = 0.05
TASK_TIMEOUT_SECS = 240
# (label, workers, ps tasks, global steps per 1000 of --steps: each shape ~10 s of training on
# 2 cores); workers 0 is the one-process baseline (no TF_CONFIG).
SHAPES = [('1 process (baseline)', 0, 0, 5500), ('1 worker + 1 ps', 1, 1, 1800),
          ('1 worker + 2 ps', 1, 2, 1300), ('2 workers + 1 ps', 2, 1, 2200),
          ('2 workers + 2 ps', 2, 2, 1500)]


# ---------------------------------------------------------------------------------------------
# The task program (`ps_throughput.py --task OUT_DIR MAX_STEPS NUM_PS`, TF_CONFIG or none)

def _data():
  import numpy as np  # pylint: disable=import-outside-toplevel
  rng = np.random.RandomState(1234)
  items = np.minimum(rng.zipf(1.2, POOL), VOCAB) - 1
  features = {'item': items.astype(np.int64),
              'cat': np.char.add('c', rng.randint(0, 300, POOL).astype(str)),
              'x': rng.randn(POOL, 8).astype(np.float32)}
  labels = ((features['x'][:, 0] > 0) ^ (items % 2 == 0)).astype(np.int64).reshape(-1, 1)
  return features, labels


def _estimator(model_dir, num_ps):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tpu_estimator as te  # pylint: disable=import-outside-toplevel
  from tpu_estimator.canned import v1 as canned_v1  # pylint: disable=import-outside-toplevel
  fc = tf.feature_column
  item = fc.categorical_column_with_identity('item', VOCAB)
  cat = fc.categorical_column_with_hash_bucket('cat', CATEGORIES)
  config = te.EstimatorRunConfig(
      model_dir=model_dir, save_checkpoints_steps=10**8, save_summary_steps=10**8,
      log_step_count_steps=10**8, tf_random_seed=1, session_creation_timeout_secs=60)
  return canned_v1.DNNLinearCombinedClassifier(
      config=config, linear_feature_columns=[cat, fc.crossed_column(['item', 'cat'], VOCAB)],
      dnn_feature_columns=[fc.embedding_column(item, EMBED_DIM), fc.embedding_column(cat, 8),
                           fc.numeric_column('x', shape=[8])],
      dnn_hidden_units=HIDDEN,
      input_layer_partitioner=tf.compat.v1.fixed_size_partitioner(max(num_ps, 1)))


def _step_recorder(path):
  """A SessionRunHook appending (time.time(), global step read in that step) after every step,
  written to `path` as JSON when the session ends."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  class StepRecorder(tf.compat.v1.train.SessionRunHook):

    def begin(self):
      self.step = tf.compat.v1.train.get_global_step()
      self.records = []

    def before_run(self, run_context):
      return tf.compat.v1.train.SessionRunArgs(self.step)

    def after_run(self, run_context, run_values):
      self.records.append((time.time(), int(run_values.results)))

    def end(self, session):
      with open(path, 'w') as f:
        json.dump(self.records, f)

  return StepRecorder()


def run_task(out_dir, max_steps, num_ps):
  """One task of a shape: trains (or serves, a ps task) through train_and_evaluate; its
  output goes to OUT_DIR/<task>.log, its records to OUT_DIR/<task>.json."""
  task = json.loads(os.environ.get('TF_CONFIG') or '{}').get('task', {'type': 'local',
                                                                      'index': 0})
  name = '%s%d' % (task['type'], task['index'])
  log = os.open(os.path.join(out_dir, name + '.log'), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
  for fd in (1, 2):
    os.dup2(log, fd)
  _common.quiet_tf()
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tpu_estimator as te  # pylint: disable=import-outside-toplevel
  features, labels = _data()

  def input_fn():
    ds = tf.data.Dataset.from_tensor_slices((features, labels)).repeat()
    return ds.batch(BATCH, drop_remainder=True)

  def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices((features, labels)).batch(BATCH)

  record = os.path.join(out_dir, name + '.json')
  te.train_and_evaluate(
      _estimator(os.path.join(out_dir, 'model'), num_ps),
      te.TrainSpec(input_fn, max_steps=max_steps, hooks=[_step_recorder(record)]),
      te.EvalSpec(eval_input_fn, steps=1, start_delay_secs=0, throttle_secs=10**6))


# ---------------------------------------------------------------------------------------------
# The driver

def _launch(workers, num_ps, steps):
  """One run of a shape; returns ({task: records}, exit codes, seconds from spawn to end)."""
  from tpu_estimator.tools import launcher  # pylint: disable=import-outside-toplevel
  out_dir = tempfile.mkdtemp(prefix='bench_ps_')
  argv = [os.path.abspath(__file__), '--task', out_dir, str(steps), str(num_ps)]
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [_common.ROOT] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
  env.pop('TF_CONFIG', None)
  start = time.time()
  if workers:
    codes = launcher.launch(argv, workers, env=env, num_ps=num_ps, timeout=TASK_TIMEOUT_SECS)
  else:
    try:
      codes = [subprocess.run([sys.executable] + argv, env=env, timeout=TASK_TIMEOUT_SECS,
                              check=False).returncode]
    except subprocess.TimeoutExpired:
      codes = [None]
  elapsed = time.time() - start
  records = {}
  for name in sorted(os.listdir(out_dir)):
    if name.endswith('.json'):
      with open(os.path.join(out_dir, name)) as f:
        records[name[:-len('.json')]] = json.load(f)
  if set(codes) != {0}:
    _print_logs(out_dir)
  shutil.rmtree(out_dir, ignore_errors=True)  # ~15 MB of checkpoints per ps task
  return records, codes, elapsed


def _print_logs(out_dir):
  for name in sorted(os.listdir(out_dir)):
    if name.endswith('.log'):
      with open(os.path.join(out_dir, name), errors='replace') as f:
        print('--- %s (tail)\n%s' % (name, f.read()[-1500:]), flush=True)


def steady_rate(records):
  """Global steps/s over the window in which every training task is past its warm-up, read
  from the chief's (or the lone process's) records; None if the window is empty."""
  starts, ends = [], []
  for steps in records.values():
    if len(steps) < 10:
      return None
    starts.append(steps[int(len(steps) * WARMUP_FRACTION)][0])
    ends.append(steps[int(len(steps) * (1 - TAIL_FRACTION)) - 1][0])
  begin, end = max(starts), min(ends)
  main = records.get('chief0') or records.get('local0')
  inside = [(t, s) for t, s in main if begin <= t <= end]
  if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
    return None
  return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def _measure(shape, steps):
  """(global steps/s, seconds from spawn to the end, [steps each training task ran])."""
  label, workers, num_ps, _ = shape
  records, codes, elapsed = _launch(workers, num_ps, steps)
  rate = steady_rate(records) if set(codes) == {0} else None
  if rate is None:
    print('  %s: no steady rate (exit codes %s, records %s)' % (
        label, codes, {k: len(v) for k, v in records.items()}), flush=True)
  return rate, elapsed, [len(records[k]) for k in sorted(records, key=_task_order)]


def _task_order(name):
  return (0 if name.startswith(('chief', 'local')) else 1, name)


def _print_table(results, ratios):
  import models as M  # pylint: disable=import-outside-toplevel
  columns = '  %-22s %7s %9s %9s %10s %10s %7s  %-11s %s'
  print('\n' + columns % ('', 'global', 'steps/s', 'steps/s', 'examples/s', 'ratio to', 'run',
                          'steps per', 'steady'))
  print(columns % ('shape', 'steps', 'median', 'best', 'median', '1 process', 's',
                   'task', 'range'))
  for label in results:
    res = results[label]
    steady = M.median(res['rate'])
    best = max([r for r in res['rate'] if r] or [0]) or None
    print(columns % (
        label, res['steps'], fmt(steady), fmt(best), fmt(steady and steady * BATCH),
        fmt(M.median(ratios[label]), 2), fmt(M.median(res['elapsed']), 1),
        '/'.join(str(n) for n in res['own'][-1]) if res['own'] else '-', spread(res['rate'])))
  print('\n  "ratio": median of the per-round ratios to the one process; "run": spawn to the '
        'last training\n  task\'s exit (start-up included); "steps per task": what each training '
        'task ran itself\n  in the last round, the chief first.')


def bench(args):
  import models as M  # pylint: disable=import-outside-toplevel
  per_1000 = args.steps or (250 if args.quick else 1000)
  rounds = args.rounds or (1 if args.quick else 3)
  print('\n## wide-and-deep (embedding %dk x %d, crossed column %dk, DNN %s), batch %d; '
        '--steps %d; %d round(s)' % (VOCAB // 1000, EMBED_DIM, VOCAB // 1000,
                                      '-'.join(map(str, HIDDEN)), BATCH, per_1000, rounds),
        flush=True)
  results = {shape[0]: {'rate': [], 'elapsed': [], 'own': [],
                        'steps': max(10, shape[3] * per_1000 // 1000)} for shape in SHAPES}
  ratios = {label: [] for label in results}
  for r in range(rounds):
    for shape in SHAPES:
      res = results[shape[0]]
      rate, elapsed, own = _measure(shape, res['steps'])
      res['rate'].append(rate)
      res['elapsed'].append(elapsed)
      res['own'].append(own)
    base = results[SHAPES[0][0]]['rate'][-1]
    for label in results:
      rate = results[label]['rate'][-1]
      ratios[label].append(rate / base if rate and base else None)
    print('  round %d done: %s  (%s)' % (r + 1, ', '.join(
        '%s %s' % (label.split(' (')[0], fmt(results[label]['rate'][-1]))
        for label in results), M.load_note()), flush=True)
  _print_table(results, ratios)


def main():
  if len(sys.argv) > 1 and sys.argv[1] == '--task':
    return run_task(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
  import models as M  # pylint: disable=import-outside-toplevel
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true', help='short smoke run (about a minute)')
  parser.add_argument('--rounds', type=int, default=None)
  parser.add_argument('--steps', type=int, default=None,
                      help='scales the global steps of every shape (default 1000, --quick 250: '
                      '5500 in one process, 1300-2200 on a cluster)')
  parser.add_argument('--wait-load', type=float, default=0.0, metavar='SECONDS',
                      help='first wait up to this long for the 1-min load average < 1')
  args = parser.parse_args()
  M.wait_for_low_load(1.0, args.wait_load)
  _common.quiet_tf()
  _common.header('ps_throughput: parameter-server training steps/s on loopback%s' %
                 (' (--quick)' if args.quick else ''))
  started = time.time()
  bench(args)
  print('\n  total %.0f s\n' % (time.time() - started))
  print(__doc__[__doc__.index('What this shows'):].strip())
  return None


if __name__ == '__main__':
  main()
