"""A TF 2.x-era Estimator program: `RunConfig(train_distribute=strategy)` with the strategy made
at the top of the program, as TensorFlow's multi-worker Estimator tutorial did.  MODE 'cluster':
`tf.distribute.MultiWorkerMirroredStrategy()` over whatever cluster TF_CONFIG describes; 'local':
a MirroredStrategy over 2 logical CPUs in one process.  input_fn(input_context) reads its
worker's shard in per-replica batches: the global batch of every step holds the same 16 rows in
both modes.  Writes each task's own final weights and global step (read in its session as
training ends: a worker's train() can return before the chief has written its last checkpoint)
to OUT_DIR/<task>.json.

Usage: strategy_program.py MODE MODEL_DIR STEPS OUT_DIR"""
import json
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

import tensorflow as tf  # pylint: disable=g-import-not-at-top

import helpers as h  # pylint: disable=g-import-not-at-top
import tpu_estimator as te  # pylint: disable=g-import-not-at-top


def main(mode, model_dir, steps, out):
  if mode == 'cluster':
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
  else:
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices('CPU')[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
  x, y = h.make_data(160)
  seen = {}

  def input_fn(input_context):
    seen.update(pipelines=input_context.num_input_pipelines,
                pipeline_id=input_context.input_pipeline_id)
    ds = tf.data.Dataset.from_tensor_slices(({'x': x}, y))
    ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return ds.batch(input_context.get_per_replica_batch_size(16)).repeat()

  config = te.EstimatorRunConfig(model_dir=model_dir, train_distribute=strategy,
                                 save_checkpoints_steps=5)
  est = te.Estimator(lambda features, labels, mode: h.make_model_fn()(features, labels, mode,
                                                                      {}), config=config)
  est.train(input_fn, max_steps=steps, hooks=[h.FinalValues(seen)])
  task = '%s%d' % (config.task_type or 'local', config.task_id or 0)
  with open(os.path.join(out, task + '.json'), 'w') as f:
    json.dump(seen, f)


if __name__ == '__main__':
  main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
