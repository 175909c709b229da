"""The event log, runs, task queue and failure records, on PostgreSQL.

Design: a run is an append-only sequence of events, unique on `(run_id, seq)`; the run row holds
the head position, and every append names the position it expects (`VersionConflict` otherwise),
so a writer that computed from a stale view cannot interleave. Tasks are rows leased with a
fencing token and deleted in the same transaction that records their outcome. All SQL of these
tables lives here, as composable `*_txn(cur, ...)` helpers; callers own the transaction through
`Database.run`, which retries serialization failures and lost connections only.

Rejected: an ORM (hides the exact statements the hot path depends on); advisory locks for
migrations or leases (absent on CockroachDB, our scale-out path); a separate "done" queue
(a task moving between two queues can be lost in between).
"""

from importlib.resources import files

from ._database import Cursor, Database
from ._embedded import (
    DATABASE_URL_ENV,
    HOME_ENV,
    amber_home,
    resolve_database_url,
    start_embedded_postgres,
)
from ._errors import LeaseLost, RunNotFound, StoreUnavailable, VersionConflict, WorkflowIdInUse
from ._events import (
    CLOSING_EVENTS,
    Event,
    EventType,
    NewEvent,
    decode_payload,
    encode_payload,
)
from ._failures import FailureRecord, record_failure_txn, run_failures_txn
from ._log import append_events_txn, read_events_txn
from ._migrations import Migration, apply_migrations, load_migrations
from ._runs import (
    NewRun,
    Run,
    RunClosing,
    RunQuery,
    RunStatus,
    advance_commands_txn,
    close_run_txn,
    get_run_by_workflow_id_txn,
    get_run_txn,
    insert_run_txn,
    list_runs_txn,
)
from ._tasks import (
    RUNS_CHANNEL,
    TASKS_CHANNEL,
    NewTask,
    Requeue,
    Task,
    TaskKind,
    TaskState,
    claim_task_txn,
    delete_run_tasks_txn,
    delete_task_txn,
    enqueue_task_txn,
    expired_leases_txn,
    extend_lease_txn,
    lock_leased_task_txn,
    next_visible_txn,
    notify_txn,
    requeue_task_txn,
    run_tasks_txn,
)


def migrate(db: Database) -> list[int]:
    """Apply this package's pending migrations; return the versions applied."""
    return apply_migrations(db, "history", load_migrations(files(__package__) / "migrations"))


__all__ = [
    "CLOSING_EVENTS",
    "DATABASE_URL_ENV",
    "HOME_ENV",
    "RUNS_CHANNEL",
    "TASKS_CHANNEL",
    "Cursor",
    "Database",
    "Event",
    "EventType",
    "FailureRecord",
    "LeaseLost",
    "Migration",
    "NewEvent",
    "NewRun",
    "NewTask",
    "Requeue",
    "Run",
    "RunClosing",
    "RunNotFound",
    "RunQuery",
    "RunStatus",
    "StoreUnavailable",
    "Task",
    "TaskKind",
    "TaskState",
    "VersionConflict",
    "WorkflowIdInUse",
    "advance_commands_txn",
    "amber_home",
    "append_events_txn",
    "apply_migrations",
    "claim_task_txn",
    "close_run_txn",
    "decode_payload",
    "delete_run_tasks_txn",
    "delete_task_txn",
    "encode_payload",
    "enqueue_task_txn",
    "expired_leases_txn",
    "extend_lease_txn",
    "get_run_by_workflow_id_txn",
    "get_run_txn",
    "insert_run_txn",
    "list_runs_txn",
    "load_migrations",
    "lock_leased_task_txn",
    "migrate",
    "next_visible_txn",
    "notify_txn",
    "read_events_txn",
    "record_failure_txn",
    "requeue_task_txn",
    "resolve_database_url",
    "run_failures_txn",
    "run_tasks_txn",
    "start_embedded_postgres",
]
