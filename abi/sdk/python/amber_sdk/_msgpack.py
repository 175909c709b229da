"""A strict msgpack codec in pure Python: the guest has the standard library only.

It writes what msgpack-python writes with `use_bin_type=True` (the smallest encoding of every
integer, length and count; `float` always as float64; `str` as str and `bytes` as bin) and what
the C SDK writes, so the bytes of a command do not depend on which of them encoded it. Dict keys
are written in insertion order, which keeps activity arguments byte-identical across replays.

It reads everything msgpack defines except ext types, and refuses what a well-formed document
cannot hold: truncated input, trailing bytes, the never-used byte 0xc1, invalid UTF-8, a map key
that is a container, a key that repeats, nesting deeper than `MAX_DEPTH`. Each refusal is a
`ValueError` naming the offset.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "ItemMemo",
    "Packed",
    "PackedArray",
    "decode",
    "decode_at",
    "decode_reusing",
    "encode",
]

MAX_DEPTH = 128
"""Deepest nesting of arrays and maps either direction accepts: each level costs the decoder a
few Python frames, and this keeps a document far below the interpreter's recursion limit."""

_U64_MAX = (1 << 64) - 1
_I64_MIN = -(1 << 63)
_U32_MAX = (1 << 32) - 1

_HASHABLE_KEY = (str, int, float, bytes, bool, type(None))


# ---- encoding ------------------------------------------------------------------------------


class Packed:
    """A value already encoded: `encode` writes its bytes as they are (a workflow's output
    lists every command from the first on each activation; each is encoded once)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class PackedArray:
    """An array whose items are encoded once, as they are appended, and written as they are
    (a workflow's output lists every command from the first on each activation: each output
    costs the new commands' encoding and one copy of the bytes, not a pass over every item)."""

    __slots__ = ("body", "count")

    def __init__(self) -> None:
        self.count = 0
        self.body = bytearray()

    def append(self, value: object) -> None:
        _pack(value, self.body, 0)
        self.count += 1

    def packed(self) -> Packed:
        """The array so far, ready for `encode`."""
        out = bytearray()
        _pack_header(self.count, out, 0x90, 15, None, 0xDC, 0xDD)
        out += self.body
        return Packed(bytes(out))


def encode(value: object) -> bytes:
    """The msgpack document of `value` (None, bool, int, float, str, bytes, list/tuple, dict)."""
    out = bytearray()
    _pack(value, out, 0)
    return bytes(out)


def _pack(value: Any, out: bytearray, depth: int) -> None:
    # The common exact types first (each a single `type` comparison, where the chain below
    # tries up to six `isinstance` calls), short strings and small ints without a further
    # call (CPython in Wasm pays for every call); subclasses and the rest go down the chain.
    kind = type(value)
    if kind is str:
        n = len(value)
        if n <= 31 and value.isascii():
            out.append(0xA0 | n)
            out += value.encode("ascii")
        else:
            _pack_str(value, out)
    elif kind is int:
        if 0 <= value <= 0x7F:
            out.append(value)
        else:
            _pack_int(value, out)
    elif kind is dict:
        _pack_map(value, out, depth)
    elif kind is list or kind is tuple:
        _pack_array(value, out, depth)
    elif kind is Packed:
        out += value.data
    elif kind is bytes:
        n = len(value)
        if n <= 0xFF:
            out.append(0xC4)
            out.append(n)
        else:
            _pack_header(n, out, None, -1, 0xC4, 0xC5, 0xC6)
        out += value
    elif value is None:
        out.append(0xC0)
    elif isinstance(value, bool):
        out.append(0xC3 if value else 0xC2)
    elif isinstance(value, int):
        _pack_int(int(value), out)
    elif isinstance(value, float):
        out.append(0xCB)
        out += struct.pack(">d", value)
    elif isinstance(value, str):
        _pack_str(value, out)
    elif isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        _pack_header(len(data), out, None, -1, 0xC4, 0xC5, 0xC6)
        out += data
    elif isinstance(value, list | tuple):
        _pack_array(value, out, depth)
    elif isinstance(value, dict):
        _pack_map(value, out, depth)
    else:
        raise TypeError(f"msgpack: cannot encode a value of type {type(value).__name__}")


def _pack_array(value: list[Any] | tuple[Any, ...], out: bytearray, depth: int) -> None:
    _open(len(value), out, depth, 0x90, 0xDC, 0xDD)
    depth += 1
    for item in value:
        _pack(item, out, depth)


def _pack_map(value: dict[Any, Any], out: bytearray, depth: int) -> None:
    _open(len(value), out, depth, 0x80, 0xDE, 0xDF)
    depth += 1
    for key, item in value.items():
        if type(key) is not str and not isinstance(key, str):
            # JSON's rule, which the host holds payloads to: an int or tuple key would reach it
            # as a map it cannot read (and show as opaque bytes).
            raise TypeError(f"msgpack: a dict key must be a str, not {type(key).__name__}")
        _pack(key, out, depth)
        _pack(item, out, depth)


def _open(n: int, out: bytearray, depth: int, fix: int, m16: int, m32: int) -> None:
    """An array's or a map's header, at a depth still allowed."""
    if depth >= MAX_DEPTH:
        raise ValueError(f"msgpack: nesting deeper than {MAX_DEPTH}")
    if n <= 15:
        out.append(fix | n)
    else:
        _pack_header(n, out, fix, 15, None, m16, m32)


def _pack_str(value: str, out: bytearray) -> None:
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"msgpack: a str that is not valid Unicode: {exc}") from None
    n = len(data)
    if n <= 31:
        out.append(0xA0 | n)
    else:
        _pack_header(n, out, None, -1, 0xD9, 0xDA, 0xDB)
    out += data


