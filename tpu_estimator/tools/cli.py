"""The `tpu-estimator` command (also `python -m tpu_estimator`).

    tpu-estimator demo [--steps N] [--shards N] [--model-dir DIR] [--iterations-per-loop N]
    tpu-estimator run [--tf1] SCRIPT [ARGS...]
    tpu-estimator run [--tf1] -m MODULE [ARGS...]
    tpu-estimator inspect MODEL_DIR [--exports DIR ...] [--json]
    tpu-estimator doctor [--json] SCRIPT [ARGS...] | -m MODULE
    tpu-estimator launch --workers N [--ps M] [--evaluator] [--timeout S] SCRIPT [ARGS...]

Each subcommand is an `argparse` subparser with a handler `(args) -> exit code`, registered in
`_SUBCOMMANDS`.  This module imports the library's other modules (and so TensorFlow) only
inside functions, and `main` prepares `run`'s environment (TF_USE_LEGACY_KERAS) before building
the parser.
"""
import argparse
import importlib.util
import os
import runpy
import sys


# ---------------------------------------------------------------------------------------------
# argument types

def _int_at_least(minimum, expected):
  """An argparse type taking an int >= `minimum`; `expected` words that in its error."""
  def parse(text):
    try:
      value = int(text)
    except ValueError:
      value = None
    if value is None or value < minimum:
      raise argparse.ArgumentTypeError('expected %s, got %r' % (expected, text))
    return value
  return parse


_positive_int = _int_at_least(1, 'a positive integer')
_non_negative_int = _int_at_least(0, 'an integer >= 0')


def _iterations_per_loop(text):
  """An int, or a duration such as '30s', '5m', '1h' (as TPUConfig accepts)."""
  from tpu_estimator.config import parse_iterations_per_loop  # pylint: disable=import-outside-toplevel
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
  from tpu_estimator.tools import demo  # pylint: disable=import-outside-toplevel
  parser = subparsers.add_parser(
      'demo', help='train, evaluate and predict a small CNN on the digits data set',
      description='Trains a small convolutional network on the scikit-learn digits data set '
      'with TPUEstimator(use_tpu=True), sharded over --shards replicas (GPUs; logical GPUs '
      'beyond the count of cards; logical CPU devices when there is no GPU); evaluates and '
      'predicts on a held-out test split and prints a report.')
  parser.add_argument('--steps', type=_positive_int, default=demo.DEFAULT_STEPS,
                      help='training steps (default: %(default)s)')
  parser.add_argument('--shards', type=_positive_int, default=None,
                      help='TPUConfig.num_shards (default: every local GPU, or %d logical CPU '
                      'devices without a GPU)' % demo.CPU_SHARDS)
  parser.add_argument('--model-dir', default=None,
                      help='where checkpoints and summaries go (default: a new temporary '
                      'directory)')
  parser.add_argument('--iterations-per-loop', type=_iterations_per_loop,
                      default=demo.DEFAULT_ITERATIONS_PER_LOOP,
                      help='training steps per session.run (default: %(default)s)')
  parser.add_argument('--seed', type=int, default=0, help='random seed (default: %(default)s)')
  parser.set_defaults(handler=_run_demo)


def _run_demo(args):
  from tpu_estimator.tools import demo  # pylint: disable=import-outside-toplevel
  demo.run(steps=args.steps, shards=args.shards, model_dir=args.model_dir,
           iterations_per_loop=args.iterations_per_loop, seed=args.seed,
           out=lambda line: print(line, flush=True))
  return 0


# ---------------------------------------------------------------------------------------------
# run

_RUN_USAGE = ('tpu-estimator run [--tf1] SCRIPT [ARGS...]\n'
              '       tpu-estimator run [--tf1] -m MODULE [ARGS...]')


