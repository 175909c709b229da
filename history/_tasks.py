"""The task queue: work items a worker leases, runs and reports under a fencing token.

A task row lives from scheduling until its outcome is recorded, then it is deleted in the same
transaction as the events that record the outcome — so a task is never lost between "done" and
"recorded". Each lease bumps `fencing`; only the holder of the current token can report.
At most one *pending* workflow task exists per run (a partial unique index): "this run needs an
activation" is a fact, not a count.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ._database import Cursor
from ._errors import LeaseLost


class TaskKind(enum.StrEnum):
    WORKFLOW = "workflow"
    ACTIVITY = "activity"


class TaskState(enum.StrEnum):
    PENDING = "pending"
    LEASED = "leased"


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """A task as stored."""

    task_id: int
    run_id: str
    kind: TaskKind
    queue: str
    cmd: int | None
    """For an activity: the index of the workflow command it serves."""
    name: str
    """Workflow type or activity name."""
    digest: str
    """The module version to run it on."""
    args: bytes | None
    state: TaskState
    visible_at: datetime
    lease_owner: str | None
    lease_expires_at: datetime | None
    fencing: int
    attempt: int
    max_attempts: int
    consecutive_failures: int
    last_failure: str | None
    scheduled_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTask:
    """A task about to be enqueued."""

    run_id: str
    kind: TaskKind
    queue: str
    name: str
    digest: str
    visible_at: datetime
    max_attempts: int
    cmd: int | None = None
    args: bytes | None = None


_COLUMNS = (
    "task_id, run_id::text, kind, queue, cmd, name, digest, args, state, visible_at, lease_owner,"
    " lease_expires_at, fencing, attempt, max_attempts, consecutive_failures, last_failure,"
    " scheduled_at"
)


def _task(row: tuple[Any, ...]) -> Task:
    (
        task_id,
        run_id,
        kind,
        queue,
        cmd,
        name,
        digest,
        args,
        state,
        visible_at,
        lease_owner,
        lease_expires_at,
        fencing,
        attempt,
        max_attempts,
        consecutive_failures,
        last_failure,
        scheduled_at,
    ) = row
    return Task(
        task_id=task_id,
        run_id=run_id,
        kind=TaskKind(kind),
        queue=queue,
        cmd=cmd,
        name=name,
        digest=digest,
        args=None if args is None else bytes(args),
        state=TaskState(state),
        visible_at=visible_at,
        lease_owner=lease_owner,
        lease_expires_at=lease_expires_at,
        fencing=fencing,
        attempt=attempt,
        max_attempts=max_attempts,
        consecutive_failures=consecutive_failures,
        last_failure=last_failure,
        scheduled_at=scheduled_at,
    )


def enqueue_task_txn(cur: Cursor, task: NewTask, now: datetime) -> bool:
    """Insert a pending task. For a workflow task that is already pending, does nothing.

    Returns whether a row was inserted.
    """
    conflict = (
        " ON CONFLICT (run_id) WHERE kind = 'workflow' AND state = 'pending' DO NOTHING"
        if task.kind is TaskKind.WORKFLOW
        else ""
    )
    cur.execute(
        "INSERT INTO amber_tasks (run_id, kind, queue, cmd, name, digest, args, state, visible_at,"
        " max_attempts, scheduled_at) VALUES (%s, %s, %s, %s, %s, %s, %s, 'pending', %s, %s, %s)"
        + conflict,
        (
            task.run_id,
            task.kind.value,
            task.queue,
            task.cmd,
            task.name,
            task.digest,
            task.args,
            task.visible_at,
            task.max_attempts,
            now,
        ),
    )
    return cur.rowcount == 1


def claim_task_txn(
    cur: Cursor, *, queue: str, worker: str, now: datetime, lease: timedelta
) -> Task | None:
    """Lease the oldest visible pending task of `queue`, bumping its fencing token."""
    cur.execute(
        "UPDATE amber_tasks SET state = 'leased', lease_owner = %s, lease_expires_at = %s,"
        " fencing = fencing + 1"
        " WHERE task_id = (SELECT task_id FROM amber_tasks"
        "   WHERE queue = %s AND state = 'pending' AND visible_at <= %s"
        "   ORDER BY visible_at LIMIT 1 FOR UPDATE SKIP LOCKED)"
        f" RETURNING {_COLUMNS}",
        (worker, now + lease, queue, now),
    )
    row = cur.fetchone()
    return None if row is None else _task(row)


def lock_leased_task_txn(cur: Cursor, task_id: int, fencing: int) -> Task:
    """Lock a task the caller claims to hold. Raises `LeaseLost` unless it holds the lease."""
    cur.execute(
        f"SELECT {_COLUMNS} FROM amber_tasks"
        " WHERE task_id = %s AND fencing = %s AND state = 'leased' FOR UPDATE",
        (task_id, fencing),
    )
    row = cur.fetchone()
    if row is None:
        raise LeaseLost(task_id, fencing)
    return _task(row)


def extend_lease_txn(cur: Cursor, task_id: int, fencing: int, until: datetime) -> None:
    """Push a held lease's expiry to `until`. Raises `LeaseLost` unless it holds the lease."""
    cur.execute(
        "UPDATE amber_tasks SET lease_expires_at = %s"
        " WHERE task_id = %s AND fencing = %s AND state = 'leased'",
        (until, task_id, fencing),
    )
    if cur.rowcount != 1:
        raise LeaseLost(task_id, fencing)


