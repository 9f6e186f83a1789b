"""Run as `tpu-estimator run --tf1 -m tf1_probe OUT_JSON ...` in tests/test_compat.py: reports
what a TF1 program sees of `import tensorflow as tf`, then fails with an uncaught exception
(the command must exit non-zero with the traceback)."""
import json
import sys

import tensorflow as tf


def error_of(fn):
  try:
    fn()
  except (AttributeError, ImportError) as e:
    return '%s: %s' % (type(e).__name__, e)
  return None


def import_gan():
  import tensorflow.contrib.gan  # pylint: disable=g-import-not-at-top,unused-import


def from_contrib_import_tpu():
  from tensorflow.contrib import tpu  # pylint: disable=g-import-not-at-top
  return tpu.TPUEstimator


report = {
    'argv': sys.argv,
    'name': __name__,
    'executing_eagerly': tf.executing_eagerly(),
    'has_placeholder': hasattr(tf, 'placeholder'),
    'has_contrib': hasattr(tf, 'contrib'),
    'placeholder_shape': str(tf.placeholder(tf.float32, [None, 2]).shape),
    'contrib_tpu': {name: getattr(tf.contrib.tpu, name).__module__ for name in (
        'TPUEstimator', 'TPUEstimatorSpec', 'RunConfig', 'TPUConfig', 'CrossShardOptimizer',
        'InputPipelineConfig')},
    'contrib_tpu_run_config': tf.contrib.tpu.RunConfig.__name__,
    'estimator_tpu': tf.estimator.tpu.TPUEstimator.__module__,
    'from_contrib_import_tpu': from_contrib_import_tpu().__module__,
    'cluster_resolver': tf.contrib.cluster_resolver.TPUClusterResolver.__name__,
    'contrib_seq2seq_error': error_of(lambda: tf.contrib.seq2seq.BasicDecoder),
    'contrib_gan_error': error_of(import_gan),
    'compat_v1_is_tf1': error_of(lambda: tf.compat.v1.contrib.tpu.TPUEstimator),
    'layers': tf.layers.dense.__module__,
}
with open(sys.argv[1], 'w') as f:
  json.dump(report, f)
raise RuntimeError('tf1_probe fails on purpose')
