"""`import tensorflow_hub` where setuptools' `pkg_resources` is gone.

tensorflow_hub 0.16.1 (its last release) reads `pkg_resources.parse_version` when imported, to
compare TensorFlow's version with the one it needs.  setuptools 82 removed `pkg_resources`, and
a Python 3.12+ venv has no setuptools but the newest one a package asks for (tensorboard asks).
There every program importing tensorflow_hub (ALBERT, BERT's TF-Hub classifier, ...) stops at
that import with "No module named 'pkg_resources'", whatever TensorFlow it runs on.

After `install()`, when `pkg_resources` cannot be found, importing tensorflow_hub runs its own
code with a stand-in `pkg_resources` in `sys.modules` for the length of that import only: it
holds `parse_version`, packaging's `Version` (what setuptools' was; TensorFlow depends on
packaging).  Code importing `pkg_resources` afterwards still finds none, and where setuptools
provides one nothing changes.
"""
import importlib.abc
import sys
import types

from tpu_estimator.compat import extras

_HUB = 'tensorflow_hub'
_PKG_RESOURCES = 'pkg_resources'


class _WithStandIn(importlib.abc.Loader):
  """Runs the real loader's `exec_module` with the stand-in `pkg_resources` in sys.modules,
  then puts back what was there and leaves the module the real loader."""

  def __init__(self, loader):
    self.loader = loader

  def create_module(self, spec):
    return self.loader.create_module(spec)

  def exec_module(self, module):
    stand_in = types.ModuleType(_PKG_RESOURCES, 'A stand-in for tensorflow_hub\'s import '
                                '(tpu_estimator.compat.hub_import).')
    from packaging import version  # pylint: disable=import-outside-toplevel
    stand_in.parse_version = version.Version  # setuptools' (since 66: no legacy versions)
    before = sys.modules.get(_PKG_RESOURCES, _PKG_RESOURCES)  # the name as a "nothing" mark
    sys.modules[_PKG_RESOURCES] = stand_in
    try:
      self.loader.exec_module(module)
    finally:
      if sys.modules.get(_PKG_RESOURCES) is stand_in:
        if before is _PKG_RESOURCES:
          del sys.modules[_PKG_RESOURCES]
        else:
          sys.modules[_PKG_RESOURCES] = before
      module.__loader__ = self.loader
      if module.__spec__ is not None:
        module.__spec__.loader = self.loader


class _HubFinder(importlib.abc.MetaPathFinder):
  """Finds tensorflow_hub through the other finders and wraps its loader, only while no
  `pkg_resources` can be found."""

  def find_spec(self, fullname, path=None, target=None):
    if fullname != _HUB or extras.installed(_PKG_RESOURCES):
      return None
    for finder in sys.meta_path:
      if finder is self or not hasattr(finder, 'find_spec'):
        continue
      spec = finder.find_spec(fullname, path, target)
      if spec is not None:
        if spec.loader is not None and hasattr(spec.loader, 'exec_module'):
          spec.loader = _WithStandIn(spec.loader)
        return spec
    return None


def install():
  """Adds the finder (idempotent); a tensorflow_hub imported already is left as it is."""
  if not any(isinstance(finder, _HubFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _HubFinder())
