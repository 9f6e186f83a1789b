"""The host's input for the replicas: `HostInput` owns the iterators on the host and hands each
replica its `(features, labels, rows)`: split from one host batch (PER_HOST_V1), one batch per
replica from one pipeline (PER_HOST_V2) or from one pipeline per replica (PER_SHARD_V1), or the
same batch for all (BROADCAST).  For evaluation and prediction a short final batch is spread over
the replicas in order (some may get fewer rows, or none), so sharded results cover exactly the
data set."""

import tensorflow as tf

from tpu_estimator.config import InputPipelineConfig
from tpu_estimator.distribute import grouping
from tpu_estimator.distribute import iterators
from tpu_estimator.distribute import sparse_features
from tpu_estimator.distribute.input_fn import check_result
from tpu_estimator.distribute.input_fn import split_features_labels
from tpu_estimator import errors

_v1 = tf.compat.v1


def _batch_size_of(structure, axes):
  for tensor, axis in zip(tf.nest.flatten(structure), axes):
    return tf.shape(tensor, out_type=tf.int64)[axis]
  return tf.constant(0, tf.int64)


def _printable(count):
  """A row count as int32 for an Assert's message: with only int32 and string data, Assert is
  one op; with int64 data it is wrapped in a conditional whose two branch functions every
  graph's first run instantiates."""
  return tf.cast(count, tf.int32)


def _axes_for(structure, batch_axis):
  """One split axis per flattened tensor of `structure` (an int applies to all)."""
  if batch_axis is None:
    return [0] * len(tf.nest.flatten(structure))
  if isinstance(batch_axis, int):
    return [batch_axis] * len(tf.nest.flatten(structure))
  try:
    tf.nest.assert_same_structure(structure, batch_axis)
  except (ValueError, TypeError):
    raise errors.value_error('`batch_axis` must match the structure of the input.',
                             batch_axis=batch_axis, input_structure=str(structure)) from None
  return tf.nest.flatten(batch_axis)


