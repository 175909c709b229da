"""HTTP from activities: the request map the host's `http_request` import takes and the
response envelope it returns (abi/README.md, "HTTP"), as `amber_http.h` writes and reads them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import _msgpack
from ._errors import HttpError

__all__ = ["BODY_MAX", "HttpResponse", "decode_response", "encode_request"]

BODY_MAX = 4 << 20
"""Largest request or response body (bytes)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpResponse:
    """A response, whatever its status (404 and 503 are responses too)."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status <= 299

    def header(self, name: str) -> str | None:
        """The value of header `name` (compared case-insensitively), or None."""
        wanted = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == wanted), None)

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


def encode_request(
    method: str,
    url: str,
    headers: Mapping[str, str] | None,
    body: bytes | str | None,
    timeout_ms: int | None,
) -> bytes:
    """The request map: method, url, then headers, body and timeout_ms when set (in that order,
    as `amber__http_encode` writes it)."""
    if not isinstance(method, str) or not method:
        raise ValueError(f"method must be a non-empty str, not {method!r}")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"url must start with http:// or https://, not {url!r}")
    doc: dict[str, object] = {"method": method, "url": url}
    if headers:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
            raise TypeError("headers must map str to str")
        doc["headers"] = dict(headers)
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body or b"")
    if len(data) > BODY_MAX:
        raise ValueError(f"the request body is {len(data)} bytes; the limit is {BODY_MAX}")
    if data:
        doc["body"] = data
    if timeout_ms is not None:
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms <= 0:
            raise ValueError(f"timeout_ms must be a positive int, not {timeout_ms!r}")
        doc["timeout_ms"] = timeout_ms
    return _msgpack.encode(doc)


def decode_response(envelope: bytes) -> HttpResponse:
    """The response in `envelope`; raises `HttpError` for `{"error": [type, message]}` and
    ValueError when the host sent something malformed."""
    doc = _msgpack.decode(envelope)
    if not isinstance(doc, dict) or ("status" in doc) == ("error" in doc):
        raise ValueError("HTTP response envelope: expected exactly one of 'status' and 'error'")
    if "error" in doc:
        error = doc["error"]
        if (
            not isinstance(error, list)
            or len(error) < 2
            or not isinstance(error[0], str)
            or not isinstance(error[1], str)
        ):
            raise ValueError("HTTP response envelope: 'error' must be [type, message]")
        raise HttpError(error[1], type=error[0])
    status, headers, body = doc["status"], doc.get("headers", {}), doc.get("body", b"")
    if isinstance(status, bool) or not isinstance(status, int):
        raise ValueError("HTTP response envelope: 'status' must be an int")
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise ValueError("HTTP response envelope: 'headers' must map str to str")
    if not isinstance(body, bytes):
        raise ValueError("HTTP response envelope: 'body' must be bin")
    return HttpResponse(status=status, headers=headers, body=body)