def _add_run(subparsers):
  parser = subparsers.add_parser(
      'run', usage=_RUN_USAGE,
      help='run an unmodified tf.estimator / TPUEstimator program on TensorFlow 2.16+',
      description='Runs a Python program as __main__ (like `python SCRIPT` or `python -m '
      'MODULE`, arguments passed through, exit code kept) after tpu_estimator.compat.install(): '
      'tf.compat.v1.estimator[.tpu], tf.estimator, tensorflow_estimator and '
      'tf.compat.v1.tpu.CrossShardOptimizer resolve to tpu_estimator, and tensorflow.contrib '
      '(tpu, cluster_resolver, layers, data, metrics, training, summary, image, opt, slim, '
      'framework) imports.  With tf_keras installed (the [legacy] extra), tf.compat.v1.layers '
      'and tf.keras use it.  A TensorFlow 1.x program stopping on a TF1-only name (tf.flags, '
      'tf.placeholder, ...) is told to rerun with --tf1.')
  parser.add_argument('--tf1', action='store_true',
                      help='run as TensorFlow 1: v2 behaviour off, `import tensorflow as tf` '
                      'gives the v1 API (tf.compat.v1, with tf.contrib)')
  parser.add_argument('-m', dest='module', metavar='MODULE',
                      help='run a module (as python -m MODULE) instead of a script')
  parser.add_argument('program', nargs=argparse.REMAINDER, metavar='SCRIPT [ARGS...]',
                      help='the script and its arguments (or, with -m, the arguments)')
  parser.set_defaults(handler=_run_program)


def _split_run_argv(argv):
  """`run`'s own options end at the script (or at `-m MODULE`, or `--`): what follows is the
  program's, even when it looks like an option of ours (`run x.py --tf1 -h`)."""
  i = 1
  while i < len(argv):
    arg = argv[i]
    if arg == '--':
      return argv[:i], argv[i + 1:]
    if arg == '-m':
      return argv[:i + 2], argv[i + 2:]
    if arg.startswith('-m') and not arg.startswith('--'):
      return argv[:i + 1], argv[i + 1:]
    if not arg.startswith('-'):
      break
    i += 1
  return argv[:i], argv[i:]


def _prepare_run_environment():
  """Before TensorFlow resolves Keras: route the legacy Keras names to tf_keras if present."""
  if 'TF_USE_LEGACY_KERAS' not in os.environ and importlib.util.find_spec('tf_keras'):
    os.environ['TF_USE_LEGACY_KERAS'] = '1'


