"""`TPUClusterResolver` as TPUEstimator-era programs built it: with no TPU named and none
configured, it resolves to this machine.

Programs such as tensorflow/tpu's mnist and resnet build
`tf.distribute.cluster_resolver.TPUClusterResolver(FLAGS.tpu or '')` (or the
`tf.contrib.cluster_resolver` one) even with `--use_tpu=False`, and pass it to
`RunConfig(cluster=...)`.  TensorFlow 1.x gave the local master for an empty name off Cloud;
TensorFlow 2's resolver raises "Please provide a TPU Name to connect to." before the program
reaches its first step.  `install()` puts `TPUClusterResolver` (a subclass of TensorFlow's, so
`isinstance` checks hold) under the public names: with no name and none of the environment
variables TensorFlow reads a TPU name from, it resolves as TensorFlow's `tpu='local'` does
(master '', an empty cluster) and logs one line saying so; a TPU that is named, or configured
in the environment, goes to TensorFlow's resolver unchanged and fails as it does when
unreachable.
"""
import os
import sys

import tensorflow as tf
from tensorflow.python.distribute.cluster_resolver.tpu import tpu_cluster_resolver as _tpu_lib

from tpu_estimator.compat import tf_modules

# Where TensorFlow's Cloud TPU client finds a TPU when none is named (GKE, the TPU_NAME
# convention, a TPU node's JSON config).
TPU_ENV_VARIABLES = ('KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS', 'TPU_NAME', 'TPU_CONFIG')

LOCAL_MESSAGE = ("TPUClusterResolver: no TPU named (tpu=%r) and none configured in the "
                 "environment (%s); resolving to the local machine (master '', no cluster), "
                 "so the program runs on this machine's devices.")


def _no_tpu_named(tpu):
  unnamed = tpu is None or (isinstance(tpu, (str, bytes)) and not tpu)
  return unnamed and not any(os.environ.get(name) for name in TPU_ENV_VARIABLES)


class TPUClusterResolver(_tpu_lib.TPUClusterResolver):
  """TensorFlow's `TPUClusterResolver`, except that no TPU at all (no name, nothing in the
  environment) resolves to the local machine instead of raising."""

  def __init__(self, tpu=None, zone=None, project=None, job_name='worker', *args, **kwargs):
    if isinstance(tpu, (list, tuple)) and len(tpu) == 1:  # TF 1.x took a list of one TPU
      tpu = tpu[0]  # (object detection's model_tpu_main: `tpu=[FLAGS.tpu_name]`)
    self.resolved_locally = _no_tpu_named(tpu)
    if self.resolved_locally:
      tf.get_logger().info(LOCAL_MESSAGE, tpu, ', '.join(TPU_ENV_VARIABLES))
      tpu = 'local'
      # No coordinator: TF 1.x started one only for a Cloud TPU it resolved (tensorflow/tpu's
      # ncf passes coordinator_name; TensorFlow's 'local' resolver cannot start one).
      args = (None,) + tuple(args[1:]) if args else args
      kwargs.pop('coordinator_name', None)
    super().__init__(tpu, zone, project, job_name, *args, **kwargs)


def _resolver_modules(api_modules):
  """TensorFlow's public `distribute.cluster_resolver` module objects."""
  found = []
  for module in api_modules:
    distribute = getattr(module, 'distribute', None)
    found.append(getattr(distribute, 'cluster_resolver', None))
  for name, module in list(sys.modules.items()):
    if name.startswith('tensorflow._api.') and name.endswith('distribute.cluster_resolver'):
      found.append(module)
  unique = {}
  for module in found:
    if module is not None and hasattr(module, 'TPUClusterResolver'):
      unique[id(module)] = module
  return list(unique.values())


def install(api_modules):
  """Sets `TPUClusterResolver` on every public cluster_resolver module of `api_modules`
  (TensorFlow's v1 and v2 API modules), which includes `tf.contrib.cluster_resolver`."""
  for module in _resolver_modules(api_modules):
    tf_modules.set_attr(module, 'TPUClusterResolver', TPUClusterResolver)
