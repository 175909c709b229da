"""Bare package names from a source checkout, as aliases of the `amber.` ones.

The repository keeps its packages as top-level folders (`abi/`, `runtime/`, ...), so with the
checkout on `sys.path` a script can still write `from runtime import AmberClient`, as code written
before the `amber` namespace did. Without help that would load a second copy of every module under
the bare name: two `RunClosed` classes, and an `except` that misses the one actually raised. Each
package's `__init__` calls `alias(__name__)` first; under a bare name it puts the `amber.` module
in its place and sends that name's submodules to the `amber.` ones, so both spellings are one set
of module objects.

Only names a checkout actually supplied are aliased: an installed Amber has no bare names, and
another distribution's `tools` package is never touched.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

_PREFIX = "amber."


class _Aliases(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `runtime.client` as `amber.runtime.client` once `runtime` is aliased."""

    def __init__(self) -> None:
        self.roots: set[str] = set()

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] not in self.roots:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(_PREFIX + spec.name)

    def exec_module(self, module: ModuleType) -> None:
        """The `amber.` module is already loaded; there is nothing left to run."""


_ALIASES = _Aliases()


def alias(name: str) -> None:
    """Called first by each package's `__init__`: a no-op under `amber.`, an alias otherwise."""
    if name.startswith(_PREFIX):
        return
    sys.modules[name] = importlib.import_module(_PREFIX + name)
    _ALIASES.roots.add(name)
    if _ALIASES not in sys.meta_path:
        sys.meta_path.insert(0, _ALIASES)
