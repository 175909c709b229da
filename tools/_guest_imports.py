"""Modules a Python guest imports inside its functions, imported while it is built.

A component holds the modules its interpreter had imported when `amber build` snapshotted it
(componentize-py's pre-initialisation runs the module's top level, then the snapshot is taken):
there is no file system to import from later. So `import fractions` in a function body built,
uploaded, then failed at run time with `ModuleNotFoundError` on every attempt. `amber build`
reads the source for import statements inside functions and imports those modules in the
snapshot too. One the guest cannot import fails the build, naming its line and what to do,
unless the statement sits in a `try` body (the code has its own fallback, `try: import ujson`
say) or under an `if` (it may never run in the guest: `if TYPE_CHECKING:`, a platform check).
componentize-py shows nothing the snapshot prints, so a warning could not reach the user.

Not covered, and written in the SDK's README: modules named only at run time
(`importlib.import_module(name)`, `__import__`), and the imports inside functions of the
guest's other modules (those modules are imported as its top level imports them; their own
late imports are not read).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["FAILURE_PREFIX", "LateImport", "late_imports", "preimport_source"]

FAILURE_PREFIX: Final = "amber build: "
"""How the snapshot's error for an import the guest cannot make begins."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LateImport:
    """A module imported inside a function."""

    module: str
    where: str
    """`file:line` of the statement."""
    guarded: bool
    """The statement is inside a `try` body or under an `if`: it may do without the module."""
    maybe_name: bool = False
    """From `from a import b`: `a.b` may be a name in `a`, not a module (no failure then)."""


def late_imports(tree: ast.Module, source: Path) -> list[LateImport]:
    """The modules `tree` imports inside function bodies (relative imports left out: they
    name the guest's own package, imported with it), the firmest occurrence of each."""
    found: dict[str, LateImport] = {}

    def note(node: ast.Import | ast.ImportFrom, guarded: bool) -> None:
        for module, maybe_name in _modules(node):
            seen = found.get(module)
            firmer = seen is not None and (
                (seen.guarded and not guarded) or (seen.maybe_name and not maybe_name)
            )
            if seen is None or firmer:
                found[module] = LateImport(
                    module=module,
                    where=f"{source.name}:{node.lineno}",
                    guarded=guarded,
                    maybe_name=maybe_name,
                )

    def visit(node: ast.AST, in_function: bool, guarded: bool) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            if in_function:
                note(node, guarded)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            in_function = True
        if in_function and isinstance(node, ast.If):
            visit(node.test, True, guarded)
            for statement in [*node.body, *node.orelse]:
                visit(statement, True, True)
            return
        if in_function and isinstance(node, ast.Try | ast.TryStar):
            for statement in node.body:  # the body only: handlers, else, finally are not
                visit(statement, True, True)
            rest: list[ast.AST] = [*node.handlers, *node.orelse, *node.finalbody]
            for other in rest:
                visit(other, True, guarded)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, in_function, guarded)

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
    stops the build (an `ImportError` whose message starts with `FAILURE_PREFIX`); a `from a
    import b` whose `b` is a name, not a submodule, is no failure."""
    listed = [(i.module, i.where, i.guarded, i.maybe_name) for i in imports]
    return f"""
import importlib as _importlib


def _preimport(listed):
    for module, where, guarded, maybe_name in listed:
        try:
            _importlib.import_module(module)
        except Exception as exc:
            if isinstance(exc, ImportError) and maybe_name and exc.name == module:
                continue  # `from parent import name`: a name, not a submodule
            if not guarded:
                raise ImportError(
                    f"{FAILURE_PREFIX}{{where}} imports {{module!r}} inside a function, and the"
                    f" guest cannot import it ({{type(exc).__name__}}: {{exc}}); a Python guest"
                    " has only the modules its build imports (if that code never runs in the"
                    " guest, put the import in a try block)"
                ) from None


_preimport({listed!r})
"""
