"""Trains the tests' linear model with TPUEstimator(use_tpu=True) for `steps`, in whatever
cluster TF_CONFIG describes (or one process).  Writes what its input_fn saw, and the final weights, to OUT_DIR/<task>.json."""
import json
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

import tensorflow as tf  # pylint: disable=g-import-not-at-top

import helpers as h  # pylint: disable=g-import-not-at-top
import tpu_estimator as te  # pylint: disable=g-import-not-at-top


def main(model_dir, steps, out, shards):
  x, y = h.make_data(160)
  seen = {}

  def input_fn(params):
    context = params['context'].input_context
    seen.update(batch_size=params['batch_size'], pipeline_id=context.input_pipeline_id,
                num_pipelines=context.num_input_pipelines,
                hosts=[params['context'].current_host, params['context'].num_hosts])
    ds = tf.data.Dataset.from_tensor_slices(({'x': x}, y)).batch(params['batch_size'])
    return ds.shard(context.num_input_pipelines, context.input_pipeline_id).repeat()

  session_config = None
  if os.environ.get('OPERATION_TIMEOUT_MS'):  # how long a worker waits for a dead peer
    session_config = tf.compat.v1.ConfigProto(
        operation_timeout_in_ms=int(os.environ['OPERATION_TIMEOUT_MS']))
  config = te.RunConfig(model_dir=model_dir, save_checkpoints_steps=5,
                        session_config=session_config,
                        tpu_config=te.TPUConfig(iterations_per_loop=5,
                                                num_shards=shards or None))
  est = te.TPUEstimator(h.make_model_fn(tpu=True), config=config, train_batch_size=16)
  latest = est.latest_checkpoint()
  seen['start_step'] = int(tf.train.load_variable(latest, 'global_step')) if latest else 0
  est.train(input_fn, max_steps=steps, hooks=[h.FinalValues(seen)])
  seen['task'] = '%s%d' % (config.task_type, config.task_id)
  with open(os.path.join(out, seen['task'] + '.json'), 'w') as f:
    json.dump(seen, f)


if __name__ == '__main__':
  main(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 0)
