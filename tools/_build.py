"""Guest build tool: compile a C guest into an Amber module with its manifest section.

Use `build_module` to turn one C source file that includes `amber.h` into a module the host
accepts: it compiles with zig's clang (`python -m ziglang cc`, wasm32-freestanding, no libc),
finds the JSON that `AMBER_MANIFEST({...})` left between marker strings in the module's data,
appends it as the `amber.manifest` custom section (wasm-ld emits no custom sections from C, so
the marker route is the only one), and then runs the very checks an upload runs
(`versions.validate_module`), so a module that builds is a module the server accepts.

The section holds the manifest **re-serialised compactly** (`json.dumps` with `(",", ":")`
separators, key order kept, UTF-8), not the source text: the preprocessor's spacing is not part
of the contract. Builds are byte-reproducible: same source, flags and defines, same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from amber.abi import MANIFEST_SECTION, ManifestError, custom_section, parse_manifest

__all__ = ["SDK_INCLUDE_DIR", "BuildError", "BuildResult", "build_module", "extract_manifest"]

SDK_INCLUDE_DIR: Final = Path(__file__).resolve().parent.parent / "abi" / "sdk"
"""Directory holding `amber.h`; always on the include path of `build_module`."""

COMPILE_TIMEOUT_S: Final = 300.0
"""The first build on a machine also fills zig's cache, so this is generous."""

_BEGIN: Final = b"\0AMBER_MANIFEST_V1_BEGIN\0"
_END: Final = b"\0AMBER_MANIFEST_V1_END\0"
_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Compiler and linker flags. Everything that affects the bytes is pinned here: the CPU
# (`lime1`: bulk-memory-opt, sign-ext, multivalue, … — all on by default in wasmtime), a 64 KiB
# stack (zig places it below the data, so an overflow traps instead of corrupting the heap),
# and -s, so no debug info, producers or path strings end up in the module.
_CFLAGS: Final = (
    "--target=wasm32-freestanding",
    "-mcpu=lime1",
    "-std=c11",
    "-O2",
    "-s",
    "-nostdlib",
    "-Wall",
    "-Wextra",
    "-Wl,--no-entry",
    "-Wl,-z,stack-size=65536",
)


class BuildError(Exception):
    """A guest could not be built. `stderr` holds the compiler's output when it got that far."""

    def __init__(self, message: str, *, stderr: str = "") -> None:
        super().__init__(f"{message}\n{stderr}".rstrip() if stderr else message)
        self.stderr = stderr


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildResult:
    output: Path
    """Where the module was written."""
    size: int
    """Module size in bytes, manifest section included."""
    sha256: str
    """Hex digest of the module bytes: the module's identity."""
    manifest: Mapping[str, Any]
    """The validated manifest, as stored in the `amber.manifest` section."""
    warnings: str
    """Compiler diagnostics of a successful build ("" when clean)."""


def build_module(
    source: Path,
    output: Path,
    *,
    defines: Mapping[str, str] | None = None,
    include_dirs: Sequence[Path] = (),
) -> BuildResult:
    """Compile the C guest `source` into the module `output` (written atomically).

    Use for every C guest: the result is what the host accepts at upload. `defines` become
    `-DNAME=VALUE`. Raises `BuildError` on a compile error, a missing or invalid manifest, or a
    module whose exports and imports do not match its manifest and ABI v1.
    """
    # wasmtime (for validation): loaded when a module is built, not when this module is imported.
    from amber.runtime.sandbox import check_capabilities
    from amber.versions import InvalidModule, validate_module

    source = Path(source).resolve()
    if not source.is_file():
        raise BuildError(f"{source}: no such source file")
    with tempfile.TemporaryDirectory(prefix="amber-build-") as tmp:
        compiled = Path(tmp) / "module.wasm"
        stderr = _compile(source, compiled, defines or {}, include_dirs)
        module = compiled.read_bytes()
    manifest = extract_manifest(module, where=str(source))
    payload = json.dumps(manifest, separators=(",", ":"), ensure_ascii=False).encode()
    module += custom_section(MANIFEST_SECTION, payload)
    try:
        validate_module(module, manifest_checks=(check_capabilities,))
    except InvalidModule as exc:
        raise BuildError(f"{source}: {exc}") from exc

    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.name}.partial")
    partial.write_bytes(module)
    os.replace(partial, output)
    return BuildResult(
        output=output,
        size=len(module),
        sha256=hashlib.sha256(module).hexdigest(),
        manifest=manifest,
        warnings=stderr,
    )


def _compile(
    source: Path, out: Path, defines: Mapping[str, str], include_dirs: Sequence[Path]
) -> str:
    command = [sys.executable, "-m", "ziglang", "cc", *_CFLAGS, "-I", str(SDK_INCLUDE_DIR)]
    for directory in include_dirs:
        command += ["-I", str(Path(directory).resolve())]
    for name, value in sorted(defines.items()):
        if not _C_IDENT.match(name):
            raise BuildError(f"define {name!r} is not a C identifier")
        command.append(f"-D{name}={value}")
    command += ["-o", str(out), str(source)]
    try:
        done = subprocess.run(
            command,
            cwd=out.parent,
            capture_output=True,
            encoding="utf-8",
            errors="replace",
            timeout=COMPILE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"{source}: compiler timed out after {exc.timeout:.0f} s") from exc
    except OSError as exc:
        raise BuildError(f"{source}: cannot run the compiler: {exc}") from exc
    if done.returncode != 0 or not out.is_file():
        raise BuildError(f"{source}: compilation failed", stderr=done.stderr)
    return done.stderr


def extract_manifest(module: bytes, *, where: str = "module") -> dict[str, Any]:
    """The validated manifest that `AMBER_MANIFEST` embedded in a compiled (pre-section) module."""
    start = module.find(_BEGIN)
    if start < 0:
        raise BuildError(
            f'{where}: no manifest found; add AMBER_MANIFEST({{"abi": 1, "workflows": [...],'
            f' "activities": [...]}}) to the source'
        )
    if module.find(_BEGIN, start + 1) >= 0:
        raise BuildError(f"{where}: more than one AMBER_MANIFEST")
    start += len(_BEGIN)
    end = module.find(_END, start)
    if end < 0:
        raise BuildError(f"{where}: manifest end marker not found")
    text = module[start:end]
    try:
        parse_manifest(text)
    except ManifestError as exc:
        raise BuildError(f"{where}: AMBER_MANIFEST: {exc}") from exc
    document: dict[str, Any] = json.loads(text)
    return document
