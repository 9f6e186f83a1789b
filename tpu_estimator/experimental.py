"""`tf.estimator.experimental`'s hooks: early stopping, in-memory evaluation, stopping
non-chief trainers at a step; `LinearSDCA`, the SDCA optimizer of the linear estimators; and
`build_raw_supervised_input_receiver_fn`, the receiver of a TRAIN or EVAL export."""
from tpu_estimator.export import build_raw_supervised_input_receiver_fn
from tpu_estimator.hooks.early_stopping import make_early_stopping_hook
from tpu_estimator.hooks.early_stopping import make_stop_at_checkpoint_step_hook
from tpu_estimator.hooks.early_stopping import read_eval_metrics
from tpu_estimator.hooks.early_stopping import stop_if_higher_hook
from tpu_estimator.hooks.early_stopping import stop_if_lower_hook
from tpu_estimator.hooks.early_stopping import stop_if_no_decrease_hook
from tpu_estimator.hooks.early_stopping import stop_if_no_increase_hook
from tpu_estimator.hooks.in_memory_eval import InMemoryEvaluatorHook

__all__ = [
    'InMemoryEvaluatorHook', 'LinearSDCA', 'build_raw_supervised_input_receiver_fn',
    'make_early_stopping_hook', 'make_stop_at_checkpoint_step_hook',
    'read_eval_metrics', 'stop_if_higher_hook', 'stop_if_lower_hook',
    'stop_if_no_decrease_hook', 'stop_if_no_increase_hook'
]


def __getattr__(name):
  """`LinearSDCA` on first use: reading it loads the canned estimators, the hooks do not."""
  if name == 'LinearSDCA':
    from tpu_estimator.canned.sdca import LinearSDCA  # pylint: disable=import-outside-toplevel
    return LinearSDCA
  raise AttributeError('module %r has no attribute %r' % (__name__, name))
