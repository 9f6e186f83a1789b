"""`tpu-estimator doctor PROGRAM.py` / `doctor -m MODULE`: what a legacy program needs, read
from its source (Python's `ast`; the program is never run).

`scan()` reads the program and the local modules it imports (files under the program's
directory, or under the current directory for `-m`) and lists every name it reaches through
`tensorflow`, `tensorflow_estimator` or an optional package (`tf_slim`, `tf_keras`,
`tensorflow_hub`): import statements, and attribute chains on the names they bind
(`tf.estimator.tpu.TPUEstimator`, `contrib_tpu.RunConfig`, `tf.flags.FLAGS`).

`diagnose()` then looks each name up the way `tpu-estimator run` would meet it: in this
process, after the same `compat.install()` that `run` calls, through the runtime's own objects
(the estimator namespaces of `compat.namespaces`, `tf.contrib` of `compat.contrib`, the import
finder and its "not provided" messages, `compat.tf1.tf1_hint` and `tf1_only`, the
`compat.extras` table).  Nothing is listed twice: a name is covered when the runtime resolves
it, and its "not provided" text is the runtime's error message.  Verdicts:

- `as_is`: resolves on TensorFlow 2 itself (TF 1.x-only names reached through tf.compat.v1, TPU
  names TensorFlow still has, an optional package that is installed);
- `run`: resolves to tpu_estimator's stand-ins (tf.estimator, tensorflow_estimator,
  tf.contrib, the local TPUClusterResolver, CrossShardOptimizer, legacy Keras layers);
- `tf1`: TensorFlow 1.x API on `tensorflow` itself (tf.flags, tf.placeholder, ...): needs
  `tpu-estimator run --tf1`;
- `extra`: needs a package that is not installed: an extra of compat.extras, or any other
  package the program imports outside a `try: ... except ImportError`;
- `missing`: not provided; the message says what to use instead.

Importing this module changes nothing (it imports tpu_estimator.compat only inside
functions); `diagnose()` calls `compat.install()`, which changes TensorFlow's modules for the
whole process, as `run` does.
"""
import ast
import importlib
import json
import os
import sys
import types

VERDICTS = (
    ('as_is', 'works as is'),
    ('run', 'works under `tpu-estimator run`'),
    ('tf1', 'needs `tpu-estimator run --tf1`'),
    ('extra', 'needs a package that is not installed'),
    ('missing', 'not provided'),
)
COVERED = ('as_is', 'run')
_CHAIN_ROOTS = ('tensorflow', 'tensorflow_estimator')
_EXTRA_ROOTS = ('tf_slim', 'tf_keras', 'tensorflow_hub')  # checked against compat.extras.EXTRAS


class Ref:
  """One use of a name: `from module import name` (name set) or `import module`, followed by
  the attribute chain `attrs`; at file:line."""

  def __init__(self, module, name, attrs, file, line, package=False):
    self.module, self.name, self.attrs = module, name, tuple(attrs)
    self.file, self.line = file, line
    self.is_import = not attrs
    self.package = package  # another package the program imports (only its presence counts)

  def parts(self):
    return self.module.split('.') + ([self.name] if self.name else []) + list(self.attrs)


def _root(module):
  return module.split('.')[0]


def _tracked(module):
  return _root(module) in _CHAIN_ROOTS + _EXTRA_ROOTS


# ---------------------------------------------------------------------------------------------
# Reading the source

