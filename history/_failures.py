"""A record of every failed activation, written in the same transaction as its consequence."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._database import Cursor


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureRecord:
    """One failed attempt of a task."""

    task_id: int
    run_id: str
    kind: str
    cmd: int | None
    attempt: int
    digest: str
    reason: str
    """Typed reason: trap, out_of_fuel, memory_limit, deadline, non_determinism, ..."""
    message: str
    trap_code: str | None = None
    fuel_used: int | None = None
    memory_bytes: int | None = None
    worker: str | None = None
    created_at: datetime
    fingerprint: str | None = None
    """What identifies this failure across attempts and runs (a crash's fingerprint)."""
    pool: str | None = None
    """The pool whose worker ran the attempt (main or surgical)."""
    trace_id: str | None = None
    host_calls: tuple[str, ...] = ()
    """The last host calls before the failure, oldest first."""
    repro: bytes | None = None
    """What replaying the activation offline needs (msgpack; see runtime's `Repro`)."""


_COLUMNS = (
    "task_id, run_id::text, kind, cmd, attempt, digest, reason, trap_code, message, fuel_used,"
    " memory_bytes, worker, created_at, fingerprint, pool, trace_id, host_calls, repro"
)


def record_failure_txn(cur: Cursor, failure: FailureRecord) -> None:
    cur.execute(
        f"INSERT INTO amber_task_failures ({_COLUMNS.replace('run_id::text', 'run_id')})"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            failure.task_id,
            failure.run_id,
            failure.kind,
            failure.cmd,
            failure.attempt,
            failure.digest,
            failure.reason,
            failure.trap_code,
            failure.message[:4096],
            failure.fuel_used,
            failure.memory_bytes,
            failure.worker,
            failure.created_at,
            failure.fingerprint,
            failure.pool,
            failure.trace_id or None,
            list(failure.host_calls) or None,
            failure.repro,
        ),
    )


def _failure(row: tuple[Any, ...]) -> FailureRecord:
    (task_id, run_id, kind, cmd, attempt, digest, reason, trap_code, message, fuel_used,
     memory_bytes, worker, created_at, fingerprint, pool, trace_id, host_calls,
     repro) = row  # fmt: skip
    return FailureRecord(
        task_id=task_id,
        run_id=run_id,
        kind=kind,
        cmd=cmd,
        attempt=attempt,
        digest=digest,
        reason=reason,
        trap_code=trap_code,
        message=message,
        fuel_used=fuel_used,
        memory_bytes=memory_bytes,
        worker=worker,
        created_at=created_at,
        fingerprint=fingerprint,
        pool=pool,
        trace_id=trace_id,
        host_calls=tuple(host_calls or ()),
        repro=None if repro is None else bytes(repro),
    )


def run_failures_txn(
    cur: Cursor, run_id: str, *, limit: int = 20, repros: bool = False
) -> list[FailureRecord]:
    """The most recent failures of a run, newest first.

    Repros (up to 4 MiB each) are loaded only with `repros`, and then only the newest of each
    task's fingerprint (an older one reproduces the same crash); the others come back as `b""`,
    meaning "recorded, not loaded".
    """
    repro = (
        "CASE WHEN repro IS NULL THEN NULL WHEN row_number() OVER (PARTITION BY task_id,"
        " fingerprint ORDER BY failure_id DESC) = 1 THEN repro ELSE ''::bytea END"
        if repros
        else "CASE WHEN repro IS NULL THEN NULL ELSE ''::bytea END"
    )
    columns = _COLUMNS.replace("repro", repro)
    cur.execute(
        f"SELECT {columns} FROM amber_task_failures WHERE run_id = %s"
        " ORDER BY failure_id DESC LIMIT %s",
        (run_id, limit),
    )
    return [_failure(row) for row in cur.fetchall()]


def last_crash_repro_txn(cur: Cursor, run_id: str, task_id: int) -> bytes | None:
    """The repro recorded with the task's newest failure that has one (None: none has): what
    its last crash ran under, which a later attempt must not run under tighter limits."""
    cur.execute(
        "SELECT repro FROM amber_task_failures WHERE run_id = %s AND task_id = %s"
        " AND repro IS NOT NULL ORDER BY failure_id DESC LIMIT 1",
        (run_id, task_id),
    )
    row = cur.fetchone()
    return None if row is None else bytes(row[0])
