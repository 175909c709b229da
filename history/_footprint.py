"""What the store holds right now, in counts and bytes: how an operator (or `amber bench`) sees
the cost of waiting runs and whether the queue has drained.

Sizes are `pg_total_relation_size` of every `amber_*` table in the current schema (heap, TOAST
and indexes, dead rows included until vacuum reuses them): what the disk holds, not a sum of row
widths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._database import Cursor


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreFootprint:
    """Counts and sizes of the engine's tables at one moment."""

    runs: int
    running_runs: int
    tasks_pending: int
    tasks_leased: int
    timers: int
    events: int
    activities_completed: int
    """ActivityCompleted events in all histories."""
    table_bytes: int
    """Every `amber_*` table with its indexes and TOAST."""


_SQL = """
SELECT (SELECT count(*) FROM amber_runs),
       (SELECT count(*) FROM amber_runs WHERE status = 'running'),
       (SELECT count(*) FROM amber_tasks WHERE state = 'pending'),
       (SELECT count(*) FROM amber_tasks WHERE state = 'leased'),
       (SELECT count(*) FROM amber_timers),
       (SELECT count(*) FROM amber_events),
       (SELECT count(*) FROM amber_events WHERE type = 'ActivityCompleted'),
       (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind IN ('r', 'p') AND c.relname LIKE 'amber\\_%'
           AND n.nspname = current_schema())
"""


def store_footprint_txn(cur: Cursor) -> StoreFootprint:
    """Read the store's counts and sizes (full counts: for benchmarks and diagnostics, not for a
    hot path)."""
    cur.execute(_SQL)
    row = cur.fetchone()
    assert row is not None
    runs, running, pending, leased, timers, events, completed, size = row
    return StoreFootprint(
        runs=runs,
        running_runs=running,
        tasks_pending=pending,
        tasks_leased=leased,
        timers=timers,
        events=events,
        activities_completed=completed,
        table_bytes=size,
    )