class _FileScan(ast.NodeVisitor):
  """The refs of one file, and the local imports to follow."""

  def __init__(self, path, package):
    self.path, self.package = path, package
    self.aliases = {}  # local name -> (module, name or None, attrs)
    self.refs, self.imports = [], []  # imports: absolute module names (maybe local)
    self.other_modules = set()  # names bound by imports of other modules
    self.packages = []  # (top-level package, line) of the other imports, unless guarded

  def _absolute(self, node):
    if not node.level:
      return node.module or ''
    parts = self.package.split('.') if self.package else []
    if node.level > 1:
      parts = parts[:len(parts) - (node.level - 1)]
    return '.'.join(parts + ([node.module] if node.module else []))

  def bind_imports(self, tree):
    guarded = _guarded_imports(tree)
    for node in ast.walk(tree):
      if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, 'level', 0) \
          and id(node) not in guarded:
        for module in ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module or '']):
          if module and not _tracked(module):
            self.packages.append((_root(module), node.lineno))
      if isinstance(node, ast.Import):
        for alias in node.names:
          self.imports.append(alias.name)
          if not _tracked(alias.name):
            self.other_modules.add(alias.asname or _root(alias.name))
            continue
          self.refs.append(Ref(alias.name, None, (), self.path, node.lineno))
          if alias.asname:
            self.aliases[alias.asname] = (alias.name, None, ())
          else:
            self.aliases[_root(alias.name)] = (_root(alias.name), None, ())
      elif isinstance(node, ast.ImportFrom):
        module = self._absolute(node)
        self.imports.append(module)
        self.imports.extend('%s.%s' % (module, a.name) for a in node.names if a.name != '*')
        if not module or node.level or not _tracked(module):
          self.other_modules.update(a.asname or a.name for a in node.names)
          continue
        for alias in node.names:
          if alias.name == '*':
            self.refs.append(Ref(module, None, (), self.path, node.lineno))
            continue
          self.refs.append(Ref(module, alias.name, (), self.path, node.lineno))
          self.aliases[alias.asname or alias.name] = (module, alias.name, ())
    # `tf = tf.compat.v1`, `tpu = tf.contrib.tpu`: names bound to a chain on an alias.
    for node in ast.walk(tree):
      if (isinstance(node, ast.Assign) and len(node.targets) == 1
          and isinstance(node.targets[0], ast.Name)):
        chain = self._chain(node.value)
        if chain is not None and chain[2]:
          self.aliases[node.targets[0].id] = chain
    # A name also bound to another module (`E = tf.estimator` in one branch, `import
    # tpu_estimator as E` in the other) is ambiguous without running the program: left out.
    for name in self.other_modules:
      self.aliases.pop(name, None)

  def _chain(self, node):
    """(module, name, attrs) for an attribute chain on an alias (None otherwise)."""
    attrs = []
    while isinstance(node, ast.Attribute):
      attrs.append(node.attr)
      node = node.value
    if not isinstance(node, ast.Name) or node.id not in self.aliases:
      return None
    module, name, base = self.aliases[node.id]
    if _root(module) not in _CHAIN_ROOTS:
      return None
    return module, name, tuple(base) + tuple(reversed(attrs))

  def visit_Attribute(self, node):  # pylint: disable=invalid-name
    chain = self._chain(node)
    if chain is None:
      self.generic_visit(node)
      return
    self.refs.append(Ref(chain[0], chain[1], chain[2], self.path, node.lineno))


def _guarded_imports(tree):
  """ids of the import statements inside a `try:` whose handlers catch ImportError (optional
  dependencies: a missing one is not an error)."""
  guarded = set()
  for node in ast.walk(tree):
    if not isinstance(node, ast.Try):
      continue
    names = set()
    for handler in node.handlers:
      kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
      names.update(k.id if isinstance(k, ast.Name) else None for k in kinds)
    if names & {None, 'ImportError', 'ModuleNotFoundError', 'Exception'}:
      for statement in node.body:
        guarded.update(id(n) for n in ast.walk(statement))
  return guarded


def _module_file(module, root):
  """The file under `root` that `import module` would load, or None."""
  if not module:
    return None
  base = os.path.join(root, *module.split('.'))
  for candidate in (base + '.py', os.path.join(base, '__init__.py')):
    if os.path.isfile(candidate):
      return candidate
  return None


def _module_name(path, root):
  rel = os.path.relpath(os.path.splitext(path)[0], root).split(os.sep)
  if rel[-1] == '__init__':
    rel = rel[:-1]
  return '.'.join(rel)


def program_file(program=None, module=None, cwd=None):
  """(the file to read, the root local imports are looked up under, its dotted name or '')."""
  if module is None:
    path = os.path.abspath(program)
    return path, os.path.dirname(path), ''
  root = os.path.abspath(cwd or os.getcwd())
  base = os.path.join(root, *module.split('.'))
  for candidate in (base + '.py', os.path.join(base, '__main__.py')):
    if os.path.isfile(candidate):
      return candidate, root, module
  raise FileNotFoundError('no module named %r under %s' % (module, root))


def scan(path, root, name=''):
  """The refs of the program at `path` and of the local modules it imports (under `root`),
  and the files read, in order.  A local module that does not parse is skipped; the program
  itself must parse (SyntaxError otherwise)."""
  refs, files, queue, seen = [], [], [(path, name)], set()
  while queue:
    file_path, module_name = queue.pop(0)
    if file_path in seen:
      continue
    seen.add(file_path)
    try:
      with open(file_path, encoding='utf-8') as f:
        tree = ast.parse(f.read(), file_path)
    except SyntaxError:
      if file_path == path:
        raise
      continue
    files.append(file_path)
    is_package = os.path.basename(file_path) == '__init__.py'
    package = module_name if is_package else module_name.rpartition('.')[0]
    visitor = _FileScan(file_path, package)
    visitor.bind_imports(tree)
    visitor.visit(tree)
    refs.extend(visitor.refs)
    for imported in visitor.imports:
      if _tracked(imported):
        continue
      local = _module_file(imported, root)
      if local is not None:
        queue.append((local, _module_name(local, root)))
    for package, line in visitor.packages:
      if _module_file(package, root) is None:
        refs.append(Ref(package, None, (), file_path, line, package=True))
  return refs, files


