"""Modules a Python guest imports inside its functions, imported while it is built.

A component holds the modules its interpreter had imported when `amber build` snapshotted it
(componentize-py's pre-initialisation runs the module's top level, then the snapshot is taken):
there is no file system to import from later. So `import fractions` in a function body built,
uploaded, then failed at run time with `ModuleNotFoundError` on every attempt. `amber build`
reads the source for import statements inside functions and imports those modules in the
snapshot too. One that cannot be imported there fails the build, naming its line, unless the
statement sits in a `try` (the code then has its own fallback, `try: import ujson` say).

Not covered, and written in the SDK's README: modules named only at run time
(`importlib.import_module(name)`, `__import__`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LateImport", "late_imports", "preimport_source"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LateImport:
    """A module imported inside a function."""

    module: str
    where: str
    """`file:line` of the statement."""
    guarded: bool
    """The statement is inside a `try`: its code copes with the module missing."""
    maybe_name: bool = False
    """From `from a import b`: `a.b` may be a name in `a`, not a module (no failure then)."""


def late_imports(tree: ast.Module, source: Path) -> list[LateImport]:
    """The modules `tree` imports inside function bodies (relative imports left out: they
    name the guest's own package, imported with it), first occurrence of each."""
    found: dict[str, LateImport] = {}

    def visit(node: ast.AST, in_function: bool, guarded: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom) and in_function:
                for module, maybe_name in _modules(child):
                    where = f"{source.name}:{child.lineno}"
                    seen = found.get(module)
                    if seen is None or (seen.guarded and not guarded):
                        found[module] = LateImport(
                            module=module, where=where, guarded=guarded, maybe_name=maybe_name
                        )
            inner = in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            visit(child, inner, guarded or (inner and isinstance(child, ast.Try)))

    visit(tree, False, False)
    return list(found.values())


def _modules(node: ast.Import | ast.ImportFrom) -> list[tuple[str, bool]]:
    """(module, whether it may be a name instead) for each module the statement imports."""
    if isinstance(node, ast.Import):
        return [(alias.name, False) for alias in node.names]
    if node.level or not node.module:
        return []
    # `from a.b import c` needs `a.b`, and `a.b.c` if `c` is a submodule rather than a name.
    names = [(f"{node.module}.{alias.name}", True) for alias in node.names if alias.name != "*"]
    return [(node.module, False), *names]


def preimport_source(imports: list[LateImport]) -> str:
    """Entry-module code importing `imports` in the snapshot: a failure of an unguarded one
    stops the build with its line; a `from a import b` whose `b` is a name, not a submodule,
    is no failure."""
    listed = [(i.module, i.where, i.guarded, i.maybe_name) for i in imports]
    return f"""
import importlib as _importlib


def _preimport(listed):
    for module, where, guarded, maybe_name in listed:
        try:
            _importlib.import_module(module)
        except ImportError as exc:
            if maybe_name and getattr(exc, "name", None) == module:
                continue  # `from parent import name`: a name, not a submodule
            if not guarded:
                raise ImportError(
                    f"amber build: {{where}} imports {{module!r}} inside a function, and the"
                    f" guest cannot import it ({{type(exc).__name__}}: {{exc}}); a Python guest"
                    " has only the modules its build imports"
                ) from None


_preimport({listed!r})
"""
