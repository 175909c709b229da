"""The direction of imports between Amber's packages, and between the runtime's sub-packages.

Each rule is a table: a package (or runtime sub-package) may import only the ones it names. A
module may import another package's *public* names (its `__init__`), never its private modules
(`_name`). Nothing imports a package by its bare name (`import history`): installed, the packages
live under `amber.` only. Third-party packages with a cost or a role (wasmtime, gRPC, psycopg,
Flask) are confined to the places that own them. Tests are not held to these rules.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("abi", "history", "versions", "runtime", "surgical_pool", "tools")

# What each top-level package may import of the others.
TOP_LEVEL: dict[str, frozenset[str]] = {
    "abi": frozenset(),
    "history": frozenset({"abi"}),
    "versions": frozenset({"abi", "history"}),
    "runtime": frozenset({"abi", "history", "versions"}),
    "surgical_pool": frozenset({"abi", "history", "versions", "runtime"}),
    "tools": frozenset({"abi", "history", "versions", "runtime", "surgical_pool"}),
}

# What each runtime sub-package may import of the others (the package's own __init__ is lazy and
# may name any of them).
RUNTIME: dict[str, frozenset[str]] = {
    "model": frozenset(),
    "metrics": frozenset({"model"}),
    "tracing": frozenset(),
    "sandbox": frozenset({"model"}),
    "replay": frozenset({"sandbox", "model"}),
    "services": frozenset({"model"}),
    "approvals": frozenset({"services", "model"}),
    "console": frozenset({"approvals", "services", "metrics", "model"}),
    "api": frozenset({"model"}),
    "client": frozenset({"api", "tracing", "model"}),
    "worker": frozenset({"client", "replay", "sandbox", "metrics", "tracing", "model"}),
    "server": frozenset(
        {
            "approvals",
            "console",
            "services",
            "api",
            "replay",
            "sandbox",
            "metrics",
            "tracing",
            "model",
        }
    ),
}

# Third-party packages confined to the places that own them: (owner prefixes, why).
CONFINED: dict[str, tuple[tuple[str, ...], str]] = {
    "wasmtime": (
        ("versions", "runtime.sandbox", "surgical_pool", "tools"),
        "the sandbox (and module validation) own wasmtime",
    ),
    "flask": (("runtime.approvals", "runtime.console"), "the web pages are the only Flask apps"),
    "flask_wtf": (
        ("runtime.approvals", "runtime.console"),
        "the web pages are the only Flask apps",
    ),
    "werkzeug": (("runtime.approvals", "runtime.console"), "the web pages are the only Flask apps"),
    # The bench measures PostgreSQL's raw commit rate itself, beside the engine.
    "psycopg": (("history", "tools._bench"), "SQL and its errors stay in history/"),
    "psycopg_pool": (("history", "tools._bench"), "SQL and its errors stay in history/"),
    "prometheus_client": (("runtime.metrics",), "metrics are defined and served in one place"),
    "msgspec": (("abi", "history"), "event payloads are encoded and decoded in one place"),
    "msgpack": (("abi._codec",), "msgpack has one codec (abi.pack/unpack), one set of options"),
    "grpc": (
        ("runtime.api", "runtime.client", "runtime.server", "tools"),
        "gRPC is the api's, the client's and the server's",
    ),
}


@dataclass(frozen=True, slots=True)
class Import:
    module: str
    """The importing module, e.g. `runtime.services._runs`."""
    target: str
    """The imported module, resolved and without the `amber.` prefix, e.g. `runtime.model`."""
    bare: bool
    """Imported by a bare top-level name (`history` rather than `amber.history`)."""
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(module: str, source: str, *, is_package: bool = False) -> Iterator[Import]:
    """Every import in `source`, resolved to a module path inside Amber (others skipped)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _resolved(module, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                parent = ".".join(base)
                name = f"{parent}.{node.module}" if node.module else parent
                targets = [name] if node.module else [f"{name}.{a.name}" for a in node.names]
                for target in targets:
                    yield Import(module, target, bare=False, line=node.lineno)
            elif node.module:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    # `from amber.runtime.api import amber_pb2` imports a module; `from x import Y`
                    # a name: count the module it comes from, and the submodule when it is one.
                    yield from _resolved(module, node.module, node.lineno)
                    if alias.name.startswith("_") and alias.name != "__version__":
                        yield from _resolved(module, full, node.lineno)


def _resolved(module: str, name: str, line: int) -> Iterator[Import]:
    top = name.split(".")[0]
    if top in PACKAGES:
        yield Import(module, name, bare=True, line=line)
    elif top == "amber" and name not in ("amber", "amber._checkout"):
        # `amber` itself (its version and the bare-name aliases) sits below every package.
        yield Import(module, name.removeprefix("amber."), bare=False, line=line)
    elif top in CONFINED:
        yield Import(module, name, bare=False, line=line)


def _owner(module: str) -> tuple[str, str | None]:
    """(top-level package, runtime sub-package or None)."""
    parts = module.split(".")
    sub = parts[1] if parts[0] == "runtime" and len(parts) > 1 and parts[1] in RUNTIME else None
    return parts[0], sub


def _package_of(module: str, is_package: bool) -> str:
    """The package whose private modules this module may import: its own (sub-)package."""
    top, sub = _owner(module)
    if sub is not None:
        return f"runtime.{sub}"
    return top


def violations(module: str, source: str, *, is_package: bool = False) -> list[str]:
    """What is wrong with the imports of one module, one line each."""
    found = []
    top, sub = _owner(module)
    own = _package_of(module, is_package)
    for imp in imports_of(module, source, is_package=is_package):
        where = f"{module}:{imp.line}"
        t_top, t_sub = _owner(imp.target)
        if t_top in CONFINED:
            owners, why = CONFINED[t_top]
            if not any(module == o or module.startswith((o + ".", o + "_")) for o in owners):
                found.append(f"{where} imports {imp.target}: {why}")
            continue
        if imp.bare:
            found.append(f"{where} imports {imp.target!r} by its bare name; use amber.{imp.target}")
            continue
        if t_top != top and t_top not in TOP_LEVEL[top]:
            found.append(f"{where} imports {imp.target}: {top} may not import {t_top}")
        if (
            top == "runtime"
            and t_top == "runtime"
            and sub is not None
            and t_sub is not None
            and t_sub != sub
            and t_sub not in RUNTIME[sub]
        ):
            found.append(f"{where} imports {imp.target}: runtime.{sub} may not import {t_sub}")
        if t_top != top and t_top == "runtime" and t_sub is None and imp.target != "runtime":
            found.append(f"{where} imports {imp.target}: import a runtime sub-package instead")
        private = [p for p in imp.target.split(".") if p.startswith("_") and not p.startswith("__")]
        if private:
            target_package = imp.target.split("." + private[0])[0]
            if not (own == target_package or own.startswith(target_package + ".")):
                found.append(f"{where} imports {imp.target}: a private module of {target_package}")
    return found


def _modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "_pb2" in path.name or _is_guest_code(path):
                continue
            yield module_name(path), path


def _is_guest_code(path: Path) -> bool:
    """Python guests and their SDK run inside a component, with `amber_sdk` as their own root:
    they are no part of the host's import graph."""
    relative = path.relative_to(ROOT).as_posix()
    return relative.startswith(("abi/sdk/python/", "abi/samples/"))


def test_no_import_goes_the_wrong_way() -> None:
    found = []
    for module, path in _modules():
        found += violations(module, path.read_text(), is_package=path.name == "__init__.py")
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("history._log", "from amber.runtime.model import Clock\n", "history may not import"),
        ("runtime.services._runs", "from amber.runtime.replay import x\n", "may not import replay"),
        ("runtime.client._client", "import wasmtime\n", "own wasmtime"),
        ("runtime.model._x", "from amber.history._log import y\n", "private module of history"),
        ("runtime.server._s", "from amber.runtime.services._runs import y\n", "private module"),
        ("tools.cli", "from runtime import AmberClient\n", "bare name"),
        ("runtime.services._runs", "from ..replay import activate\n", "may not import replay"),
        ("runtime.services._runs", "from psycopg import errors\n", "stay in history"),
    ],
)
def test_a_wrong_way_import_is_caught(module: str, source: str, expected: str) -> None:
    found = violations(module, source)
    assert len(found) == 1 and expected in found[0], found


