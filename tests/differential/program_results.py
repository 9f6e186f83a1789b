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


def run_tasks(write, resume, **extra):
  """A program's main: runs the tasks of the JSON file `sys.argv[2]` in order (`write` for
  `{'task': 'write', ...}`, `resume` for any other) and writes their results, with the
  TensorFlow version and `extra`, to the JSON file `sys.argv[3]`."""
  import json  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  with open(sys.argv[2]) as f:
    tasks = json.load(f)
  results = [write(t) if t['task'] == 'write' else resume(t) for t in tasks]
  with open(sys.argv[3], 'w') as f:
    json.dump(dict({'tf_version': tf.__version__, 'results': results}, **extra), f)
