"""How the console shows stored things to a person: payloads decoded to JSON, times in UTC,
digests shortened with their labels. Pure functions; templates call them as filters."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from amber.abi import payload_json
from amber.history import Event

_MAX_SHOWN_CHARS: Final = 20_000


def as_json(value: Any, *, pretty: bool = False) -> str:
    """`value` (JSON-ready) as text, cut at a size a page can show."""
    text = json.dumps(value, indent=2 if pretty else None, ensure_ascii=False, default=str)
    if len(text) > _MAX_SHOWN_CHARS:
        return text[:_MAX_SHOWN_CHARS] + f"… ({len(text):,} characters)"
    return text


def payload_text(raw: bytes | None) -> str:
    """A user payload as JSON text ("" when there is none)."""
    return "" if raw is None else as_json(payload_json(raw))


def when(moment: datetime | None) -> str:
    """A time as `YYYY-MM-DD HH:MM:SS` in UTC ("" for none)."""
    if moment is None:
        return ""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def short(digest: str | None, labels: Mapping[str, Sequence[str]] | None = None) -> str:
    """A version digest as its first 12 hex digits, with its labels when known."""
    if not digest:
        return ""
    named = (labels or {}).get(digest, ())
    return f"{digest[:12]} ({', '.join(named)})" if named else digest[:12]


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineEntry:
    """One event of a run's history, decoded for the timeline."""

    seq: int
    time: str
    type: str
    digest: str
    details: str
    """The event's payload as JSON, user payloads decoded."""


def timeline(events: Sequence[Event]) -> list[TimelineEntry]:
    """A run's events as timeline entries, payloads decoded (never msgpack or base64)."""
    entries = []
    for event in events:
        body = event.readable()
        entries.append(
            TimelineEntry(
                seq=event.seq,
                time=when(event.created_at),
                type=event.type.value,
                digest=event.digest,
                details=as_json(body),
            )
        )
    return entries
