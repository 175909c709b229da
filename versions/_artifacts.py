"""Precompiled module artifacts on disk, keyed by (sha256, wasmtime version, engine flags).

Compiling a module costs milliseconds; loading its precompiled artifact with
`Module.deserialize_file` (an mmap) costs tens of microseconds. Deserialising is only safe for
artifacts Amber wrote itself, so the directory is created private (0700) and an artifact is
written atomically (temp file + rename) after compiling bytes whose digest was checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import wasmtime
from wasmtime.component import Component

from amber.abi import Manifest, ManifestError, parse_manifest, read_manifest

from ._errors import InvalidModule

WASMTIME_VERSION = version("wasmtime")


class ArtifactCache:
    """Loads compiled modules for one engine, compiling and caching on first use."""

    def __init__(self, directory: Path, engine: wasmtime.Engine, engine_flags: str) -> None:
        self._dir = directory
        self.engine = engine
        """The engine artifacts are compiled for (and loaded into)."""
        self._flags_key = hashlib.sha256(engine_flags.encode()).hexdigest()[:16]
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        directory.chmod(0o700)  # artifacts are trusted when loaded: keep others out

    def path_for(self, digest: str) -> Path:
        return self._dir / f"{digest}.wasmtime-{WASMTIME_VERSION}.{self._flags_key}.cwasm"

    def component_path_for(self, digest: str) -> Path:
        return self._dir / f"{digest}.wasmtime-{WASMTIME_VERSION}.{self._flags_key}.component"

    def load(self, digest: str, fetch: Callable[[], bytes]) -> wasmtime.Module:
        """The compiled module for `digest`; `fetch()` supplies the bytes on a cache miss."""
        path = self.path_for(digest)
        if path.exists():
            try:
                return wasmtime.Module.deserialize_file(self.engine, str(path))
            except wasmtime.WasmtimeError:
                path.unlink(missing_ok=True)  # incompatible or damaged: rebuild below
        wasm = fetch()
        if hashlib.sha256(wasm).hexdigest() != digest:
            raise InvalidModule(f"module bytes do not match digest {digest}")
        try:
            module = wasmtime.Module(self.engine, wasm)
        except wasmtime.WasmtimeError as exc:
            raise InvalidModule(f"module {digest[:12]} does not compile: {exc}") from exc
        self._write(path, bytes(module.serialize()))
        self._write(self._manifest_path(digest), _manifest_json(wasm))
        return module

    def load_component(self, digest: str, fetch: Callable[[], bytes]) -> Component:
        """The compiled component (a Python guest) for `digest`; compiling one takes seconds
        (it holds CPython), loading its artifact milliseconds."""
        path = self.component_path_for(digest)
        if path.exists():
            try:
                return Component.deserialize_file(self.engine, str(path))
            except wasmtime.WasmtimeError:
                path.unlink(missing_ok=True)  # incompatible or damaged: rebuild below
        wasm = fetch()
        if hashlib.sha256(wasm).hexdigest() != digest:
            raise InvalidModule(f"module bytes do not match digest {digest}")
        try:
            component = Component(self.engine, wasm)
        except wasmtime.WasmtimeError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise InvalidModule(f"component {digest[:12]} does not compile: {first}") from exc
        self._write(path, bytes(component.serialize()))
        self._write(self._manifest_path(digest), _manifest_json(wasm))
        return component

    def manifest(self, digest: str, fetch: Callable[[], bytes]) -> Manifest:
        """The manifest of a cached module (kept beside its artifact: compiled artifacts drop
        custom sections); `fetch()` supplies the bytes if the sidecar is missing."""
        path = self._manifest_path(digest)
        try:
            return parse_manifest(path.read_bytes())
        except (OSError, ManifestError):
            wasm = fetch()
            if hashlib.sha256(wasm).hexdigest() != digest:
                raise InvalidModule(f"module bytes do not match digest {digest}") from None
            self._write(path, _manifest_json(wasm))
            return read_manifest(wasm)

    def _manifest_path(self, digest: str) -> Path:
        return self._dir / f"{digest}.manifest.json"

    def _write(self, path: Path, data: bytes) -> None:
        fd, tmp = tempfile.mkstemp(dir=self._dir, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _manifest_json(wasm: bytes) -> bytes:
    try:
        return json.dumps(read_manifest(wasm).to_json()).encode()
    except ManifestError as exc:
        raise InvalidModule(str(exc)) from exc
