"""TensorFlow's own module objects, as the compat layer finds and patches them.

`import tensorflow.compat.v1 as tf` loads fresh copies of the compat modules unless
`tensorflow.compat[.v1|.v2]` are in sys.modules, so install() registers the ones it patched
there, and also patches copies that already exist.  `real_tf()` remembers the `tensorflow`
module as first imported: `install(tf1=True)` later puts another object under that name.
"""
import contextlib
import sys
import types


class _State:
  real_tf = None


def real_tf():
  """The `tensorflow` module as imported (before any `install(tf1=True)` switch)."""
  if _State.real_tf is None:
    import tensorflow  # pylint: disable=import-outside-toplevel,unused-import
    _State.real_tf = sys.modules['tensorflow']
  return _State.real_tf


def register_compat_aliases():
  """Puts TensorFlow's compat module objects under their import names (see module doc)."""
  real = real_tf()
  for alias, module in (('tensorflow.compat', real.compat),
                        ('tensorflow.compat.v1', real.compat.v1),
                        ('tensorflow.compat.v2', real.compat.v2)):
    sys.modules.setdefault(alias, module)


def api_modules():
  """(v2 module objects, v1 module objects) of the real TensorFlow, deduplicated."""
  real = real_tf()
  v2, v1, seen = [], [], set()

  def add(module, bucket):
    if module is not None and id(module) not in seen and isinstance(module, types.ModuleType):
      seen.add(id(module))
      bucket.append(module)

  add(real, v2)
  frontier = [(real, v2)]
  for _ in range(2):  # tf.compat.v1, tf.compat.v1.compat.v1, tf.compat.v2.compat.v1, ...
    nxt = []
    for module, _ in frontier:
      compat = getattr(module, 'compat', None)
      for version, bucket in (('v1', v1), ('v2', v2)):
        sub = getattr(compat, version, None) if compat is not None else None
        if sub is not None and id(sub) not in seen:
          add(sub, bucket)
          nxt.append((sub, bucket))
    frontier = nxt
  for name, bucket in (('tensorflow.compat.v1', v1), ('tensorflow._api.v2.compat.v1', v1),
                       ('tensorflow.compat.v2', v2), ('tensorflow._api.v2.compat.v2', v2)):
    add(sys.modules.get(name), bucket)
  copy = sys.modules.get('tensorflow.compat')
  if copy is not None:
    add(getattr(copy, 'v1', None), v1)
    add(getattr(copy, 'v2', None), v2)
  return v2, v1


def restore_moved_names():
  """Names TensorFlow moved out of the modules that TF 1.x-era libraries import them from,
  put back where TensorFlow no longer has them: `register_tensor_conversion_function` on
  `tensorflow.python.framework.ops` (public as `tf.register_tensor_conversion_function`;
  mesh_tensorflow, which tensor2tensor imports, calls it from `ops` when it is imported)."""
  ops = sys.modules.get('tensorflow.python.framework.ops')
  if ops is not None and not hasattr(ops, 'register_tensor_conversion_function'):
    set_attr(ops, 'register_tensor_conversion_function',
             real_tf().register_tensor_conversion_function)


def set_attr(module, name, value):
  """`setattr`, skipped when the module already holds exactly that value."""
  if module.__dict__.get(name, None) is not value:
    setattr(module, name, value)


@contextlib.contextmanager
def importing_tf2():
  """Within: `import tensorflow` gives the real TensorFlow 2 module even after the --tf1
  switch, for libraries loaded lazily (tf_slim) that expect it."""
  current = sys.modules.get('tensorflow')
  real = real_tf()
  if current is real:
    yield
    return
  sys.modules['tensorflow'] = real
  try:
    yield
  finally:
    if sys.modules.get('tensorflow') is real:
      sys.modules['tensorflow'] = current
