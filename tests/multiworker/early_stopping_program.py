"""Two-worker TPUEstimator training with an early-stopping hook that only the chief's
`should_stop_fn` fires (on its second call, at step 10): every worker must stop at that step.
Writes each task's final step to OUT_DIR/<task>.json."""
import json
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

import tensorflow as tf  # pylint: disable=g-import-not-at-top

import helpers as h  # pylint: disable=g-import-not-at-top
import tpu_estimator as te  # pylint: disable=g-import-not-at-top


def main(model_dir, out):
  x, y = h.make_data(160)

  def input_fn(params):
    context = params['context'].input_context
    ds = tf.data.Dataset.from_tensor_slices(({'x': x}, y)).batch(params['batch_size'])
    return ds.shard(context.num_input_pipelines, context.input_pipeline_id).repeat()

  config = te.RunConfig(model_dir=model_dir, save_checkpoints_steps=5,
                        tpu_config=te.TPUConfig(iterations_per_loop=5))
  est = te.TPUEstimator(h.make_model_fn(tpu=True), config=config, train_batch_size=16)
  calls = []

  def should_stop():
    calls.append(1)
    return config.is_chief and len(calls) >= 2

  hook = te.experimental.make_early_stopping_hook(est, should_stop, run_every_secs=None,
                                                  run_every_steps=5)
  final = {}
  est.train(input_fn, max_steps=40, hooks=[hook, h.FinalValues(final)])
  task = '%s%d' % (config.task_type, config.task_id)
  with open(os.path.join(out, task + '.json'), 'w') as f:
    json.dump({'calls': len(calls), 'stopped_at': final['global_step']}, f)


if __name__ == '__main__':
  main(sys.argv[1], sys.argv[2])
