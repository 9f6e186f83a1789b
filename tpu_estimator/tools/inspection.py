"""`tpu-estimator inspect MODEL_DIR`: what a model directory holds.

    tpu-estimator inspect MODEL_DIR [--exports DIR ...] [--json]

Lists the checkpoints (step and save time, from the `checkpoint` state file and the files'
modification times), the variables of the latest checkpoint with their shapes, the latest
evaluation results of each eval directory (`eval`, `eval_<name>`: the scalars of the last step
in its event files), and the SavedModel exports (timestamped directories under
`MODEL_DIR/export/*/` and under every `--exports DIR`) with their tags and signature names.

`inspect_model_dir` returns all of it as a dict; `print_report` draws that dict as tables with
rich on a terminal, `format_report` renders it as plain text (files, pipes); `add_parser`
registers the subcommand on an `argparse` subparsers object.  Paths go through
`tf.io.gfile`, so `gs://` model directories work too.
"""
import json
import os
import re
import sys
import time

import numpy as np


class _LazyTensorFlow:
  """`tensorflow`, imported on first use: registering the subcommand (cli.py builds every
  subcommand's parser) must not import TensorFlow."""

  def __getattr__(self, name):
    import tensorflow  # pylint: disable=import-outside-toplevel
    return getattr(tensorflow, name)


tf = _LazyTensorFlow()
_CKPT_STEP = re.compile(r'-(\d+)$')
_EVENTS = 'events.out.tfevents.*'
_SAVED_MODEL_FILES = ('saved_model.pb', 'saved_model.pbtxt')
# saved_model.pb holds the whole graph; above this size signatures are not read.
_MAX_SAVED_MODEL_BYTES = 256 << 20


class InspectionError(ValueError):
  """The directory cannot be inspected (missing, or without a checkpoint)."""


# ---------------------------------------------------------------------------------------------
# Collecting

def inspect_model_dir(model_dir, exports=None):
  """Everything `inspect` reports about `model_dir`, as a JSON-serialisable dict:

    model_dir: the directory (absolute for local paths)
    checkpoints: [{path, name, step, time, exists}], oldest first; `time` in seconds since
        the epoch (the state file's timestamp, else the .index file's modification time)
    latest_checkpoint: path of the newest checkpoint
    variables: [{name, shape, dtype}] of the latest checkpoint, by name
    num_values: total elements of those variables
    evaluations: {eval dir name: {step, time, metrics: {tag: float}, checkpoint_path}}
    exports: [{path, timestamp, time, meta_graphs: [{tags, signatures}] or None}]
    warnings: [str] (unreadable parts, skipped)

  `exports`: more directories to list SavedModels from: an export base holding timestamped
  SavedModel directories, or a SavedModel directory itself.

  Raises `InspectionError` when `model_dir` does not exist or holds no checkpoint.
  """
  model_dir = os.fspath(model_dir)
  if '://' not in model_dir:
    model_dir = os.path.abspath(model_dir)
  if not tf.io.gfile.isdir(model_dir):
    if tf.io.gfile.exists(model_dir):
      raise InspectionError('%s is not a directory.' % model_dir)
    raise InspectionError('Model directory %s does not exist.' % model_dir)
  warnings = []
  checkpoints = _checkpoints(model_dir, warnings)
  existing = [c for c in checkpoints if c['exists']]
  if not existing:
    raise InspectionError(
        'No checkpoint in %s (no `checkpoint` state file naming an existing checkpoint, no '
        '*.index files). Train first, or pass the directory a model was trained in.'
        % model_dir)
  latest = existing[-1]['path']
  named = tf.train.latest_checkpoint(model_dir)  # the state file's choice, when it exists
  if named and named in [c['path'] for c in existing]:
    latest = named
  variables = _variables(latest, warnings)
  return {
      'model_dir': model_dir,
      'checkpoints': checkpoints,
      'latest_checkpoint': latest,
      'variables': variables,
      'num_values': int(sum(int(np.prod(v['shape'])) for v in variables)),
      'evaluations': _evaluations(model_dir, warnings),
      'exports': _exports(model_dir, exports or (), warnings),
      'warnings': warnings,
  }


