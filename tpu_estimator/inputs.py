"""`numpy_input_fn` and `pandas_input_fn`: input_fns over in-memory arrays and DataFrames
(`tf.compat.v1.estimator.inputs`), on tf.data instead of the original's queues.

What a program sees is the original's: batches of `batch_size` rows in order (shuffle=False),
epochs following each other without a break, so only the very last batch may be short
(`num_epochs=None`: forever, always full batches); features as a dict (or the array itself when
`x` is one array), labels as an array or a dict, or features alone when `y` is None.
`shuffle=True` mixes rows over a buffer of `queue_capacity` rows, across epoch boundaries as the
shuffling queue did.  `num_threads` was the number of queue-filling threads; tf.data needs none,
and with more than one the original's order was not repeatable anyway.

The returned `input_fn` takes `params`.  Under `TPUEstimator`, `params['batch_size']` is the
batch each input pipeline must produce (per host or per shard), so it is used in place of the
`batch_size` argument (a warning says so when they differ), and with several input pipelines
(workers, or PER_SHARD_V1) each reads its own part of the rows.  Under `Estimator`, `params`
is the user's and `batch_size` is used.

The `input_fn` returns a dataset of those batches where the estimator calls it (it reads the
dataset as the original read its tensors) or where it runs eagerly (the original's queues
could not); called in a graph by other code (an `input_fn` of the program's that indexes the
features it returns, as TF-GAN's StarGAN test does), it returns the next batch's tensors, as
the original did.
"""
import collections

import numpy as np
import tensorflow as tf

from tpu_estimator import errors
from tpu_estimator.distribute import input_fn as input_fn_lib
from tpu_estimator.distribute import layout

_log = tf.get_logger()
_TARGET_KEY = '__target_key__'
_SINGLE_ARRAY_KEY = '__direct_np_input__'


def _check_common(batch_size, num_epochs, shuffle, queue_capacity, num_threads):
  if not isinstance(shuffle, bool):
    raise errors.value_error(
        '`shuffle` must be provided and explicitly set as a bool.',
        'Pass shuffle=True for training, shuffle=False for evaluation and prediction.',
        shuffle=shuffle)
  errors.check_positive_int('batch_size', batch_size)
  errors.check_positive_int('num_epochs', num_epochs, allow_none=True)
  errors.check_positive_int('queue_capacity', queue_capacity, allow_none=True)
  errors.check_positive_int('num_threads', num_threads)


def _features_dict(x):
  """`x` as an ordered dict of arrays (keys sorted, as the original iterated them)."""
  if isinstance(x, dict):
    if not x:
      raise errors.value_error('`x` cannot be an empty dict.', x=x)
    return collections.OrderedDict((k, np.asarray(x[k])) for k in sorted(x))
  if isinstance(x, np.ndarray):
    if x.size == 0:
      raise errors.value_error('`x` cannot be an empty array.', x_shape=x.shape)
    return collections.OrderedDict([(_SINGLE_ARRAY_KEY, x)])
  raise errors.type_error('`x` must be a dict of numpy arrays or a numpy array.',
                          x=type(x).__name__)


def numpy_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None, queue_capacity=1000,
                   num_threads=1):
  """An input_fn yielding `(features, labels)` batches of the numpy arrays `x` (an array or
  a dict of arrays) and `y` (an array, a dict of arrays, or None: features only)."""
  _check_common(batch_size, num_epochs, shuffle, queue_capacity, num_threads)
  features = _features_dict(x)
  if y is None:
    label_keys = None
  elif isinstance(y, dict):
    if not y:
      raise errors.value_error('`y` cannot be an empty dict.', 'Pass y=None instead.', y=y)
    duplicates = sorted(set(features) & set(y))
    if duplicates:
      raise errors.value_error('%d keys are in both `x` and `y`.' % len(duplicates),
                               'Rename them in one of the dicts.', duplicate_keys=duplicates)
    label_keys = sorted(y)
  elif isinstance(y, np.ndarray):
    label_keys = _TARGET_KEY
  else:
    raise errors.type_error('`y` must be a numpy array, a dict of numpy arrays or None.',
                            y=type(y).__name__)
  labels = None if y is None else (
      collections.OrderedDict((k, np.asarray(y[k])) for k in label_keys)
      if isinstance(y, dict) else y)
  lengths = {k: v.shape[0] if v.ndim else None for k, v in features.items()}
  label_lengths = {} if y is None else (
      {k: v.shape[0] if v.ndim else None for k, v in labels.items()} if isinstance(y, dict)
      else {'y': y.shape[0] if y.ndim else None})
  if len(set(lengths.values()) | set(label_lengths.values())) != 1 or None in lengths.values():
    raise errors.value_error(
        'All arrays in `x` and `y` must have the same length (first dimension).',
        'Pass arrays with one row per example.',
        x_shapes={k: v.shape for k, v in features.items()},
        y_shapes=None if y is None else (
            {k: v.shape for k, v in labels.items()} if isinstance(y, dict) else y.shape))
  single = isinstance(x, np.ndarray)

  def make(data):
    feats, labs = data if y is not None else (data, None)
    feats = feats[_SINGLE_ARRAY_KEY] if single else dict(feats)
    if labs is None:
      return feats
    return feats, (dict(labs) if isinstance(labs, dict) else labs)

  data = (features, labels) if y is not None else features
  return _input_fn(data, make, next(iter(lengths.values())), batch_size, num_epochs, shuffle,
                   queue_capacity, 'numpy_input_fn')


