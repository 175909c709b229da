"""Counts activations per module version in memory and adds them to the database every sweep.

A completion costs no extra statement: the counters are flushed by the server's sweeper (one
upsert per (version, kind, outcome) that changed). Counts lost in a crash are the last seconds'
worth; they are health figures, not billing.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable

from amber.history import Database
from amber.versions import OK, HealthCount, add_health_txn


class HealthCounter:
    """Thread-safe per-version activation counters, flushed in one transaction."""

    def __init__(self, on_record: Callable[[str, str, int], None] | None = None) -> None:
        """`on_record(kind, reason, fuel)` is told of each activation as it is counted."""
        self._on_record = on_record
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])

    def record(self, digest: str, kind: str, reason: str = OK, fuel: int = 0) -> None:
        """One activation of `kind` on `digest` ended with `reason` (`ok` when it succeeded)."""
        with self._lock:
            cell = self._counts[(digest, kind, reason)]
            cell[0] += 1
            cell[1] += max(fuel, 0)
        if self._on_record is not None:
            self._on_record(kind, reason, fuel)

    def flush(self, db: Database) -> int:
        """Add what was counted since the last flush; returns how many rows changed."""
        with self._lock:
            counts, self._counts = self._counts, defaultdict(lambda: [0, 0])
        if not counts:
            return 0
        rows = [
            HealthCount(digest=d, kind=k, reason=r, count=c, fuel=f)
            for (d, k, r), (c, f) in sorted(counts.items())
        ]
        try:
            db.run(lambda cur: add_health_txn(cur, rows))
        except BaseException:
            with self._lock:  # keep them for the next flush
                for row in rows:
                    cell = self._counts[(row.digest, row.kind, row.reason)]
                    cell[0] += row.count
                    cell[1] += row.fuel
            raise
        return len(rows)