def _mtime(path):
  try:
    return tf.io.gfile.stat(path).mtime_nsec / 1e9
  except tf.errors.OpError:
    return None


def _step_of(path):
  match = _CKPT_STEP.search(os.path.basename(path))
  if match:
    return int(match.group(1))
  try:
    return int(tf.train.load_variable(path, tf.compat.v1.GraphKeys.GLOBAL_STEP))
  except (tf.errors.OpError, ValueError):
    return None


def _checkpoints(model_dir, warnings):
  """The checkpoints the state file names (oldest first), else the *.index files found."""
  entries = []
  state = None
  try:
    state = tf.train.get_checkpoint_state(model_dir)
  except (tf.errors.OpError, ValueError) as e:  # a corrupt `checkpoint` file
    warnings.append('Could not read %s: %s' % (os.path.join(model_dir, 'checkpoint'), e))
  if state is not None:
    paths = list(state.all_model_checkpoint_paths)
    if state.model_checkpoint_path and state.model_checkpoint_path not in paths:
      paths.append(state.model_checkpoint_path)
    stamps = list(state.all_model_checkpoint_timestamps)
    for i, path in enumerate(paths):
      exists = tf.io.gfile.exists(path + '.index')
      if not exists:
        # A model_dir that was moved: the state file holds the old absolute paths.
        moved = os.path.join(model_dir, os.path.basename(path))
        if moved != path and tf.io.gfile.exists(moved + '.index'):
          path, exists = moved, True
      stamp = stamps[i] if len(stamps) == len(paths) else None
      entries.append({'path': path, 'exists': exists,
                      'time': stamp or (_mtime(path + '.index') if exists else None)})
    if entries and not any(e['exists'] for e in entries):
      warnings.append('None of the checkpoints the `checkpoint` file names exist; listing the '
                      '*.index files instead.')
      state, entries = None, []
  if state is None:
    for index in tf.io.gfile.glob(os.path.join(model_dir, '*.index')):
      path = index[:-len('.index')]
      entries.append({'path': path, 'exists': True, 'time': _mtime(index)})
  for entry in entries:
    entry['name'] = os.path.basename(entry['path'])
    entry['step'] = _step_of(entry['path']) if entry['exists'] else None
  if state is None:
    entries.sort(key=lambda e: (e['step'] is None, e['step'] or 0, e['time'] or 0))
  return entries


def _variables(checkpoint, warnings):
  try:
    reader = tf.train.load_checkpoint(checkpoint)
    dtypes = reader.get_variable_to_dtype_map()
    names = tf.train.list_variables(checkpoint)
  except (tf.errors.OpError, ValueError) as e:
    warnings.append('Could not read the variables of %s: %s' % (checkpoint, e))
    return []
  return [{'name': name, 'shape': [int(d) for d in shape],
           'dtype': dtypes[name].name if name in dtypes else None}
          for name, shape in sorted(names)]


def _scalar(value):
  """A float (or str) for a scalar summary value, else None."""
  if value.HasField('simple_value'):
    return float(value.simple_value)
  if value.HasField('tensor'):
    try:
      array = tf.make_ndarray(value.tensor)
    except (TypeError, ValueError):
      return None
    if array.ndim != 0:
      return None
    item = array.item()
    if isinstance(item, bytes):
      return item.decode('utf-8', 'replace')
    if isinstance(item, (bool, int, float)):
      return float(item)
  return None