def _pack_int(v: int, out: bytearray) -> None:
    if v >= 0:
        if v <= 0x7F:
            out.append(v)
        elif v <= 0xFF:
            out += bytes((0xCC, v))
        elif v <= 0xFFFF:
            out += b"\xcd" + v.to_bytes(2, "big")
        elif v <= _U32_MAX:
            out += b"\xce" + v.to_bytes(4, "big")
        elif v <= _U64_MAX:
            out += b"\xcf" + v.to_bytes(8, "big")
        else:
            raise ValueError(f"msgpack: integer {v} is above the uint64 range")
    elif v >= -32:
        out.append(v & 0xFF)
    elif v >= -0x80:
        out += b"\xd0" + v.to_bytes(1, "big", signed=True)
    elif v >= -0x8000:
        out += b"\xd1" + v.to_bytes(2, "big", signed=True)
    elif v >= -0x8000_0000:
        out += b"\xd2" + v.to_bytes(4, "big", signed=True)
    elif v >= _I64_MIN:
        out += b"\xd3" + v.to_bytes(8, "big", signed=True)
    else:
        raise ValueError(f"msgpack: integer {v} is below the int64 range")


def _pack_header(
    n: int,
    out: bytearray,
    fix: int | None,
    fix_max: int,
    m8: int | None,
    m16: int,
    m32: int,
) -> None:
    """A length or count: the fix form up to fix_max, then 8 (when the type has it), 16, 32 bits."""
    if fix is not None and n <= fix_max:
        out.append(fix | n)
    elif m8 is not None and n <= 0xFF:
        out += bytes((m8, n))
    elif n <= 0xFFFF:
        out += bytes((m16,)) + n.to_bytes(2, "big")
    elif n <= _U32_MAX:
        out += bytes((m32,)) + n.to_bytes(4, "big")
    else:
        raise ValueError(f"msgpack: length {n} is above the 32-bit limit")


# ---- decoding ------------------------------------------------------------------------------


def decode(data: bytes | bytearray | memoryview) -> Any:
    """The value of one msgpack document that fills `data` exactly (bin decodes to `bytes`)."""
    return _whole(_Reader(bytes(data)))


class ItemMemo:
    """The items of one array of a map document, each kept with its bytes and what `convert`
    made of it, for `decode_reusing` to take over in the next document.

    A live workflow's next input envelope repeats every result of the one before, and more:
    reading only what is new keeps each activation's cost to its new results, instead of
    growing with the run's history. Reuse is by the bytes, so it gives what decoding them
    again would give."""

    __slots__ = ("convert", "items", "key", "raw")

    def __init__(self, key: str, convert: Callable[[Any], Any]) -> None:
        self.key = key
        self.convert = convert
        self.items: list[tuple[bytes, Any]] = []
        self.raw = b""
        """Every item's bytes, in order: when a document's array opens with all of them (the
        common case), one comparison takes them all."""


def decode_reusing(data: bytes | bytearray | memoryview, memo: ItemMemo) -> Any:
    """`decode(data)` for a map document, with its array under `memo.key` as a list of
    `memo.convert(item)`: items whose bytes open that array as they opened the last one
    decoded with `memo` are taken from it, not decoded and converted again. `memo` then holds
    this document's items."""
    return _whole(_Reader(bytes(data), memo))