class HostInput:
  """Iterators on the host and the per-replica inputs drawn from them for one step."""

  def __init__(self, results, input_mode, num_replicas, batch_axis=None, rows=None,
               uneven=False, device=None, group=None, empty_stand_in=False,
               micro_batches=1):
    """`results`: what each `input_fn` call returned (one, or one per replica for
    PER_SHARD_V1).  `rows`: rows expected per dataset element when sharding (None on one
    device).  `uneven`: a short or missing final element is spread over the replicas in order,
    each getting at most its share, some none (evaluation, prediction); otherwise a short
    element that cannot be split evenly ends the input (training).  `device`: a GPU the one
    dataset's elements are prefetched to (see `_iterator`).  `group`: a number of steps whose
    elements are read at once (`next_group`; `uneven`: `next_run`, runs of batches of one shape,
    grouping.py), for a device loop compiled as a whole; where the input cannot be grouped,
    `ungrouped` says why and the input is read a step at a time.
    `empty_stand_in`: a replica left without an element at the end of evaluation gets a
    batch of 0 rows rather than a stand-in row (model_fn's own metrics see it: RunConfig
    strategies, whose metrics are made in model_fn).  `micro_batches` (training, grouped):
    each step of a group is that many elements (gradient accumulation), [steps,
    micro_batches, ...]; elements left over at the end of the input that make no whole step
    are dropped, as the uncompiled loop drops an unfinished accumulation."""
    self._mode = input_mode
    self._n = num_replicas
    self._batch_axis = batch_axis
    self._rows = rows
    self._uneven = uneven
    self._empty_stand_in = empty_stand_in
    self._pipelines = []  # (dataset, device) of each iterator `make_iterators` makes
    self._iterators = None
    self._tensors = None
    self._element_spec = None
    self.ungrouped = 'no group was asked for' if group is None else \
        _why_not_grouped(results, num_replicas, group * micro_batches, uneven, rows,
                         input_mode)
    results = [check_result(r) for r in results]
    # SparseTensors cross the sharded input as dense pairs (sparse_features.py).
    self._sparse = (rows is not None or num_replicas > 1) and batch_axis is None and any(
        isinstance(r, tf.data.Dataset) and sparse_features.has_sparse(r.element_spec)
        for r in results)
    if self._sparse:
      results = [sparse_features.densify(r) for r in results]
    self.whole_static_steps = self._whole_static_steps(results)
    if self._splits_uneven():
      for result in results:
        self._check_static_rows(
            result.element_spec if isinstance(result, tf.data.Dataset) else result)
    if all(isinstance(r, tf.data.Dataset) for r in results):
      for dataset in results:
        if self._must_split_evenly():
          dataset = self._full_batches_only(dataset)
        if not self.ungrouped:
          self._element_spec = dataset.element_spec
          if micro_batches > 1:
            dataset = dataset.batch(micro_batches, drop_remainder=True)
          dataset = grouping.equal_shape_runs(dataset, group) if uneven else \
              dataset.batch(group)
        self._pipelines.append((dataset, device if len(results) == 1 else None))
    elif len(results) == 1 and not isinstance(results[0], tf.data.Dataset):
      self._tensors = results[0]
      self._iterators = []
    else:
      raise errors.type_error('With PER_SHARD_V1 input every `input_fn` call must return a '
                              'tf.data.Dataset.', results=results)

  def _must_split_evenly(self):
    """Training splits each host batch over the replicas: a short batch cannot be used."""
    return (self._rows is not None and not self._uneven and self._n > 1 and
            self._mode == InputPipelineConfig.PER_HOST_V1)

  def _splits_uneven(self):
    """Evaluation/prediction splitting each host batch into shares of `rows // n` rows."""
    return (self._rows is not None and self._uneven and self._n > 1 and
            self._mode == InputPipelineConfig.PER_HOST_V1)

  def _too_many_rows_words(self):
    """(what, fix) of the error for a batch with more rows than the shards take."""
    return ('An evaluation/prediction batch from `input_fn` has more rows than '
            'params["batch_size"] (eval_batch_size/predict_batch_size per host), all that the '
            '%d shards take: the rows past it would be lost.' % self._n,
            'Batch the dataset with params["batch_size"] (or raise eval_batch_size/'
            'predict_batch_size).')

  def _too_many_rows(self, size):
    what, fix = self._too_many_rows_words()
    return errors.value_error(what, fix, batch_rows=size, params_batch_size=self._rows)

  def _check_static_rows(self, structure):
    """The batch size, when known while building the graph, must fit the shards."""
    features, _ = split_features_labels(structure)
    for item, axis in zip(tf.nest.flatten(features), _axes_for(features, self._axis(0))):
      size = _dimension(item.shape, axis)
      if size is not None and size > self._rows:
        raise self._too_many_rows(size)
      break

  def _whole_static_steps(self, results):
    """Whether every step that has rows gives rows to every replica, each a static share: a
    `drop_remainder` input, on one replica or one element a step (split or broadcast).  One
    pipeline per replica, or PER_HOST_V2's element per replica, can end with a step some
    replicas get none of."""
    return ((self._n == 1 or self._mode in ONE_ELEMENT_A_STEP) and
            all(isinstance(r, tf.data.Dataset) and self._static_rows(r.element_spec)
                for r in results))

  def _whole_static(self, features, axes):
    """Whether this step's host batch is statically whole (`drop_remainder`, of
    params["batch_size"] rows): split evenly, each replica's share keeps its static size, as
    on a TPU (a step past the end of the input gives each share 0 real rows)."""
    for item, axis in zip(tf.nest.flatten(features), axes):
      return self._rows is not None and _dimension(item.shape, axis) == self._rows
    return False

  def _static_rows(self, structure):
    """Whether every tensor of an element has its batch size in its static shape (a
    `drop_remainder` dataset)."""
    features, labels = split_features_labels(structure)
    feature_axes, label_axes = self._axes(features, labels)
    pairs = list(zip(tf.nest.flatten(features), feature_axes))
    if labels is not None:
      pairs += list(zip(tf.nest.flatten(labels), label_axes))
    return all(_dimension(item.shape, axis) is not None for item, axis in pairs)

  def _checked_rows(self, rows):
    """`rows` once checked at run time: more rows than the shards take would be dropped."""
    what, fix = self._too_many_rows_words()
    check = tf.debugging.Assert(
        tf.less_equal(rows, self._rows),
        [what + ' Received: batch_rows=', _printable(rows),
         ', params_batch_size=%d. %s' % (self._rows, fix)],
        summarize=3)
    with tf.control_dependencies([check]):
      return tf.identity(rows)

  def _full_batches_only(self, dataset):
    """The dataset up to its first short batch (which ends the input); a first batch of the
    wrong size is an error, not an empty training run.  A dataset whose batch axis is
    statically params["batch_size"] (batched with drop_remainder=True) has only full batches:
    it is returned as it is, with no per-element check on the host."""
    rows, shards = self._rows, self._n

    def check_first(index, element):
      features, _ = split_features_labels(element)
      size = _batch_size_of(features, _axes_for(features, self._axis(0)))
      check = tf.debugging.Assert(
          tf.logical_or(index > 0, tf.equal(size, rows)),
          ['The first training batch has', _printable(size), 'rows, but each host batch must have',
           rows, 'rows (params["batch_size"]) to be split over', shards, 'shards. Batch '
           'the dataset with params["batch_size"] (and drop_remainder=True).'], summarize=3)
      with tf.control_dependencies([check]):
        return tf.nest.map_structure(tf.identity, element)

    features, _ = split_features_labels(dataset.element_spec)
    for spec, axis in zip(tf.nest.flatten(features), _axes_for(features, self._axis(0))):
      size = _dimension(spec.shape, axis)
      known = size is not None
      if known and size != rows:
        raise errors.value_error(
            'input_fn batches must have params["batch_size"] rows to be split over the shards.',
            'Batch the dataset with params["batch_size"].', batch_rows=size,
            params_batch_size=rows, num_shards=shards)
      if known:
        return dataset
      break
    return dataset.enumerate().map(check_first).take_while(self._is_full)

  def _is_full(self, *element):
    features, _ = split_features_labels(element if len(element) > 1 else element[0])
    return tf.equal(_batch_size_of(features, _axes_for(features, self._axis(0))), self._rows)

  @property
  def tensors_only(self):
    """`input_fn` returned tensors, not a Dataset (a one-shot iterator's `get_next()`, a
    queue's dequeue): a graph evaluates them once per `session.run`."""
    return self._tensors is not None

  @property
  def datasets(self):
    """The datasets the iterators read, one per pipeline (ready before the iterators are)."""
    return [dataset for dataset, _ in self._pipelines]

  def make_iterators(self):
    """Makes the iterators over `datasets` in the current graph and device scope (once).
    Apart from `__init__`: a call whose input a kept graph reads instead
    (graph_cache.read_new_input) needs only the datasets, and an iterator's copies took ~4 ms
    of such a call's ~12 to make."""
    if self._iterators is None:
      self._iterators = [_iterator(dataset, device) for dataset, device in self._pipelines]

  @property
  def iterators(self):
    """The input's iterators (iterators.Restartable), one per pipeline; none where `input_fn`
    returned tensors."""
    if self._iterators is None:
      raise RuntimeError('HostInput.make_iterators() must run before the input is read.')
    return list(self._iterators)

  @property
  def hooks(self):
    if not self.iterators:
      return []
    return [iterators.InputStartHook(self.iterators)]

  def _elements_per_step(self):
    """(iterator, count) pairs: how many elements one step takes from each iterator."""
    its = self.iterators
    if self._mode == InputPipelineConfig.PER_HOST_V2:
      return [(its[0], self._n)]
    if self._mode == InputPipelineConfig.PER_SHARD_V1 and len(its) > 1:
      return [(it, 1) for it in its]
    return [(its[0], 1)]

  def next_batch(self):
    """`(features, labels)` for one device and one step per `session.run`; `get_next()` raises
    OutOfRangeError at the end of a dataset, which ends the run as in the original."""
    if self._tensors is not None:
      return split_features_labels(self._tensors)
    element = self.iterators[0].get_next()
    return split_features_labels(sparse_features.rebuild(element) if self._sparse else element)

  def next_replica_inputs(self):
    """Builds the ops for one training step: `[(features, labels, rows)]`, one per replica.

    Reads with `get_next()`, so the end of the input raises OutOfRangeError, which ends a
    device loop (and training) after the steps already run.  Short host batches that cannot be
    split evenly over the replicas are filtered out of the dataset.
    """
    if self._tensors is not None:
      return self._distribute([split_features_labels(self._tensors)])
    elements = self._read_in_order(lambda iterator: iterator.get_next())
    return self._distribute([split_features_labels(e) for e in elements])

  def next_group(self):
    """The flat input tensors of up to `group` steps, each [steps, ...] (fewer steps at the end
    of the input; OutOfRangeError when there is none left)."""
    return tf.nest.flatten(self.iterators[0].get_next())

  def next_run(self):
    """(flat input tensors, steps) of a group of evaluation/prediction batches of one shape:
    each tensor [group, ...] of which the first `steps` are batches (OutOfRangeError when
    there is none left)."""
    element, steps = self.iterators[0].get_next()
    return tf.nest.flatten(element), steps

  def inputs_at(self, tensors):
    """`[(features, labels, rows)]` of one step from the slices of `next_group`'s tensors."""
    element = tf.nest.pack_sequence_as(self._element_spec, tensors)
    return self._distribute([split_features_labels(element)])

  def _read_in_order(self, read):
    """`read(iterator)` for every element of one step, each after the previous one: nothing
    orders a graph's reads otherwise (inside the device loop neither), and the replicas of
    PER_HOST_V2, reading one iterator, could swap elements (predictions out of order)."""
    results, previous = [], []
    for iterator, count in self._elements_per_step():
      for _ in range(count):
        with tf.control_dependencies(previous):
          result = read(iterator)
        previous = tf.nest.flatten(result, expand_composites=True)[:1]
        results.append(result)
    return results

  def next_replica_inputs_or_empty(self):
    """For evaluation and prediction: returns (has_value, `[(features, labels, rows)]`).

    A short or missing final element is spread over the replicas in order: some get fewer
    real rows or none (then a stand-in row whose outputs are dropped), so results cover
    exactly the data set.  `has_value` is False once no replica got anything.
    """
    if self._tensors is not None:
      return tf.constant(True), self._distribute([split_features_labels(self._tensors)])
    optionals = self._read_in_order(lambda iterator: iterator.get_next_as_optional())
    present = [o.has_value() for o in optionals]
    values = [self._value_or_empty(o, here) for o, here in zip(optionals, present)]
    return tf.reduce_any(tf.stack(present)), self._distribute(values)

  def next_replica_inputs_first_required(self):
    """For evaluation with a RunConfig strategy: `[(features, labels, rows)]`.  The first
    replica's element is read with `get_next()`, so an input that ends on a whole step ends
    the run there (OutOfRangeError, as the original); the others are read as optionals, and a
    replica left without one at the end gets a batch of 0 rows (`empty_stand_in`), so every
    element is evaluated."""
    reads = iter([lambda it: it.get_next()] +
                 [lambda it: it.get_next_as_optional()] * (self._n - 1))
    elements = self._read_in_order(lambda iterator: next(reads)(iterator))
    values = [split_features_labels(elements[0])]
    values += [self._value_or_empty(o, o.has_value()) for o in elements[1:]]
    return self._distribute(values)

  def _value_or_empty(self, optional, here):
    """(features, labels, real rows): the element, or when there is none a stand-in batch of
    zeros with 0 real rows (see `_stand_in_like_spec`)."""
    spec = optional.element_spec
    value = tf.cond(here, optional.get_value,
                    lambda: _stand_in_like_spec(spec, empty=self._empty_stand_in))
    features, labels = split_features_labels(value)
    rows = _batch_size_of(features, _axes_for(features, self._axis(0)))
    return features, labels, tf.where(here, rows, tf.constant(0, tf.int64))

  def fed_rows(self, features):
    """The rows of one replica's `features` (along the batch axis), stand-in rows included."""
    return _batch_size_of(features, _axes_for(features, self._axis(0)))

  def _axis(self, index):
    if isinstance(self._batch_axis, (tuple, list)) and len(self._batch_axis) == 2:
      return self._batch_axis[index]
    return self._batch_axis

  def _axes(self, features, labels):
    return _axes_for(features, self._axis(0)), _axes_for(labels, self._axis(1))

  def _distribute(self, values):
    """From the elements read for one step to one (features, labels, rows) per replica.

    `values` holds (features, labels) or, for evaluation/prediction, (features, labels, real
    rows).  Uneven shares: replica i gets real rows [i*b, (i+1)*b) of a short host batch; a
    replica left with none gets the batch's first row, counted as 0 real rows, whose outputs the
    host drops."""
    values = [v if len(v) == 3 else (v[0], v[1], None) for v in values]
    if len(values) == self._n:
      return self._rebuilt([(f, l, r if r is not None else _batch_size_of(f, self._axes(f, l)[0]))
                            for f, l, r in values])
    (features, labels, real), = values
    f_axes, l_axes = self._axes(features, labels)
    rows = _batch_size_of(features, f_axes) if real is None else real
    if self._mode == InputPipelineConfig.BROADCAST or self._n == 1:
      return self._rebuilt([(features, labels, rows)] * self._n)
    if self._uneven and not self._whole_static(features, f_axes):
      rows = self._checked_rows(rows)
      share = self._rows // self._n
      counts, ranges = [], []
      for i in range(self._n):
        start, end = tf.minimum(rows, i * share), tf.minimum(rows, (i + 1) * share)
        counts.append(end - start)
        ranges.append(tf.range(tf.where(end > start, start, 0), tf.where(end > start, end, 1)))
      parts = lambda s, axes: [[tf.gather(t, ranges[i], axis=a) for i in range(self._n)]
                               for t, a in zip(tf.nest.flatten(s), axes)]
    else:
      share = None if self._rows is None else self._rows // self._n
      parts = lambda s, axes: [[_with_batch(p, a, share) for p in tf.split(t, self._n, axis=a)]
                               for t, a in zip(tf.nest.flatten(s), axes)]
      counts = [rows // self._n] * self._n
    f_parts = parts(features, f_axes)
    l_parts = parts(labels, l_axes) if labels is not None else None
    out = []
    for i in range(self._n):
      f = tf.nest.pack_sequence_as(features, [p[i] for p in f_parts])
      lab = tf.nest.pack_sequence_as(labels, [p[i] for p in l_parts]) \
          if labels is not None else None
      out.append((f, lab, counts[i]))
    return self._rebuilt(out)

  def _rebuilt(self, inputs):
    """Each replica's `(features, labels, rows)` with its sparse features SparseTensors again."""
    if not self._sparse:
      return inputs
    return [(sparse_features.rebuild(f), sparse_features.rebuild(lab), rows)
            for f, lab, rows in inputs]


def _iterator(dataset, device):
  """An initializable iterator over `dataset` (iterators.Restartable), on `device` when given
  and every element can live there.

  On a GPU, an iterator on the host makes every step of a device loop wait for a host read and
  a copy; prefetched to the GPU (tf.data's `prefetch_to_device`), the next elements are
  already there and the whole loop runs on the GPU.  Elements holding strings or other host-only
  types stay on the host.  (An iterator on a GPU has one copy: it is made anew in place.)"""
  if device is None or not _device_friendly(dataset.element_spec):
    return iterators.Restartable(dataset)
  with tf.device(device):
    dataset = dataset.apply(tf.data.experimental.prefetch_to_device(device, buffer_size=2))
    return iterators.Restartable(dataset, copies=1)


GROUP_BYTES = 256 << 20  # the most input one group of steps may hold (two are prefetched)


ONE_ELEMENT_A_STEP = (InputPipelineConfig.PER_HOST_V1, InputPipelineConfig.BROADCAST)


def _why_not_grouped(results, num_replicas, group, uneven=False, rows=None,
                     input_mode=InputPipelineConfig.PER_HOST_V1):
  """Why the input of a compiled loop cannot be read a group of steps at a time (None if it
  can): one dataset whose elements are numeric tensors of static shapes, so that every step
  of a group has the same shapes (a dataset batched with drop_remainder=True), holding at
  most GROUP_BYTES per group, and one element a step (for several replicas, each step's
  element is split over them, or given to all: PER_HOST_V1, BROADCAST).  `uneven`
  (evaluation, prediction): the first axis of each tensor may vary (a short final batch:
  grouping.py); a group's size is then reckoned with `rows` (params["batch_size"]) along it."""
  if len(results) != 1 or not isinstance(results[0], tf.data.Dataset) or \
      (num_replicas != 1 and input_mode not in ONE_ELEMENT_A_STEP):
    return ('input_fn must return one tf.data.Dataset%s' %
            (' whose elements are split over the replicas (per_host_input_for_training=True '
             'or BROADCAST)' if num_replicas != 1 else ''))
  spec = results[0].element_spec
  if not _device_friendly(spec):
    return 'the dataset has elements other than numeric dense tensors'
  shapes = [s.shape for s in tf.nest.flatten(spec)]
  if uneven:
    if not all(s.rank for s in shapes) or \
        not all(s[1:].is_fully_defined() for s in shapes):
      return ('the dataset\'s elements have no static shape past their first axis (give '
              'every tensor a batch axis and static other dimensions)')
    firsts = [_dimension(s, 0) for s in shapes]
    shapes = [tf.TensorShape([rows or 1 if first is None else first]).concatenate(s[1:])
              for first, s in zip(firsts, shapes)]
  elif not all(s.is_fully_defined() for s in shapes):
    return ('the dataset\'s elements have no static shape (batch it with '
            'drop_remainder=True)')
  dtypes = [s.dtype for s in tf.nest.flatten(spec)]
  size = group * sum(s.num_elements() * d.size for s, d in zip(shapes, dtypes))
  if size > GROUP_BYTES:
    return ('the input of %d steps (iterations_per_loop) would take %d MiB, more than %d MiB' %
            (group, size >> 20, GROUP_BYTES >> 20))
  return None


def _dimension(shape, axis):
  """`shape[axis]` as an int, None where unknown (also for TensorFlow 1's `Dimension`s under
  `disable_v2_behavior()`, where `shape[axis]` is never None)."""
  if shape.rank is None:
    return None
  return tf.compat.dimension_value(shape[axis])


def _device_friendly(spec):
  specs = tf.nest.flatten(spec, expand_composites=False)
  return all(isinstance(s, tf.TensorSpec) and (s.dtype.is_floating or s.dtype.is_integer or
                                               s.dtype.is_bool) for s in specs)


def _with_batch(tensor, axis, size):
  """`tensor` with its batch dimension statically `size` (known once batches are full)."""
  if size is None or tensor.shape.rank is None:
    return tensor
  shape = tensor.shape.as_list()
  shape[axis] = size
  return tf.ensure_shape(tensor, shape)


def _stand_in_like_spec(spec, empty=False):
  """Zeros shaped as the element spec says, 1 where a dimension is unknown: whatever the
  batch axis (`batch_axis`, e.g. images fed [H, W, C, N]), the stand-in has the real
  elements' static shape, so the `tf.cond` choosing between them keeps every known
  dimension (model_fns read static shapes, e.g. a pool size from the image size).  Never 0
  rows: an empty batch would reach model_fn, and some CPU kernels (oneDNN's Conv2D) mis-shape
  empty inputs.  `empty`: 0 rows along the first axis instead (see HostInput)."""
  def zeros(s):
    if not isinstance(s, tf.TensorSpec):  # a `None` (labels of a features-only input)
      if type(s).__name__ == 'NoneTensorSpec':
        return None
      raise errors.type_error(
          'input_fn elements must be dense or sparse tensors to be split over the shards '
          '(sparse ones without a batch_axis).', 'Convert ragged features to dense or sparse '
          'ones in input_fn (RaggedTensor.to_tensor, .to_sparse()).', element_spec=s)
    if s.shape.rank is None:
      raise errors.value_error(
          'input_fn elements must have a known rank to be split over the shards.',
          'Give the dataset static ranks (e.g. tf.ensure_shape in Dataset.map).',
          element_spec=s)
    shape = [d if d is not None else 1 for d in s.shape.as_list()]
    if empty and shape:
      shape[0] = 0
    return tf.zeros(shape, s.dtype) if s.dtype != tf.string else tf.fill(shape, '')
  return tf.nest.map_structure(zeros, spec)
