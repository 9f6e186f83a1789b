"""The package's layout rules (docs/architecture.md), read from the source: nothing is imported.

Imports only go down (no module reaches itself through imports, deferred ones included), the
top level holds only the public faces and the ground floor, TensorFlow's private modules are
reached through `_tf_internals` alone (the legacy `compat` layer aside), and no function is
longer than a screen.
"""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = 'tpu_estimator'
TOP_LEVEL = {'__init__', '__main__', '_tf_internals', 'quiet', 'gc_freeze', 'errors', 'estimator',
             'specs', 'config', 'export', 'inputs', 'training', 'experimental',
             'cross_shard_optimizer', 'warm_starting'}
TF_PRIVATE = ('tensorflow.python', 'tensorflow.core', 'tensorflow.compiler', 'tensorflow.tsl')
MAX_FUNCTION_LINES = 60


def _modules():
  """{dotted module name: path} of every module of the package (a package is its __init__)."""
  found = {}
  for path in sorted((ROOT / PACKAGE).rglob('*.py')):
    parts = list(path.relative_to(ROOT).with_suffix('').parts)
    if parts[-1] == '__init__':
      parts.pop()
    found['.'.join(parts)] = path
  return found


def _imported(tree, modules):
  """The package's modules that `tree` imports anywhere (at the top or inside a function)."""
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      for alias in node.names:
        child = '%s.%s' % (node.module, alias.name)
        names.add(child if child in modules else node.module)
  return {name for name in names if name in modules}


def _cycles(graph):
  """Strongly connected components of more than one module, or a module importing itself."""
  index, low, stack, on_stack, found = {}, {}, [], set(), []

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for other in graph[node]:
      if other not in index:
        visit(other)
        low[node] = min(low[node], low[other])
      elif other in on_stack:
        low[node] = min(low[node], index[other])
    if low[node] == index[node]:
      component = set()
      while True:
        member = stack.pop()
        on_stack.discard(member)
        component.add(member)
        if member == node:
          break
      if len(component) > 1 or node in graph[node]:
        found.append(sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return found


def _trees():
  return {name: ast.parse(path.read_text(), str(path)) for name, path in _modules().items()}


def test_no_import_cycles_even_through_deferred_imports():
  modules = _modules()
  graph = {name: _imported(tree, modules) - {name} for name, tree in _trees().items()}
  assert _cycles(graph) == []


def test_top_level_holds_only_the_public_faces_and_the_ground_floor():
  top = {path.stem for path in (ROOT / PACKAGE).glob('*.py')}
  assert top == TOP_LEVEL, 'new modules belong in a package of their concern'


def test_tensorflow_private_modules_only_through_tf_internals():
  offenders = []
  for name, tree in _trees().items():
    if name == PACKAGE + '._tf_internals' or name.startswith(PACKAGE + '.compat'):
      continue
    for node in ast.walk(tree):
      if isinstance(node, ast.ImportFrom) and node.module:
        imported = [node.module]
      elif isinstance(node, ast.Import):
        imported = [alias.name for alias in node.names]
      else:
        continue
      offenders += ['%s: %s' % (name, m) for m in imported if m.startswith(TF_PRIVATE)]
  assert offenders == []


def test_no_function_longer_than_a_screen():
  long_ones = []
  for name, tree in _trees().items():
    for node in ast.walk(tree):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        lines = node.end_lineno - node.lineno + 1
        if lines > MAX_FUNCTION_LINES:
          long_ones.append('%s.%s: %d lines' % (name, node.name, lines))
  assert long_ones == []