def decode_at(data: bytes, pos: int, depth: int) -> tuple[Any, int]:
    """The value that starts at offset `pos` of `data`, nested `depth` deep in its document,
    and the offset after it (for a reader that knows the document's layout around its values)."""
    reader = _Reader(data)
    reader.pos = pos
    return reader.value(depth), reader.pos


def _whole(reader: _Reader) -> Any:
    value = reader.value(0)
    if reader.pos != reader.end:
        raise ValueError(
            f"msgpack: {reader.end - reader.pos} trailing bytes after the value "
            f"(at offset {reader.pos})"
        )
    return value


class _Reader:
    __slots__ = ("data", "end", "memo", "pos")

    def __init__(self, data: bytes, memo: ItemMemo | None = None) -> None:
        self.data = data
        self.end = len(data)
        self.pos = 0
        self.memo = memo
        """Where the document's own map has its array under `memo.key` (`decode_reusing`)."""

    def take(self, n: int) -> bytes:
        start, end = self.pos, self.pos + n
        if end > self.end:
            raise ValueError(
                f"msgpack: truncated input: {n} bytes needed at offset {start}, "
                f"{self.end - start} left"
            )
        self.pos = end
        return self.data[start:end]

    def uint(self, n: int) -> int:
        return int.from_bytes(self.take(n), "big")

    def value(self, depth: int) -> Any:
        data = self.data
        pos = self.pos
        if pos >= self.end:
            raise ValueError(f"msgpack: truncated input: a value expected at offset {pos}")
        byte = data[pos]
        pos += 1
        self.pos = pos
        if byte < 0x80:  # a positive fixint: most counts, indices and small values
            return byte
        # What envelopes are made of, read here without the table's calls (CPython in Wasm
        # pays for every call): short strings (keys), maps, arrays, bin8 (payloads), nil and
        # booleans. Anything irregular (truncated, not UTF-8) goes to the table, which says
        # what is wrong.
        if byte >= 0xA0:
            if byte <= 0xBF:
                end = pos + (byte & 0x1F)
                if end <= self.end:
                    try:
                        text = data[pos:end].decode("utf-8")
                    except UnicodeDecodeError:
                        pass
                    else:
                        self.pos = end
                        return text
            elif byte == 0xC4 and pos < self.end:
                end = pos + 1 + data[pos]
                if end <= self.end:
                    self.pos = end
                    return data[pos + 1 : end]
            elif byte <= 0xC3 and byte != 0xC1:
                return None if byte == 0xC0 else byte == 0xC3
        elif byte <= 0x8F:
            return self.map(byte & 0x0F, depth)
        else:
            return self.array(byte & 0x0F, depth)
        return _DISPATCH[byte](self, byte, depth)

    def text(self, n: int) -> str:
        at = self.pos
        raw = self.take(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"msgpack: the str at offset {at} is not valid UTF-8") from None

    def array(self, n: int, depth: int) -> list[Any]:
        if n > self.end - self.pos or depth >= MAX_DEPTH:
            self._room(n, depth)
        value = self.value
        depth += 1
        out = []
        for _ in range(n):
            out.append(value(depth))
        return out

    def map(self, n: int, depth: int) -> dict[Any, Any]:
        if 2 * n > self.end - self.pos or depth >= MAX_DEPTH:
            self._room(2 * n, depth)
        memo_key = self.memo.key if depth == 0 and self.memo is not None else None
        out: dict[Any, Any] = {}
        value = self.value
        data = self.data
        end = self.end
        depth += 1
        for _ in range(n):
            at = self.pos
            byte = data[at] if at < end else 0xC1
            stop = at + 1 + (byte & 0x1F)
            if 0xA0 <= byte <= 0xBF and stop <= end:  # a short str key, read here
                try:
                    key = data[at + 1 : stop].decode("utf-8")
                except UnicodeDecodeError:
                    key = value(depth)  # raises what is wrong
                self.pos = stop
            else:
                key = value(depth)
                if not isinstance(key, _HASHABLE_KEY):
                    raise ValueError(f"msgpack: a {type(key).__name__} map key at offset {at}")
            if key in out:
                raise ValueError(f"msgpack: map key {key!r} repeats at offset {at}")
            if memo_key is not None and key == memo_key:
                out[key] = self._memo_array(depth)
            else:
                out[key] = value(depth)
        return out

    def _room(self, items: int, depth: int) -> None:
        # Every item takes at least one byte: refuse a count the input cannot hold before
        # allocating anything for it.
        if items > self.end - self.pos:
            raise ValueError(
                f"msgpack: truncated input: {items} items announced at offset {self.pos}, "
                f"{self.end - self.pos} bytes left"
            )
        if depth >= MAX_DEPTH:
            raise ValueError(f"msgpack: nesting deeper than {MAX_DEPTH}")

    def _memo_array(self, depth: int) -> Any:
        """The array under the memo's key (see `ItemMemo`)."""
        memo = self.memo
        assert memo is not None
        if self.pos >= self.end:
            return self.value(depth)  # the truncation error
        byte = self.data[self.pos]
        if 0x90 <= byte <= 0x9F:
            self.pos += 1
            n = byte & 0x0F
        elif byte in (0xDC, 0xDD):
            self.pos += 1
            n = self.uint(2 if byte == 0xDC else 4)
        else:
            return self.value(depth)  # not an array: the caller refuses it
        self._room(n, depth)
        before = memo.items
        if len(before) <= n and self.data.startswith(memo.raw, self.pos):
            kept = list(before)
            self.pos += len(memo.raw)
        else:
            kept = []
        for i in range(len(kept), n):
            start = self.pos
            if i < len(before) and self.data.startswith(before[i][0], start):
                raw, item = before[i]
                self.pos = start + len(raw)
            else:
                item = memo.convert(self.value(depth + 1))
                raw = self.data[start : self.pos]
            kept.append((raw, item))
        memo.items = kept
        memo.raw = b"".join(raw for raw, _ in kept)
        return [item for _, item in kept]


