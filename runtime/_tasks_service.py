"""The worker-facing side of the engine: lease tasks, record their outcomes, reclaim leases.

Every method is one transaction (through `Database.run`) composed of `history` helpers, so an
outcome and its consequences — events appended, the next task enqueued, the finished task
deleted, the failure counted — commit together or not at all.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from abi import (
    NAME,
    ActivityOutcome,
    ActivityStatus,
    Command,
    ErrorInfo,
    InvalidInput,
    ScheduleActivity,
    WorkflowStatus,
    command_kind,
)
from history import (
    RUNS_CHANNEL,
    TASKS_CHANNEL,
    Cursor,
    Database,
    Event,
    EventType,
    FailureRecord,
    LeaseLost,
    NewEvent,
    NewTask,
    Requeue,
    Run,
    RunClosing,
    RunStatus,
    Task,
    TaskKind,
    VersionConflict,
    advance_commands_txn,
    append_events_txn,
    claim_task_txn,
    close_run_txn,
    delete_run_tasks_txn,
    delete_task_txn,
    enqueue_task_txn,
    expired_leases_txn,
    extend_lease_txn,
    get_run_txn,
    lock_leased_task_txn,
    next_visible_txn,
    notify_txn,
    read_events_txn,
    record_failure_txn,
    requeue_task_txn,
)

from ._clock import Clock
from ._errors import PayloadTooLarge
from ._faults import FailureReason
from ._notify import Notifier
from ._replay import MAX_NEW_COMMANDS
from ._settings import EngineSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedTask:
    """A leased task with what its worker needs to run it."""

    task: Task
    run: Run
    events: tuple[Event, ...] = ()
    """The run's full history (workflow tasks only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NewCommand:
    """A command a workflow issued beyond what history records, with its index."""

    cmd: int
    command: Command


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowCompletion:
    """A workflow activation's result, as a worker reports it."""

    expected_last_seq: int
    commands: tuple[NewCommand, ...]
    status: WorkflowStatus
    result: bytes | None = None
    error: ErrorInfo | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureReport:
    """A failed activation, as a worker reports it."""

    reason: str
    message: str
    trap_code: str | None = None
    fuel_used: int | None = None
    memory_bytes: int | None = None
    step: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """Eager dispatch: lease the worker's next task in the transaction that records its last."""

    queue: str
    worker: str


Wake = tuple[str, str]
"""(channel, key) to poke once the transaction has committed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedAttempt:
    """One failed attempt of a leased task, with how to treat it."""

    task: Task
    run: Run
    failure: FailureReport
    error: ErrorInfo | None = None
    """The activity's own error, when it returned one (it may forbid retries)."""
    worker: str | None = None
    immediate: bool = False
    """Requeue a workflow task without backoff (its worker was lost, the code did not fail)."""


def idempotency_key(run_id: str, cmd: int) -> str:
    """The same for every attempt of one activity of one run."""
    return f"{run_id}/{cmd}"


def _command_event(cmd: int, command: Command, digest: str, max_attempts: int) -> NewEvent:
    if isinstance(command, ScheduleActivity):
        payload = {
            "cmd": cmd,
            "name": command.name,
            "args": command.args,
            "max_attempts": max_attempts,
        }
        return NewEvent(type=EventType.ACTIVITY_SCHEDULED, payload=payload, digest=digest)
    payload = {"cmd": cmd, "kind": command_kind(command), "value": command.value}
    return NewEvent(type=EventType.MARKER_RECORDED, payload=payload, digest=digest)