def read_last_step_scalars(logdir, warnings=None):
  """(step, wall_time, {tag: value}): the scalars of the highest step in `logdir`'s event
  files (later events of that step win), or None when there are none.  String scalars (such
  as `checkpoint_path`) come back as str."""
  from tpu_estimator import quiet  # pylint: disable=import-outside-toplevel
  last = None
  with quiet.internal_calls():
    for path in sorted(tf.io.gfile.glob(os.path.join(logdir, _EVENTS))):
      try:
        for event in tf.compat.v1.train.summary_iterator(path):
          if not event.HasField('summary'):
            continue
          values = {v.tag: _scalar(v) for v in event.summary.value}
          values = {k: v for k, v in values.items() if v is not None}
          if not values:
            continue
          if last is None or event.step > last[0]:
            last = (event.step, event.wall_time, values)
          elif event.step == last[0]:
            last = (event.step, max(event.wall_time, last[1]), dict(last[2], **values))
      except tf.errors.DataLossError as e:  # a file still being written
        if warnings is not None:
          warnings.append('Event file %s is truncated (%s); read what came before.' % (path, e))
  return last


def _evaluations(model_dir, warnings):
  result = {}
  for name in sorted(tf.io.gfile.listdir(model_dir)):
    name = name.rstrip('/')
    if not (name == 'eval' or name.startswith('eval_')):
      continue
    logdir = os.path.join(model_dir, name)
    if not tf.io.gfile.isdir(logdir):
      continue
    last = read_last_step_scalars(logdir, warnings)
    if last is None:
      result[name] = {'step': None, 'time': None, 'metrics': {}, 'checkpoint_path': None}
      continue
    step, wall_time, values = last
    checkpoint_path = values.pop('checkpoint_path', None)
    metrics = {k: v for k, v in sorted(values.items()) if isinstance(v, float)}
    result[name] = {'step': int(step), 'time': wall_time, 'metrics': metrics,
                    'checkpoint_path': checkpoint_path if isinstance(checkpoint_path, str)
                                       else None}
  return result


def _is_saved_model(path):
  return any(tf.io.gfile.exists(os.path.join(path, f)) for f in _SAVED_MODEL_FILES)


def _subdirs(path):
  try:
    names = tf.io.gfile.listdir(path)
  except tf.errors.OpError:
    return []
  return [os.path.join(path, n.rstrip('/')) for n in sorted(names)
          if not n.startswith('temp-') and tf.io.gfile.isdir(os.path.join(path, n))]


def _find_saved_models(base, depth):
  """SavedModel directories at `base` or up to `depth` levels below it."""
  if _is_saved_model(base):
    return [base]
  if depth == 0:
    return []
  found = []
  for sub in _subdirs(base):
    found += _find_saved_models(sub, depth - 1)
  return found


def _meta_graphs(path, warnings):
  """[{tags, signatures}] from saved_model.pb(txt), or None when too big or unreadable."""
  from tpu_estimator import _tf_internals  # pylint: disable=import-outside-toplevel
  proto = _tf_internals.saved_model_proto()
  try:
    binary = os.path.join(path, 'saved_model.pb')
    if tf.io.gfile.exists(binary):
      if tf.io.gfile.stat(binary).length > _MAX_SAVED_MODEL_BYTES:
        return None
      with tf.io.gfile.GFile(binary, 'rb') as f:
        proto.ParseFromString(f.read())
    else:
      from google.protobuf import text_format  # pylint: disable=import-outside-toplevel
      with tf.io.gfile.GFile(os.path.join(path, 'saved_model.pbtxt'), 'r') as f:
        text_format.Parse(f.read(), proto)
  except Exception as e:  # pylint: disable=broad-except
    warnings.append('Could not read the signatures of %s: %s' % (path, e))
    return None
  return [{'tags': sorted(m.meta_info_def.tags), 'signatures': sorted(m.signature_def)}
          for m in proto.meta_graphs]


def _exports(model_dir, extra, warnings):
  found = []
  export_root = os.path.join(model_dir, 'export')
  if tf.io.gfile.isdir(export_root):
    # export/<exporter name>/<timestamp>/ (Exporters), or export/<timestamp>/
    found += _find_saved_models(export_root, 2)
  for base in extra:
    base = os.fspath(base)
    if '://' not in base:
      base = os.path.abspath(base)
    if not tf.io.gfile.isdir(base):
      warnings.append('Export directory %s does not exist.' % base)
      continue
    models = _find_saved_models(base, 2)
    if not models:
      warnings.append('No SavedModel under %s.' % base)
    found += models
  result, seen = [], set()
  for path in found:
    if path in seen:
      continue
    seen.add(path)
    name = os.path.basename(path)
    timestamp = int(name) if name.isdigit() else None
    result.append({'path': path, 'timestamp': timestamp,
                   'time': float(timestamp) if timestamp is not None and timestamp < 1e11
                           else _mtime(path),
                   'meta_graphs': _meta_graphs(path, warnings)})
  return result