def pandas_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None, queue_capacity=1000,
                    num_threads=1, target_column='target'):
  """An input_fn yielding `(features, labels)` batches of the DataFrame `x` (a dict of its
  columns) and `y` (a Series, named `target_column`, or a DataFrame: a dict; None: features
  only).  `y`'s index must equal `x`'s."""
  try:
    import pandas as pd  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise ImportError('pandas_input_fn needs pandas, which is not installed: '
                      'pip install pandas') from None
  _check_common(batch_size, num_epochs, shuffle, queue_capacity, num_threads)
  if not isinstance(target_column, str):
    raise errors.type_error('`target_column` must be a string.', target_column=target_column)
  if not isinstance(x, pd.DataFrame):
    raise errors.type_error('`x` must be a pandas DataFrame.', x=type(x).__name__)
  if y is not None:
    if not isinstance(y, (pd.Series, pd.DataFrame)):
      raise errors.type_error('`y` must be a pandas Series, DataFrame or None.',
                              y=type(y).__name__)
    if isinstance(y, pd.Series) and target_column in x:
      raise errors.value_error(
          'Cannot use the name %r for the target column: `x` already has a column with that '
          'name.' % target_column, 'Pass another target_column.',
          target_column=target_column, x_columns=list(x.columns))
    if not np.array_equal(x.index, y.index):
      raise errors.value_error('The indexes of `x` and `y` must match.',
                               'Align them, e.g. y = y.loc[x.index].',
                               x_index=list(x.index[:5]), y_index=list(y.index[:5]))
  if queue_capacity is None:  # the original's default sizes, for the shuffle buffer
    queue_capacity = 4 * len(x) if shuffle else len(x)
  features = collections.OrderedDict((str(c), x[c].values) for c in x.columns)
  if y is None:
    labels = None
  elif isinstance(y, pd.DataFrame):
    labels = collections.OrderedDict((str(c), y[c].values) for c in y.columns)
  else:
    labels = y.values

  def make(data):
    if y is None:
      return dict(data)
    feats, labs = data
    return dict(feats), (dict(labs) if isinstance(labs, dict) else labs)

  data = (features, labels) if y is not None else features
  return _input_fn(data, make, len(x), batch_size, num_epochs, shuffle, queue_capacity,
                   'pandas_input_fn')


def _input_fn(data, make, num_rows, batch_size, num_epochs, shuffle, buffer_size, what):
  """The input_fn over `data` (nested arrays of `num_rows` rows); `make` turns an element
  into what the model sees."""
  if num_rows == 0:
    raise errors.value_error('%s needs at least one row of data.' % what, num_rows=num_rows)

  def input_fn(params=None):
    batch = batch_size
    context = None
    hparams = layout.is_hparams(params)  # TPUEstimator took an HParams as params too
    if (isinstance(params, dict) or hparams) and 'context' in params and 'batch_size' in params:
      # TPUEstimator: the batch this pipeline must produce.
      context = params.context if hparams else params['context']
      batch = params.batch_size if hparams else params['batch_size']
      if batch != batch_size:
        _log.warning('%s: using TPUEstimator\'s params["batch_size"]=%d (the batch each input '
                     'pipeline produces) instead of batch_size=%d.', what, batch, batch_size)
    dataset = tf.data.Dataset.from_tensor_slices(data)
    pipelines = getattr(getattr(context, 'input_context', None), 'num_input_pipelines', 1)
    if pipelines > 1:
      dataset = dataset.shard(pipelines, context.input_context.input_pipeline_id)
    dataset = dataset.repeat(num_epochs)
    if shuffle:
      dataset = dataset.shuffle(buffer_size or 1000)
    dataset = dataset.batch(batch, drop_remainder=num_epochs is None)
    # A (features, labels) element reaches map's function as two arguments.
    dataset = dataset.map(lambda *element: make(element[0] if len(element) == 1 else element))
    if tf.executing_eagerly() or input_fn_lib.called_by_the_estimator(input_fn):
      return dataset
    # Called by another input_fn (TF-GAN's tests index its features): the next batch's
    # tensors, which the original's queue gave every caller.
    return tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()

  return input_fn

