"""Injectable time. Nothing in the engine reads the wall clock except through a `Clock`."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


class SystemClock:
    """The real wall clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to (tests advance it instead of sleeping)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta) -> datetime:
        with self._lock:
            self._now += delta
            return self._now


def to_ms(moment: datetime) -> int:
    """Milliseconds since the Unix epoch."""
    return int(moment.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def to_ms_or_zero(moment: datetime | None) -> int:
    """`to_ms`, with 0 for "none" (protobuf has no null for integers)."""
    return 0 if moment is None else to_ms(moment)


def from_ms_or_none(ms: int) -> datetime | None:
    """`from_ms`, with 0 read back as "none"."""
    return from_ms(ms) if ms else None
