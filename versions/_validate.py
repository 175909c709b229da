"""Checks an uploaded module against ABI v1 before anything is stored."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import wasmtime
from wasmtime.component import Component
from wasmtime.component import FuncType as ComponentFuncType

from amber.abi import (
    ACTIVITY_EXPORT_PREFIX,
    ALLOC_EXPORT,
    ALLOC_SIGNATURE,
    COMPONENT_EXPORTS,
    COMPONENT_HOST_INTERFACE,
    COMPONENT_WASI_PREFIX,
    ENTRY_SIGNATURE,
    HOST_MODULE,
    MEMORY_EXPORT,
    WORKFLOW_EXPORT_PREFIX,
    Manifest,
    ManifestError,
    Signature,
    WasmFormatError,
    allowed_host_imports,
    is_component,
    read_manifest,
)

from ._artifacts import ArtifactCache
from ._errors import InvalidModule, ModuleTooLarge
from ._registry import DEFAULT_MAX_COMPONENT_BYTES, DEFAULT_MAX_MODULE_BYTES

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
    max_component_bytes: int = DEFAULT_MAX_COMPONENT_BYTES,
    manifest_checks: Sequence[ManifestCheck] = (),
    compile_into: ArtifactCache | None = None,
) -> Manifest:
    """Return the manifest of a module that satisfies ABI v1, or raise `InvalidModule`.

    Checks, in order: size cap, the manifest section (without running code) and the given
    `manifest_checks` (the runtime passes its capability check), that the bytes compile, the
    exports the manifest promises, and that every import is a known host import.

    A component (a Python guest) has its own cap, `max_component_bytes` (CPython makes it
    ~18 MB), and its own shape checks (`check_component`). Compiling one takes seconds:
    `compile_into` (a sandbox engine's artifact cache) keeps the compiled artifact, so the
    sandbox that runs it next does not compile it again.
    """
    if is_component(wasm):
        if len(wasm) > max_component_bytes:
            raise ModuleTooLarge(
                f"component is {len(wasm)} bytes; the cap is {max_component_bytes} bytes"
            )
        manifest = _manifest(wasm, manifest_checks)
        check_component(wasm, compile_into=compile_into)
        return manifest
    if len(wasm) > max_bytes:
        raise ModuleTooLarge(f"module is {len(wasm)} bytes; the cap is {max_bytes} bytes")
    if not wasm:
        raise InvalidModule("module is empty")
    manifest = _manifest(wasm, manifest_checks)
    try:
        module = wasmtime.Module(_inspection_engine(), wasm)
    except wasmtime.WasmtimeError as exc:
        raise InvalidModule(f"module does not compile: {_first_line(exc)}") from exc
    _check_exports(module, manifest)
    _check_imports(module)
    return manifest


def _manifest(wasm: bytes, manifest_checks: Sequence[ManifestCheck]) -> Manifest:
    try:
        manifest = read_manifest(wasm)
        for check in manifest_checks:
            check(manifest)
    except (ManifestError, WasmFormatError) as exc:
        raise InvalidModule(str(exc)) from exc
    return manifest


_checked_components: set[str] = set()
"""Digests of components that passed `check_component` in this process: compiling one takes
seconds, and the check depends on the bytes alone."""


def check_component(wasm: bytes, *, compile_into: ArtifactCache | None = None) -> None:
    """Refuse a component that does not live in Amber's world (`abi/wit/amber.wit`): it must
    compile, export `workflow` and `activity` as `func(name: string, envelope: string) ->
    string`, and import nothing but `amber:guest/host` and WASI (which the host stubs or turns
    into traps)."""
    digest = hashlib.sha256(wasm).hexdigest()
    if digest in _checked_components:
        return
    if compile_into is not None:
        engine = compile_into.engine
        try:
            component = compile_into.load_component(digest, lambda: wasm)
        except InvalidModule as exc:
            cause = exc.__cause__ or exc
            raise InvalidModule(f"component does not compile: {_first_line(cause)}") from None
    else:
        engine = _inspection_engine()
        try:
            component = Component(engine, wasm)
        except wasmtime.WasmtimeError as exc:
            raise InvalidModule(f"component does not compile: {_first_line(exc)}") from exc
    ty = component.type
    for name in ty.imports(engine):
        if name != COMPONENT_HOST_INTERFACE and not name.startswith(COMPONENT_WASI_PREFIX):
            raise InvalidModule(f"component imports {name}, which Amber does not provide")
    exports = ty.exports(engine)
    for name in COMPONENT_EXPORTS:
        item = exports.get(name)
        func = None if item is None else item.ty
        if not isinstance(func, ComponentFuncType) or not _string_entry(func):
            raise InvalidModule(
                f"component does not export {name}: func(name: string, envelope: string)"
                " -> string (build it with `amber build`)"
            )
    _checked_components.add(digest)


def _string_entry(func: ComponentFuncType) -> bool:
    params = [type(ty).__name__ for _, ty in func.params]
    return params == ["String", "String"] and type(func.result).__name__ == "String"


def _first_line(exc: BaseException) -> str:
    lines: Sequence[str] = str(exc).strip().splitlines() or [""]
    return lines[0]
