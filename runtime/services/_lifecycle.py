"""How runs begin and end, and what a workflow's commands do to the database.

These are transaction steps (`*_txn`) shared by the services: the one that records a worker's
report, the one that serves applications, and the timer sweeper. Each returns the wake-ups to
send once the transaction commits. They compose `history` helpers and never commit themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from amber.abi import (
    ActivityOptions,
    AmberError,
    AwaitSignal,
    CancelTimer,
    Patched,
    RecordNow,
    RecordRandom,
    RequestApproval,
    ScheduleActivity,
    StartChild,
    StartTimer,
    options_to_doc,
    pack,
)
from amber.history import (
    EXECUTION_TIMER_ID,
    RUNS_CHANNEL,
    TASKS_CHANNEL,
    ActivityCancelled,
    ActivityScheduled,
    Appended,
    CancelRequested,
    ChildCompleted,
    ChildFailed,
    ChildStarted,
    Cursor,
    Event,
    HistoryWarning,
    Lineage,
    MarkerRecorded,
    NewEvent,
    NewRun,
    NewTask,
    ParentLink,
    Payload,
    Run,
    RunCancelled,
    RunClosing,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunStatus,
    RunTerminated,
    RunTimedOut,
    SignalAwaited,
    Task,
    TaskKind,
    Timer,
    TimerCancelled,
    TimerKind,
    TimerStarted,
    WorkflowIdInUse,
    after_commit,
    append_events_txn,
    claim_workflow_id_txn,
    close_run_txn,
    delete_task_txn,
    delete_timer_txn,
    enqueue_task_txn,
    get_run_txn,
    inherit_signal_ids_txn,
    insert_run_txn,
    insert_timer_txn,
    mark_cancel_requested_txn,
    mark_history_warned_txn,
    open_children_txn,
    pending_activity_tasks_txn,
    repoint_workflow_id_txn,
    request_activity_cancel_txn,
    savepoint,
    workflow_timer_id,
)
from amber.runtime.model import Clock, EngineSettings, NewCommand, from_ms, new_run_id, to_ms
from amber.versions import select_version_txn

from ._approvals import request_approval_txn

Wake = tuple[str, str]
"""(channel, key) to poke once the transaction has committed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec:
    """A run about to be created: by a start, a child command, continue-as-new or a reset."""

    tenant: str
    workflow_id: str
    workflow_type: str
    digest: str
    queue: str
    input: bytes
    run_id: str = field(default_factory=new_run_id)
    new_chain: bool = True
    """Claim the workflow id (a start or a child); False repoints an existing chain to it."""
    parent_run_id: str | None = None
    parent_cmd: int | None = None
    parent_close_policy: str | None = None
    execution_timeout_ms: int | None = None
    execution_deadline: datetime | None = None
    """The deadline of the run this one replaces (continue-as-new, reset): the execution
    timeout covers the whole chain, as in Temporal, so a replacement never extends it."""
    inherit_from: str | None = None
    """The run this one replaces: its received signal ids are refused here too."""
    lineage: Lineage = field(default_factory=Lineage)
    """Where the run came from (version choice, parent, continued or reset from)."""
    """Extra RunStarted payload keys (continued_from, reset_from, parent)."""
    prefix: Sequence[NewEvent] = ()
    """For a reset: the events to copy after RunStarted instead of starting afresh."""
    traceparent: str = ""
    """The trace the run belongs to (its start's, or its origin run's)."""


def execution_deadline(event: Event) -> datetime | None:
    """The execution deadline a run's RunStarted event records (None: no timeout).

    Runs recorded before deadlines were written down carry only the timeout; their deadline is
    counted from when they started.
    """
    started = event.payload_as(RunStarted)
    if started.execution_deadline_ms is not None:
        return from_ms(started.execution_deadline_ms)
    timeout = started.execution_timeout_ms
    return event.created_at + timedelta(milliseconds=timeout) if timeout else None


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandEffects:
    """The events a batch of new commands becomes, and whether the workflow must run again."""

    events: list[NewEvent]
    reactivate: bool
    """A result is already among the events (a cancelled timer, a child that failed to start)."""
    wakes: list[Wake]


