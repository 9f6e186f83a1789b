"""What a differential program writes: its results as JSON values, the same on both
implementations (imported by the programs beside it, which run as scripts on either)."""
import numpy as np


def jsonable(value):
  """`value` with numpy arrays and scalars as lists and numbers, bytes as text, dict keys as
  strings."""
  if isinstance(value, dict):
    return {str(k): jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [jsonable(v) for v in value]
  if isinstance(value, np.ndarray):
    return jsonable(value.tolist())
  if isinstance(value, np.bool_):
    return bool(value)
  if isinstance(value, np.integer):
    return int(value)
  if isinstance(value, np.floating):
    return float(value)
  if isinstance(value, bytes):
    return value.decode('utf-8', 'replace')
  return value


def rounds(run_round):
  """A program's main loop, one process for every round: `sys.argv[2:]` is SPEC OUT, once a
  round.  Each round waits for its SPEC (the test writes a later round's once both
  implementations finished the one before: a round may resume the other's model_dir), runs its
  tasks with `run_round(tasks) -> dict` and writes that dict to OUT as JSON, whole or not at all
  (written beside it, then renamed).  A program whose test is gone (its parent process) exits."""
  import json  # pylint: disable=import-outside-toplevel
  import os  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  import time  # pylint: disable=import-outside-toplevel
  parent, args = os.getppid(), sys.argv[2:]
  for spec, out in zip(args[0::2], args[1::2]):
    while not os.path.exists(spec):
      if os.getppid() != parent:
        raise SystemExit('the test that started this program has ended')
      time.sleep(0.05)
    with open(spec) as f:
      tasks = json.load(f)
    result = run_round(tasks)
    with open(out + '.partial', 'w') as f:
      json.dump(result, f)
    os.replace(out + '.partial', out)


def run_tasks(write, resume, **extra):
  """A program's main: runs each round's tasks (`rounds`) in order (`write` for
  `{'task': 'write', ...}`, `resume` for any other) and writes their results, with the
  TensorFlow version and `extra`."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  rounds(lambda tasks: dict({'tf_version': tf.__version__,
                             'results': [write(t) if t['task'] == 'write' else resume(t)
                                         for t in tasks]}, **extra))
