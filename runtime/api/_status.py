"""Amber errors ↔ gRPC statuses, so a typed error raised in the server is raised again by the
client with the same type, message and fields.

Wire format: the status code comes from the error's place in the tree; trailing metadata carries
the class's wire name (`ERROR_TYPE_KEY`) and its fields as one JSON object (`ERROR_FIELDS_KEY`),
bytes as `{"$bytes": base64}`, tuples as lists. A field that is not JSON data, or does not fit
the metadata budget, is left out; the client's copy then lacks that attribute.

Rejected: a hand-kept list of classes (a new error came back as `RemoteError` until someone
remembered it); a protobuf message per error (every new field a proto change); pickle (runs code
the server chose).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping
from typing import Any

import grpc

# Loading a module that defines Amber errors registers its classes (see `AmberError`): between
# them, these imports load every such module of abi, history, versions and runtime.model, and
# none of them loads wasmtime or psycopg. `tests/runtime/test_error_registry.py` checks that a
# client knows every error class defined there.
from amber.abi import (
    AmberError,
    Conflict,
    InvalidInput,
    NotFound,
    RetryableError,
    error_fields,
    error_types,
    rebuild_error,
)
from amber.history import WorkflowIdInUse
from amber.runtime.model import (
    InvalidToken,
    NotAuthenticated,
    NotAuthorised,
    PayloadTooLarge,
    RemoteError,
)
from amber.versions import LabelConflict, VersionNotFound  # noqa: F401 (registration only)

ERROR_TYPE_KEY = "amber-error-type"
ERROR_FIELDS_KEY = "amber-error-fields"
MAX_DETAILS_BYTES = 4096
"""The longest message a status carries, in bytes as gRPC sends it (`error_details`)."""
MAX_FIELDS_CHARS = 2048
"""Budget for an error's encoded fields: gRPC refuses oversized metadata (8 KiB by default,
shared with the message)."""

# The first class of an error's MRO found here gives its status, so a new subclass takes its
# parent's code without an edit.
_CODES: dict[type[AmberError], grpc.StatusCode] = {
    PayloadTooLarge: grpc.StatusCode.RESOURCE_EXHAUSTED,
    NotAuthenticated: grpc.StatusCode.UNAUTHENTICATED,
    NotAuthorised: grpc.StatusCode.PERMISSION_DENIED,
    InvalidToken: grpc.StatusCode.PERMISSION_DENIED,
    InvalidInput: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    WorkflowIdInUse: grpc.StatusCode.ALREADY_EXISTS,
    Conflict: grpc.StatusCode.ABORTED,
    RetryableError: grpc.StatusCode.UNAVAILABLE,
}
_BYTES = "$bytes"
_OVERSIZED = re.compile(r"message larger than max \((\d+) vs\. (\d+)\)")
"""gRPC's refusal of a message over its size cap, sent or received."""


def status_of(exc: AmberError) -> grpc.StatusCode:
    """The gRPC status code an error travels with (INTERNAL outside the known groups)."""
    for cls in type(exc).__mro__:
        code = _CODES.get(cls)
        if code is not None:
            return code
    return grpc.StatusCode.INTERNAL


def error_details(exc: AmberError) -> str:
    """`exc`'s message as a status's details, cut to `MAX_DETAILS_BYTES` as sent: messages
    quote what the caller sent (an id, a name), and details past gRPC's metadata limits (8 KiB
    soft, 16 KiB hard; every UTF-8 byte but printable ASCII is sent as three, `%XX`) turn the
    whole answer into a transport error that says nothing of the refusal."""
    text = str(exc)
    sent = 0
    for index, char in enumerate(text):
        sent += 1 if " " <= char <= "~" and char != "%" else 3 * len(char.encode())
        if sent > MAX_DETAILS_BYTES - 9:  # room for the "…" (three bytes, sent as nine)
            return text[:index] + "…"
    return text


def error_metadata(exc: AmberError) -> tuple[tuple[str, str], ...]:
    """The trailing metadata that carries `exc`'s type and fields to the client."""
    meta = [(ERROR_TYPE_KEY, type(exc).wire_name)]
    fields = _encoded_fields(error_fields(exc))
    if fields:
        meta.append((ERROR_FIELDS_KEY, fields))
    return tuple(meta)


def error_from_rpc(exc: grpc.RpcError) -> AmberError:
    """Rebuild the typed error the server raised (or a transport error)."""
    meta = dict(exc.trailing_metadata() or ())
    return error_of(
        exc.code(),
        exc.details() or "",
        str(meta.get(ERROR_TYPE_KEY) or ""),
        meta.get(ERROR_FIELDS_KEY),
    )


def error_of(code: grpc.StatusCode, details: str, name: str, fields: object) -> AmberError:
    """Rebuild a typed error from its status code, message, wire name and encoded fields
    (those of an RPC's status, or of one item of a worker's stream)."""
    cls = error_types().get(name) if name else None
    if cls is not None:
        return rebuild_error(cls, details, _decoded_fields(fields))
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return RetryableError(f"server unavailable: {details}")
    too_large = _OVERSIZED.search(details) if code is grpc.StatusCode.RESOURCE_EXHAUSTED else None
    if too_large is not None:  # gRPC's own refusal, before any Amber code saw the message
        size, limit = too_large.groups()
        return PayloadTooLarge(
            f"the request is {size} bytes, more than one call carries ({limit}); payloads"
            " (inputs, signals, results) are limited far below that by the server"
        )
    where = f" ({name})" if name else ""
    return RemoteError(f"{code.name}{where}: {details}", error_type=name)


def error_parts(exc: AmberError) -> tuple[str, str, str]:
    """An error's wire name, message and encoded fields: what an RPC's status carries, for a
    refusal that travels inside a message instead (one item of a worker's stream)."""
    return type(exc).wire_name, str(exc), _encoded_fields(error_fields(exc))


class _NotData(Exception):
    """A field value JSON cannot carry."""


def _encoded_fields(fields: Mapping[str, Any]) -> str:
    parts: list[str] = []
    used = 2  # the braces
    for name, value in fields.items():
        try:
            part = json.dumps(name) + ":" + json.dumps(_to_json(value), separators=(",", ":"))
        except _NotData:
            continue
        if used + len(part) + 1 > MAX_FIELDS_CHARS:
            continue
        parts.append(part)
        used += len(part) + 1
    return "{" + ",".join(parts) + "}" if parts else ""


def _to_json(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotData
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {_BYTES: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _to_json(v) for k, v in value.items()}
    raise _NotData


def _decoded_fields(raw: object) -> dict[str, Any]:
    if not isinstance(raw, str) or not raw:
        return {}
    try:
        fields = json.loads(raw)
    except ValueError:
        return {}  # the message and type still arrive; the fields are a bonus
    if not isinstance(fields, dict):
        return {}
    decoded = {}
    for name, value in fields.items():
        try:
            decoded[name] = _from_json(value)
        except (binascii.Error, ValueError):
            continue
    return decoded


def _from_json(value: Any) -> Any:
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(_BYTES), str):
            return base64.b64decode(value[_BYTES], validate=True)
        return {k: _from_json(v) for k, v in value.items()}
    return value
