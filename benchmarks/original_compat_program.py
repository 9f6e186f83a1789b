"""One benchmark program for both implementations (run by vs_original.py, or by hand).

  <python> benchmarks/original_compat_program.py --impl ours|orig [--use-tpu] [--num-shards N]
                                                 [--ipl 100] [--quick] [--t0 EPOCH_SECONDS]
                                                 [--optimizer v1_adam|elementwise_adam]
                                                 [--keep-optional] [--ttfs-only]

`--impl ours` imports `tpu_estimator`; `--impl orig` uses the original
`tf.compat.v1.estimator.tpu` (run it with the reference venv: TF 2.15 + tensorflow-estimator).
Only the API common to both is used: RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec,
train/evaluate/predict with hooks, `params['batch_size']`.  The model is the small MLP of
models.py (64-256-10, batch 128, Adam 1e-3: tf.compat.v1.train.AdamOptimizer, or with
`--optimizer elementwise_adam` the same Adam as element-wise ops).

Measures, in this one process (prints one `RESULT {json}` line):
  ttfs_*      time to first training step: train(steps=100) on a fresh model_dir, from the call
              (and from `--t0`, the parent's clock before spawning this process) to the first
              after_run (1 step with use_tpu=False; one device loop of `ipl` steps with
              use_tpu=True) and to the session being created; `ttfs_call_to_step_100`: from
              the call to the end of step 100 (the 100th run, or the first device loop).
  train_*     steps/s after a warm-up call: steady (steps between the first and last
              session.run of the N2 call / time: the steady state inside one call), diff
              ((N2 - N1) / (t(N2) - t(N1)) over two whole calls), per call (N2 / t(N2)).
  eval_*      evaluate examples/s, same three measures (warm-up call first), each call with a
              new input_fn (over new arrays) and a hook, on the estimator that trained: ours
              reads the new input in the graph the previous call kept
              (graph_cache.read_new_input), the original builds a new graph every call.
  predict_*   predict examples/s (every per-example dict consumed), same three measures.
  eval_first_call, predict_first_call  the same calls (per call) on a new estimator object
              each: a call that builds its graph, in both implementations.
  eval_again_call  examples/s of evaluate() called again with the same input_fn and no hooks
              (median of 3 calls after a first): what train_and_evaluate's evaluations see.
`--ttfs-only` stops after the time to the first step (a few seconds a sample).
"""
import time

T_PYTHON = time.time()

import argparse  # noqa: E402
import importlib.abc  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402


# Optional packages that Keras (and TensorFlow's legacy Keras) import inside `import tensorflow`
# when they are installed: scikit-learn (Keras' sklearn wrapper, ~0.9 s), pandas (Keras 3's
# data adapters, ~0.25 s) and scipy (`scipy.sparse`).  This repo's demo/test extras install them
# and the reference venv has none, so by default they are hidden from every process and both
# implementations import the same packages; --keep-optional (or its old name --keep-sklearn)
# measures with them.
HIDDEN = ('sklearn', 'pandas', 'scipy')


class _Hidden(importlib.abc.MetaPathFinder):
  """Makes `import sklearn` (pandas, scipy) fail, as in an environment without them."""

  def find_spec(self, fullname, path, target=None):
    del path, target
    if fullname.split('.')[0] in HIDDEN:
      raise ModuleNotFoundError("No module named '%s' (hidden)" % fullname, name=fullname)
    return None


if not {'--keep-optional', '--keep-sklearn'} & set(sys.argv):
  sys.meta_path.insert(0, _Hidden())

import _common  # noqa: E402,F401  (sys.path, TF_CPP_MIN_LOG_LEVEL)
import models as M  # noqa: E402

SPEC = M.SMALL


