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
