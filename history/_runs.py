"""Run rows: identity, pinned module version, lifecycle status and the head of the history.

A workflow id names a chain of runs (continue-as-new and reset start new runs under the same
id); `amber_workflow_ids` points at the chain's first run and its current one.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._database import Cursor


class RunStatus(enum.StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TERMINATED = "terminated"
    TIMED_OUT = "timed_out"
    CONTINUED_AS_NEW = "continued_as_new"

    @property
    def closed(self) -> bool:
        return self is not RunStatus.RUNNING


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """A run as stored."""

    run_id: str
    tenant: str
    workflow_id: str
    workflow_type: str
    digest: str
    """The module version the run is pinned to."""
    queue: str
    status: RunStatus
    input: bytes
    result: bytes | None
    error_type: str | None
    error_message: str | None
    last_seq: int
    """Position of the last event in the run's history."""
    next_cmd: int
    """Index the workflow's next new command gets (the number of commands recorded)."""
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None
    parent_run_id: str | None = None
    parent_cmd: int | None = None
    parent_close_policy: str | None = None
    cancel_seq: int | None = None
    """History position of the cancellation request, if one was made."""
    cancel_reason: str | None = None
    history_bytes: int = 0
    history_warned: bool = False
    upgrade_blocked: str | None = None
    """A version an automatic upgrade could not replay this run on."""
    suspension: Suspension | None = None
    """Set while the run is suspended for an operator (a lifecycle state beside `status`)."""
    traceparent: str = ""
    """The W3C trace context of the call that started the run (or of its origin run)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Suspension:
    """Why and since when a run waits for an operator."""

    since: datetime
    reason: str
    fingerprint: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class NewRun:
    """A run about to be created (its history starts empty; the caller appends RunStarted)."""

    run_id: str
    tenant: str
    workflow_id: str
    workflow_type: str
    digest: str
    queue: str
    input: bytes
    created_at: datetime
    parent_run_id: str | None = None
    parent_cmd: int | None = None
    parent_close_policy: str | None = None
    traceparent: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQuery:
    """A page of runs, newest first."""

    tenant: str
    status: RunStatus | None = None
    workflow_type: str | None = None
    limit: int = 100
    before: str | None = None
    """Keyset cursor: the run id of the last run of the previous page (run ids are UUIDv7,
    ordered by creation time)."""


_COLUMNS = (
    "run_id::text, tenant, workflow_id, workflow_type, digest, queue, status, input, result,"
    " error_type, error_message, last_seq, next_cmd, created_at, updated_at, closed_at,"
    " parent_run_id::text, parent_cmd, parent_close_policy, cancel_seq, cancel_reason,"
    " history_bytes, history_warned, upgrade_blocked, suspended_at, suspended_reason,"
    " suspended_fingerprint, traceparent"
)


def _run(row: tuple[Any, ...]) -> Run:
    (run_id, tenant, workflow_id, workflow_type, digest, queue, status, input_, result,
     error_type, error_message, last_seq, next_cmd, created_at, updated_at, closed_at,
     parent_run_id, parent_cmd, parent_close_policy, cancel_seq, cancel_reason, history_bytes,
     history_warned, upgrade_blocked, suspended_at, suspended_reason,
     suspended_fingerprint, traceparent) = row  # fmt: skip
    return Run(
        run_id=run_id,
        tenant=tenant,
        workflow_id=workflow_id,
        workflow_type=workflow_type,
        digest=digest,
        queue=queue,
        status=RunStatus(status),
        input=bytes(input_),
        result=None if result is None else bytes(result),
        error_type=error_type,
        error_message=error_message,
        last_seq=last_seq,
        next_cmd=next_cmd,
        created_at=created_at,
        updated_at=updated_at,
        closed_at=closed_at,
        parent_run_id=parent_run_id,
        parent_cmd=parent_cmd,
        parent_close_policy=parent_close_policy,
        cancel_seq=cancel_seq,
        cancel_reason=cancel_reason,
        history_bytes=history_bytes,
        history_warned=history_warned,
        upgrade_blocked=upgrade_blocked,
        suspension=None
        if suspended_at is None
        else Suspension(
            since=suspended_at, reason=suspended_reason or "", fingerprint=suspended_fingerprint
        ),
        traceparent=traceparent or "",
    )


def insert_run_txn(cur: Cursor, run: NewRun) -> None:
    """Insert a run with an empty history (the caller claims or repoints its workflow id)."""
    cur.execute(
        "INSERT INTO amber_runs (run_id, tenant, workflow_id, workflow_type, digest, queue,"
        " status, input, last_seq, created_at, updated_at, parent_run_id, parent_cmd,"
        " parent_close_policy, traceparent)"
        " VALUES (%s, %s, %s, %s, %s, %s, 'running', %s, 0, %s, %s, %s, %s, %s, %s)",
        (
            run.run_id,
            run.tenant,
            run.workflow_id,
            run.workflow_type,
            run.digest,
            run.queue,
            run.input,
            run.created_at,
            run.created_at,
            run.parent_run_id,
            run.parent_cmd,
            run.parent_close_policy,
            run.traceparent,
        ),
    )


def claim_workflow_id_txn(cur: Cursor, tenant: str, workflow_id: str, run_id: str) -> bool:
    """Make `run_id` the first and current run of a new workflow id; False if it is taken."""
    cur.execute(
        "INSERT INTO amber_workflow_ids (tenant, workflow_id, first_run_id, run_id)"
        " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (tenant, workflow_id, run_id, run_id),
    )
    return cur.rowcount == 1


def repoint_workflow_id_txn(cur: Cursor, tenant: str, workflow_id: str, run_id: str) -> None:
    """Make `run_id` the current run of an existing chain (continue-as-new, reset)."""
    cur.execute(
        "UPDATE amber_workflow_ids SET run_id = %s WHERE tenant = %s AND workflow_id = %s",
        (run_id, tenant, workflow_id),
    )


def get_run_txn(cur: Cursor, run_id: str, *, for_update: bool = False) -> Run | None:
    lock = " FOR UPDATE" if for_update else ""
    cur.execute(f"SELECT {_COLUMNS} FROM amber_runs WHERE run_id = %s{lock}", (run_id,))
    row = cur.fetchone()
    return None if row is None else _run(row)


def try_lock_run_txn(cur: Cursor, run_id: str) -> tuple[bool, Run | None]:
    """Lock a run without waiting: `(False, run)`, `(False, None)` if it does not exist, or
    `(True, None)` if another transaction holds its lock. For sweeps that hold a task's lock
    already: waiting for the run there would invert the order closing a run takes."""
    cur.execute(
        f"SELECT {_COLUMNS} FROM amber_runs WHERE run_id = %s FOR UPDATE SKIP LOCKED", (run_id,)
    )
    row = cur.fetchone()
    if row is not None:
        return False, _run(row)
    cur.execute("SELECT 1 FROM amber_runs WHERE run_id = %s", (run_id,))
    return cur.fetchone() is not None, None


def get_run_by_workflow_id_txn(
    cur: Cursor, tenant: str, workflow_id: str, *, first: bool = False
) -> Run | None:
    """The current run of a workflow id (or, with `first`, the run that started the chain)."""
    column = "first_run_id" if first else "run_id"
    cur.execute(
        f"SELECT {column}::text FROM amber_workflow_ids WHERE tenant = %s AND workflow_id = %s",
        (tenant, workflow_id),
    )
    row = cur.fetchone()
    return None if row is None else get_run_txn(cur, row[0])


def list_runs_txn(cur: Cursor, query: RunQuery) -> list[Run]:
    clauses = ["tenant = %s"]
    params: list[object] = [query.tenant]
    if query.status is not None:
        clauses.append("status = %s")
        params.append(query.status.value)
    if query.workflow_type is not None:
        clauses.append("workflow_type = %s")
        params.append(query.workflow_type)
    if query.before is not None:
        clauses.append("run_id < %s::uuid")
        params.append(query.before)
    params.append(query.limit)
    cur.execute(
        f"SELECT {_COLUMNS} FROM amber_runs WHERE {' AND '.join(clauses)}"
        " ORDER BY run_id DESC LIMIT %s",
        params,
    )
    return [_run(row) for row in cur.fetchall()]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunClosing:
    """How a run ends."""

    status: RunStatus
    result: bytes | None = None
    error_type: str | None = None
    error_message: str | None = None


def close_run_txn(
    cur: Cursor, run_id: str, closing: RunClosing, now: datetime, *, notify: str
) -> None:
    """Record a run's closing, and in the same statement drop what it leaves behind: its
    workflow and activity tasks (late reports then get `LeaseLost`), its timers, its pending
    approvals (cancelled, their tokens revoked); then wake `notify`'s listeners with the run id
    when the transaction commits. One statement instead of six: every run closes once."""
    cur.execute(
        "WITH closed AS ("
        "  UPDATE amber_runs SET status = %(status)s, result = %(result)s,"
        "   error_type = %(error_type)s, error_message = %(error_message)s, closed_at = %(now)s,"
        "   updated_at = %(now)s, suspended_at = NULL, suspended_reason = NULL,"
        "   suspended_fingerprint = NULL WHERE run_id = %(run)s RETURNING run_id),"
        " tasks AS (DELETE FROM amber_tasks"
        "  WHERE run_id = %(run)s AND kind IN ('workflow', 'activity')),"
        " timers AS (DELETE FROM amber_timers WHERE run_id = %(run)s),"
        " approvals AS (UPDATE amber_approvals SET status = 'cancelled', decided_at = %(now)s"
        "  WHERE run_id = %(run)s AND status = 'pending' RETURNING approval_id),"
        " tokens AS (UPDATE amber_approval_tokens SET status = 'revoked', closed_at = %(now)s"
        "  WHERE approval_id IN (SELECT approval_id FROM approvals) AND status = 'pending')"
        " SELECT pg_notify(%(channel)s, %(payload)s) FROM closed",
        {
            "status": closing.status.value,
            "result": closing.result,
            "error_type": closing.error_type,
            "error_message": closing.error_message,
            "now": now,
            "run": run_id,
            "channel": notify,
            "payload": run_id,
        },
    )


def advance_commands_txn(cur: Cursor, run_id: str, first_cmd: int, count: int) -> bool:
    """Claim command indexes [first_cmd, first_cmd + count); False if they are not next."""
    cur.execute(
        "UPDATE amber_runs SET next_cmd = next_cmd + %s WHERE run_id = %s AND next_cmd = %s",
        (count, run_id, first_cmd),
    )
    return cur.rowcount == 1


def mark_cancel_requested_txn(cur: Cursor, run_id: str, seq: int, reason: str) -> None:
    cur.execute(
        "UPDATE amber_runs SET cancel_seq = %s, cancel_reason = %s WHERE run_id = %s",
        (seq, reason, run_id),
    )


def mark_history_warned_txn(cur: Cursor, run_id: str) -> None:
    cur.execute("UPDATE amber_runs SET history_warned = true WHERE run_id = %s", (run_id,))


def open_children_txn(cur: Cursor, parent_run_id: str) -> list[Run]:
    """Running child runs of a parent (to apply its parent-close policy)."""
    cur.execute(
        f"SELECT {_COLUMNS} FROM amber_runs WHERE parent_run_id = %s AND status = 'running'"
        " ORDER BY run_id FOR UPDATE",
        (parent_run_id,),
    )
    return [_run(row) for row in cur.fetchall()]


def set_next_cmd_txn(cur: Cursor, run_id: str, next_cmd: int) -> None:
    """Set the next command index (a reset copies a history with commands already issued)."""
    cur.execute("UPDATE amber_runs SET next_cmd = %s WHERE run_id = %s", (next_cmd, run_id))


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionUse:
    """How much a module version is still referenced by runs and tasks."""

    running: int
    """Open runs pinned to it (they replay on it)."""
    closed: int
    tasks: int
    """Task rows that will run on it (activity retries run on the version that scheduled them)."""


def version_use_txn(cur: Cursor, digest: str, workflow_type: str | None = None) -> VersionUse:
    """What uses the version; with `workflow_type`, only runs of that type and their tasks (a
    module may declare several workflow types)."""
    of_type = "" if workflow_type is None else " AND workflow_type = %(type)s"
    params = {"digest": digest, "type": workflow_type}
    cur.execute(
        "SELECT count(*) FILTER (WHERE status = 'running'),"
        " count(*) FILTER (WHERE status <> 'running') FROM amber_runs WHERE digest = %(digest)s"
        + of_type,
        params,
    )
    running, closed = cur.fetchone() or (0, 0)
    if workflow_type is None:
        cur.execute("SELECT count(*) FROM amber_tasks WHERE digest = %(digest)s", params)
    else:
        cur.execute(
            "SELECT count(*) FROM amber_tasks t JOIN amber_runs r ON r.run_id = t.run_id"
            " WHERE t.digest = %(digest)s AND r.workflow_type = %(type)s",
            params,
        )
    row = cur.fetchone()
    return VersionUse(running=running, closed=closed, tasks=row[0] if row else 0)


def runs_of_type_txn(cur: Cursor, workflow_type: str, *, running: bool, limit: int) -> list[Run]:
    """Open runs of a type (all, up to `limit`), or its most recently closed ones."""
    status = "status = 'running'" if running else "status <> 'running'"
    cur.execute(
        f"SELECT {_COLUMNS} FROM amber_runs WHERE workflow_type = %s AND {status}"
        " ORDER BY run_id DESC LIMIT %s",
        (workflow_type, limit),
    )
    return [_run(row) for row in cur.fetchall()]


def repin_run_txn(cur: Cursor, run_id: str, digest: str) -> None:
    """Move a run to another module version (its pending workflow task too; activity tasks
    keep the version that scheduled them)."""
    cur.execute("UPDATE amber_runs SET digest = %s WHERE run_id = %s", (digest, run_id))
    cur.execute(
        "UPDATE amber_tasks SET digest = %s WHERE run_id = %s AND kind = 'workflow'",
        (digest, run_id),
    )


def block_upgrade_txn(cur: Cursor, run_id: str, digest: str) -> None:
    """Remember that this run cannot replay on `digest` (an automatic upgrade failed)."""
    cur.execute("UPDATE amber_runs SET upgrade_blocked = %s WHERE run_id = %s", (digest, run_id))
