"""msgpack, the one encoding of user payloads, envelopes, bundles and frames, in one place.

Every producer packs with `use_bin_type` (bytes stay bytes, strings stay strings) and every
consumer unpacks strings as `str`. Bytes that should be msgpack but are not raise `NotMsgpack`,
whatever the msgpack library raised: on hostile input it raises a handful of unrelated types
(ValueError, TypeError, ExtraData, FormatError, StackError, ...), and each caller used to list
its own subset of them. Event payloads are the exception: they are typed, and
`history._payloads` decodes them straight into their classes.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import msgpack

from ._errors import InvalidInput


class NotMsgpack(InvalidInput):
    """Bytes that should hold one msgpack value do not."""

    def __init__(self, what: str, detail: str) -> None:
        super().__init__(f"{what} is not msgpack: {detail}")
        self.what = what
        self.detail = detail
        """What the decoder said, cut short."""


def pack(value: object) -> bytes:
    """`value` as msgpack."""
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def unpack(raw: bytes, *, what: str = "payload", any_keys: bool = False) -> Any:
    """The one msgpack value `raw` holds; `NotMsgpack` naming `what` otherwise. Map keys must
    be strings or bytes unless `any_keys`."""
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=not any_keys)
    except Exception as exc:  # every failure to decode means the same here
        detail = str(exc) or type(exc).__name__
        raise NotMsgpack(what, detail[:200]) from None


def unpacker(raw: bytes) -> msgpack.Unpacker:
    """A streaming reader of `raw` with `unpack`'s options (string map keys), for reading a
    document item by item (`tell` gives where each ends). It raises `ValueError` or
    `UnpackError` (both in `UNPACK_ERRORS`) on what `unpack` refuses."""
    reader = msgpack.Unpacker(raw=False, strict_map_key=True, max_buffer_size=max(len(raw), 1))
    reader.feed(raw)
    return reader


UNPACK_ERRORS: tuple[type[Exception], ...] = (ValueError, TypeError, msgpack.UnpackException)
"""What an `unpacker` raises on input that is not msgpack (or ends early)."""


def pack_with_bytes(head: dict[str, object], key: str, tail: bytes | bytearray) -> bytes:
    """The map `head` plus `key: tail`, with `tail` (a large body, say) copied once rather than
    through the packer's growing buffer."""
    packer = msgpack.Packer(use_bin_type=True)
    parts = [packer.pack_map_header(len(head) + 1)]
    for name, value in head.items():
        parts += [packer.pack(name), packer.pack(value)]
    parts += [packer.pack(key), _bin_header(len(tail)), tail]
    return b"".join(parts)


def _bin_header(length: int) -> bytes:
    if length < 2**8:
        return struct.pack(">BB", 0xC4, length)
    if length < 2**16:
        return struct.pack(">BH", 0xC5, length)
    return struct.pack(">BI", 0xC6, length)


def jsonable(value: Any) -> Any:
    """A decoded msgpack value as JSON-ready data, for people and JSON output: bytes become
    `{"$bytes": base64}`, times ISO 8601 text, tuples lists, keys strings, and a float JSON
    has no number for (NaN, ±infinity) the text `"NaN"`, `"Infinity"` or `"-Infinity"`."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, bytes | bytearray):
        return {"$bytes": base64.b64encode(value).decode()}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def payload_json(raw: bytes | None) -> Any:
    """A user payload (msgpack bytes) as JSON-ready data; bytes that are not msgpack are shown
    as bytes, not refused."""
    if raw is None:
        return None
    try:
        return jsonable(unpack(raw))
    except NotMsgpack:
        return jsonable(raw)
