"""Checks an uploaded module against ABI v1 before anything is stored."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import wasmtime

from amber.abi import (
    ACTIVITY_EXPORT_PREFIX,
    ALLOC_EXPORT,
    ALLOC_SIGNATURE,
    ENTRY_SIGNATURE,
    HOST_MODULE,
    MEMORY_EXPORT,
    WORKFLOW_EXPORT_PREFIX,
    Manifest,
    ManifestError,
    Signature,
    WasmFormatError,
    allowed_host_imports,
    read_manifest,
)

from ._errors import InvalidModule, ModuleTooLarge
from ._registry import DEFAULT_MAX_MODULE_BYTES

_engine: wasmtime.Engine | None = None


def _inspection_engine() -> wasmtime.Engine:
    # Only used to parse and type-check; the sandbox's engine compiles for execution.
    global _engine
    if _engine is None:
        _engine = wasmtime.Engine()
    return _engine


def _signature(ty: wasmtime.FuncType) -> Signature:
    return (tuple(str(p) for p in ty.params), tuple(str(r) for r in ty.results))


def _show(sig: Signature) -> str:
    results = ", ".join(sig[1])
    return f"({', '.join(sig[0])}) -> {results or '()'}"


def _check_exports(module: wasmtime.Module, manifest: Manifest) -> None:
    exports = {e.name: e.type for e in module.exports}
    if not isinstance(exports.get(MEMORY_EXPORT), wasmtime.MemoryType):
        raise InvalidModule(f"module does not export its memory as {MEMORY_EXPORT!r}")
    alloc = exports.get(ALLOC_EXPORT)
    if not isinstance(alloc, wasmtime.FuncType) or _signature(alloc) != ALLOC_SIGNATURE:
        raise InvalidModule(f"module does not export {ALLOC_EXPORT}{_show(ALLOC_SIGNATURE)}")
    declared = {manifest.workflow_export(n) for n in manifest.workflows}
    declared |= {manifest.activity_export(n) for n in manifest.activities}
    entries = {n for n in exports if n.startswith((WORKFLOW_EXPORT_PREFIX, ACTIVITY_EXPORT_PREFIX))}
    if missing := sorted(declared - entries):
        raise InvalidModule(f"manifest declares {missing[0]} but the module does not export it")
    if undeclared := sorted(entries - declared):
        raise InvalidModule(f"module exports {undeclared[0]}, which its manifest does not declare")
    for name in sorted(declared):
        ty = exports[name]
        if not isinstance(ty, wasmtime.FuncType) or _signature(ty) != ENTRY_SIGNATURE:
            raise InvalidModule(f"export {name} must be a function {_show(ENTRY_SIGNATURE)}")


def _check_imports(module: wasmtime.Module) -> None:
    provided = allowed_host_imports()  # test-only imports are known only where enabled
    for imp in module.imports:
        where = f"{imp.module}.{imp.name}"
        if imp.module != HOST_MODULE or imp.name not in provided:
            raise InvalidModule(f"module imports {where}, which ABI v1 does not provide")
        if not isinstance(imp.type, wasmtime.FuncType):
            raise InvalidModule(f"import {where!r} must be a function")
        sig = provided[imp.name]
        if _signature(imp.type) != sig:
            raise InvalidModule(
                f"import {where!r} has type {_show(_signature(imp.type))};"
                f" ABI v1 provides {_show(sig)}"
            )


ManifestCheck = Callable[[Manifest], None]
"""An extra check of a manifest (raising `ManifestError`), such as the host's capabilities."""


def validate_module(
    wasm: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_MODULE_BYTES,
    manifest_checks: Sequence[ManifestCheck] = (),
) -> Manifest:
    """Return the manifest of a module that satisfies ABI v1, or raise `InvalidModule`.

    Checks, in order: size cap, the manifest section (without running code) and the given
    `manifest_checks` (the runtime passes its capability check), that the bytes compile, the
    exports the manifest promises, and that every import is a known host import.
    """
    if len(wasm) > max_bytes:
        raise ModuleTooLarge(f"module is {len(wasm)} bytes; the cap is {max_bytes} bytes")
    if not wasm:
        raise InvalidModule("module is empty")
    try:
        manifest = read_manifest(wasm)
        for check in manifest_checks:
            check(manifest)
    except (ManifestError, WasmFormatError) as exc:
        raise InvalidModule(str(exc)) from exc
    try:
        module = wasmtime.Module(_inspection_engine(), wasm)
    except wasmtime.WasmtimeError as exc:
        raise InvalidModule(f"module does not compile: {_first_line(exc)}") from exc
    _check_exports(module, manifest)
    _check_imports(module)
    return manifest


def _first_line(exc: Exception) -> str:
    lines: Sequence[str] = str(exc).strip().splitlines() or [""]
    return lines[0]
