"""Run rows: identity, pinned module version, lifecycle status and the head of the history."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._database import Cursor


class RunStatus(enum.StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"

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
    " error_type, error_message, last_seq, next_cmd, created_at, updated_at, closed_at"
)


def _run(row: tuple[Any, ...]) -> Run:
    (
        run_id,
        tenant,
        workflow_id,
        workflow_type,
        digest,
        queue,
        status,
        input_,
        result,
        error_type,
        error_message,
        last_seq,
        next_cmd,
        created_at,
        updated_at,
        closed_at,
    ) = row
    return Run(
        run_id=str(run_id),
        tenant=str(tenant),
        workflow_id=str(workflow_id),
        workflow_type=str(workflow_type),
        digest=str(digest),
        queue=str(queue),
        status=RunStatus(status),
        input=bytes(input_),
        result=None if result is None else bytes(result),
        error_type=None if error_type is None else str(error_type),
        error_message=None if error_message is None else str(error_message),
        last_seq=int(last_seq),
        next_cmd=int(next_cmd),
        created_at=created_at,
        updated_at=updated_at,
        closed_at=closed_at,
    )


def insert_run_txn(cur: Cursor, run: NewRun) -> None:
    """Insert a run with an empty history. Raises psycopg's UniqueViolation on a taken id."""
    cur.execute(
        "INSERT INTO amber_runs (run_id, tenant, workflow_id, workflow_type, digest, queue,"
        " status, input, last_seq, created_at, updated_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, 'running', %s, 0, %s, %s)",
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
        ),
    )


def get_run_txn(cur: Cursor, run_id: str, *, for_update: bool = False) -> Run | None:
    lock = " FOR UPDATE" if for_update else ""
    cur.execute(f"SELECT {_COLUMNS} FROM amber_runs WHERE run_id = %s{lock}", (run_id,))
    row = cur.fetchone()
    return None if row is None else _run(row)


def get_run_by_workflow_id_txn(cur: Cursor, tenant: str, workflow_id: str) -> Run | None:
    cur.execute(
        f"SELECT {_COLUMNS} FROM amber_runs WHERE tenant = %s AND workflow_id = %s",
        (tenant, workflow_id),
    )
    row = cur.fetchone()
    return None if row is None else _run(row)


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


def close_run_txn(cur: Cursor, run_id: str, closing: RunClosing, now: datetime) -> None:
    cur.execute(
        "UPDATE amber_runs SET status = %s, result = %s, error_type = %s, error_message = %s,"
        " closed_at = %s, updated_at = %s WHERE run_id = %s",
        (
            closing.status.value,
            closing.result,
            closing.error_type,
            closing.error_message,
            now,
            now,
            run_id,
        ),
    )


def advance_commands_txn(cur: Cursor, run_id: str, first_cmd: int, count: int) -> bool:
    """Claim command indexes [first_cmd, first_cmd + count); False if they are not next."""
    cur.execute(
        "UPDATE amber_runs SET next_cmd = next_cmd + %s WHERE run_id = %s AND next_cmd = %s",
        (count, run_id, first_cmd),
    )
    return cur.rowcount == 1