# ---------------------------------------------------------------------------------------------
# Looking the names up as `tpu-estimator run` meets them

def _install():
  """What `tpu-estimator run` (without --tf1) does before it runs a program."""
  from tpu_estimator import compat  # pylint: disable=import-outside-toplevel
  compat.use_legacy_keras()
  compat.install(tf1=False)


def _is_ours(obj):
  from tpu_estimator.compat import namespaces  # pylint: disable=import-outside-toplevel
  if isinstance(obj, namespaces.Namespace):
    return True
  name = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, '__module__', '')
  return isinstance(name, str) and name.split('.')[0] == 'tpu_estimator'


def _legacy_path(module):
  """Whether `module` is under an import path only tpu_estimator provides (the finder's)."""
  from tpu_estimator.compat import namespaces  # pylint: disable=import-outside-toplevel
  return any(module == prefix.rstrip('.') or module.startswith(prefix)
             for prefix in namespaces.finder().missing)


def _import(module):
  return importlib.import_module(module)


def lookup(ref):
  """(the parts of `ref` that were looked up, the object or None, whether a tpu_estimator
  stand-in was on the way, the error or None).  The chain stops at the first value that is
  not a module (`tf.estimator.ModeKeys.TRAIN` is looked up as far as `ModeKeys`)."""
  parts = ref.module.split('.')
  ours = _legacy_path(ref.module)
  try:
    obj = _import(ref.module)
  except Exception as e:  # pylint: disable=broad-except
    return parts, None, ours, e
  if ref.name is not None:
    parts.append(ref.name)
    ours = ours or _is_ours(obj)
    try:
      obj = getattr(obj, ref.name)
    except Exception as first:  # pylint: disable=broad-except
      try:  # `from package import submodule`, as Python does
        obj = _import('%s.%s' % (ref.module, ref.name))
      except ImportError as e:
        # Our finder's message says more than the attribute's; Python's own says less.
        return parts, None, ours, (e if getattr(e, 'name', 1) is None else first)
  for attr in ref.attrs:
    if not isinstance(obj, types.ModuleType):
      break
    ours = ours or _is_ours(obj)
    parts.append(attr)
    try:
      obj = getattr(obj, attr)
    except Exception as e:  # pylint: disable=broad-except
      return parts, None, ours, e
  return parts, obj, ours or _is_ours(obj), None


def _verdict(ref, parts, obj, ours, error):
  """(verdict, message) for one looked-up ref; verdict None when the name is plain
  TensorFlow 2 that nothing here concerns."""
  from tpu_estimator.compat import extras  # pylint: disable=import-outside-toplevel
  root = parts[0]
  if root in _EXTRA_ROOTS:
    if extras.installed(root):
      return 'as_is', None
    return 'extra', '%s is not installed: pip install %s (%s).' % ((root,) + extras.EXTRAS[root])
  if error is not None:
    if isinstance(error, extras.MissingExtraError):
      return 'extra', str(error)
    from tpu_estimator.compat import tf1  # pylint: disable=import-outside-toplevel
    hint = tf1.tf1_hint(error)
    if hint is not None:
      return 'tf1', hint
    return 'missing', str(error)
  rel = parts[1:]
  if rel[:1] == ['compat'] and len(rel) >= 2 and rel[1] in ('v1', 'v2'):
    rel = rel[2:]
  if root == 'tensorflow' and rel[:1] == ['layers']:
    # The TF1 layers: Keras 3 has none; `run` routes them to tf_keras (legacy_keras).
    ours = True
  if ours:
    return 'run', None
  from tpu_estimator.compat import tf1  # pylint: disable=import-outside-toplevel
  if parts[1:3] == ['compat', 'v1'] and rel and tf1.tf1_only(rel):
    return 'as_is', 'TensorFlow 1.x API, reached through tf.compat.v1'
  if any(p == 'tpu' or 'TPU' in p for p in parts):
    return 'as_is', None
  return None, None


