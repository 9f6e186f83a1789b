"""Speed of gradient accumulation and mixed precision against the plain run, in one process.

    .venv/bin/python benchmarks/precision_accumulation.py [--quick] [--models small,compute]

For each model (benchmarks/models.py), TPUEstimator(use_tpu=True), one shard,
iterations_per_loop=100, v1 Adam, timed over interleaved rounds (medians):

  plain            the model's batch B, one update per step
  accumulate 4     TPUConfig(gradient_accumulation_steps=4), micro-batch B/4: the same
                   examples per update as plain, in four passes
  accumulate 4 xB  micro-batch B: four times the examples per update
  accumulate 4 xB, xla=False   the same uncompiled (every other row runs with the default,
                   xla=None, whose calls after the first compile the whole loop)
  mixed_bfloat16   TPUConfig(precision='mixed_bfloat16'), batch B
  mixed_float16    TPUConfig(precision='mixed_float16') (dynamic loss scaling), batch B

The model_fn is benchmarks/models.py's MLP with the logits cast to float32 for the loss (what
a mixed-precision model_fn does).  Rates are updates/s and examples/s, and the ratio of examples/s to plain.  CPU numbers are
reported, not targeted: accumulation pays where a larger batch does not fit in memory, not in
speed (each micro-batch adds an inner-loop iteration and an accumulator update per variable);
most CPUs have no fast bfloat16/float16 matmuls, so mixed precision is expected to be slower
on CPU (it is for GPUs/TPUs).
"""
import argparse
import tempfile
import time

import _common

import models
import tensorflow as tf


def _model_fn(spec, te):
  def model_fn(features, labels, mode, params):
    del mode, params
    logits = tf.cast(models._graph_logits(spec, features['x']), tf.float32)  # pylint: disable=protected-access
    loss = models._loss(labels, logits)  # pylint: disable=protected-access
    train_op = tf.compat.v1.train.AdamOptimizer(spec.lr).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return te.TPUEstimatorSpec('train', loss=loss, train_op=train_op)
  return model_fn


def _estimator(te, spec, model_dir, batch, accumulate=1, precision=None, ipl=100, xla=None):
  config = te.RunConfig(
      model_dir=model_dir, save_checkpoints_steps=10**8, save_summary_steps=10**8,
      log_step_count_steps=10**8, progress_bar=False,
      tpu_config=te.TPUConfig(iterations_per_loop=ipl, num_shards=1,
                              gradient_accumulation_steps=accumulate, precision=precision,
                              xla=xla))
  return te.TPUEstimator(_model_fn(spec, te), config=config, use_tpu=True,
                         train_batch_size=batch)


def _variants(spec):
  """(name, micro-batch, accumulation steps, precision, xla)."""
  return [('plain', spec.batch, 1, None, None),
          ('accumulate 4', spec.batch // 4, 4, None, None),
          ('accumulate 4 xB', spec.batch, 4, None, None),
          ('accumulate 4 xB, xla=False', spec.batch, 4, None, False),
          ('mixed_bfloat16', spec.batch, 1, 'mixed_bfloat16', None),
          ('mixed_float16', spec.batch, 1, 'mixed_float16', None)]


def bench(spec, te, steps, rounds):
  runners = {}
  for name, batch, accumulate, precision, xla in _variants(spec):
    est = _estimator(te, spec, tempfile.mkdtemp(prefix='bench_acc_'), batch, accumulate,
                     precision, xla=xla)
    runner = models.EstimatorTrain(est, spec, per_run=100)
    runner.run(100)  # warm-up call: builds and saves the first checkpoint
    runners[name] = (runner, batch * accumulate)
  rates = {name: [] for name in runners}
  for _ in range(rounds):
    for name, (runner, _) in runners.items():
      runner.run(steps)
      rates[name].append(runner.in_call_rate(steps))
  rows = []
  base = models.median(rates['plain']) * spec.batch
  for name, (runner, examples) in runners.items():
    updates = models.median(rates[name])
    rows.append((name, examples, updates, updates * examples, updates * examples / base))
  return rows


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--quick', action='store_true', help='fewer steps and rounds')
  parser.add_argument('--models', default='small', help='comma-separated: small,compute')
  args = parser.parse_args()
  _common.quiet_tf()
  import tpu_estimator as te  # pylint: disable=import-outside-toplevel
  _common.header('Gradient accumulation and mixed precision vs plain training (TPUEstimator, 1 shard, ipl=100)')
  steps, rounds = (300, 3) if args.quick else (1000, 5)
  for name in args.models.split(','):
    spec = models.SPECS[name]
    started = time.time()
    rows = bench(spec, te, steps if name == 'small' else steps // 10, rounds)
    print('\n%s MLP %s, batch %d (%d rounds, %.0f s)' % (
        name, '-'.join(map(str, spec.sizes)), spec.batch, rounds, time.time() - started))
    print('%-28s %14s %10s %12s %10s' % ('variant', 'examples/upd', 'updates/s', 'examples/s',
                                         'vs plain'))
    for variant, examples, updates, per_s, ratio in rows:
      print('%-28s %14d %10s %12s %9.2fx' % (variant, examples, _common.fmt(updates),
                                             _common.fmt(per_s), ratio))


if __name__ == '__main__':
  main()
