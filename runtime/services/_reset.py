"""Reset: start a new run that replays an old run's history up to one event and goes on.

The new run copies the old run's events after RunStarted up to the reset point, gets back the
activity tasks and timers those events left outstanding (activities with the options they were
scheduled with), keeps the chain's execution deadline and received signal ids, and becomes the
workflow id's current run; the old run is terminated if still open, and both are linked by
events (RunStarted.reset_from, RunReset.new_run_id).

Reset points are refused, with the reason, where the copy could not be faithful:
- at or after the run's closing event (nothing left to go on with);
- while a child started in the prefix is still open (two runs would own one child);
- before a child started in the remainder (it would start again under a workflow id that is
  taken for good, and fail where it once succeeded);
- on a run that is not the current run of its workflow id while the current one is open
  (the reset would orphan the open run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from amber.abi import AmberError, InvalidInput, StartChild
from amber.history import (
    CLOSING_EVENTS,
    ActivityCancelled,
    ActivityScheduled,
    ApprovalRequested,
    ChildStarted,
    Cursor,
    Event,
    EventType,
    NewEvent,
    ResetPoint,
    Run,
    RunReset,
    RunStarted,
    Timer,
    TimerKind,
    TimerStarted,
    append_events_txn,
    get_run_by_workflow_id_txn,
    insert_timer_txn,
    mark_cancel_requested_txn,
    read_events_txn,
    set_next_cmd_txn,
    workflow_timer_id,
)
from amber.runtime.model import Clock, Projection, from_ms, project
from amber.versions import version_for_type_txn

from ._approvals import restore_approval_txn
from ._lifecycle import ActivityRequest, Lifecycle, RunSpec, Wake, execution_deadline

_NOT_COPIED = frozenset({EventType.HISTORY_WARNING})
"""Events that describe the old run rather than its workflow's progress."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetRequest:
    """What an operator asked for."""

    to_event: int
    """The last event of the old run the new run keeps."""
    reason: str
    by: str


