"""What a failed attempt leads to: a retry, a timeout, a final failure, poisoning or suspension.

Every consequence is written in the transaction that records the failure: the failure record
(with its fingerprint), the task's crash counter and pool, the events the workflow sees, and a
suspended run's `RunSuspended` event. `FailureReport` is what a worker says; `FailedAttempt` is
the server's view of it, with the task row as stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from amber.abi import ErrorInfo, parse_activity_options, unpack
from amber.history import (
    TASKS_CHANNEL,
    ActivityCancelled,
    ActivityFailed,
    ActivityTimedOut,
    Cursor,
    FailureRecord,
    NewEvent,
    Payload,
    Requeue,
    Run,
    RunSuspended,
    Suspension,
    Task,
    TaskKind,
    TaskState,
    append_events_txn,
    count_crash_txn,
    delete_task_txn,
    fingerprint_poisoned_txn,
    recent_crashes_txn,
    record_failure_txn,
    requeue_task_txn,
    surgical_failures_txn,
    suspend_run_txn,
)
from amber.runtime.model import Clock, EngineSettings, FailureReason, FailureReport, RetryPolicy

from ._lifecycle import Lifecycle, Wake
from ._poison import GUEST_FAULTS, fingerprint, is_crash, judge


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedAttempt:
    """One failed attempt of a leased task, with how to treat it."""

    task: Task
    run: Run
    failure: FailureReport
    error: ErrorInfo | None = None
    """The activity's own error, when it returned one (it may forbid retries)."""
    worker: str | None = None
    timeout: str | None = None
    """The attempt timed out this way (start_to_close, heartbeat)."""


