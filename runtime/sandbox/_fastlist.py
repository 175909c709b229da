"""Bytes handed to a component (`list<u8>` results of host functions) in one copy.

Why: wasmtime-py 50 converts a `list<u8>` into C values one element at a time, a Python call
per byte. CPython asks for 2,496 random bytes (ten `get-random-bytes` calls) at its first call in
every fresh component instance, which made that conversion most of a Python guest's fresh
activation. `amber bench` prints what an activation costs.

How: `ListType.convert_to_c` is replaced, for `bytes` values of a `list<u8>` only, by a strided
fill of one `bytearray` laid out as an array of `wasmtime_component_val_t` (kind byte, then the
value at the union's offset) and one `memmove` into the vallist wasmtime allocated, through
wasmtime-py's private ctypes bindings (`wasmtime._ffi`), pinned by pyproject. Every other value
goes through the original method.

Check and fallback: at import, the fast path converts a sample beside the original one and
compares the two arrays byte for byte; under another major version, or if a name or layout
differs, nothing is patched (the original, slow path stays). tests/runtime/test_python_guests.py
checks that `FAST` holds on the pinned version.
"""

from __future__ import annotations

import ctypes
from typing import Any, Final

from amber.versions import WASMTIME_VERSION

_SUPPORTED_MAJOR: Final = "50"


def _install() -> bool:
    if WASMTIME_VERSION.split(".")[0] != _SUPPORTED_MAJOR:
        return False
    try:
        from wasmtime import _ffi as ffi
        from wasmtime.component._types import ListType

        size = ctypes.sizeof(ffi.wasmtime_component_val_t)
        offset = ffi.wasmtime_component_val_t.of.offset
        kind = ffi.WASMTIME_COMPONENT_U8.value
        original = ListType.convert_to_c
    except (ImportError, AttributeError):
        return False

    def fast(self: Any, store: Any, val: Any, ptr: Any) -> None:
        if not isinstance(val, bytes | bytearray) or not self._is_bytes():
            original(self, store, val, ptr)
            return
        count = len(val)
        raw = ffi.wasmtime_component_vallist_t()
        ffi.wasmtime_component_vallist_new_uninit(raw, count)
        if count:
            layout = bytearray(size * count)
            layout[0::size] = bytes([kind]) * count
            layout[offset::size] = val
            ctypes.memmove(raw.data, (ctypes.c_char * len(layout)).from_buffer(layout), len(layout))
        ptr.contents.kind = ffi.WASMTIME_COMPONENT_LIST
        ptr.contents.of.list = raw

    if not _same(ffi, ListType, original, fast, kind):
        return False
    ListType.convert_to_c = fast  # type: ignore[method-assign]
    return True


def _same(ffi: Any, list_type: Any, original: Any, fast: Any, kind: int) -> bool:
    """Whether `fast` gives each element of a sample the kind and value `original` gives it
    (padding bytes are left uninitialised by both)."""
    try:
        from wasmtime.component._types import U8

        sample = bytes(range(256)) + b"\x00\xff"

        class Probe(list_type):  # type: ignore[misc]
            element = U8()  # a list<u8> without a type handle from wasmtime

        target = Probe.__new__(Probe)
        arrays = []
        for convert in (original, fast):
            val = ffi.wasmtime_component_val_t()
            convert(target, None, sample, ctypes.pointer(val))
            vallist = val.of.list
            items = [vallist.data[i] for i in range(vallist.size)]
            arrays.append([(item.kind, item.of.u8) for item in items])
            ffi.wasmtime_component_vallist_delete(ctypes.byref(vallist))
        return arrays[0] == arrays[1] == [(kind, b) for b in sample]
    except Exception:
        return False


FAST: Final = _install()
"""Whether `list<u8>` values go to components in one copy (else wasmtime-py's own path)."""
