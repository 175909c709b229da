"""Poison pills in the store: a task's crash counter and pool, and runs suspended for an operator.

Every change is a compare-and-set on the row it changes, made in the transaction that records
the failure (or the operator's command) that causes it. Nothing is moved between tables: a
poisoned task stays in `amber_tasks`, only its `pool` changes, so nothing can be lost between
two queues.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ._runs import _COLUMNS as _RUN_COLUMNS
from ._runs import Run, Suspension, _run
from ._tasks import Crash

if TYPE_CHECKING:
    from ._database import Cursor


def count_crash_txn(cur: Cursor, task_id: int, *, step: int | None, fingerprint: str) -> Crash:
    """Count a crash of a (locked) task: one more if it matches the task's last crash's step
    and fingerprint, else the first of a new series."""
    cur.execute(
        "SELECT crash_step, crash_fingerprint, crash_count FROM amber_tasks WHERE task_id = %s",
        (task_id,),
    )
    row = cur.fetchone()
    same = row is not None and row[0] == step and row[1] == fingerprint
    return Crash(step=step, fingerprint=fingerprint, count=(row[2] + 1) if same and row else 1)


def surgical_failures_txn(cur: Cursor, task_id: int, since: datetime) -> int:
    """How many times a poisoned task has failed in the surgical pool since it was poisoned."""
    cur.execute(
        "SELECT count(*) FROM amber_task_failures"
        " WHERE task_id = %s AND pool = 'surgical' AND created_at >= %s",
        (task_id, since),
    )
    row = cur.fetchone()
    return int(row[0]) if row else 0


def fingerprint_poisoned_txn(cur: Cursor, fingerprint: str, *, other_than_run: str) -> bool:
    """Whether this crash fingerprint has already poisoned a task of another run (one still
    poisoned, or its run suspended for it). A fingerprint names the module digest too."""
    cur.execute(
        "SELECT EXISTS (SELECT 1 FROM amber_tasks WHERE crash_fingerprint = %(f)s"
        "   AND poisoned_at IS NOT NULL AND run_id <> %(r)s::uuid)"
        " OR EXISTS (SELECT 1 FROM amber_runs WHERE suspended_fingerprint = %(f)s"
        "   AND suspended_at IS NOT NULL AND run_id <> %(r)s::uuid)",
        {"f": fingerprint, "r": other_than_run},
    )
    row = cur.fetchone()
    return bool(row and row[0])


def recent_crashes_txn(cur: Cursor, fingerprint: str, *, since: datetime, enough: int) -> int:
    """How many crashes with this fingerprint were recorded since `since`, in any run and
    either pool, counting no further than `enough` (the newest rows through the fingerprint's
    index, so a fingerprint with millions of failures costs the same)."""
    cur.execute(
        "SELECT count(*) FROM (SELECT created_at FROM amber_task_failures"
        " WHERE fingerprint = %s ORDER BY failure_id DESC LIMIT %s) AS newest"
        " WHERE created_at >= %s",
        (fingerprint, enough, since),
    )
    row = cur.fetchone()
    return int(row[0]) if row else 0


def suspend_run_txn(cur: Cursor, run_id: str, suspension: Suspension) -> bool:
    """Suspend an open run and hold its tasks; False if it was not running or already
    suspended (compare-and-set)."""
    cur.execute(
        "UPDATE amber_runs SET suspended_at = %s, suspended_reason = %s,"
        " suspended_fingerprint = %s WHERE run_id = %s AND status = 'running'"
        " AND suspended_at IS NULL",
        (suspension.since, suspension.reason[:4096], suspension.fingerprint, run_id),
    )
    if cur.rowcount != 1:
        return False
    cur.execute(
        "UPDATE amber_tasks SET pool = 'held' WHERE run_id = %s"
        " AND kind IN ('workflow', 'activity') AND state = 'pending'",
        (run_id,),
    )
    return True


def release_run_txn(cur: Cursor, run_id: str, now: datetime) -> bool:
    """End a run's suspension and its tasks' poisoning: every held or poisoned task returns to
    the main pool, visible now, with its crash counter cleared. False if it was not suspended
    and had no poisoned task (compare-and-set)."""
    cur.execute(
        "UPDATE amber_runs SET suspended_at = NULL, suspended_reason = NULL,"
        " suspended_fingerprint = NULL WHERE run_id = %s AND suspended_at IS NOT NULL",
        (run_id,),
    )
    released = cur.rowcount == 1
    cur.execute(
        "UPDATE amber_tasks SET pool = 'main', crash_step = NULL, crash_fingerprint = NULL,"
        " crash_count = 0, poisoned_at = NULL, poison_reason = NULL, visible_at = %s,"
        " consecutive_failures = 0"
        " WHERE run_id = %s AND pool <> 'main' AND state = 'pending'",
        (now, run_id),
    )
    return released or cur.rowcount > 0


def repoint_task_txn(cur: Cursor, task_id: int, digest: str) -> None:
    """Run a task on another module version (an operator resumed its run on a fixed one)."""
    cur.execute("UPDATE amber_tasks SET digest = %s WHERE task_id = %s", (digest, task_id))


@dataclass(frozen=True, slots=True, kw_only=True)
class Troubled:
    """A run an operator should look at: suspended, or with a poisoned task."""

    run: Run
    task_id: int | None
    task_kind: str | None
    step: int | None
    pool: str | None
    reason: str
    fingerprint: str | None
    crashes: int
    since: datetime
    """When it was suspended, or else when its task was poisoned."""


def troubled_runs_txn(
    cur: Cursor, *, tenant: str | None, fingerprint: str | None = None, limit: int = 100
) -> list[Troubled]:
    """A tenant's (None: every tenant's) suspended runs and runs with a poisoned task (newest
    trouble first), optionally only those whose trouble has one fingerprint."""
    columns = ", ".join(f"r.{c.strip()}" for c in _RUN_COLUMNS.split(","))
    where = "(r.suspended_at IS NOT NULL OR t.poisoned_at IS NOT NULL) AND r.status = 'running'"
    params: list[Any] = []
    if tenant is not None:
        where += " AND r.tenant = %s"
        params.append(tenant)
    if fingerprint:
        where += " AND COALESCE(r.suspended_fingerprint, t.crash_fingerprint) = %s"
        params.append(fingerprint)
    cur.execute(
        f"SELECT {columns}, t.task_id, t.kind, t.cmd, t.pool, t.poison_reason,"
        " t.crash_fingerprint, t.crash_count, t.poisoned_at"
        " FROM amber_runs r LEFT JOIN amber_tasks t"
        "   ON t.run_id = r.run_id AND t.poisoned_at IS NOT NULL"
        f" WHERE {where}"
        " ORDER BY COALESCE(r.suspended_at, t.poisoned_at) DESC, r.run_id LIMIT %s",
        (*params, limit),
    )
    out = []
    for row in cur.fetchall():
        run = _run(row[:-8])
        task_id, kind, cmd, pool, reason, task_fp, crashes, poisoned_at = row[-8:]
        suspension = run.suspension
        out.append(
            Troubled(
                run=run,
                task_id=task_id,
                task_kind=kind,
                step=cmd,
                pool=pool,
                reason=suspension.reason if suspension else (reason or ""),
                fingerprint=(suspension.fingerprint if suspension else None) or task_fp,
                crashes=crashes or 0,
                since=suspension.since if suspension else poisoned_at,
            )
        )
    return out