class Attempts:
    """Decides and records the consequences of failed attempts, inside a caller's transaction."""

    def __init__(self, clock: Clock, settings: EngineSettings, life: Lifecycle) -> None:
        self._clock = clock
        self._settings = settings
        self._life = life

    def fail_txn(self, cur: Cursor, attempt: FailedAttempt) -> list[Wake]:
        """Count a failed attempt, then retry the task, poison it, suspend its run, or resolve
        it with its final error."""
        task, run, failure = attempt.task, attempt.run, attempt.failure
        step = task.cmd if task.kind is TaskKind.ACTIVITY else failure.step
        crash = is_crash(failure.reason) and attempt.timeout is None and attempt.error is None
        mark = fingerprint(task, step, failure.reason, failure.trap_code) if crash else None
        record_failure_txn(cur, self._record(task, failure, attempt.worker, mark))
        if crash and mark is not None:
            return self._crash_txn(cur, attempt, step, mark)
        if task.kind is TaskKind.WORKFLOW:  # not a crash, yet a failure: retry with backoff
            delay = self._settings.workflow_retry.delay(task.consecutive_failures + 1)
            requeue = _keeping_poison(task, self._clock.now() + delay, failure.reason)
            requeue_task_txn(cur, task, requeue)
            return [(TASKS_CHANNEL, run.queue)]
        return self._activity_failed_txn(cur, attempt)

    def _crash_txn(
        self, cur: Cursor, attempt: FailedAttempt, step: int | None, mark: str
    ) -> list[Wake]:
        task, run, failure = attempt.task, attempt.run, attempt.failure
        now = self._clock.now()
        if task.kind is TaskKind.ACTIVITY and run.cancel_seq is not None:
            return self._cancelled_on_failure_txn(cur, attempt)
        crash = count_crash_txn(cur, task.task_id, step=step, fingerprint=mark)
        surgical = 0
        if task.poisoned_at is not None:
            surgical = surgical_failures_txn(cur, task.task_id, task.poisoned_at)
        known = None
        if task.poisoned_at is None and failure.reason in GUEST_FAULTS:
            known = self._known_crash_txn(cur, mark, run.run_id, now)
        verdict = judge(
            task, crash, failure.reason, now, self._settings.poison, surgical, known=known
        )
        requeue = Requeue(
            visible_at=verdict.visible_at,
            failure=failure.reason,
            crashed=True,  # counted apart: a crash spends no retry attempt
            pool=verdict.pool,
            crash=verdict.crash,
            poisoned_at=verdict.poisoned_at,
            poison_reason=verdict.poison_reason,
        )
        requeue_task_txn(cur, task, requeue)
        if verdict.suspend:
            self._suspend_txn(cur, run, task, failure, mark)
        return [(TASKS_CHANNEL, run.queue)]

    def _known_crash_txn(self, cur: Cursor, mark: str, run_id: str, now: datetime) -> str | None:
        """Why a guest fault's fingerprint is a known crash, or None: it poisoned another run
        that is still poisoned or suspended, or it crashed often enough lately in any runs."""
        if fingerprint_poisoned_txn(cur, mark, other_than_run=run_id):
            return "already poisoned another run"
        policy = self._settings.poison
        enough = policy.crashes_to_poison
        since = now - policy.remember_for
        if recent_crashes_txn(cur, mark, since=since, enough=enough) >= enough:
            return f"crashed {enough} times in the last {_span(policy.remember_for)}"
        return None

    def _suspend_txn(
        self, cur: Cursor, run: Run, task: Task, failure: FailureReport, mark: str
    ) -> None:
        now = self._clock.now()
        since = task.poisoned_at or now
        reason = (
            f"{task.kind.value} task still failing ({failure.reason}) {now - since} after it was"
            f" poisoned: {task.poison_reason or ''}"
        )
        if suspend_run_txn(cur, run.run_id, Suspension(since=now, reason=reason, fingerprint=mark)):
            suspended = RunSuspended(
                reason=reason,
                fingerprint=mark,
                task_kind=task.kind.value,
                step=task.cmd if task.kind is TaskKind.ACTIVITY else None,
            )
            event = NewEvent(suspended, run.digest)
            append_events_txn(cur, run.run_id, [event], expected_last_seq=None, now=now)

    def _activity_failed_txn(self, cur: Cursor, attempt: FailedAttempt) -> list[Wake]:
        """An activity's own error or timeout: its retry policy decides."""
        task, run, failure, error = attempt.task, attempt.run, attempt.failure, attempt.error
        if run.cancel_seq is not None:
            return self._cancelled_on_failure_txn(cur, attempt)
        policy = self._retry_policy(task)
        retryable = error is None or not (error.non_retryable or error.type in policy.non_retryable)
        spent = task.attempt - task.crashed_attempts  # attempts that did not crash
        if retryable and (task.max_attempts == 0 or spent < task.max_attempts):
            # No jitter: the delays are exactly the policy's (operators reason about them).
            visible = self._clock.now() + policy.delay(spent)
            if task.close_by is None or visible < task.close_by:
                requeue_task_txn(cur, task, _keeping_poison(task, visible, failure.reason))
                return [(TASKS_CHANNEL, run.queue)]
        delete_task_txn(cur, task.task_id)
        ended: Payload
        if attempt.timeout is not None:
            ended = ActivityTimedOut(
                cmd=task.activity_cmd, timeout=attempt.timeout, attempt=task.attempt
            )
        else:
            final = error or ErrorInfo(type=f"amber.{failure.reason}", message=failure.message)
            ended = ActivityFailed(
                cmd=task.activity_cmd,
                error_type=final.type,
                message=final.message,
                attempt=task.attempt,
            )
        return self._life.deliver_txn(cur, run, NewEvent(ended, task.digest))

    def _cancelled_on_failure_txn(self, cur: Cursor, attempt: FailedAttempt) -> list[Wake]:
        """An activity that fails once its run asked to cancel is not retried: it ends
        cancelled, with the failure in the message."""
        task, failure = attempt.task, attempt.failure
        cause = attempt.error or ErrorInfo(type=f"amber.{failure.reason}", message=failure.message)
        delete_task_txn(cur, task.task_id)
        message = (
            f"cancelled: attempt {task.attempt} failed after cancellation was"
            f" requested ({cause.type}: {cause.message})"
        )
        event = NewEvent(ActivityCancelled(cmd=task.activity_cmd, message=message), task.digest)
        return self._life.deliver_txn(cur, attempt.run, event)

    # -- timeouts ------------------------------------------------------------------------------

    def timeout_txn(self, cur: Cursor, task: Task, run: Run, now: datetime) -> list[Wake]:
        """Enforce the timeout that passed: schedule-to-close and schedule-to-start end the
        activity; start-to-close and heartbeat timeouts fail the attempt."""
        if task.close_by is not None and task.close_by <= now:
            return self._time_out_txn(cur, task, run, "schedule_to_close")
        if task.state is TaskState.PENDING:
            return self._time_out_txn(cur, task, run, "schedule_to_start")
        kind = (
            "start_to_close"
            if task.attempt_deadline is not None and task.attempt_deadline <= now
            else "heartbeat"
        )
        failure = FailureReport(
            reason=f"timeout_{kind}",
            message=f"attempt {task.attempt} passed its {kind.replace('_', '-')} timeout",
        )
        return self.fail_txn(cur, FailedAttempt(task=task, run=run, failure=failure, timeout=kind))

    def _time_out_txn(self, cur: Cursor, task: Task, run: Run, kind: str) -> list[Wake]:
        """End an activity for good with a timeout result."""
        failure = FailureReport(
            reason=f"timeout_{kind}", message=f"{kind.replace('_', '-')} timeout passed"
        )
        record_failure_txn(cur, self._record(task, failure, None, None))
        timed_out = ActivityTimedOut(cmd=task.activity_cmd, timeout=kind, attempt=task.attempt)
        event = NewEvent(timed_out, task.digest)
        delete_task_txn(cur, task.task_id)
        return self._life.deliver_txn(cur, run, event)

    # -- shared steps --------------------------------------------------------------------------

    def _record(
        self, task: Task, failure: FailureReport, worker: str | None, mark: str | None
    ) -> FailureRecord:
        return FailureRecord(
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
            worker=worker,
            created_at=self._clock.now(),
            fingerprint=mark,
            pool=task.pool,
            trace_id=failure.trace_id or None,
            host_calls=failure.host_calls,
            repro=failure.repro or None,
        )

    def _retry_policy(self, task: Task) -> RetryPolicy:
        if task.options is None:
            return self._settings.activity_retry
        stored = unpack(task.options, what="the task's options")
        options = parse_activity_options(stored, "options")
        return self._settings.activity_retry.overlay(options.retry)