# ---------------------------------------------------------------------------------------------
# Rendering

def _when(seconds):
  if seconds is None:
    return '?'
  return time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(seconds))


def _number(value):
  if isinstance(value, float):
    return '%.6g' % value
  return str(value)


def _is_terminal(stream):
  try:
    return bool(stream.isatty())
  except (AttributeError, ValueError, OSError):
    return False


def _relative(path, root):
  if path.startswith(root.rstrip('/') + '/'):
    return path[len(root.rstrip('/')) + 1:]
  return path


# Wide enough that nothing wraps when the report goes to a file or a pipe (one line per item,
# for grep); a terminal's own width otherwise.
_UNWRAPPED_WIDTH = 4096


def _console(file, terminal, width=None):
  from rich.console import Console  # pylint: disable=import-outside-toplevel
  # No markup, emoji or highlighting: names and paths are printed as they are.
  return Console(file=file, force_terminal=terminal, force_jupyter=False, width=width,
                 markup=False, emoji=False, highlight=False,
                 color_system='auto' if terminal else None)


def _table(*columns):
  """A table without borders, a rule under its header, indented under its section's title."""
  from rich import box  # pylint: disable=import-outside-toplevel
  from rich.table import Table  # pylint: disable=import-outside-toplevel
  table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
                header_style='bold')
  for name, options in columns:
    table.add_column(name, **options)
  return table


_FOLD = {'overflow': 'fold'}  # long names and paths fold at the terminal's edge, never cut


def _checkpoint_table(info):
  from rich.text import Text  # pylint: disable=import-outside-toplevel
  table = _table(('step', {'justify': 'right', 'style': 'cyan'}), ('saved', {}),
                 ('checkpoint', _FOLD), ('', {}))
  for c in info['checkpoints']:
    if not c['exists']:
      mark = Text('missing', style='red')
    elif c['path'] == info['latest_checkpoint']:
      mark = Text('latest', style='green')
    else:
      mark = ''
    table.add_row(str(c['step'] if c['step'] is not None else '?'), _when(c['time']),
                  _relative(c['path'], info['model_dir']), mark)
  return table


def _variable_table(info):
  table = _table(('variable', _FOLD), ('dtype', {'style': 'magenta'}), ('shape', {}))
  for v in info['variables']:
    table.add_row(v['name'], v['dtype'] or '?', '[%s]' % ', '.join(str(d) for d in v['shape']))
  return table


def _evaluation_table(evaluations):
  """A column per eval directory, a row per metric: side by side, the directories compare."""
  from rich.text import Text  # pylint: disable=import-outside-toplevel
  names = list(evaluations)
  metrics = sorted({k for ev in evaluations.values() for k in ev['metrics']})
  table = _table(('', {'style': 'bold'}), *[(name, {'justify': 'right'}) for name in names])
  runs = [evaluations[n] for n in names]
  table.add_row('global step', *[str(ev['step']) if ev['step'] is not None
                                 else Text('no results', style='yellow') for ev in runs])
  table.add_row('saved', *[_when(ev['time']) if ev['step'] is not None else '' for ev in runs])
  for key in metrics:
    table.add_row(key, *[_number(ev['metrics'][key]) if key in ev['metrics'] else '-'
                         for ev in runs])
  return table