def delete_task_txn(cur: Cursor, task_id: int) -> None:
    cur.execute("DELETE FROM amber_tasks WHERE task_id = %s", (task_id,))


def delete_run_tasks_txn(cur: Cursor, run_id: str) -> int:
    """Drop every task of a run (it closed); late reports then get `LeaseLost`."""
    cur.execute("DELETE FROM amber_tasks WHERE run_id = %s", (run_id,))
    return cur.rowcount


@dataclass(frozen=True, slots=True, kw_only=True)
class Requeue:
    """Put a leased task back in its queue after a failed attempt."""

    visible_at: datetime
    failure: str
    """Short description of why, kept on the row for operators."""
    next_attempt: bool = True
    """Whether the failure consumed an attempt (an activity retry) or not."""


def requeue_task_txn(cur: Cursor, task: Task, requeue: Requeue) -> None:
    """Return a leased task to pending. A workflow task merges into a pending one if present.

    The caller must hold the run row's lock (as every engine transaction does), or a concurrent
    enqueue of the run's workflow task could collide with the one made pending here.
    """
    bump = 1 if requeue.next_attempt else 0
    if task.kind is TaskKind.WORKFLOW:
        cur.execute(
            "UPDATE amber_tasks SET attempt = GREATEST(attempt, %s),"
            " consecutive_failures = %s, last_failure = %s, visible_at = GREATEST(visible_at, %s)"
            " WHERE run_id = %s AND kind = 'workflow' AND state = 'pending'",
            (
                task.attempt + bump,
                task.consecutive_failures + 1,
                requeue.failure,
                requeue.visible_at,
                task.run_id,
            ),
        )
        if cur.rowcount == 1:
            delete_task_txn(cur, task.task_id)
            return
    cur.execute(
        "UPDATE amber_tasks SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL,"
        " attempt = attempt + %s, consecutive_failures = consecutive_failures + 1,"
        " last_failure = %s, visible_at = %s WHERE task_id = %s",
        (bump, requeue.failure, requeue.visible_at, task.task_id),
    )


def expired_leases_txn(cur: Cursor, now: datetime, *, limit: int = 100) -> list[Task]:
    """Lock leased tasks whose lease ran out (their worker is presumed lost)."""
    cur.execute(
        f"SELECT {_COLUMNS} FROM amber_tasks WHERE state = 'leased' AND lease_expires_at < %s"
        " ORDER BY lease_expires_at LIMIT %s FOR UPDATE SKIP LOCKED",
        (now, limit),
    )
    return [_task(row) for row in cur.fetchall()]


def run_tasks_txn(cur: Cursor, run_id: str) -> list[Task]:
    """The tasks of one run (for describing it)."""
    cur.execute(f"SELECT {_COLUMNS} FROM amber_tasks WHERE run_id = %s ORDER BY task_id", (run_id,))
    return [_task(row) for row in cur.fetchall()]


def next_visible_txn(cur: Cursor, queue: str) -> datetime | None:
    """When the next pending task of `queue` becomes visible (for sleeping pollers)."""
    cur.execute(
        "SELECT min(visible_at) FROM amber_tasks WHERE queue = %s AND state = 'pending'", (queue,)
    )
    row = cur.fetchone()
    return None if row is None else row[0]


TASKS_CHANNEL = "amber_tasks"
RUNS_CHANNEL = "amber_runs"


def notify_txn(cur: Cursor, channel: str, payload: str) -> None:
    """Wake listeners when the transaction commits (PostgreSQL LISTEN/NOTIFY)."""
    cur.execute("SELECT pg_notify(%s, %s)", (channel, payload))
