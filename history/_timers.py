"""Durable timers: rows with a fire time, claimed by deleting them.

A timer fires in the transaction that deletes its row (`DELETE ... RETURNING` over rows locked
with SKIP LOCKED), so two servers sweeping at once never fire one twice, and a timer cancelled
(deleted) first never fires at all. Nothing waits in memory: a restart loses nothing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._database import Cursor


class TimerKind(enum.StrEnum):
    WORKFLOW = "timer"
    """A `timer` command of the workflow."""
    EXECUTION_TIMEOUT = "execution_timeout"
    """The run's workflow execution timeout."""
    APPROVAL = "approval"
    """An approval's expiry (its `cmd` is the approval command)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Timer:
    run_id: str
    timer_id: str
    kind: TimerKind
    cmd: int | None
    fire_at: datetime


def workflow_timer_id(cmd: int) -> str:
    return f"cmd:{cmd}"


EXECUTION_TIMER_ID = "execution"


def insert_timer_txn(cur: Cursor, timer: Timer) -> None:
    cur.execute(
        "INSERT INTO amber_timers (run_id, timer_id, kind, cmd, fire_at)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (timer.run_id, timer.timer_id, timer.kind.value, timer.cmd, timer.fire_at),
    )


def delete_timer_txn(cur: Cursor, run_id: str, timer_id: str) -> bool:
    """Cancel a timer; False if it had already fired (or never existed)."""
    cur.execute("DELETE FROM amber_timers WHERE run_id = %s AND timer_id = %s", (run_id, timer_id))
    return cur.rowcount == 1


def claim_due_timers_txn(cur: Cursor, now: datetime, *, limit: int = 100) -> list[Timer]:
    """Take (delete) timers due at `now`; the caller records their firing in the same txn."""
    cur.execute(
        "DELETE FROM amber_timers WHERE (run_id, timer_id) IN ("
        "  SELECT run_id, timer_id FROM amber_timers WHERE fire_at <= %s"
        "  ORDER BY fire_at LIMIT %s FOR UPDATE SKIP LOCKED)"
        " RETURNING run_id::text, timer_id, kind, cmd, fire_at",
        (now, limit),
    )
    return [
        Timer(run_id=r[0], timer_id=r[1], kind=TimerKind(r[2]), cmd=r[3], fire_at=r[4])
        for r in cur.fetchall()
    ]


def defer_timer_txn(cur: Cursor, timer: Timer, until: datetime) -> None:
    """Put a claimed timer back, due at `until` (its firing failed; it must not be lost)."""
    cur.execute(
        "INSERT INTO amber_timers (run_id, timer_id, kind, cmd, fire_at)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (timer.run_id, timer.timer_id, timer.kind.value, timer.cmd, until),
    )


def run_timers_txn(cur: Cursor, run_id: str) -> list[Timer]:
    cur.execute(
        "SELECT run_id::text, timer_id, kind, cmd, fire_at FROM amber_timers"
        " WHERE run_id = %s ORDER BY fire_at",
        (run_id,),
    )
    return [
        Timer(run_id=r[0], timer_id=r[1], kind=TimerKind(r[2]), cmd=r[3], fire_at=r[4])
        for r in cur.fetchall()
    ]


def next_timer_txn(cur: Cursor) -> datetime | None:
    """When the next timer is due (for a sweeper that sleeps until then)."""
    cur.execute("SELECT min(fire_at) FROM amber_timers")
    row = cur.fetchone()
    return None if row is None else row[0]