def closing_event(closing: RunClosing, digest: str, *, closed: Payload | None = None) -> NewEvent:
    """The event that records how a run closed: `closed` where the caller has more to say than
    the closing itself (who terminated it, the next run of a continue-as-new)."""
    if closed is not None:
        return NewEvent(closed, digest)
    match closing.status:
        case RunStatus.COMPLETED:
            assert closing.result is not None
            return NewEvent(RunCompleted(result=closing.result), digest)
        case RunStatus.FAILED:
            failed = RunFailed(error_type=closing.error_type, message=closing.error_message)
            return NewEvent(failed, digest)
        case RunStatus.CANCELLED:
            cancelled = RunCancelled(error_type=closing.error_type, message=closing.error_message)
            return NewEvent(cancelled, digest)
        case RunStatus.TIMED_OUT:
            return NewEvent(RunTimedOut(), digest)
    raise AssertionError(f"a {closing.status} run closes with an event the caller gives")


_CHILD_ERRORS = {
    RunStatus.FAILED: "ChildFailed",
    RunStatus.CANCELLED: "ChildCancelled",
    RunStatus.TERMINATED: "ChildTerminated",
    RunStatus.TIMED_OUT: "ChildTimedOut",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityRequest:
    """An activity to queue: the command that scheduled it and what it asked for."""

    cmd: int
    """The scheduling command's number in its run."""
    name: str
    """The activity's name in the module."""
    args: bytes
    """Its msgpack arguments."""
    options: ActivityOptions
    """Timeouts and retry options, as the workflow gave them."""


class RunWatch(Protocol):
    """Told of runs started and closed (the server's metrics)."""

    def run_started(self) -> None: ...

    def run_closed(self, status: str) -> None: ...


class Lifecycle:
    """Transaction steps that create, feed and close runs.

    The server builds one and hands it to every service: it holds the clock and the settings
    they all share."""

    def __init__(
        self, clock: Clock, settings: EngineSettings, watch: RunWatch | None = None
    ) -> None:
        """`watch` is told of every run started and closed, once its transaction commits."""
        self._clock = clock
        self._settings = settings
        self._watch = watch

    # -- creating -----------------------------------------------------------------------------

    def create_run_txn(self, cur: Cursor, spec: RunSpec) -> tuple[Run, list[Wake]]:
        """Insert a run with its first events and its first workflow task.

        Raises `WorkflowIdInUse` when a new chain's workflow id is taken.
        """
        now = self._clock.now()
        if self._watch is not None:
            after_commit(cur, self._watch.run_started)
        insert_run_txn(
            cur,
            NewRun(
                run_id=spec.run_id,
                tenant=spec.tenant,
                workflow_id=spec.workflow_id,
                workflow_type=spec.workflow_type,
                digest=spec.digest,
                queue=spec.queue,
                input=spec.input,
                created_at=now,
                parent_run_id=spec.parent_run_id,
                parent_cmd=spec.parent_cmd,
                parent_close_policy=spec.parent_close_policy,
                traceparent=spec.traceparent,
            ),
        )
        if spec.new_chain:
            if not claim_workflow_id_txn(cur, spec.tenant, spec.workflow_id, spec.run_id):
                raise WorkflowIdInUse(f"workflow id {spec.workflow_id!r} is in use")
        else:
            repoint_workflow_id_txn(cur, spec.tenant, spec.workflow_id, spec.run_id)
        deadline = spec.execution_deadline
        if deadline is None and spec.execution_timeout_ms:
            deadline = now + timedelta(milliseconds=spec.execution_timeout_ms)
        lineage = spec.lineage
        started = NewEvent(
            RunStarted(
                workflow_type=spec.workflow_type,
                workflow_id=spec.workflow_id,
                tenant=spec.tenant,
                input=spec.input,
                version=lineage.version,
                parent=lineage.parent,
                continued_from=lineage.continued_from,
                reset_from=lineage.reset_from,
                execution_deadline_ms=to_ms(deadline) if deadline else None,
            ),
            spec.digest,
        )
        append_events_txn(cur, spec.run_id, [started, *spec.prefix], expected_last_seq=0, now=now)
        if deadline is not None:
            insert_timer_txn(
                cur,
                Timer(
                    run_id=spec.run_id,
                    timer_id=EXECUTION_TIMER_ID,
                    kind=TimerKind.EXECUTION_TIMEOUT,
                    cmd=None,
                    fire_at=deadline,
                ),
            )
        if spec.inherit_from is not None:
            inherit_signal_ids_txn(cur, spec.inherit_from, spec.run_id)
        run = get_run_txn(cur, spec.run_id)
        assert run is not None
        return run, self.enqueue_workflow_txn(cur, run)

    def enqueue_workflow_txn(self, cur: Cursor, run: Run) -> list[Wake]:
        """Make sure the run has a pending workflow task (it needs an activation)."""
        now = self._clock.now()
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
            notify=True,
        )
        return [(TASKS_CHANNEL, run.queue)]

    # -- feeding ------------------------------------------------------------------------------

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def settings(self) -> EngineSettings:
        return self._settings

    def deliver_txn(self, cur: Cursor, run: Run, event: NewEvent) -> list[Wake]:
        """Append a fact the workflow may be waiting for, and activate it."""
        size = append_events_txn(
            cur, run.run_id, [event], expected_last_seq=None, now=self._clock.now()
        )
        return self.enqueue_workflow_txn(cur, run) + self.check_limits_txn(cur, run, size)

    def command_events_txn(
        self, cur: Cursor, run: Run, digest: str, commands: Sequence[NewCommand]
    ) -> CommandEffects:
        """The events a workflow's new commands become, with their side effects (activity
        tasks, timers, child runs) done in the same transaction."""
        effects = CommandEffects(events=[], reactivate=False, wakes=[])
        reactivate = False
        for new in commands:
            reactivate |= self._command_txn(cur, run, digest, new, effects)
        return CommandEffects(events=effects.events, reactivate=reactivate, wakes=effects.wakes)

    def _command_txn(
        self, cur: Cursor, run: Run, digest: str, new: NewCommand, effects: CommandEffects
    ) -> bool:
        now = self._clock.now()
        cmd, command = new.cmd, new.command

        def event(payload: Payload) -> None:
            effects.events.append(NewEvent(payload, digest))

        match command:
            case ScheduleActivity(name=name, args=args, options=options):
                event(ActivityScheduled(cmd=cmd, name=name, args=args, options=options))
                activity = ActivityRequest(cmd=cmd, name=name, args=args, options=options)
                effects.wakes.extend(self.schedule_activity_txn(cur, run, digest, activity))
                return False
            case RecordNow(value=value):
                event(MarkerRecorded(cmd=cmd, kind="now", value=value))
                return False
            case RecordRandom(value=value):
                event(MarkerRecorded(cmd=cmd, kind="random", value=value))
                return False
            case Patched(change_id=change_id):
                event(MarkerRecorded(cmd=cmd, kind="patched", value=change_id))
                return False
            case StartTimer(duration_ms=ms):
                fire_at = now + timedelta(milliseconds=ms)
                event(TimerStarted(cmd=cmd, duration_ms=ms, fire_at_ms=to_ms(fire_at)))
                insert_timer_txn(
                    cur,
                    Timer(
                        run_id=run.run_id,
                        timer_id=workflow_timer_id(cmd),
                        kind=TimerKind.WORKFLOW,
                        cmd=cmd,
                        fire_at=fire_at,
                    ),
                )
                return False
            case CancelTimer(timer_cmd=target):
                cancelled = delete_timer_txn(cur, run.run_id, workflow_timer_id(target))
                event(TimerCancelled(cmd=cmd, timer=target, cancelled=cancelled))
                return cancelled
            case AwaitSignal(name=name):
                event(SignalAwaited(cmd=cmd, name=name))
                return False
            case StartChild() as child:
                return self._start_child_txn(cur, run, digest, new.cmd, child, effects)
            case RequestApproval() as approval:
                effects.events.append(request_approval_txn(cur, run, digest, cmd, approval, now))
                return False
        raise AssertionError(command)

    def _start_child_txn(
        self,
        cur: Cursor,
        run: Run,
        digest: str,
        cmd: int,
        child: StartChild,
        effects: CommandEffects,
    ) -> bool:
        def started(run_id: str | None) -> NewEvent:
            payload = ChildStarted(
                cmd=cmd,
                run_id=run_id,
                workflow_type=child.workflow_type,
                workflow_id=child.workflow_id,
                input=child.input,
                parent_close_policy=child.parent_close_policy,
            )
            return NewEvent(payload, digest)

        try:
            with savepoint(cur, "amber_child"):
                child_run, wakes = self._create_child_txn(cur, run, cmd, child)
        except AmberError as exc:
            failed = ChildFailed(cmd=cmd, error_type="ChildStartFailed", message=str(exc))
            effects.events.extend([started(None), NewEvent(failed, digest)])
            return True
        effects.events.append(started(child_run.run_id))
        effects.wakes.extend(wakes)
        return False

    def _create_child_txn(
        self, cur: Cursor, run: Run, cmd: int, child: StartChild
    ) -> tuple[Run, list[Wake]]:
        selection = select_version_txn(
            cur, child.workflow_type, child.workflow_id, child.version or None
        )
        spec = RunSpec(
            tenant=run.tenant,
            workflow_id=child.workflow_id,
            workflow_type=child.workflow_type,
            digest=selection.digest,
            queue=run.queue,
            input=child.input,
            parent_run_id=run.run_id,
            parent_cmd=cmd,
            parent_close_policy=child.parent_close_policy,
            lineage=Lineage(parent=ParentLink(run_id=run.run_id, cmd=cmd), version=selection),
            traceparent=run.traceparent,
        )
        return self.create_run_txn(cur, spec)

    def schedule_activity_txn(
        self, cur: Cursor, run: Run, digest: str, activity: ActivityRequest
    ) -> list[Wake]:
        """Queue an activity's first attempt with its timeouts and retry policy (for a new
        ScheduleActivity command, and for a reset restoring one its history left open)."""
        now = self._clock.now()
        options = activity.options
        doc = options_to_doc(options)
        retry = self._settings.activity_retry.overlay(options.retry)
        enqueue_task_txn(
            cur,
            NewTask(
                run_id=run.run_id,
                kind=TaskKind.ACTIVITY,
                queue=run.queue,
                name=activity.name,
                digest=digest,
                visible_at=now,
                max_attempts=retry.max_attempts,
                cmd=activity.cmd,
                args=activity.args,
                options=pack(doc) if doc else None,
                start_to_close_ms=options.start_to_close_ms,
                schedule_to_start_ms=options.schedule_to_start_ms,
                heartbeat_ms=options.heartbeat_ms,
                close_by=None
                if options.schedule_to_close_ms is None
                else now + timedelta(milliseconds=options.schedule_to_close_ms),
            ),
            now,
            notify=True,
        )
        return [(TASKS_CHANNEL, run.queue)]

    # -- limits -------------------------------------------------------------------------------

    def check_limits_txn(self, cur: Cursor, run: Run, size: Appended) -> list[Wake]:
        """Warn once when a history passes its warning limits; fail the run past the others.

        `run` is the (open, locked) run as read before the append that returned `size`.
        """
        s = self._settings
        events, stored = size.last_seq, size.history_bytes
        if events > s.history_fail_events or stored > s.history_fail_bytes:
            closing = RunClosing(
                status=RunStatus.FAILED,
                error_type="amber.HistoryLimitExceeded",
                error_message=f"history reached {events} events / {stored} bytes"
                f" (limits {s.history_fail_events} / {s.history_fail_bytes})",
            )
            return self.close_txn(cur, run, closing, closing_event(closing, run.digest))
        if not size.history_warned and (
            events > s.history_warn_events or stored > s.history_warn_bytes
        ):
            warning = NewEvent(HistoryWarning(events=events, history_bytes=stored), run.digest)
            now = self._clock.now()
            append_events_txn(cur, run.run_id, [warning], expected_last_seq=None, now=now)
            mark_history_warned_txn(cur, run.run_id)
        return []

    # -- closing ------------------------------------------------------------------------------

    def close_txn(
        self,
        cur: Cursor,
        run: Run,
        closing: RunClosing,
        event: NewEvent | None,
        *,
        superseded: bool = False,
    ) -> list[Wake]:
        """Close a run: record it (appending `event` unless the caller already did), drop its
        tasks and timers, tell its parent, and apply its children's parent-close policy.

        A `superseded` run (replaced by a reset) does not tell its parent: the run that replaces
        it carries the parent link and reports when it closes. Continue-as-new is the same.
        """
        now = self._clock.now()
        if event is not None:
            append_events_txn(cur, run.run_id, [event], expected_last_seq=None, now=now)
        close_run_txn(cur, run.run_id, closing, now, notify=RUNS_CHANNEL)
        if self._watch is not None:
            watch, status = self._watch, closing.status.value
            after_commit(cur, lambda: watch.run_closed(status))
        wakes: list[Wake] = [(RUNS_CHANNEL, run.run_id)]
        superseded = superseded or closing.status is RunStatus.CONTINUED_AS_NEW
        if run.parent_run_id and not superseded:
            wakes += self._tell_parent_txn(cur, run, closing)
        for child in open_children_txn(cur, run.run_id):
            if child.parent_close_policy == "terminate":
                wakes += self.terminate_txn(cur, child, "the parent run closed", "amber")
            elif child.parent_close_policy == "cancel":
                wakes += self.request_cancel_txn(cur, child, "the parent run closed", "amber")[0]
        return wakes

    def _tell_parent_txn(self, cur: Cursor, run: Run, closing: RunClosing) -> list[Wake]:
        assert run.parent_run_id is not None
        parent = get_run_txn(cur, run.parent_run_id, for_update=True)
        if parent is None or parent.status.closed:
            return []
        assert run.parent_cmd is not None
        told: Payload
        if closing.status is RunStatus.COMPLETED:
            assert closing.result is not None
            told = ChildCompleted(cmd=run.parent_cmd, result=closing.result)
        else:
            message = closing.error_message or f"the child run {run.run_id} {closing.status.value}"
            if closing.error_type:
                message = f"{closing.error_type}: {message}"
            error_type = _CHILD_ERRORS[closing.status]
            told = ChildFailed(cmd=run.parent_cmd, error_type=error_type, message=message)
        return self.deliver_txn(cur, parent, NewEvent(told, run.digest))

    def terminate_txn(
        self, cur: Cursor, run: Run, reason: str, by: str, *, superseded: bool = False
    ) -> list[Wake]:
        """Close a run at once (no workflow code runs); see `close_txn` for `superseded`."""
        closing = RunClosing(
            status=RunStatus.TERMINATED, error_type="Terminated", error_message=reason
        )
        event = closing_event(closing, run.digest, closed=RunTerminated(reason=reason, by=by))
        return self.close_txn(cur, run, closing, event, superseded=superseded)

    def request_cancel_txn(
        self, cur: Cursor, run: Run, reason: str, by: str
    ) -> tuple[list[Wake], bool]:
        """Record a cancellation request; returns (wakes, whether one was already recorded).

        Activities no worker holds are dropped (their result: Cancelled), whether they never
        started or wait for a retry; running ones learn of it through their heartbeats and are
        not retried if they fail; the workflow sees it at its next await.
        """
        if run.cancel_seq is not None:
            return [], True
        now = self._clock.now()
        event = NewEvent(CancelRequested(reason=reason, by=by), run.digest)
        seq = append_events_txn(cur, run.run_id, [event], expected_last_seq=None, now=now).last_seq
        mark_cancel_requested_txn(cur, run.run_id, seq, reason)
        pending = pending_activity_tasks_txn(cur, run.run_id)
        dropped = [
            NewEvent(ActivityCancelled(cmd=t.activity_cmd, message=_dropped_message(t)), t.digest)
            for t in pending
        ]
        if dropped:
            append_events_txn(cur, run.run_id, dropped, expected_last_seq=None, now=now)
            for task in pending:
                delete_task_txn(cur, task.task_id)
        request_activity_cancel_txn(cur, run.run_id)
        return self.enqueue_workflow_txn(cur, run), False


def _dropped_message(task: Task) -> str:
    if task.attempt <= 1 and task.consecutive_failures == 0:
        return "cancelled before it started"
    return (
        f"cancelled while waiting to retry, after {task.consecutive_failures} failed"
        f" attempt(s) (last: {task.last_failure})"
    )
