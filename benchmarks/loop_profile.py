"""Where one device loop's time goes: a traced `session.run` of our training loop, per device.

  .venv/bin/python benchmarks/loop_profile.py [--model small|compute] [--ipl 100] [--xla]
                                              [--shards N] [--top 15]

Trains the benchmark MLP with `TPUEstimator(use_tpu=True)` (Adam, quiet config), warms up,
then traces one device loop of `ipl` steps (`RunOptions(trace_level=FULL_TRACE)`) and prints,
per device: op executions per step, cross-device copies (Send/Recv, MemcpyHtoD/DtoH) per step,
and the op types taking the most time.  Run it on a GPU machine to see what bounds the loop
there (host input, per-iteration host<->device traffic, control flow, kernel count).
"""
import argparse
import collections
import tempfile

import _common  # noqa: F401  (sys.path, TF_CPP_MIN_LOG_LEVEL)
import models as M
import tensorflow as tf


class TraceHook(tf.compat.v1.train.SessionRunHook):
  """Traces the `index`-th run of the session (after warm-up runs)."""

  def __init__(self, index):
    self._index, self._runs, self.metadata = index, 0, None

  def before_run(self, run_context):
    self._runs += 1
    if self._runs != self._index:
      return None
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    return tf.compat.v1.train.SessionRunArgs(fetches=None, options=options)

  def after_run(self, run_context, run_values):
    if self._runs == self._index:
      self.metadata = run_values.run_metadata


def _op_type(node):
  # timeline_label: "name = Type(inputs)"; node_name alone for copies.
  label = node.timeline_label
  if ' = ' in label:
    return label.split(' = ', 1)[1].split('(', 1)[0]
  return node.node_name.split(':')[0]


def summarize(metadata, steps, top):
  print('device loop of %d steps, traced:' % steps)
  for dev in metadata.step_stats.dev_stats:
    nodes = list(dev.node_stats)
    if not nodes:
      continue
    start = min(n.all_start_micros for n in nodes)
    end = max(n.all_start_micros + n.all_end_rel_micros for n in nodes)
    by_type = collections.defaultdict(lambda: [0, 0])
    for n in nodes:
      kind = _op_type(n)
      by_type[kind][0] += 1
      by_type[kind][1] += n.all_end_rel_micros
    copies = sum(c for k, (c, _) in by_type.items()
                 if k in ('_Send', '_Recv', '_HostSend', '_HostRecv') or 'Memcpy' in k)
    print('\n  %s: %d ops (%.1f per step), %d copies/sends (%.1f per step), span %.1f ms' % (
        dev.device, len(nodes), len(nodes) / steps, copies, copies / steps, (end - start) / 1e3))
    ranked = sorted(by_type.items(), key=lambda kv: -kv[1][1])[:top]
    for kind, (count, micros) in ranked:
      print('    %-36s %6d runs %8.1f per step %9.0f us' % (kind[:36], count, count / steps,
                                                            micros))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--model', default='small', choices=sorted(M.SPECS))
  parser.add_argument('--ipl', type=int, default=100)
  parser.add_argument('--shards', type=int, default=1)
  parser.add_argument('--xla', action='store_true')
  parser.add_argument('--top', type=int, default=15)
  args = parser.parse_args()
  _common.quiet_tf()
  import tpu_estimator as te  # pylint: disable=import-outside-toplevel
  _common.header('loop_profile: %s MLP, ipl=%d, %d shard(s), xla=%s, GPUs: %d' % (
      args.model, args.ipl, args.shards, args.xla, len(tf.config.list_physical_devices('GPU'))))
  spec = M.SPECS[args.model]
  estimator = M.make_estimator(te, spec, tempfile.mkdtemp(prefix='profile_'), use_tpu=True,
                               num_shards=args.shards, ipl=args.ipl, xla=args.xla)
  input_fn = M.train_input_fn(spec)
  estimator.train(input_fn, steps=2 * args.ipl)  # warm-up call: graph, session, first loops
  timing = M.TimingHook()
  estimator.train(input_fn, steps=10 * args.ipl, hooks=[timing])
  print('untraced: %.0f steps/s between the first and the last loop of a %d-step call' % (
      9 * args.ipl / (timing.after[-1] - timing.after[0]), 10 * args.ipl))
  hook = TraceHook(3)
  estimator.train(input_fn, steps=4 * args.ipl, hooks=[hook])
  if hook.metadata is None:
    print('no run was traced')
    return
  summarize(hook.metadata, args.ipl, args.top)


if __name__ == '__main__':
  main()