def rates(n1, t1, n2, t2, hook, per_run):
  """(per call, diff, steady) for two calls of sizes n1 < n2."""
  steady = None
  if hook is not None and len(hook.after) >= 2:
    steady = (n2 - min(per_run, n2)) / (hook.after[-1] - hook.after[0])
  return n2 / t2, ((n2 - n1) / (t2 - t1) if t2 > t1 else None), steady


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--impl', choices=('ours', 'orig'), required=True)
  parser.add_argument('--use-tpu', action='store_true')
  parser.add_argument('--num-shards', type=int, default=None)
  parser.add_argument('--ipl', type=int, default=100)
  parser.add_argument('--quick', action='store_true')
  parser.add_argument('--optimizer', choices=M.OPTIMIZERS, default='v1_adam')
  parser.add_argument('--keep-optional', '--keep-sklearn', action='store_true',
                      help='do not hide scikit-learn, pandas and scipy (see the top of this '
                      'file)')
  parser.add_argument('--ttfs-only', action='store_true',
                      help='stop after the time to the first step')
  parser.add_argument('--xla', action='store_true',
                      help='ours only: TPUConfig(xla=True) (evaluation/prediction loops '
                      'compiled too)')
  parser.add_argument('--t0', type=float, default=None,
                      help='epoch seconds taken by the parent just before spawning')
  args = parser.parse_args()
  t0 = args.t0 or T_PYTHON

  _common.quiet_tf()
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  t_tf = time.time()
  if args.impl == 'ours':
    import tpu_estimator as module  # pylint: disable=import-outside-toplevel
  else:
    module = tf.compat.v1.estimator.tpu
    module.TPUEstimator  # pylint: disable=pointless-statement  (resolve the lazy import)
  t_imported = time.time()

  def estimator(model_dir):
    return M.make_estimator(module, SPEC, model_dir, use_tpu=args.use_tpu,
                            num_shards=args.num_shards, ipl=args.ipl,
                            optimizer=args.optimizer, xla=True if args.xla else None)

  out = {'impl': args.impl, 'optional_hidden': not args.keep_optional, 'use_tpu': args.use_tpu,
         'num_shards': args.num_shards, 'ipl': args.ipl, 'optimizer': args.optimizer,
         'tf': tf.__version__, 'python_start': T_PYTHON - t0,
         'tf_imported': t_tf - t0, 'imported': t_imported - t0,
         'import_only': t_imported - t_tf}
  loop = args.use_tpu and args.impl == 'ours'

  # Time to first step: the first train() of this process, on a fresh model_dir.
  est = estimator(tempfile.mkdtemp(prefix='bench_compat_'))
  hook = M.TimingHook()
  start_wall, start = time.time(), time.perf_counter()
  est.train(M.train_input_fn(SPEC), steps=100, hooks=[hook])
  out['ttfs_call_to_session'] = hook.created - start
  out['ttfs_call_to_first_run'] = hook.after[0] - start
  out['ttfs_process_to_first_run'] = start_wall + (hook.after[0] - start) - t0
  # Step 100 done: the 100th one-step run, or the first 100-step device loop.
  out['ttfs_call_to_step_100'] = hook.after[0 if loop else 99] - start
  out['first_run_steps'] = args.ipl if loop else 1
  if args.ttfs_only:
    print('RESULT ' + json.dumps(out), flush=True)
    return

  # Training throughput.
  n1, n2 = (400, 1200) if args.quick else (1000, 3000)
  runner = M.EstimatorTrain(est, SPEC)
  runner.run(200)
  t1 = runner.run(n1)
  t2 = runner.run(n2)
  out['train_call'], out['train_diff'], out['train_steady'] = rates(
      n1, t1, n2, t2, runner.last_hook, args.ipl if loop else 1)

  # Evaluation and prediction on the checkpoint just written.
  e1, e2 = (4096, 40960) if args.quick else (8192, 163840)
  per_run = SPEC.batch * (args.ipl if args.use_tpu and args.impl == 'ours' else 1)

  def evaluate(n, on=None):  # the input (new arrays) made before the clock starts
    hook, input_fn = M.TimingHook(), M.eval_input_fn(SPEC, n)
    start = time.perf_counter()
    (on or est).evaluate(input_fn, hooks=[hook])
    return time.perf_counter() - start, hook

  def predict(n, on=None):
    hook, input_fn = M.TimingHook(), M.predict_input_fn(SPEC, n)
    start = time.perf_counter()
    count = sum(1 for _ in (on or est).predict(input_fn, hooks=[hook]))
    assert count == n, (count, n)
    return time.perf_counter() - start, hook

  for kind, fn in (('eval', evaluate), ('predict', predict)):
    fn(e1)  # warm-up
    t1, _ = fn(e1)
    t2, hook = fn(e2)
    out[kind + '_call'], out[kind + '_diff'], out[kind + '_steady'] = rates(
        e1, t1, e2, t2, hook, per_run)
    first, _ = fn(e2, on=estimator(est.model_dir))  # a new estimator builds its graph
    out[kind + '_first_call'] = e2 / first
  # evaluate() again with the same input_fn and no hooks (the evaluations of
  # train_and_evaluate): ours keeps the graph and session of the previous call.
  input_fn = M.eval_input_fn(SPEC, e1)
  est.evaluate(input_fn)
  times = []
  for _ in range(3):
    start = time.perf_counter()
    est.evaluate(input_fn)
    times.append(time.perf_counter() - start)
  out['eval_again_call'] = e1 / M.median(times)
  print('RESULT ' + json.dumps(out), flush=True)


if __name__ == '__main__':
  main()
