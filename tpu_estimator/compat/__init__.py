"""Legacy drop-in: TensorFlow's removed estimator namespaces and `tf.contrib`, resolved to
tpu_estimator, so TPUEstimator-era programs run unchanged on TensorFlow 2.16+.

`tpu-estimator run` calls `install()` before running a program.  Nothing here runs on import:
a program that never calls `install()` sees TensorFlow exactly as shipped.

`install()` (idempotent) sets, on TensorFlow's module objects:
- `tf.estimator`, `tf.compat.v2.estimator`: the v2 namespace (plus `.tpu`, as in TF 1.x);
- `tf.compat.v1.estimator`: the v1 namespace, with `.tpu`, `.export`, `.experimental`;
- `tf.compat.v1.tpu.CrossShardOptimizer`: ours (TensorFlow's calls a TPU-only op);
- `tf.compat.v1.tpu.experimental.AdagradParameters` (`AdamParameters`, `FtrlParameters`,
  `StochasticGradientDescentParameters`) where TensorFlow dropped them (2.16+): ours, for
  `EmbeddingConfigSpec` (see `distribute.tpu_embedding`);
- `TPUClusterResolver` in `tf[.compat.v1].distribute.cluster_resolver` (and so
  `tf.contrib.cluster_resolver`): with no TPU named or configured, it resolves to the local
  machine instead of raising (see `compat.cluster_resolver`);
- `tf.contrib` (on `tensorflow` and `tensorflow.compat.v1`): see `compat.contrib`;
- `tensorflow.python.keras[.*]`: tf_keras when `tf.keras` is tf_keras (see
  `compat.python_keras`);
- `import tensorflow_hub` where setuptools no longer ships `pkg_resources` (see
  `compat.hub_import`);
- `tensorflow.python.eager.profiler` (TF 2.0's eager profiler API) where TensorFlow dropped it
  (see `compat.eager_profiler`);
- `tensorflow.python.framework.ops.register_tensor_conversion_function` where TensorFlow moved
  it (see `tf_modules.restore_moved_names`);
and registers in `sys.modules` the import paths legacy code used: `tensorflow.estimator[.*]`,
`tensorflow.compat.v1.estimator[.*]`, `tensorflow.compat.v2.estimator[.*]`,
`tensorflow_estimator[.*]`, TF 1.x's `tensorflow.python.estimator.*`, `tensorflow.contrib[.*]`,
plus `tensorflow.compat[.v1|.v2]` (the patched objects).
`install(tf1=True)` also turns v2 behaviour off and makes `import tensorflow` give the TF1 API.

The parts, each in its module: `namespaces` (the estimator namespace tables and the shared
import machinery), `contrib` (tf.contrib), `tf1` (the --tf1 mode and the hint that points TF 1.x
programs to it), `legacy_keras` (tf.compat.v1.layers on tf_keras), `cluster_resolver` (the
local-machine TPUClusterResolver), `python_keras` (tensorflow.python.keras), `hub_import`
(tensorflow_hub without pkg_resources), `eager_profiler` (TF 2.0's eager profiler API),
`tf_modules` (TensorFlow's module objects).  Names the
original had but this package does not provide raise an error saying so and what to use
instead.
"""
from tpu_estimator.compat import cluster_resolver as _cluster_resolver
from tpu_estimator.compat import contrib as _contrib
from tpu_estimator.compat import eager_profiler as _eager_profiler
from tpu_estimator.compat import hub_import as _hub_import
from tpu_estimator.compat.legacy_keras import legacy_keras_available
from tpu_estimator.compat.legacy_keras import use_legacy_keras
from tpu_estimator.compat import namespaces as _namespaces
from tpu_estimator.compat import python_keras as _python_keras
from tpu_estimator.compat import tf1 as _tf1
from tpu_estimator.compat.tf1 import tf1_hint
from tpu_estimator.compat import tf_modules as _tf_modules

__all__ = ['install', 'legacy_keras_available', 'use_legacy_keras', 'tf1_hint']


def _install_embedding_parameters(experimental):
  """`tf.compat.v1.tpu.experimental.AdagradParameters` and the other TPU embedding optimizers'
  parameters where TensorFlow no longer has them (2.16+): programs build them for
  `EmbeddingConfigSpec`."""
  from tpu_estimator.distribute import tpu_embedding  # pylint: disable=import-outside-toplevel
  for cls in tpu_embedding.PARAMETERS if experimental is not None else ():
    if not hasattr(experimental, cls.__name__):
      _tf_modules.set_attr(experimental, cls.__name__, cls)


def install(tf1=False):
  """Makes the legacy estimator namespaces and `tf.contrib` resolve to tpu_estimator (see the
  module docstring for the list).  Idempotent; call it before the legacy program runs (or at
  least before it imports `tensorflow.compat.v1`, `tensorflow_estimator` or
  `tensorflow.contrib`).

  `tf1=True` (what `tpu-estimator run --tf1` does) also calls
  `tf.compat.v1.disable_v2_behavior()` and makes `import tensorflow as tf` give the TF1 API
  (`tf.compat.v1` with `tf.contrib`) for the rest of the process; modules imported before
  (tpu_estimator itself, tf_keras, the contrib implementations) keep TensorFlow 2."""
  import tpu_estimator as te  # pylint: disable=import-outside-toplevel
  _tf_modules.real_tf()
  _tf_modules.register_compat_aliases()
  _tf_modules.restore_moved_names()
  v2_modules, v1_modules = _tf_modules.api_modules()
  _namespaces.install(v2_modules, v1_modules)
  from tpu_estimator.distribute import cross_replica  # pylint: disable=import-outside-toplevel
  for module in v1_modules:
    tpu = getattr(module, 'tpu', None)
    if tpu is not None:
      _tf_modules.set_attr(tpu, 'CrossShardOptimizer', te.CrossShardOptimizer)
      _tf_modules.set_attr(tpu, 'cross_replica_sum', cross_replica.cross_replica_sum)
      _install_embedding_parameters(getattr(tpu, 'experimental', None))
  from tensorflow.compiler.tf2xla.python import xla  # pylint: disable=import-outside-toplevel
  _tf_modules.set_attr(xla, 'replica_id', cross_replica.replica_id)
  _cluster_resolver.install(v2_modules + v1_modules)
  _python_keras.install()
  _hub_import.install()
  _eager_profiler.install()
  contrib = _contrib.install(v2_modules, v1_modules)  # imports TensorFlow 2: before the switch
  if tf1:
    _tf1.install_tf1(contrib, _namespaces.build()['_v1'])