def display_name(ref, parts):
  if not ref.is_import and parts[0] == 'tensorflow' and parts[1:2] != ['python']:
    return '.'.join(['tf'] + parts[1:])
  return '.'.join(parts)


def _as_tf1(ref):
  """`ref` as `import tensorflow as tf` meets it under `run --tf1` (`tf` is tf.compat.v1,
  with tf.contrib and the v1 tf.estimator), or None when the TF1 switch does not change it."""
  if ref.module != 'tensorflow':
    return None
  return Ref('tensorflow.compat.v1', ref.name, ref.attrs, ref.file, ref.line)


def _verdicts(refs, tf1_mode):
  """(ref, display name, verdict, message) for each ref that has a verdict."""
  from tpu_estimator.compat import extras  # pylint: disable=import-outside-toplevel
  for ref in refs:
    if ref.package:
      if not extras.installed(ref.module):
        yield ref, ref.module, 'extra', (
            '%s is not installed: the program imports it (it is not part of TensorFlow or '
            'tpu-estimator); install it.' % ref.module)
      continue
    parts, obj, ours, error = lookup(ref)
    verdict, message = _verdict(ref, parts, obj, ours, error)
    v1_ref = _as_tf1(ref) if tf1_mode else None
    if v1_ref is not None:
      # Under --tf1 the same source means tf.compat.v1's name (tf.metrics.accuracy is the TF1
      # metric there, not Keras's tf.metrics).
      tf2_failed = error is not None
      parts, obj, ours, error = lookup(v1_ref)
      parts = parts[:1] + parts[3:]
      v1_verdict, v1_message = _verdict(v1_ref, ['tensorflow'] + parts[1:], obj, ours, error)
      if error is None and (verdict == 'tf1' or tf2_failed):
        message = message if verdict == 'tf1' else (
            'TensorFlow 1.x API: under `tpu-estimator run --tf1` this is tf.compat.v1.%s'
            % '.'.join(parts[1:]))
        verdict = 'tf1'
      else:
        verdict, message = v1_verdict, v1_message
    if verdict is not None:
      yield ref, display_name(ref, parts), verdict, message


def diagnose(refs, root=None):
  """The names `refs` use, each as {'name', 'verdict', 'message', 'locations'}, sorted by
  verdict (VERDICTS order) then name; locations relative to `root` (default: the current
  directory).  A program with any name needing --tf1 is judged as `run --tf1` runs it.  Calls
  `compat.install()` (see the module docstring)."""
  _install()
  root = root or os.getcwd()
  judged = list(_verdicts(refs, tf1_mode=False))
  if any(verdict == 'tf1' for _, _, verdict, _ in judged):
    judged = list(_verdicts(refs, tf1_mode=True))
  found = {}
  for ref, name, verdict, message in judged:
    entry = found.setdefault((verdict, name), {'name': name, 'verdict': verdict,
                                               'message': message, 'locations': []})
    where = {'file': _relative(ref.file, root), 'line': ref.line}
    if where not in entry['locations']:
      entry['locations'].append(where)
  order = {v: i for i, (v, _) in enumerate(VERDICTS)}
  return sorted(found.values(), key=lambda e: (order[e['verdict']], e['name']))


def _relative(path, root):
  rel = os.path.relpath(path, root)
  return path if rel.startswith(os.pardir) else rel


def report(program, files, names, root=None):
  """The JSON report (what `--json` prints)."""
  root = root or os.getcwd()
  counts = {v: sum(1 for n in names if n['verdict'] == v) for v, _ in VERDICTS}
  covered = all(n['verdict'] in COVERED for n in names)
  if covered:
    advice = 'tpu-estimator run' if counts['run'] else 'python'
  elif not (counts['extra'] or counts['missing']):
    advice = 'tpu-estimator run --tf1'
  else:
    advice = None
  return {'program': program, 'files': [_relative(f, root) for f in files],
          'names': names, 'counts': counts, 'covered': covered, 'run_with': advice}


# ---------------------------------------------------------------------------------------------
# Printing

def _locations(entry, limit=3):
  spots = ['%s:%d' % (w['file'], w['line']) for w in entry['locations']]
  more = len(spots) - limit
  return ', '.join(spots[:limit]) + (' (+%d more)' % more if more > 0 else '')


_TF1_NOTE = ('TensorFlow 1.x API on `tensorflow` itself, which TensorFlow 2 dropped (each is '
             'tf.compat.v1.<name> now): `tpu-estimator run --tf1` makes `import tensorflow as '
             'tf` give the TF1 API.')


