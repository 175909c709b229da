"""Just enough of the WebAssembly binary format to read custom sections without running code."""

from __future__ import annotations

from collections.abc import Iterator

from ._errors import InvalidInput

WASM_MAGIC = b"\x00asm"
WASM_VERSION_1 = b"\x01\x00\x00\x00"
COMPONENT_VERSION = b"\x0d\x00\x01\x00"
"""The preamble's version and layer fields of a component (the component model's binary format)."""
_CUSTOM_SECTION = 0


class WasmFormatError(InvalidInput):
    """The bytes are not a well-formed core WebAssembly module."""


def _read_leb_u32(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise WasmFormatError("truncated LEB128 integer")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 28:
            raise WasmFormatError("LEB128 integer longer than 5 bytes")
    if result > 0xFFFF_FFFF:
        raise WasmFormatError("LEB128 integer does not fit in 32 bits")
    return result, pos


def encode_leb_u32(value: int) -> bytes:
    """Unsigned LEB128 encoding, as section and name lengths use it."""
    if not 0 <= value <= 0xFFFF_FFFF:
        raise ValueError("value out of u32 range")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def is_component(wasm: bytes) -> bool:
    """Whether the bytes start like a component (a Python guest) rather than a core module."""
    return wasm[:4] == WASM_MAGIC and wasm[4:8] == COMPONENT_VERSION


def custom_sections(module: bytes) -> Iterator[tuple[str, bytes]]:
    """Yield `(name, payload)` for each top-level custom section of a core module or a
    component, in file order (both binary formats frame their sections the same way)."""
    if module[:4] != WASM_MAGIC:
        raise WasmFormatError("not a WebAssembly module (bad magic number)")
    if module[4:8] not in (WASM_VERSION_1, COMPONENT_VERSION):
        raise WasmFormatError("not a core WebAssembly module or component (unsupported version)")
    view = memoryview(module)
    pos = 8
    while pos < len(view):
        section_id = view[pos]
        size, body = _read_leb_u32(view, pos + 1)
        end = body + size
        if end > len(view):
            raise WasmFormatError("section runs past the end of the module")
        if section_id == _CUSTOM_SECTION:
            name_len, name_pos = _read_leb_u32(view, body)
            if name_pos + name_len > end:
                raise WasmFormatError("custom section name runs past its section")
            try:
                name = bytes(view[name_pos : name_pos + name_len]).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise WasmFormatError("custom section name is not UTF-8") from exc
            yield name, bytes(view[name_pos + name_len : end])
        pos = end


def custom_section(name: str, payload: bytes) -> bytes:
    """Encode a custom section, ready to append to a module."""
    encoded_name = name.encode("utf-8")
    body = encode_leb_u32(len(encoded_name)) + encoded_name + payload
    return bytes([_CUSTOM_SECTION]) + encode_leb_u32(len(body)) + body