_Handler = Callable[[_Reader, int, int], Any]


def _unused(r: _Reader, b: int, depth: int) -> Any:
    raise ValueError(f"msgpack: byte 0x{b:02x} at offset {r.pos - 1} is never used")


def _ext(r: _Reader, b: int, depth: int) -> Any:
    raise ValueError(f"msgpack: ext type (0x{b:02x}) at offset {r.pos - 1} is not supported")


def _const(value: object) -> _Handler:
    return lambda r, b, depth: value


def _sized(size_bytes: int, read: Callable[[_Reader, int, int], Any]) -> _Handler:
    return lambda r, b, depth: read(r, r.uint(size_bytes), depth)


def _str(r: _Reader, n: int, depth: int) -> str:
    return r.text(n)


def _bin(r: _Reader, n: int, depth: int) -> bytes:
    return r.take(n)


def _array(r: _Reader, n: int, depth: int) -> list[Any]:
    return r.array(n, depth)


def _map(r: _Reader, n: int, depth: int) -> dict[Any, Any]:
    return r.map(n, depth)


def _unsigned(n: int) -> _Handler:
    return lambda r, b, depth: r.uint(n)


def _signed(n: int) -> _Handler:
    return lambda r, b, depth: int.from_bytes(r.take(n), "big", signed=True)


def _float32(r: _Reader, b: int, depth: int) -> float:
    value: float = struct.unpack(">f", r.take(4))[0]
    return value


def _float64(r: _Reader, b: int, depth: int) -> float:
    value: float = struct.unpack(">d", r.take(8))[0]
    return value


def _table() -> tuple[_Handler, ...]:
    """One handler per first byte (the msgpack spec's format table)."""
    table: list[_Handler] = [_unused] * 256
    for b in range(0x00, 0x80):
        table[b] = _const(b)
    for b in range(0x80, 0x90):
        table[b] = lambda r, b, depth: r.map(b & 0x0F, depth)
    for b in range(0x90, 0xA0):
        table[b] = lambda r, b, depth: r.array(b & 0x0F, depth)
    for b in range(0xA0, 0xC0):
        table[b] = lambda r, b, depth: r.text(b & 0x1F)
    for b in range(0xE0, 0x100):
        table[b] = _const(b - 0x100)
    table[0xC0] = _const(None)
    table[0xC2] = _const(False)
    table[0xC3] = _const(True)
    table[0xC4], table[0xC5], table[0xC6] = (_sized(n, _bin) for n in (1, 2, 4))
    for b in (0xC7, 0xC8, 0xC9, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8):
        table[b] = _ext
    table[0xCA] = _float32
    table[0xCB] = _float64
    table[0xCC], table[0xCD], table[0xCE], table[0xCF] = (_unsigned(n) for n in (1, 2, 4, 8))
    table[0xD0], table[0xD1], table[0xD2], table[0xD3] = (_signed(n) for n in (1, 2, 4, 8))
    table[0xD9], table[0xDA], table[0xDB] = (_sized(n, _str) for n in (1, 2, 4))
    table[0xDC], table[0xDD] = (_sized(n, _array) for n in (2, 4))
    table[0xDE], table[0xDF] = (_sized(n, _map) for n in (2, 4))
    return tuple(table)


_DISPATCH = _table()
