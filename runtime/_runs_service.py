"""The application-facing side of the engine: start runs and look at them."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from psycopg import errors as pgerrors

from abi import InvalidInput
from history import (
    TASKS_CHANNEL,
    Cursor,
    Database,
    Event,
    EventType,
    FailureRecord,
    NewEvent,
    NewRun,
    NewTask,
    Run,
    RunNotFound,
    RunQuery,
    Task,
    TaskKind,
    WorkflowIdInUse,
    append_events_txn,
    enqueue_task_txn,
    get_run_by_workflow_id_txn,
    get_run_txn,
    insert_run_txn,
    list_runs_txn,
    notify_txn,
    read_events_txn,
    run_failures_txn,
    run_tasks_txn,
)
from versions import resolve_version_txn

from ._clock import Clock
from ._errors import PayloadTooLarge
from ._ids import new_run_id
from ._notify import Notifier
from ._settings import EngineSettings

DEFAULT_TENANT = "default"
MAX_ID_LENGTH = 256
_RUN_RECHECK_S = 5.0
"""A waiter re-reads its run this often even without a notification."""
MAX_HISTORY_PAGE = 10_000
"""Events returned by one history read; page with `after_seq`."""
"""A waiter re-reads its run this often even without a notification."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StartRequest:
    """Start a run of `workflow_type`; idempotent on (tenant, workflow_id)."""

    workflow_type: str
    input: bytes
    tenant: str = DEFAULT_TENANT
    workflow_id: str = ""
    """Caller-chosen id; a second start with the same id returns the first run."""
    version: str = ""
    """Digest or prefix to pin; default: the type's current version."""
    queue: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class StartResult:
    """The run a start created, or the one its workflow id already named."""

    run: Run
    already_started: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RunDescription:
    """What an operator needs to see why a run is where it is."""

    run: Run
    tasks: tuple[Task, ...]
    recent_failures: tuple[FailureRecord, ...]


def _check_name(label: str, value: str) -> None:
    if not value or len(value) > MAX_ID_LENGTH or not value.isprintable():
        raise InvalidInput(f"{label} must be 1–{MAX_ID_LENGTH} printable characters")


