"""Appending a workflow activation's outcome: its commands' events and their effects, and the
run's closing, at the history position the activation read.

Two reports carry an activation: a workflow task's completion, and an activity's completion
with the run's next activation attached (`ThenWorkflow`: the worker ran it on its own copy of
the history). Both end here, so the second can never write what the first would not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from amber.abi import ScheduleActivity, WorkflowStatus
from amber.history import (
    Cursor,
    Event,
    Lineage,
    NewEvent,
    Payload,
    Run,
    RunClosing,
    RunContinuedAsNew,
    RunStatus,
    VersionConflict,
    append_events_txn,
    delete_task_txn,
    read_events_txn,
)
from amber.runtime.model import WorkflowCompletion, new_run_id

from ._lifecycle import Lifecycle, RunSpec, Wake, closing_event, execution_deadline
from ._migration import Counted

_STATUS_CLOSING = {
    WorkflowStatus.COMPLETED: RunStatus.COMPLETED,
    WorkflowStatus.FAILED: RunStatus.FAILED,
    WorkflowStatus.CANCELLED: RunStatus.CANCELLED,
    WorkflowStatus.CONTINUE_AS_NEW: RunStatus.CONTINUED_AS_NEW,
}


@dataclass(slots=True)
class Outcome:
    """What an outcome's transaction reports besides its wake-ups (cleared when retried)."""

    counted: list[Counted] = field(default_factory=list)
    """Activations judged, for their versions' health: (digest, kind, reason)."""
    appended: list[Event] = field(default_factory=list)
    """Events appended at the head the worker saw, for its copy of the history."""
    combined: bool = False
    affine_run: str = ""
    """A run that just scheduled activities: the worker's next task should be one of them."""

    def clear(self) -> None:
        self.counted.clear()
        self.appended.clear()
        self.combined = False
        self.affine_run = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Applied:
    """An activation appended."""

    wakes: list[Wake]
    closed: bool
    """The activation closed the run."""


class ActivationWriter:
    """Appends activations; one per server, shared by the reports that carry them."""

    def __init__(self, life: Lifecycle) -> None:
        self._life = life

    def apply_txn(
        self,
        cur: Cursor,
        run: Run,
        digest: str,
        done: WorkflowCompletion,
        *,
        after_seq: int,
        prefix: Sequence[NewEvent] = (),
        task_id: int | None = None,
        out: Outcome,
    ) -> Applied:
        """Append `prefix`, then the events of `done` (its commands' with their effects, and
        the closing event), after position `after_seq`; close the run or activate it again as
        `done` says, the workflow task `task_id` the activation ran as deleted first. Raises
        `VersionConflict` if history moved on."""
        if run.last_seq != after_seq or (done.commands and done.commands[0].cmd != run.next_cmd):
            # Before the commands' effects: a stale activation's activity tasks would otherwise
            # collide with the ones the activation that moved history on already scheduled.
            raise VersionConflict(run.run_id, after_seq, run.last_seq)
        now = self._life.clock.now()
        effects = self._life.command_events_txn(cur, run, digest, done.commands)
        events = [*prefix, *effects.events]
        closing, closed, next_run = _closing(run, done)
        if closing is not None:
            events.append(closing_event(closing, digest, closed=closed))
        commands = (done.commands[0].cmd, len(done.commands)) if done.commands else None
        size = append_events_txn(
            cur,
            run.run_id,
            events,
            expected_last_seq=after_seq,
            now=now,
            commands=commands,
        )
        first = size.last_seq - len(events) + 1
        out.appended = [
            Event.of(
                run_id=run.run_id, seq=first + i, payload=e.payload, digest=e.digest, created_at=now
            )
            for i, e in enumerate(events)
        ]
        if any(isinstance(new.command, ScheduleActivity) for new in done.commands):
            out.affine_run = run.run_id
        wakes = list(effects.wakes)
        if closing is not None:
            wakes += self._life.close_txn(cur, run, closing, None)
            if next_run is not None:
                (started,) = read_events_txn(cur, run.run_id, limit=1)
                next_run = replace(next_run, execution_deadline=execution_deadline(started))
                wakes += self._life.create_run_txn(cur, next_run)[1]
            return Applied(wakes=wakes, closed=True)
        if task_id is not None:
            delete_task_txn(cur, task_id)
        if effects.reactivate or done.reactivate:
            wakes += self._life.enqueue_workflow_txn(cur, run)
        return Applied(wakes=wakes + self._life.check_limits_txn(cur, run, size), closed=False)


def _closing(
    run: Run, done: WorkflowCompletion
) -> tuple[RunClosing | None, Payload | None, RunSpec | None]:
    """How the run closes (None: it does not), the event's payload where the closing does not
    say it all, and the run to start next (continue-as-new)."""
    status = _STATUS_CLOSING.get(done.status)
    if status is None:
        return None, None, None
    error_type = done.error.type if done.error else None
    message = done.error.message if done.error else None
    if status is RunStatus.CONTINUED_AS_NEW:
        assert done.result is not None
        spec = RunSpec(
            run_id=new_run_id(),
            tenant=run.tenant,
            workflow_id=run.workflow_id,
            workflow_type=run.workflow_type,
            digest=run.digest,
            queue=run.queue,
            input=done.result,
            new_chain=False,
            parent_run_id=run.parent_run_id,
            parent_cmd=run.parent_cmd,
            parent_close_policy=run.parent_close_policy,
            lineage=Lineage(continued_from=run.run_id),
            inherit_from=run.run_id,
            traceparent=run.traceparent,
        )
        continued = RunContinuedAsNew(next_run_id=spec.run_id, input=done.result)
        return RunClosing(status=status), continued, spec
    closing = RunClosing(
        status=status, result=done.result, error_type=error_type, error_message=message
    )
    return closing, None, None