def print_report(result, out=None, rich_tables=None):
  """The human report: a table per verdict group (rich on a terminal, plain lines otherwise)."""
  out = out or sys.stdout
  if rich_tables is None:
    rich_tables = hasattr(out, 'isatty') and out.isatty()
  console = None
  if rich_tables:
    try:
      from rich.console import Console  # pylint: disable=import-outside-toplevel
      from rich.table import Table  # pylint: disable=import-outside-toplevel
      console = Console(file=out)
    except ImportError:
      console = None
  print('tpu-estimator doctor: %s (%d file%s read)' % (
      result['program'], len(result['files']), '' if len(result['files']) == 1 else 's'),
        file=out)
  for verdict, title in VERDICTS:
    entries = [n for n in result['names'] if n['verdict'] == verdict]
    if not entries:
      continue
    if console is not None:
      table = Table(title='%s (%d)' % (title, len(entries)), title_justify='left',
                    show_lines=False)
      table.add_column('name', style='bold')
      table.add_column('where')
      if verdict == 'tf1':
        table.caption, table.caption_justify = _TF1_NOTE, 'left'
      elif any(e['message'] for e in entries):
        table.add_column('note', overflow='fold')
      for e in entries:
        row = [e['name'], _locations(e)]
        if len(table.columns) == 3:
          row.append(e['message'] or '')
        table.add_row(*row)
      console.print(table)
      continue
    print('\n%s (%d):' % (title, len(entries)), file=out)
    if verdict == 'tf1':
      print('  ' + _TF1_NOTE, file=out)
    for e in entries:
      print('  %s  %s' % (e['name'], _locations(e)), file=out)
      if e['message'] and verdict != 'tf1':
        print('      %s' % e['message'], file=out)
  print('\n' + summary_line(result), file=out)


def summary_line(result):
  counts = ', '.join('%d %s' % (result['counts'][v], title) for v, title in VERDICTS
                     if result['counts'][v])
  text = '%d name%s: %s.' % (len(result['names']), '' if len(result['names']) == 1 else 's',
                             counts or 'none of tf.estimator, TPU, tf.contrib or TF 1.x API')
  if result['covered']:
    return text + ' Everything is covered: run it with `%s`.' % result['run_with']
  if result['run_with']:
    return text + ' Run it with `%s`.' % result['run_with']
  return text + ' Not everything is covered (see above).'


# ---------------------------------------------------------------------------------------------
# The subcommand

_USAGE = ('tpu-estimator doctor [--json] PROGRAM.py [ARGS...]\n'
          '       tpu-estimator doctor [--json] -m MODULE [ARGS...]')


def add_parser(subparsers):
  import argparse  # pylint: disable=import-outside-toplevel
  parser = subparsers.add_parser(
      'doctor', usage=_USAGE,
      help='read a legacy program (without running it) and say what tpu-estimator covers',
      description='Reads a Python program and the local modules it imports (never runs '
      'them) and lists every tf.estimator / TPU / tf.contrib / tensorflow_estimator / '
      'TensorFlow 1.x-only name it uses, grouped by verdict: works as is; works under '
      '`tpu-estimator run`; needs `run --tf1`; needs a package that is not installed; not '
      'provided (with what to use instead).  The verdicts come from the lookups `run` '
      'itself does.  Exit status 0 when everything is covered, 1 otherwise, 2 when the '
      'program cannot be read.')
  parser.add_argument('--json', action='store_true', help='print the report as JSON')
  parser.add_argument('-m', dest='module', metavar='MODULE',
                      help='read a module (as `python -m MODULE` would run it)')
  parser.add_argument('program', nargs=argparse.REMAINDER, metavar='PROGRAM.py [ARGS...]',
                      help="the program (its arguments are accepted and ignored)")
  parser.set_defaults(handler=run_command)


def run_command(args, out=None):
  out = out or sys.stdout
  if args.module is None and not args.program:
    print('usage: ' + _USAGE + '\ntpu-estimator doctor: error: expected PROGRAM.py or -m '
          'MODULE', file=sys.stderr)
    return 2
  try:
    path, root, name = program_file(args.program[0] if args.module is None else None,
                                    args.module)
    if not os.path.isfile(path):
      raise FileNotFoundError('no such file: %r' % path)
    refs, files = scan(path, root, name)
  except (OSError, SyntaxError, UnicodeDecodeError) as e:
    print('tpu-estimator doctor: cannot read the program: %s' % e, file=sys.stderr)
    return 2
  names = diagnose(refs, root)
  result = report(args.module or args.program[0], files, names, root)
  if args.json:
    print(json.dumps(result, indent=1), file=out)
  else:
    print_report(result, out)
  return 0 if result['covered'] else 1
