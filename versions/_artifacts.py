"""Precompiled module artifacts on disk, keyed by (sha256, wasmtime version, engine flags).

Compiling a module costs milliseconds; loading its precompiled artifact with
`Module.deserialize_file` (an mmap) costs tens of microseconds. Deserialising is only safe for
artifacts Amber wrote itself, so the directory is created private (0700) and an artifact is
written atomically (temp file + rename) after compiling bytes whose digest was checked.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import wasmtime

from ._errors import InvalidModule

WASMTIME_VERSION = version("wasmtime")


class ArtifactCache:
    """Loads compiled modules for one engine, compiling and caching on first use."""

    def __init__(self, directory: Path, engine: wasmtime.Engine, engine_flags: str) -> None:
        self._dir = directory
        self._engine = engine
        self._flags_key = hashlib.sha256(engine_flags.encode()).hexdigest()[:16]
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        directory.chmod(0o700)  # artifacts are trusted when loaded: keep others out

    def path_for(self, digest: str) -> Path:
        return self._dir / f"{digest}.wasmtime-{WASMTIME_VERSION}.{self._flags_key}.cwasm"

    def load(self, digest: str, fetch: Callable[[], bytes]) -> wasmtime.Module:
        """The compiled module for `digest`; `fetch()` supplies the bytes on a cache miss."""
        path = self.path_for(digest)
        if path.exists():
            try:
                return wasmtime.Module.deserialize_file(self._engine, str(path))
            except wasmtime.WasmtimeError:
                path.unlink(missing_ok=True)  # incompatible or damaged: rebuild below
        wasm = fetch()
        if hashlib.sha256(wasm).hexdigest() != digest:
            raise InvalidModule(f"module bytes do not match digest {digest}")
        try:
            module = wasmtime.Module(self._engine, wasm)
        except wasmtime.WasmtimeError as exc:
            raise InvalidModule(f"module {digest[:12]} does not compile: {exc}") from exc
        fd, tmp = tempfile.mkstemp(dir=self._dir, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(module.serialize())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return module