class RunService:
    """Start, describe, list and wait for runs. Public methods own their transactions."""

    def __init__(
        self, db: Database, clock: Clock, settings: EngineSettings, notifier: Notifier | None
    ) -> None:
        self._db = db
        self._clock = clock
        self._settings = settings
        self._notifier = notifier

    def start(self, request: StartRequest) -> StartResult:
        """Create the run, its first event and its first workflow task, in one transaction."""
        _check_name("workflow type", request.workflow_type)
        _check_name("tenant", request.tenant)
        if request.workflow_id:
            _check_name("workflow id", request.workflow_id)
        if len(request.input) > self._settings.max_payload_bytes:
            raise PayloadTooLarge(
                f"input is {len(request.input)} bytes; the limit is"
                f" {self._settings.max_payload_bytes}"
            )
        run_id = new_run_id()
        queue = request.queue or self._settings.default_queue
        workflow_id = request.workflow_id or run_id

        def txn(cur: Cursor) -> StartResult:
            existing = get_run_by_workflow_id_txn(cur, request.tenant, workflow_id)
            if existing is not None:
                return StartResult(run=self._same_start(existing, request), already_started=True)
            digest = resolve_version_txn(cur, request.workflow_type, request.version or None)
            now = self._clock.now()
            insert_run_txn(
                cur,
                NewRun(
                    run_id=run_id,
                    tenant=request.tenant,
                    workflow_id=workflow_id,
                    workflow_type=request.workflow_type,
                    digest=digest,
                    queue=queue,
                    input=request.input,
                    created_at=now,
                ),
            )
            started = NewEvent(
                type=EventType.RUN_STARTED,
                payload={
                    "workflow_type": request.workflow_type,
                    "workflow_id": workflow_id,
                    "tenant": request.tenant,
                    "input": request.input,
                },
                digest=digest,
            )
            append_events_txn(cur, run_id, [started], expected_last_seq=0, now=now)
            enqueue_task_txn(
                cur,
                NewTask(
                    run_id=run_id,
                    kind=TaskKind.WORKFLOW,
                    queue=queue,
                    name=request.workflow_type,
                    digest=digest,
                    visible_at=now,
                    max_attempts=0,
                ),
                now,
            )
            notify_txn(cur, TASKS_CHANNEL, queue)
            run = get_run_txn(cur, run_id)
            assert run is not None
            return StartResult(run=run, already_started=False)

        for _ in range(3):
            try:
                result = self._db.run(txn)
                break
            except pgerrors.UniqueViolation:
                continue  # a concurrent start took the workflow id; the retry returns its run
        else:
            raise WorkflowIdInUse(f"workflow id {workflow_id!r} is being started concurrently")
        if not result.already_started and self._notifier is not None:
            self._notifier.poke_tasks(queue)
        return result

    @staticmethod
    def _same_start(existing: Run, request: StartRequest) -> Run:
        if existing.workflow_type != request.workflow_type or existing.input != request.input:
            raise WorkflowIdInUse(
                f"workflow id {existing.workflow_id!r} is already used by run {existing.run_id}"
                f" ({existing.workflow_type}) with a different type or input"
            )
        return existing

    def get(self, ref: str, *, tenant: str = DEFAULT_TENANT) -> Run:
        """The run named by `ref` — a run id or a workflow id — in `tenant`, or `RunNotFound`."""
        return self._db.run(lambda cur: _find_txn(cur, ref, tenant))

    def describe(self, ref: str, *, tenant: str = DEFAULT_TENANT) -> RunDescription:
        """The run with its open tasks and most recent failures (why is it stuck?)."""

        def txn(cur: Cursor) -> RunDescription:
            run = _find_txn(cur, ref, tenant)
            return RunDescription(
                run=run,
                tasks=tuple(run_tasks_txn(cur, run.run_id)),
                recent_failures=tuple(run_failures_txn(cur, run.run_id)),
            )

        return self._db.run(txn)

    def history(self, ref: str, *, after_seq: int = 0, tenant: str = DEFAULT_TENANT) -> list[Event]:
        """The run's events after `after_seq`, in order (at most `MAX_HISTORY_PAGE`)."""

        def txn(cur: Cursor) -> list[Event]:
            run = _find_txn(cur, ref, tenant)
            return read_events_txn(cur, run.run_id, after_seq=after_seq, limit=MAX_HISTORY_PAGE)

        return self._db.run(txn)

    def list(self, query: RunQuery) -> list[Run]:
        if not 1 <= query.limit <= 1000:
            raise InvalidInput("limit must be between 1 and 1000")
        return self._db.run(lambda cur: list_runs_txn(cur, query))

    def wait_closed(self, ref: str, *, timeout_s: float, tenant: str = DEFAULT_TENANT) -> Run:
        """The run once it has closed, or as it is when `timeout_s` passes."""
        deadline = time.monotonic() + timeout_s
        run = self.get(ref, tenant=tenant)
        if self._notifier is None:
            while not run.status.closed and (remaining := deadline - time.monotonic()) > 0:
                time.sleep(min(remaining, 0.05))
                run = self.get(run.run_id, tenant=tenant)
            return run
        with self._notifier.watch_run(run.run_id) as watch:
            while True:
                seen = watch.generation
                run = self.get(run.run_id, tenant=tenant)
                remaining = deadline - time.monotonic()
                if run.status.closed or remaining <= 0:
                    return run
                watch.wait(seen, min(remaining, _RUN_RECHECK_S))


def _find_txn(cur: Cursor, ref: str, tenant: str) -> Run:
    """A run by run id or, failing that, by workflow id, within one tenant."""
    run: Run | None = None
    try:
        run_id = str(uuid.UUID(ref))
    except ValueError:
        run_id = ""
    if run_id:
        run = get_run_txn(cur, run_id)
    if run is None and ref and len(ref) <= MAX_ID_LENGTH:
        run = get_run_by_workflow_id_txn(cur, tenant, ref)
    if run is None or run.tenant != tenant:
        raise RunNotFound(ref)
    return run
