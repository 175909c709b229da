"""Rate limits on refusals, per source address: failed authentications and refused approval
decisions.

A source (an IP address, without its port) that was refused `limit` times within `window_s` is
*blocked* until the oldest of its last `limit` refusals leaves the window: its calls are refused
before any check (and counted, so a source that keeps trying stays blocked), so a guess made
while blocked cannot succeed and costs no database work. The refusal it
gets is the same kind it was getting (unauthenticated, or an invalid approval link), saying why.
Crossing the limit is logged once per block (`WARNING amber.throttle`), with the source and
what was refused. Loopback is limited like any address: an attacker on the same host is the
first one to stop. Memory is bounded (`MAX_SOURCES`, oldest first out).

Rejected: a delay per refusal (holds a server thread per attempt: the flood would exhaust the
pool instead); limits per credential (an unknown token names no one).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

_log = logging.getLogger("amber.throttle")

MAX_SOURCES = 10_000
THROTTLE_LIMIT = 100
"""Refusals a minute before a source is blocked. Tokens carry 192+ random bits, so the limit is
not what stops guessing; it stops floods (thousands a second) from costing database work and
makes them visible, while staying above what people and retrying clients produce."""


class Throttle:
    """Counts refusals per source and says which sources are blocked. Thread-safe."""

    def __init__(
        self,
        what: str,
        *,
        limit: int = THROTTLE_LIMIT,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`what`: the refusals counted, for the log ("failed authentications")."""
        self.what = what
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._refusals: OrderedDict[str, deque[float]] = OrderedDict()
        self._logged: dict[str, float] = {}
        self._lock = threading.Lock()

    def blocked(self, source: str) -> float | None:
        """Seconds until `source` may try again, or None when it is not blocked."""
        now = self._clock()
        with self._lock:
            times = self._recent(source, now)
            if times is None or len(times) < self.limit:
                return None
            return max(times[0] + self.window_s - now, 0.001)

    def refused(self, source: str) -> None:
        """Count one refusal of `source` (logs when it crosses the limit)."""
        now = self._clock()
        with self._lock:
            times = self._recent(source, now)
            if times is None:
                times = self._refusals[source] = deque(maxlen=self.limit)
                while len(self._refusals) > MAX_SOURCES:
                    old, _ = self._refusals.popitem(last=False)
                    self._logged.pop(old, None)
            times.append(now)
            self._refusals.move_to_end(source)
            if len(times) >= self.limit and self._logged.get(source, -1.0) < times[0]:
                self._logged[source] = now
                _log.warning(
                    "rate limit: %d %s from %s within %.0f s; its attempts are refused unchecked"
                    " for up to %.0f s",
                    len(times),
                    self.what,
                    source,
                    self.window_s,
                    self.window_s,
                )

    def _recent(self, source: str, now: float) -> deque[float] | None:
        times = self._refusals.get(source)
        if times is not None:
            while times and times[0] <= now - self.window_s:
                times.popleft()
        return times


def source_of(peer: str) -> str:
    """The address part of a gRPC peer (`ipv4:10.0.0.5:41234` → `ipv4:10.0.0.5`,
    `ipv6:[::1]:5000` → `ipv6:[::1]`); other forms unchanged."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6") and ":" in rest:
        return f"{kind}:{rest.rsplit(':', 1)[0]}"
    return peer
