"""Events as appended and as stored.

An event is immutable once appended. A stored event keeps its payload as the bytes the store
holds (`raw`) and decodes them on first use of `payload`: the server hands histories to workers
without decoding them, and the worker decodes each payload once.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, TypeVar

from amber.abi import jsonable, payload_json

from ._errors import MalformedPayload
from ._event_types import EventType
from ._payloads import Payload, decode_payload, encode_payload

USER_PAYLOAD_KEYS: Final = frozenset({"input", "args", "result", "payload"})
"""Payload fields that hold a user's msgpack bytes (workflow input, activity arguments, results,
signal payloads)."""

P = TypeVar("P", bound=Payload)


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event about to be appended."""

    payload: Payload
    digest: str
    """The module version that produced it."""

    @property
    def type(self) -> EventType:
        return self.payload.TYPE


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """An event as stored."""

    run_id: str
    seq: int
    """1-based position in the run's history."""
    type: EventType
    raw: bytes
    """The payload as stored: msgpack of `type`'s payload class."""
    digest: str
    created_at: datetime
    _decoded: Payload | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(
        cls, *, run_id: str, seq: int, payload: Payload, digest: str, created_at: datetime
    ) -> Event:
        """An event built from its payload (for tests, benchmarks and bundles)."""
        event = cls(
            run_id=run_id,
            seq=seq,
            type=payload.TYPE,
            raw=encode_payload(payload),
            digest=digest,
            created_at=created_at,
        )
        object.__setattr__(event, "_decoded", payload)
        return event

    @property
    def payload(self) -> Payload:
        """The payload, decoded on first use (`MalformedPayload` if it does not fit)."""
        decoded = self._decoded
        if decoded is None:
            decoded = decode_payload(self.type, self.raw)
            object.__setattr__(self, "_decoded", decoded)
        return decoded

    def readable(self) -> dict[str, Any]:
        """The payload as JSON-ready data for people and JSON output, the user payloads it
        carries (`USER_PAYLOAD_KEYS`) decoded from msgpack."""
        return {
            key: payload_json(value) if key in USER_PAYLOAD_KEYS else jsonable(value)
            for key, value in self.payload.to_doc().items()
        }

    def payload_as(self, cls: builtins.type[P]) -> P:
        """The payload, known to be of class `cls` (as the event's type implies)."""
        payload = self.payload
        if not isinstance(payload, cls):
            raise MalformedPayload(f"event {self.seq} is {self.type.value}, not {cls.__name__}")
        return payload
