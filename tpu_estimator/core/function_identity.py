"""Whether a call's `input_fn` is the one a kept graph was built from (graph_cache.Key).

The same object always is.  So is another function object that calling cannot tell apart from
it: a lambda or nested function written in the call (`evaluate(input_fn=lambda:
make_input(files))` makes a new one every call) with the same code and module, the same
defaults, and closure cells holding the same objects; a `functools.partial` of such a function
with the same arguments; a bound method of the same function on the same object (every
attribute access makes a new one).  In each case the module globals that the code reads by
name (its own and its nested functions', a dataset `map` lambda's) must still be the objects
they were at the kept call: a loop at module level that rebinds `files` before each
`evaluate(input_fn=lambda: make_input(files))` gets a new graph for each value.

Values are compared by identity, or by value for immutable scalars (bool, int, float, complex,
str, bytes, None) and tuples of them.  Anything else (a callable object, a builtin) is only the
same as itself.  What a function reads indirectly (a helper's globals, an array changed in
place) is not seen: graph_cache's rule that `input_fn` builds the same graph when called again
covers it, and `RunConfig(reuse_eval_graphs=False)` turns reuse off."""
import functools
import types

_SCALARS = (bool, int, float, complex, str, bytes, type(None))


def _same_value(a, b):
  if a is b:
    return True
  if type(a) is not type(b):  # pylint: disable=unidiomatic-typecheck
    return False
  if isinstance(a, _SCALARS):
    return repr(a) == repr(b)  # 0.0 and -0.0 differ; nan is nan
  if isinstance(a, tuple):
    return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
  return False


def _items(mapping):
  return tuple(sorted((mapping or {}).items(), key=lambda item: item[0]))


def _state(fn):
  """What calling `fn` runs, as it is now: a nest of tuples for `_same_value` (the contents
  of a closure cell are read now: a later call can find another value in the same cell)."""
  if isinstance(fn, types.MethodType):
    return ('method', fn.__self__, _state(fn.__func__))
  if isinstance(fn, functools.partial):
    return ('partial', _state(fn.func), fn.args, _items(fn.keywords))
  if isinstance(fn, types.FunctionType) and not fn.__dict__:
    try:
      cells = tuple(cell.cell_contents for cell in fn.__closure__ or ())
    except ValueError:  # an empty cell (a name not yet bound in the enclosing function)
      return ('object', fn)
    return ('function', fn.__code__, fn.__globals__, fn.__defaults__,
            _items(fn.__kwdefaults__), cells)
  return ('object', fn)


def same_function(a, b):
  """Whether calling `a` and calling `b` run the same code on the same values now (see
  above); the globals they read are compared by `Identity`."""
  return _same_value(_state(a), _state(b))


def _functions(fn):
  """The plain function `fn` calls first: itself, a partial's or a bound method's."""
  while isinstance(fn, (functools.partial, types.MethodType)):
    fn = fn.func if isinstance(fn, functools.partial) else fn.__func__
  return fn if isinstance(fn, types.FunctionType) else None


def _names(code):
  """The global (and attribute) names `code` and the code nested in it read."""
  names = set(code.co_names)
  for const in code.co_consts:
    if isinstance(const, types.CodeType):
      names |= _names(const)
  return names


def _global_reads(fn):
  """(name, value) pairs of the module globals `fn`'s code reads by name, as they are now."""
  function = _functions(fn)
  if function is None:
    return ()
  module = function.__globals__
  return _items({name: module[name] for name in _names(function.__code__) if name in module})


class Identity:
  """An `input_fn` as it was when a call began: what calling it runs, and the globals its code
  reads."""

  def __init__(self, fn):
    # Held while a graph built for it is kept: xla.Auto's weak set of kept input_fns finds it.
    self.fn = fn
    self._state = (_state(fn), _global_reads(fn))

  def same_as(self, other):
    return _same_value(self._state, other._state)