class Resetter:
    """Performs resets inside a caller's transaction (the caller found and locked the run)."""

    def __init__(self, clock: Clock, life: Lifecycle) -> None:
        self._clock = clock
        self._life = life

    def reset_txn(self, cur: Cursor, old: Run, request: ResetRequest) -> tuple[str, list[Wake]]:
        """Reset `old` (locked FOR UPDATE); returns the new run's id and the wakes."""
        to_event = request.to_event
        if not 1 <= to_event <= old.last_seq:
            raise InvalidInput(f"--to-event must be between 1 and {old.last_seq}")
        self._check_current_txn(cur, old)
        try:  # share-locked: a retirement waits for this reset, or this reset sees it
            version_for_type_txn(cur, old.digest, old.workflow_type, lock=True)
        except AmberError as exc:
            raise InvalidInput(
                f"cannot reset run {old.run_id}: {exc}, and a reset would start a run on it"
                " again; start a new run (on the current version) instead"
            ) from None
        events = read_events_txn(cur, old.run_id)
        kept, remainder = events[:to_event], events[to_event:]
        _check_point(kept, remainder)
        started = kept[0].payload_as(RunStarted)
        spec = RunSpec(
            tenant=old.tenant,
            workflow_id=old.workflow_id,
            workflow_type=old.workflow_type,
            digest=old.digest,
            queue=old.queue,
            input=old.input,
            new_chain=False,
            parent_run_id=old.parent_run_id,
            parent_cmd=old.parent_cmd,
            parent_close_policy=old.parent_close_policy,
            execution_deadline=execution_deadline(kept[0]),
            inherit_from=old.run_id,
            traceparent=old.traceparent,
            lineage=replace(
                started.lineage, reset_from=ResetPoint(run_id=old.run_id, seq=to_event)
            ),
            prefix=[NewEvent(e.payload, e.digest) for e in kept[1:] if e.type not in _NOT_COPIED],
        )
        new, wakes = self._life.create_run_txn(cur, spec)
        wakes += self._restore_txn(cur, new)
        reset = RunReset(
            new_run_id=new.run_id, to_seq=to_event, reason=request.reason, by=request.by
        )
        marker = NewEvent(reset, old.digest)
        append_events_txn(cur, old.run_id, [marker], expected_last_seq=None, now=self._clock.now())
        if not old.status.closed:
            wakes += self._life.terminate_txn(
                cur, old, f"reset to run {new.run_id}", request.by, superseded=True
            )
        return new.run_id, wakes

    @staticmethod
    def _check_current_txn(cur: Cursor, old: Run) -> None:
        current = get_run_by_workflow_id_txn(cur, old.tenant, old.workflow_id)
        if current is not None and current.run_id != old.run_id and not current.status.closed:
            raise InvalidInput(
                f"run {old.run_id} is not the current run of workflow id {old.workflow_id!r};"
                f" its current run {current.run_id} is {current.status.value} (reset that run,"
                " or terminate it first)"
            )

    def _restore_txn(self, cur: Cursor, run: Run) -> list[Wake]:
        """Re-create the activity tasks, timers and approvals the copied history left
        outstanding (an approval gets a new id and new tokens: the old run's are revoked when it
        closes).

        If the copied history holds a cancellation request, restored activities are cancelled
        rather than queued: an activity that has not started when cancellation is known never
        starts (the same rule as a live cancellation).
        """
        events = read_events_txn(cur, run.run_id)
        projection = project(events)
        set_next_cmd_txn(cur, run.run_id, len(projection.commands))
        wakes: list[Wake] = []
        cancelled: list[NewEvent] = []
        for start in _open_commands(events, projection):
            match start:
                case ActivityScheduled(cmd=cmd) if projection.cancel is not None:
                    message = "cancelled before it started (reset)"
                    dropped = ActivityCancelled(cmd=cmd, message=message)
                    cancelled.append(NewEvent(dropped, run.digest))
                case ActivityScheduled(cmd=cmd, name=name, args=args, options=options):
                    activity = ActivityRequest(cmd=cmd, name=name, args=args, options=options)
                    wakes += self._life.schedule_activity_txn(cur, run, run.digest, activity)
                case ApprovalRequested():
                    restore_approval_txn(cur, run, start, self._clock.now())
                case TimerStarted(cmd=cmd, fire_at_ms=fire_at_ms):
                    insert_timer_txn(
                        cur,
                        Timer(
                            run_id=run.run_id,
                            timer_id=workflow_timer_id(cmd),
                            kind=TimerKind.WORKFLOW,
                            cmd=cmd,
                            fire_at=from_ms(fire_at_ms),
                        ),
                    )
        if projection.cancel is not None:
            mark_cancel_requested_txn(
                cur, run.run_id, projection.cancel.seq, projection.cancel.reason
            )
        if cancelled:
            append_events_txn(
                cur, run.run_id, cancelled, expected_last_seq=None, now=self._clock.now()
            )
        return wakes


def _open_commands(
    events: Sequence[Event], projection: Projection
) -> list[ActivityScheduled | TimerStarted | ApprovalRequested]:
    """The scheduling payloads (ActivityScheduled, TimerStarted, ApprovalRequested) of
    unresolved commands."""
    resolved = projection.resolved()
    return [
        p
        for p in (e.payload for e in events)
        if isinstance(p, ActivityScheduled | TimerStarted | ApprovalRequested)
        and p.cmd not in resolved
    ]


def _check_point(kept: Sequence[Event], remainder: Sequence[Event]) -> None:
    at = kept[-1].seq
    for event in kept:
        if event.type in CLOSING_EVENTS or event.type is EventType.RUN_RESET:
            raise InvalidInput(
                f"cannot reset to event {at}: the run closed at event {event.seq}"
                f" ({event.type.value}); reset to an event before it"
            )
    projection = project(kept)
    resolved = projection.resolved()
    for command in projection.commands:
        if isinstance(command.command, StartChild) and command.cmd not in resolved:
            raise InvalidInput(
                f"cannot reset to event {at}: child workflow of command {command.cmd} is still"
                " open there (reset to before it started or after it ended)"
            )
    for event in remainder:
        child = event.payload
        if isinstance(child, ChildStarted) and child.run_id:
            raise InvalidInput(
                f"cannot reset to event {at}: the child started at event {event.seq}"
                f" (workflow id {child.workflow_id!r}) would start again under a"
                " workflow id that is taken for good; reset to after that child ended"
            )