class TaskService:
    """Lease, complete, fail and heartbeat tasks; reclaim expired leases."""

    def __init__(
        self, db: Database, clock: Clock, settings: EngineSettings, notifier: Notifier | None
    ) -> None:
        self._db = db
        self._clock = clock
        self._settings = settings
        self._notifier = notifier

    # -- leasing -----------------------------------------------------------------------------

    def claim(self, *, queue: str, worker: str) -> ClaimedTask | None:
        """Lease the next visible task of `queue`, or None."""

        return self._db.run(lambda cur: self._claim_txn(cur, Claim(queue=queue, worker=worker)))

    def _claim_txn(self, cur: Cursor, claim: Claim) -> ClaimedTask | None:
        now = self._clock.now()
        while True:
            task = claim_task_txn(
                cur, queue=claim.queue, worker=claim.worker, now=now, lease=self._settings.lease
            )
            if task is None:
                return None
            run = get_run_txn(cur, task.run_id)
            if run is None or run.status.closed:
                delete_task_txn(cur, task.task_id)  # leftover of a closed run
                continue
            if task.kind is TaskKind.ACTIVITY:
                return ClaimedTask(task=task, run=run)
            events = tuple(read_events_txn(cur, task.run_id))
            return ClaimedTask(task=task, run=run, events=events)

    def _record(
        self, body: Callable[[Cursor], list[Wake]], claim: Claim | None
    ) -> ClaimedTask | None:
        """Run an outcome's transaction, leasing the next task in it when asked to."""

        def txn(cur: Cursor) -> tuple[list[Wake], ClaimedTask | None]:
            wakes = body(cur)
            return wakes, None if claim is None else self._claim_txn(cur, claim)

        wakes, claimed = self._db.run(txn)
        self._poke(wakes)
        return claimed

    def next_visible(self, queue: str) -> datetime | None:
        """When the queue's next pending task becomes visible (None: nothing pending)."""
        return self._db.run(lambda cur: next_visible_txn(cur, queue))

    def heartbeat(self, *, task_id: int, fencing: int) -> datetime:
        """Extend a held lease; returns the new expiry. Raises `LeaseLost`."""
        until = self._clock.now() + self._settings.lease
        self._db.run(lambda cur: extend_lease_txn(cur, task_id, fencing, until))
        return until

    # -- outcomes ----------------------------------------------------------------------------

    def complete_workflow(
        self,
        *,
        task_id: int,
        fencing: int,
        done: WorkflowCompletion,
        claim_next: Claim | None = None,
    ) -> ClaimedTask | None:
        """Append a workflow activation's commands (and closing event) under its lease.

        Returns the worker's next task when `claim_next` asks for one. Raises `LeaseLost` for a
        stale worker and `VersionConflict` if history moved on since the activation read it (the
        task is then dropped: a newer pending task covers the run).
        """
        self._check_commands(done.commands, done.result)
        try:
            return self._record(
                lambda cur: self._complete_workflow_txn(cur, task_id, fencing, done), claim_next
            )
        except VersionConflict:
            self._db.run(lambda cur: self._drop_stale_txn(cur, task_id, fencing))
            raise

    def _check_commands(self, commands: Sequence[NewCommand], result: bytes | None) -> None:
        if len(commands) > MAX_NEW_COMMANDS:
            raise InvalidInput(f"{len(commands)} new commands; the cap is {MAX_NEW_COMMANDS}")
        if any(new.cmd != commands[0].cmd + i for i, new in enumerate(commands)):
            raise InvalidInput("new command indexes must be consecutive")
        for new in commands:
            if isinstance(new.command, ScheduleActivity) and not NAME.fullmatch(new.command.name):
                raise InvalidInput(f"{new.command.name[:140]!r} is not a valid activity name")
        limit = self._settings.max_payload_bytes
        for new in commands:
            if isinstance(new.command, ScheduleActivity) and len(new.command.args) > limit:
                raise PayloadTooLarge(
                    f"activity {new.command.name!r} arguments are {len(new.command.args)} bytes;"
                    f" the limit is {limit}"
                )
        if result is not None and len(result) > limit:
            raise PayloadTooLarge(f"workflow result is {len(result)} bytes; the limit is {limit}")

    def _complete_workflow_txn(
        self, cur: Cursor, task_id: int, fencing: int, done: WorkflowCompletion
    ) -> list[Wake]:
        now = self._clock.now()
        task = lock_leased_task_txn(cur, task_id, fencing)
        run = get_run_txn(cur, task.run_id, for_update=True)
        if run is None or run.status.closed:
            delete_task_txn(cur, task_id)
            return []
        max_attempts = self._settings.activity_retry.max_attempts
        events = [
            _command_event(c.cmd, c.command, task.digest, max_attempts) for c in done.commands
        ]
        closing = self._closing(done)
        if closing is not None:
            events.append(self._closing_event(closing, task.digest))
        append_events_txn(
            cur, run.run_id, events, expected_last_seq=done.expected_last_seq, now=now
        )
        if done.commands and not advance_commands_txn(
            cur, run.run_id, done.commands[0].cmd, len(done.commands)
        ):
            raise VersionConflict(run.run_id, done.expected_last_seq, None)
        for new in done.commands:
            if isinstance(new.command, ScheduleActivity):
                enqueue_task_txn(
                    cur,
                    NewTask(
                        run_id=run.run_id,
                        kind=TaskKind.ACTIVITY,
                        queue=run.queue,
                        name=new.command.name,
                        digest=task.digest,
                        visible_at=now,
                        max_attempts=max_attempts,
                        cmd=new.cmd,
                        args=new.command.args,
                    ),
                    now,
                )
        if closing is not None:
            close_run_txn(cur, run.run_id, closing, now)
            delete_run_tasks_txn(cur, run.run_id)
            notify_txn(cur, RUNS_CHANNEL, run.run_id)
            return [(RUNS_CHANNEL, run.run_id)]
        delete_task_txn(cur, task_id)
        if any(isinstance(c.command, ScheduleActivity) for c in done.commands):
            notify_txn(cur, TASKS_CHANNEL, run.queue)
            return [(TASKS_CHANNEL, run.queue)]
        return []

    def _drop_stale_txn(self, cur: Cursor, task_id: int, fencing: int) -> None:
        try:
            task = lock_leased_task_txn(cur, task_id, fencing)
        except LeaseLost:
            return
        delete_task_txn(cur, task.task_id)
        # Whoever moved the history on left a pending task; make sure of it regardless.
        run = get_run_txn(cur, task.run_id)
        if run is not None and not run.status.closed:
            self._enqueue_workflow_txn(cur, run, self._clock.now())

    @staticmethod
    def _closing(done: WorkflowCompletion) -> RunClosing | None:
        if done.status is WorkflowStatus.COMPLETED:
            return RunClosing(status=RunStatus.COMPLETED, result=done.result)
        if done.status is WorkflowStatus.FAILED:
            assert done.error is not None
            return RunClosing(
                status=RunStatus.FAILED,
                error_type=done.error.type,
                error_message=done.error.message,
            )
        return None

    @staticmethod
    def _closing_event(closing: RunClosing, digest: str) -> NewEvent:
        if closing.status is RunStatus.COMPLETED:
            return NewEvent(
                type=EventType.RUN_COMPLETED, payload={"result": closing.result}, digest=digest
            )
        payload = {"error_type": closing.error_type, "message": closing.error_message}
        return NewEvent(type=EventType.RUN_FAILED, payload=payload, digest=digest)

    def complete_activity(
        self,
        *,
        task_id: int,
        fencing: int,
        outcome: ActivityOutcome,
        claim_next: Claim | None = None,
    ) -> ClaimedTask | None:
        """Record an activity attempt's outcome: its result, a retry, or its final failure.

        Returns the worker's next task when `claim_next` asks for one. Raises `LeaseLost` for a
        stale worker: a late duplicate result is rejected here.
        """
        if outcome.result is not None and len(outcome.result) > self._settings.max_payload_bytes:
            raise PayloadTooLarge(
                f"activity result is {len(outcome.result)} bytes;"
                f" the limit is {self._settings.max_payload_bytes}"
            )

        def txn(cur: Cursor) -> list[Wake]:
            now = self._clock.now()
            task = lock_leased_task_txn(cur, task_id, fencing)
            run = get_run_txn(cur, task.run_id, for_update=True)
            if run is None or run.status.closed:
                delete_task_txn(cur, task_id)
                return []
            if outcome.status is ActivityStatus.COMPLETED:
                payload = {"cmd": task.cmd, "result": outcome.result, "attempt": task.attempt}
                event = NewEvent(
                    type=EventType.ACTIVITY_COMPLETED, payload=payload, digest=task.digest
                )
                return self._resolve_txn(cur, task, run, event, now)
            assert outcome.error is not None
            failure = FailureReport(
                reason=FailureReason.APPLICATION_ERROR,
                message=f"{outcome.error.type}: {outcome.error.message}",
            )
            return self._fail_txn(
                cur, FailedAttempt(task=task, run=run, failure=failure, error=outcome.error), now
            )

        return self._record(txn, claim_next)

    def fail(
        self,
        *,
        task_id: int,
        fencing: int,
        failure: FailureReport,
        worker: str,
        claim_next: Claim | None = None,
    ) -> ClaimedTask | None:
        """Record a failed activation and retry or resolve the task. Raises `LeaseLost`.

        Returns the worker's next task when `claim_next` asks for one.
        """

        def txn(cur: Cursor) -> list[Wake]:
            now = self._clock.now()
            task = lock_leased_task_txn(cur, task_id, fencing)
            run = get_run_txn(cur, task.run_id, for_update=True)
            if run is None or run.status.closed:
                delete_task_txn(cur, task_id)
                return []
            return self._fail_txn(
                cur, FailedAttempt(task=task, run=run, failure=failure, worker=worker), now
            )

        return self._record(txn, claim_next)

    def sweep_expired_leases(self) -> int:
        """Treat every task whose lease ran out as one failed attempt ("worker lost")."""

        def txn(cur: Cursor) -> tuple[int, list[Wake]]:
            now = self._clock.now()
            tasks = expired_leases_txn(cur, now)
            wakes: list[Wake] = []
            for task in tasks:
                run = get_run_txn(cur, task.run_id, for_update=True)
                if run is None or run.status.closed:
                    delete_task_txn(cur, task.task_id)
                    continue
                failure = FailureReport(
                    reason=FailureReason.WORKER_LOST,
                    message=f"lease held by {task.lease_owner} expired at {task.lease_expires_at}",
                )
                attempt = FailedAttempt(
                    task=task, run=run, failure=failure, worker=task.lease_owner, immediate=True
                )
                wakes += self._fail_txn(cur, attempt, now)
            return len(tasks), wakes

        count, wakes = self._db.run(txn)
        self._poke(wakes)
        return count

    # -- shared transaction steps --------------------------------------------------------------

    def _fail_txn(self, cur: Cursor, attempt: FailedAttempt, now: datetime) -> list[Wake]:
        """Count a failed attempt, then retry the task or resolve it with its final error."""
        task, run, failure, error = attempt.task, attempt.run, attempt.failure, attempt.error
        record_failure_txn(
            cur,
            FailureRecord(
                task_id=task.task_id,
                run_id=task.run_id,
                kind=task.kind.value,
                cmd=task.cmd if task.kind is TaskKind.ACTIVITY else failure.step,
                attempt=task.attempt,
                digest=task.digest,
                reason=failure.reason,
                trap_code=failure.trap_code,
                message=failure.message,
                fuel_used=failure.fuel_used,
                memory_bytes=failure.memory_bytes,
                worker=attempt.worker,
                created_at=now,
            ),
        )
        if task.kind is TaskKind.WORKFLOW:
            delay = self._settings.workflow_retry.delay(task.consecutive_failures + 1)
            visible = now if attempt.immediate else now + self._jitter(delay)
            requeue_task_txn(cur, task, Requeue(visible_at=visible, failure=failure.reason))
            return [(TASKS_CHANNEL, run.queue)]
        retryable = error is None or not error.non_retryable
        if retryable and (task.max_attempts == 0 or task.attempt < task.max_attempts):
            delay = self._settings.activity_retry.delay(task.attempt)
            requeue_task_txn(
                cur, task, Requeue(visible_at=now + self._jitter(delay), failure=failure.reason)
            )
            return [(TASKS_CHANNEL, run.queue)]
        final = error or ErrorInfo(type=f"amber.{failure.reason}", message=failure.message)
        payload = {
            "cmd": task.cmd,
            "error_type": final.type,
            "message": final.message,
            "attempt": task.attempt,
        }
        event = NewEvent(type=EventType.ACTIVITY_FAILED, payload=payload, digest=task.digest)
        return self._resolve_txn(cur, task, run, event, now)

    def _resolve_txn(
        self, cur: Cursor, task: Task, run: Run, event: NewEvent, now: datetime
    ) -> list[Wake]:
        """Record an activity's final result and wake its workflow."""
        append_events_txn(cur, run.run_id, [event], expected_last_seq=None, now=now)
        delete_task_txn(cur, task.task_id)
        return self._enqueue_workflow_txn(cur, run, now)

    def _enqueue_workflow_txn(self, cur: Cursor, run: Run, now: datetime) -> list[Wake]:
        enqueue_task_txn(
            cur,
            NewTask(
                run_id=run.run_id,
                kind=TaskKind.WORKFLOW,
                queue=run.queue,
                name=run.workflow_type,
                digest=run.digest,
                visible_at=now,
                max_attempts=0,
            ),
            now,
        )
        notify_txn(cur, TASKS_CHANNEL, run.queue)
        return [(TASKS_CHANNEL, run.queue)]

    @staticmethod
    def _jitter(delay: timedelta) -> timedelta:
        return delay * random.uniform(0.9, 1.1)

    def _poke(self, wakes: Sequence[tuple[str, str]]) -> None:
        if self._notifier is None:
            return
        for channel, key in wakes:
            if channel == TASKS_CHANNEL:
                self._notifier.poke_tasks(key)
            else:
                self._notifier.poke_run(key)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeasedTask:
    """A task as a worker receives it over the API."""

    task_id: int
    fencing: int
    kind: TaskKind
    run_id: str
    tenant: str
    digest: str
    name: str
    attempt: int
    lease_expires_at: datetime
    input: bytes = b""
    events: tuple[Event, ...] = ()
    cmd: int = 0
    args: bytes = b""
    idempotency_key: str = ""
