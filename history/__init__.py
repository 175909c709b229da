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

from ._audit import AuditEntry, audit_for_txn, record_audit_txn
from ._database import Cursor, Database, is_transient, savepoint
from ._deliveries import (
    Discarded,
    claim_signal_id_txn,
    inherit_signal_ids_txn,
    record_discarded_txn,
    run_discarded_txn,
)
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
from ._queries import (
    QueryAnswer,
    drop_read_tasks_txn,
    put_query_answer_txn,
    take_query_answer_txn,
    take_query_answers_txn,
)
from ._runs import (
    NewRun,
    Run,
    RunClosing,
    RunQuery,
    RunStatus,
    VersionUse,
    advance_commands_txn,
    block_upgrade_txn,
    claim_workflow_id_txn,
    close_run_txn,
    get_run_by_workflow_id_txn,
    get_run_txn,
    insert_run_txn,
    list_runs_txn,
    mark_cancel_requested_txn,
    mark_history_warned_txn,
    open_children_txn,
    repin_run_txn,
    repoint_workflow_id_txn,
    runs_of_type_txn,
    set_next_cmd_txn,
    version_use_txn,
)
from ._tasks import (
    QUERIES_CHANNEL,
    RUNS_CHANNEL,
    TASKS_CHANNEL,
    NewTask,
    Requeue,
    Task,
    TaskKind,
    TaskState,
    claim_task_txn,
    defer_task_txn,
    delete_run_tasks_txn,
    delete_task_txn,
    enqueue_task_txn,
    expired_leases_txn,
    extend_lease_txn,
    get_task_txn,
    lock_leased_task_txn,
    next_visible_txn,
    notify_txn,
    pending_activity_tasks_txn,
    request_activity_cancel_txn,
    requeue_task_txn,
    run_tasks_txn,
    timed_out_tasks_txn,
)
from ._timers import (
    EXECUTION_TIMER_ID,
    Timer,
    TimerKind,
    claim_due_timers_txn,
    defer_timer_txn,
    delete_run_timers_txn,
    delete_timer_txn,
    insert_timer_txn,
    next_timer_txn,
    run_timers_txn,
    workflow_timer_id,
)


def migrate(db: Database) -> list[int]:
    """Apply this package's pending migrations; return the versions applied."""
    return apply_migrations(db, "history", load_migrations(files(__package__) / "migrations"))


__all__ = [
    "CLOSING_EVENTS",
    "DATABASE_URL_ENV",
    "EXECUTION_TIMER_ID",
    "HOME_ENV",
    "QUERIES_CHANNEL",
    "RUNS_CHANNEL",
    "TASKS_CHANNEL",
    "AuditEntry",
    "Cursor",
    "Database",
    "Discarded",
    "Event",
    "EventType",
    "FailureRecord",
    "LeaseLost",
    "Migration",
    "NewEvent",
    "NewRun",
    "NewTask",
    "QueryAnswer",
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
    "Timer",
    "TimerKind",
    "VersionConflict",
    "VersionUse",
    "WorkflowIdInUse",
    "advance_commands_txn",
    "amber_home",
    "append_events_txn",
    "apply_migrations",
    "audit_for_txn",
    "block_upgrade_txn",
    "claim_due_timers_txn",
    "claim_signal_id_txn",
    "claim_task_txn",
    "claim_workflow_id_txn",
    "close_run_txn",
    "decode_payload",
    "defer_task_txn",
    "defer_timer_txn",
    "delete_run_tasks_txn",
    "delete_run_timers_txn",
    "delete_task_txn",
    "delete_timer_txn",
    "drop_read_tasks_txn",
    "encode_payload",
    "enqueue_task_txn",
    "expired_leases_txn",
    "extend_lease_txn",
    "get_run_by_workflow_id_txn",
    "get_run_txn",
    "get_task_txn",
    "inherit_signal_ids_txn",
    "insert_run_txn",
    "insert_timer_txn",
    "is_transient",
    "list_runs_txn",
    "load_migrations",
    "lock_leased_task_txn",
    "mark_cancel_requested_txn",
    "mark_history_warned_txn",
    "migrate",
    "next_timer_txn",
    "next_visible_txn",
    "notify_txn",
    "open_children_txn",
    "pending_activity_tasks_txn",
    "put_query_answer_txn",
    "read_events_txn",
    "record_audit_txn",
    "record_discarded_txn",
    "record_failure_txn",
    "repin_run_txn",
    "repoint_workflow_id_txn",
    "request_activity_cancel_txn",
    "requeue_task_txn",
    "resolve_database_url",
    "run_discarded_txn",
    "run_failures_txn",
    "run_tasks_txn",
    "run_timers_txn",
    "runs_of_type_txn",
    "savepoint",
    "set_next_cmd_txn",
    "start_embedded_postgres",
    "take_query_answer_txn",
    "take_query_answers_txn",
    "timed_out_tasks_txn",
    "version_use_txn",
    "workflow_timer_id",
]
