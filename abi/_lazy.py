"""Lazy re-exports for a package `__init__` (PEP 562).

Use `lazy_exports` in a package whose public names come from private modules that some callers
should not pay for: a client reading one `Run` type must not load the database driver, and
`amber --help` must not load wasmtime. The package keeps a table of name -> defining module and
the same names imported under `TYPE_CHECKING` for type checkers; `tests/test_imports.py` checks
that every exported name resolves.

It lives in `abi` because that is the bottom of the import graph, where every package can reach
it. Rejected: importing everything eagerly in `__init__` (every import of one type loaded the
whole package, psycopg and wasmtime included); a third-party lazy loader (one more dependency for
a dozen lines).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_exports(
    namespace: MutableMapping[str, Any], table: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of a package whose `table` maps each public name to the
    module (relative to the package) that defines it. Pass the package's `globals()`: a name is
    imported on first use and then kept there, so later reads cost a dict lookup."""
    package = namespace["__name__"]

    def getattr_(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(table))

    return getattr_, dir_
