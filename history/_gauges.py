"""What the store holds right now, for metrics: queue depths and ages, poisoned and suspended
work. Read at scrape time rather than counted in memory, so that every server sharing the
database reports the same figures, and a restarted one reports them at once.

Each query reads only live work (`amber_tasks` holds pending and leased tasks, not finished
ones) or a partial index (suspended runs), so a scrape costs the same with a billion closed runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._database import Cursor


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueGauge:
    """One queue's tasks in one pool (`main`, `surgical`, `held`)."""

    queue: str
    pool: str
    ready: int
    """Pending and visible now: waiting for a worker."""
    delayed: int
    """Pending, visible later (retry backoff, a poisoned task's next surgical attempt)."""
    leased: int
    """Held by a worker."""
    oldest_ready_s: float
    """Seconds the longest-waiting ready task has been visible (0 when none)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreGauges:
    queues: tuple[QueueGauge, ...]
    tasks_poisoned: int
    runs_suspended: int


def store_gauges_txn(cur: Cursor, now: datetime) -> StoreGauges:
    """Queue depths and ages per queue and pool, poisoned tasks and suspended runs."""
    cur.execute(
        "SELECT queue, pool,"
        " count(*) FILTER (WHERE state = 'pending' AND visible_at <= %(now)s),"
        " count(*) FILTER (WHERE state = 'pending' AND visible_at > %(now)s),"
        " count(*) FILTER (WHERE state = 'leased'),"
        " min(visible_at) FILTER (WHERE state = 'pending' AND visible_at <= %(now)s)"
        " FROM amber_tasks GROUP BY queue, pool ORDER BY queue, pool",
        {"now": now},
    )
    queues = tuple(
        QueueGauge(
            queue=queue,
            pool=pool,
            ready=ready,
            delayed=delayed,
            leased=leased,
            oldest_ready_s=0.0 if oldest is None else max(0.0, (now - oldest).total_seconds()),
        )
        for queue, pool, ready, delayed, leased, oldest in cur.fetchall()
    )
    cur.execute("SELECT count(*) FROM amber_tasks WHERE poisoned_at IS NOT NULL")
    poisoned = cur.fetchone()
    cur.execute("SELECT count(*) FROM amber_runs WHERE suspended_at IS NOT NULL")
    suspended = cur.fetchone()
    return StoreGauges(
        queues=queues,
        tasks_poisoned=int(poisoned[0]) if poisoned else 0,
        runs_suspended=int(suspended[0]) if suspended else 0,
    )