def _export_table(info):
  from rich.text import Text  # pylint: disable=import-outside-toplevel
  table = _table(('export', _FOLD), ('saved', {}), ('tags', {}), ('signatures', _FOLD))
  for ex in info['exports']:
    path, saved = _relative(ex['path'], info['model_dir']), _when(ex['time'])
    if ex['meta_graphs'] is None:
      table.add_row(path, saved, '', Text('not read', style='yellow'))
    for mg in ex['meta_graphs'] or ():
      table.add_row(path, saved, ', '.join(mg['tags']), ', '.join(mg['signatures']) or '-')
      path, saved = '', ''  # once per export
  return table


def print_report(info, console):
  """Prints what `tpu-estimator inspect` shows for a dict from `inspect_model_dir` on a rich
  Console: a title and a table per part (checkpoints, variables, evaluations, exports), then
  the warnings."""
  from rich.padding import Padding  # pylint: disable=import-outside-toplevel
  from rich.text import Text  # pylint: disable=import-outside-toplevel

  def section(title, table=None):
    console.print()
    console.print(Text(title, style='bold'))
    if table is not None:
      console.print(Padding(table, (0, 0, 0, 2), expand=False))

  console.print(Text.assemble(('Model directory: ', 'bold'), info['model_dir']))
  section('Checkpoints (%d, oldest first)' % len(info['checkpoints']), _checkpoint_table(info))
  section('Variables in %s (%d variables, %s values)' % (
      os.path.basename(info['latest_checkpoint']), len(info['variables']),
      '{:,}'.format(info['num_values'])), _variable_table(info))
  if info['evaluations']:
    section('Evaluations (latest results per eval directory)',
            _evaluation_table(info['evaluations']))
  else:
    section('Evaluations: none (no eval or eval_<name> directory).')
  if info['exports']:
    section('Exports (%d)' % len(info['exports']), _export_table(info))
  else:
    section('Exports: none found (export/*/<timestamp>; pass --exports DIR for others).')
  for warning in info['warnings']:
    console.print()
    console.print(Text.assemble(('Warning: ', 'bold yellow'), warning))


def format_report(info, width=None):
  """The report as plain text (no colour, no trailing spaces), as `inspect` writes it to a file
  or a pipe: tables at their natural width unless `width` (columns) is given."""
  import io  # pylint: disable=import-outside-toplevel
  buffer = io.StringIO()
  print_report(info, _console(buffer, terminal=False, width=width or _UNWRAPPED_WIDTH))
  return '\n'.join(line.rstrip() for line in buffer.getvalue().rstrip('\n').split('\n'))


# ---------------------------------------------------------------------------------------------
# The subcommand

def add_parser(subparsers):
  """Registers `inspect` on an argparse subparsers object (handler: `run(args)`)."""
  parser = subparsers.add_parser(
      'inspect', help='list the checkpoints, variables, eval results and exports of a model '
      'directory',
      description='Lists the checkpoints of MODEL_DIR (step, save time), the variables of the '
      'latest checkpoint with their shapes, the latest results of each evaluation directory '
      '(eval, eval_<name>) and the SavedModel exports (MODEL_DIR/export/*/<timestamp> and '
      '--exports directories) with their signatures.')
  parser.add_argument('model_dir', metavar='MODEL_DIR', help='the model directory')
  parser.add_argument('--exports', metavar='DIR', action='append', default=[],
                      help='also list the SavedModels in DIR (an export base or a SavedModel '
                      'directory); may be repeated')
  parser.add_argument('--json', action='store_true', help='print the report as JSON')
  parser.set_defaults(handler=run)
  return parser


def run(args, out=None, err=None):
  """The `inspect` handler: prints the report, returns the exit code (2: cannot inspect)."""
  out = out or sys.stdout
  err = err or sys.stderr
  try:
    info = inspect_model_dir(args.model_dir, exports=args.exports)
  except InspectionError as e:
    print('tpu-estimator inspect: error: %s' % e, file=err)
    return 2
  if args.json:
    out.write(json.dumps(info, indent=2, sort_keys=True) + '\n')
  elif _is_terminal(out):
    print_report(info, _console(out, terminal=True))  # colours, the terminal's width
  else:
    out.write(format_report(info) + '\n')
  out.flush()
  return 0
