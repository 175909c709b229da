"""The event types of a run's history and their msgpack payloads.

An event is immutable once appended. Its payload is a msgpack map whose keys are fixed per type
(listed on `EventType`); user payloads inside it (input, args, results) stay opaque msgpack bytes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgpack


class EventType(enum.StrEnum):
    """What happened. Payload keys in brackets."""

    RUN_STARTED = "RunStarted"
    """The run exists [workflow_type, workflow_id, tenant, input]."""
    ACTIVITY_SCHEDULED = "ActivityScheduled"
    """The workflow issued command `cmd` to run an activity [cmd, name, args, max_attempts]."""
    ACTIVITY_COMPLETED = "ActivityCompleted"
    """An attempt of command `cmd` succeeded [cmd, result, attempt]."""
    ACTIVITY_FAILED = "ActivityFailed"
    """Command `cmd` failed for good [cmd, error_type, message, attempt]."""
    MARKER_RECORDED = "MarkerRecorded"
    """A value the workflow observed was recorded as command `cmd` [cmd, kind, value]."""
    RUN_COMPLETED = "RunCompleted"
    """The workflow returned a result [result]."""
    RUN_FAILED = "RunFailed"
    """The workflow returned an application error [error_type, message]."""


CLOSING_EVENTS = frozenset({EventType.RUN_COMPLETED, EventType.RUN_FAILED})


def encode_payload(payload: dict[str, Any]) -> bytes:
    packed: bytes = msgpack.packb(payload, use_bin_type=True)
    return packed


def decode_payload(raw: bytes) -> dict[str, Any]:
    doc = msgpack.unpackb(raw, raw=False)
    if not isinstance(doc, dict):
        raise ValueError("event payload is not a map")
    return doc


@dataclass(frozen=True, slots=True, kw_only=True)
class NewEvent:
    """An event about to be appended."""

    type: EventType
    payload: dict[str, Any]
    digest: str
    """The module version that produced it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """An event as stored."""

    run_id: str
    seq: int
    """1-based position in the run's history."""
    type: EventType
    payload: dict[str, Any]
    digest: str
    created_at: datetime
