"""A TF 1.x program's device loops under `tpu-estimator run --tf1` (`disable_v2_behavior()`:
shapes of `Dimension`s, reference variables), tests/legacy_programs/tf1_device_loops.py:
training on 2 shards from batches of unknown size ends at the short last batch, and one
replica's loops, compiled or not, give a plain Estimator's metrics and predictions."""
import json
import os
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_tf1_program_in_device_loops(tmp_path):
  out = tmp_path / 'report.json'
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONPATH=REPO)
  proc = subprocess.run(
      [sys.executable, '-m', 'tpu_estimator', 'run', '--tf1', 'tf1_device_loops.py', str(out)],
      cwd=os.path.join(REPO, 'tests', 'legacy_programs'), env=env, capture_output=True,
      text=True, timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-6000:]
  report = json.loads(out.read_text())
  # 90 rows in batches of 16 split over 2 shards: five steps, the 10-row batch ends the input
  # (before, its unknown size was taken for known, and the loop failed on the short batch).
  assert report['sharded_train_steps'] == 5
  plain = report['plain']
  assert plain['global_step'] == 6 and len(plain['logits']) == 90
  # One replica's loop: its global step a reference variable failed to build; compiled, the
  # optimizer model_fn builds in every mode ran at every evaluation batch.
  for name in ('one_replica', 'one_replica_compiled'):
    assert report[name]['global_step'] == plain['global_step'], name
    np.testing.assert_allclose(report[name]['accuracy'], plain['accuracy'], rtol=1e-6)
    np.testing.assert_allclose(report[name]['logits'], plain['logits'], rtol=1e-5, atol=1e-6)