def _run_program(args):
  if args.module is None and not args.program:
    print('usage: ' + _RUN_USAGE + '\ntpu-estimator run: error: expected SCRIPT or -m MODULE',
          file=sys.stderr)
    return 2
  if args.module is None:
    script = args.program[0]
    if not os.path.isfile(script):
      print("tpu-estimator run: can't open file %r: no such file" % script, file=sys.stderr)
      return 2
  from tpu_estimator import compat  # pylint: disable=import-outside-toplevel
  from tpu_estimator.distribute import gpus  # pylint: disable=import-outside-toplevel
  # The program may open its own sessions before it builds an estimator (gpus.py).
  gpus.grow_memory_unless_configured(None)
  compat.use_legacy_keras()
  compat.install(tf1=args.tf1)
  shadowed = _own_tpu_estimator(os.getcwd() if args.module is not None else
                                os.path.dirname(os.path.abspath(script)))
  if shadowed:
    print('tpu-estimator run: warning: the program\'s directory has its own tpu_estimator '
          'module (%s). Under run that name is this library: where the program imports '
          'tpu_estimator it gets the library, not that file. If it means its own, rename the '
          'module (and its imports).' % shadowed, file=sys.stderr)
  if args.module is not None:
    if os.getcwd() not in sys.path:
      sys.path.insert(0, os.getcwd())  # as `python -m` does
    try:
      found = importlib.util.find_spec(args.module)
    except ImportError:
      found = None
    if found is None:
      print('tpu-estimator run: no module named %r' % args.module, file=sys.stderr)
      return 1
    sys.argv = [args.module] + list(args.program)  # runpy puts the module's path in argv[0]
    run = lambda: runpy.run_module(args.module, run_name='__main__', alter_sys=True)
  else:
    sys.argv = list(args.program)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python SCRIPT` does
    run = lambda: runpy.run_path(script, run_name='__main__')
  try:
    run()
  except (AttributeError, RuntimeError) as e:
    _add_note(e, compat.tf1_hint(e))
    raise
  return 0


def _own_tpu_estimator(directory):
  """The program's own `tpu_estimator` module or package in `directory` (first on its
  sys.path), other than this library; None if there is none.  transformer-xl ships a fork of
  TF 1.12's TPUEstimator as tpu_estimator.py: the library, imported first, is what its
  `import tpu_estimator` finds."""
  import tpu_estimator  # pylint: disable=import-outside-toplevel
  module = os.path.join(directory, 'tpu_estimator.py')
  if os.path.isfile(module):
    return module
  package = os.path.join(directory, 'tpu_estimator')
  ours = os.path.realpath(os.path.dirname(tpu_estimator.__file__))
  if os.path.isfile(os.path.join(package, '__init__.py')) and os.path.realpath(package) != ours:
    return package
  return None


def _add_note(error, note):
  """Appends `note` to the traceback Python prints for `error` (Python 3.11+: a note; 3.10:
  the message)."""
  if not note:
    return
  if hasattr(error, 'add_note'):
    error.add_note('tpu-estimator run: ' + note)
  elif error.args and isinstance(error.args[0], str):
    error.args = ('%s\ntpu-estimator run: %s' % (error.args[0], note),) + error.args[1:]


# ---------------------------------------------------------------------------------------------
# inspect

def _add_inspect(subparsers):
  from tpu_estimator.tools import inspection  # pylint: disable=import-outside-toplevel
  inspection.add_parser(subparsers)


# ---------------------------------------------------------------------------------------------
# doctor

def _add_doctor(subparsers):
  from tpu_estimator.tools import doctor  # pylint: disable=import-outside-toplevel
  doctor.add_parser(subparsers)


# ---------------------------------------------------------------------------------------------
# launch

def _add_launch(subparsers):
  parser = subparsers.add_parser(
      'launch', help='run a program as local TF_CONFIG tasks (a test/dev tool)',
      description='Starts one copy of a Python program per task on this machine, each with a '
      'TF_CONFIG naming a loopback port per cluster task: task 0 is the chief, then --workers '
      'minus one workers and --ps parameter servers (ps); with --evaluator, an evaluator task, '
      'which (as TensorFlow expects) gets the same cluster but is not listed in it. '
      'TPUEstimator(use_tpu=True) trains across the chief and workers. The run is done when '
      'the chief, workers and evaluator have exited; the ps tasks, which serve until stopped, '
      'are then stopped (reported as exit code 0). When one task fails the others are '
      'stopped. For testing and development: this is not a cluster manager.')
  parser.add_argument('--workers', type=_positive_int, required=True, metavar='N',
                      help='number of training tasks (the chief + workers)')
  parser.add_argument('--ps', type=_non_negative_int, default=0, metavar='M',
                      help='number of parameter-server (ps) tasks (default: %(default)s)')
  parser.add_argument('--evaluator', action='store_true',
                      help='add an evaluator task (not in the cluster dict)')
  parser.add_argument('--timeout', type=float, default=None, metavar='S',
                      help='seconds before every task still running is stopped')
  parser.add_argument('script', help='the Python program')
  parser.add_argument('args', nargs=argparse.REMAINDER, help="the program's arguments")
  parser.set_defaults(handler=_run_launch)


def _run_launch(args):
  from tpu_estimator.tools import launcher  # pylint: disable=import-outside-toplevel
  codes = launcher.launch([args.script] + list(args.args), args.workers, timeout=args.timeout,
                          num_ps=args.ps, evaluator=args.evaluator)
  names = launcher.task_names(args.workers, args.ps, args.evaluator)
  print('task exit codes: %s' % ' '.join('%s=%s' % nc for nc in zip(names, codes)),
        file=sys.stderr)
  # The failing task's own exit code (the others were stopped by a signal), else 1 on failure.
  failures = [c for c in codes if c > 0]
  return failures[0] if failures else (1 if any(codes) else 0)


# ---------------------------------------------------------------------------------------------

_SUBCOMMANDS = (_add_demo, _add_run, _add_inspect, _add_doctor, _add_launch)


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
  """Parses `argv` (default: sys.argv[1:]), runs the subcommand, returns its exit code.

  `run` returns 0 when the program ends normally; the program's `sys.exit(code)` and uncaught
  exceptions propagate (so the process exits with that code, or 1 with the traceback)."""
  argv = list(sys.argv[1:] if argv is None else argv)
  program = None
  if argv[:1] in (['run'], ['doctor']):  # doctor looks names up as run meets them
    _prepare_run_environment()
    argv, program = _split_run_argv(argv)
  args = build_parser().parse_args(argv)
  if program is not None:
    args.program = program
  return args.handler(args)


if __name__ == '__main__':
  sys.exit(main())
