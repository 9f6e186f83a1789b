"""`tf.contrib.summary`: the TF 1.x graph-mode summary API that TPU programs wrote host_call
summaries with.

TensorFlow 2 still carries this API's ops (the summary-writer resource and the
`Write*Summary` kernels) behind `tf.summary`; these functions expose them under the TF 1.15
names and semantics:
- nothing is recorded unless a writer is the default (`writer.as_default()`) AND a recording
  condition is active (`always_record_summaries()`, `record_summaries_every_n_global_steps(n)`)
  — TF 1.x's default was "do not record", unlike `tf.summary`'s;
- `step=None` means the global step;
- `create_file_writer` registers the writer's init op in the (outermost) graph, so
  `summary_writer_initializer_op()` (and tpu_estimator's host_call hook) initialise it, also
  when a host_call creates it inside the device loop;
- `all_summary_ops()` lists the ops to run, as a host_call returned them.
Events are written in the `Summary` formats TensorBoard reads (scalars as `simple_value`).
"""
import tensorflow as tf
from tensorflow.python.ops import summary_ops_v2 as _ops

__all__ = [
    'all_summary_ops', 'always_record_summaries', 'audio', 'create_file_writer',
    'create_summary_file_writer', 'eval_dir', 'flush', 'generic', 'graph', 'histogram', 'image',
    'import_event', 'initialize', 'never_record_summaries',
    'record_summaries_every_n_global_steps', 'scalar', 'should_record_summaries',
    'summary_writer_initializer_op', 'text', 'SummaryWriter',
]

SummaryWriter = _ops.SummaryWriter
always_record_summaries = _ops.always_record_summaries
never_record_summaries = _ops.never_record_summaries
record_summaries_every_n_global_steps = _ops.record_summaries_every_n_global_steps
should_record_summaries = _ops._legacy_contrib_should_record_summaries  # pylint: disable=protected-access
summary_writer_initializer_op = _ops.summary_writer_initializer_op
initialize = _ops.initialize
eval_dir = _ops.eval_dir
import_event = _ops.import_event
scalar = _ops.scalar
histogram = _ops.histogram
image = _ops.image
audio = _ops.audio
generic = _ops.generic
graph = _ops.graph_v1


def create_file_writer(logdir, max_queue=None, flush_millis=None, filename_suffix=None,
                       name=None):
  """A summary writer for `logdir` (None: one that writes nothing).  `max_queue` (default 10)
  summaries are buffered, flushed at least every `flush_millis` (default 120000) ms and when
  `flush()` runs."""
  # Built in the outermost graph: a host_call runs inside tpu_estimator's device loop (a
  # while-loop body), where an init op could not be run by the session.
  with tf.init_scope():
    return _ops.create_file_writer(logdir, max_queue=max_queue, flush_millis=flush_millis,
                                   filename_suffix=filename_suffix, name=name)


create_summary_file_writer = create_file_writer


def flush(writer=None, name=None):
  """The op that flushes `writer` (a writer or its resource tensor; default: the default
  writer; a no-op when there is none)."""
  return _ops.legacy_raw_flush(writer=writer, name=name)


def all_summary_ops():
  """The summary ops built so far in the default graph (None when executing eagerly)."""
  return _ops.all_v2_summary_ops()


def text(name, tensor, family=None, step=None):
  """Writes a string tensor as a TensorBoard text summary, if recording."""
  metadata = tf.compat.v1.SummaryMetadata(
      plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name='text'))
  return generic(name, tf.cast(tensor, tf.string), metadata=metadata, family=family, step=step)
