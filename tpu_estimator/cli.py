"""The `tpu-estimator` command (also `python -m tpu_estimator`).

    tpu-estimator demo [--steps N] [--shards N] [--model-dir DIR] [--iterations-per-loop N]

Each subcommand is an `argparse` subparser with a handler `(args) -> exit code`, registered in
`_SUBCOMMANDS`; more (`run`, `inspect`) plug in the same way.
"""
import argparse
import sys

from tpu_estimator import demo
from tpu_estimator.config import parse_iterations_per_loop


def _positive_int(text):
  try:
    value = int(text)
  except ValueError:
    raise argparse.ArgumentTypeError('expected a positive integer, got %r' % text) from None
  if value <= 0:
    raise argparse.ArgumentTypeError('expected a positive integer, got %r' % text)
  return value


def _iterations_per_loop(text):
  """An int, or a duration such as '30s', '5m', '1h' (as TPUConfig accepts)."""
  try:
    kind, value = parse_iterations_per_loop(text)
  except ValueError:
    raise argparse.ArgumentTypeError(
        "expected a positive integer or a duration like '30s', '5m', '1h', got %r" % text
    ) from None
  return value if kind == 'count' else text


# ---------------------------------------------------------------------------------------------
# demo

def _add_demo(subparsers):
  parser = subparsers.add_parser(
      'demo', help='train, evaluate and predict a small CNN on the digits data set',
      description='Trains a small convolutional network on the scikit-learn digits data set '
      'with TPUEstimator(use_tpu=True), sharded over --shards logical CPU devices when no TPU '
      'or GPU is present; evaluates and predicts on a held-out test split and prints a report.')
  parser.add_argument('--steps', type=_positive_int, default=demo.DEFAULT_STEPS,
                      help='training steps (default: %(default)s)')
  parser.add_argument('--shards', type=_positive_int, default=2,
                      help='TPUConfig.num_shards (default: %(default)s)')
  parser.add_argument('--model-dir', default=None,
                      help='where checkpoints and summaries go (default: a new temporary '
                      'directory)')
  parser.add_argument('--iterations-per-loop', type=_iterations_per_loop,
                      default=demo.DEFAULT_ITERATIONS_PER_LOOP,
                      help='training steps per session.run (default: %(default)s)')
  parser.add_argument('--seed', type=int, default=0, help='random seed (default: %(default)s)')
  parser.set_defaults(handler=_run_demo)


def _run_demo(args):
  demo.run(steps=args.steps, shards=args.shards, model_dir=args.model_dir,
           iterations_per_loop=args.iterations_per_loop, seed=args.seed,
           out=lambda line: print(line, flush=True))
  return 0


# ---------------------------------------------------------------------------------------------

_SUBCOMMANDS = (_add_demo,)


def build_parser():
  parser = argparse.ArgumentParser(
      prog='tpu-estimator',
      description='TPUEstimator on TensorFlow 2: sharded on TPU-less hardware too.')
  subparsers = parser.add_subparsers(dest='command', metavar='COMMAND')
  subparsers.required = True
  for add in _SUBCOMMANDS:
    add(subparsers)
  return parser


def main(argv=None):
  """Parses `argv` (default: sys.argv[1:]), runs the subcommand, returns its exit code."""
  args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
  return args.handler(args)


if __name__ == '__main__':
  sys.exit(main())