def test_allowed_imports_pass() -> None:
    assert violations("runtime.worker._w", "from amber.runtime.client import AmberClient\n") == []
    assert violations("runtime.services._runs", "from ._lifecycle import Lifecycle\n") == []
    assert violations("tools.cli", "from amber.runtime.client import AmberClient\n") == []


def _loaded_after(statement: str) -> set[str]:
    code = (
        f"import sys\n{statement}\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return set(out.stdout.split())


@pytest.mark.parametrize(
    "statement",
    [
        "import amber.runtime.client",
        "from amber.runtime import AmberClient",
        "from amber.runtime.client import AmberClient",
    ],
)
def test_the_client_is_light(statement: str) -> None:
    loaded = _loaded_after(statement)
    heavy = loaded & {"wasmtime", "flask", "psycopg", "psycopg_pool", "werkzeug"}
    assert not heavy, f"{statement} loads {sorted(heavy)}"
    assert "grpc" in loaded


def test_the_cli_starts_without_the_engine() -> None:
    loaded = _loaded_after("import amber.tools.cli")
    heavy = loaded & {"wasmtime", "flask", "psycopg", "psycopg_pool", "werkzeug"}
    assert not heavy, f"the CLI loads {sorted(heavy)} before it knows the verb"


@pytest.mark.parametrize(
    "package",
    [
        "amber.abi",
        "amber.history",
        "amber.versions",
        "amber.runtime",
        *(f"amber.runtime.{sub}" for sub in RUNTIME),
        "amber.surgical_pool",
    ],
)
def test_every_exported_name_resolves(package: str) -> None:
    # history, versions and runtime load their names lazily from a table: a name the table
    # points at the wrong module would only fail when first used.
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


def test_bare_names_from_a_checkout_are_the_amber_modules() -> None:
    # Scripts written before the namespace say `from runtime import AmberClient`; from a checkout
    # that must give the same module objects, or an `except RunClosed` would miss the one raised.
    code = (
        "import sys\n"
        "from runtime import AmberClient, RunClosed\n"
        "from runtime.model._errors import RunClosed as Private\n"
        "import amber.runtime, runtime, history, amber.history, tools, amber.tools\n"
        "assert runtime is amber.runtime and history is amber.history and tools is amber.tools\n"
        "assert RunClosed is Private is amber.runtime.RunClosed\n"
        "assert AmberClient.__module__ == 'amber.runtime.client._client'\n"
        "bare = [m for m in sys.modules if m.split('.')[0] in {'runtime', 'history'}]\n"
        "assert all(sys.modules[m] is sys.modules['amber.' + m] for m in bare), bare\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