def _keeping_poison(task: Task, visible_at: datetime, failure: str) -> Requeue:
    """A retry after a failure that is not a crash (an activity's own error, a timeout): the
    task's crash series and poisoning are neither advanced nor forgiven — only a success or an
    operator ends them."""
    return Requeue(
        visible_at=visible_at,
        failure=failure,
        pool=task.pool,
        crash=task.crash,
        poisoned_at=task.poisoned_at,
        poison_reason=task.poison_reason,
    )


def timeout_kind(task: Task, failure: FailureReport) -> str | None:
    """Which activity timeout a sandbox deadline kill was, if the task has one.

    Workers run an activity with a task deadline under exactly that deadline (the sooner of
    start-to-close and schedule-to-close), so the kill is that timeout, reported as the sweep
    would have reported it.
    """
    if task.kind is not TaskKind.ACTIVITY or failure.reason != FailureReason.DEADLINE:
        return None
    if task.close_by is not None and (
        task.attempt_deadline is None or task.close_by <= task.attempt_deadline
    ):
        return "schedule_to_close"
    return "start_to_close" if task.attempt_deadline is not None else None


def _span(window: timedelta) -> str:
    """A window as an operator reads it: `24 h`, `30 min`, `45 s`."""
    seconds = int(window.total_seconds())
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"
