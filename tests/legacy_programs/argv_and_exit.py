"""Run by `tpu-estimator run` in tests/test_compat.py: reports what a script sees (sys.argv,
__name__, sys.path[0], the legacy names install() provides) to the JSON file named by its
first argument, then exits with the code given as its second."""
import json
import os
import sys

import tensorflow as tf

report = {
    'argv': sys.argv,
    'name': __name__,
    'path0': sys.path[0],
    'file': os.path.basename(__file__),
    'estimator': tf.compat.v1.estimator.Estimator.__module__,
    'tpu_estimator': tf.compat.v1.estimator.tpu.TPUEstimator.__module__,
    'cross_shard_optimizer': tf.compat.v1.tpu.CrossShardOptimizer.__module__,
    'legacy_keras': os.environ.get('TF_USE_LEGACY_KERAS'),
    'layers': tf.compat.v1.layers.dense.__module__,
    'executing_eagerly': tf.executing_eagerly(),
}
with open(sys.argv[1], 'w') as f:
  json.dump(report, f)
sys.exit(int(sys.argv[2]))
