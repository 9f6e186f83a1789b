"""What a Keras estimator keeps in its model_dir besides the Estimator's checkpoints.

- `checkpoint_format='checkpoint'`: the Saver of `object_scaffold` keys every variable by its
  path in the cloned model's object graph (`layer_with_weights-0/kernel/.ATTRIBUTES/
  VARIABLE_VALUE`, the optimizer's slots under `.OPTIMIZER_SLOT/optimizer/`, the global step
  as `estimator_global_step`), as the original did: `model.load_weights` reads them.
- `model_dir/keras/keras_model.ckpt`: the Keras model's weights when it was converted, keyed by
  the graph's variable names, which the estimator warm-starts from until it has a checkpoint
  of its own (`warm_start_settings`).
"""
import os
import re

import numpy as np
import tensorflow as tf

from tpu_estimator import _tf_internals
from tpu_estimator import warm_starting
from tpu_estimator.keras_models import backends

_v1 = tf.compat.v1
KERAS_DIR = 'keras'
KERAS_CHECKPOINT = 'keras_model.ckpt'


def object_scaffold(clone, global_step, optimizer=None):
  """A Scaffold whose Saver writes object-based names for `clone` (see module doc)."""
  if optimizer is not None:
    _tf_internals.track_child(clone, optimizer, 'optimizer')
  _tf_internals.track_child(clone, global_step, 'estimator_global_step')
  saver = _v1.train.Saver(var_list=_tf_internals.object_graph_saveables(clone),
                          sharded=True)
  return _v1.train.Scaffold(saver=saver)


def write_keras_weights(build_clone, keras_model, model_dir, session_config=None, seed=None):
  """Writes `keras_model`'s current weights into `model_dir/keras/` under the variable names
  `build_clone()` gives them in a graph; returns (checkpoint path, variable names).  An
  existing one is kept (the original did the same)."""
  keras_dir = os.path.join(model_dir, KERAS_DIR)
  path = os.path.join(keras_dir, KERAS_CHECKPOINT)
  values = [np.asarray(w) for w in keras_model.get_weights()]
  with tf.Graph().as_default():
    if seed is not None:
      _v1.set_random_seed(seed)
    variables = backends.graph_variables(build_clone().weights)
    names = [v.op.name for v in variables]
    if tf.train.latest_checkpoint(keras_dir):
      return path, names
    tf.io.gfile.makedirs(keras_dir)
    feeds = [_v1.placeholder(v.dtype.base_dtype, v.shape) for v in variables]
    assign = tf.group(*[v.assign(f) for v, f in zip(variables, feeds)])
    saver = _v1.train.Saver(var_list={n: v for n, v in zip(names, variables)})
    with _v1.Session(config=session_config) as session:
      session.run(assign, feed_dict=dict(zip(feeds, values)))
      saver.save(session, path, write_meta_graph=False)
  return path, names


def warm_start_settings(path, names):
  """Warm-starting every variable in `names` (the model's weights, its BatchNormalization
  statistics included) from `path`."""
  return warm_starting.WarmStartSettings(
      path, vars_to_warm_start='^(%s)(:0)?$' % '|'.join(re.escape(n) for n in names))
