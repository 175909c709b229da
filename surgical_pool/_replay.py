"""Replay a triage bundle's failure offline: no database, no network, no side effects.

The newest failure that carries a repro is re-run through the module bytes in the bundle, on
the limits it ran under and with the clock reading it started at:

- a workflow activation is rebuilt from the bundled history up to the position it replayed
  (the same code path a live worker uses), and the rebuilt input envelope must hash the same as
  the recorded one;
- an activity activation runs its recorded input envelope, with heartbeats answered "not
  cancelled" and the HTTP capability refused (a replay must not call out).

Fuel use is deterministic, so a faithful replay fails with the same reason, the same trap code
and the same fuel count as the recorded failure; the result says whether each matched.

A bundle without a failure (a run that completed, or waits) is replayed whole instead
(`replay_history`): its whole history through the run's module, as a worker would, and the
outcome compared with the recorded one: every recorded command matched, the same status, the
same result bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from amber.abi import InvalidInput, WorkflowStatus
from amber.history import EventType, FailureRecord, RunStatus
from amber.runtime.model import (
    Bundle,
    Clock,
    FailureReason,
    GuestFault,
    ManualClock,
    ModuleUnavailable,
)
from amber.runtime.replay import (
    WorkflowActivation,
    WorkflowStep,
    activate_workflow,
    run_activity_request,
)
from amber.runtime.sandbox import (
    ActivationKind,
    ActivationRequest,
    ActivityHost,
    RecordingSandbox,
    Repro,
    SandboxLimits,
    SandboxRunner,
)

SandboxFactory = Callable[[Callable[[str], bytes], Clock], SandboxRunner]
"""Makes the sandbox a replay runs in, from a module source and a clock."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResult:
    """A recorded failure and what replaying it did."""

    recorded: FailureRecord
    reason: str
    """The replay's failure reason, or `completed` if it did not fail."""
    trap_code: str | None
    fuel_used: int | None
    memory_bytes: int | None
    message: str
    input_matches: bool
    """The rebuilt input envelope hashed the same as the recorded one."""

    @property
    def reproduced(self) -> bool:
        """Same reason and trap code, and the same fuel count where fuel is deterministic.

        A wall-clock kill (`deadline`) stops the guest wherever it happens to be: "the deadline
        was reached again" is the reproduction, at whatever fuel. Every other fault is
        deterministic, so its fuel must match too (where the failure recorded it)."""
        r = self.recorded
        fuel_same = r.reason in _WALL_CLOCK or r.fuel_used is None or r.fuel_used == self.fuel_used
        return (
            self.input_matches
            and self.reason == r.reason
            and _same_trap(r.trap_code, self.trap_code)
            and fuel_same
        )


def _same_trap(recorded: str | None, replayed: str | None) -> bool:
    """The same trap code; a Python exception recorded before its type became its trap code
    (`python:KeyError`) was recorded as `unreachable`, which any Python exception matches."""
    if (recorded or None) == (replayed or None):
        return True
    return recorded == "unreachable" and (replayed or "").startswith("python:")


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryReplay:
    """A run's whole history replayed offline, beside what was recorded."""

    recorded_status: str
    replayed_status: str
    """The workflow's status after the last event (`suspended` for a run still open), or the
    failure reason when the replay failed (`non_determinism`, a trap, ...)."""
    result_matches: bool
    """The replayed outcome is the closing event's: the same result (or next run's input)
    byte for byte, or the same error; or neither has one (a run still open, cancelled,
    terminated)."""
    new_commands: int
    """Commands the replay issued past the end of history (0 when it matched a closed run)."""
    message: str

    @property
    def reproduced(self) -> bool:
        expected = "suspended" if self.recorded_status == RunStatus.RUNNING.value else None
        same_status = self.replayed_status == (expected or self.recorded_status)
        closed = self.recorded_status != RunStatus.RUNNING.value
        return same_status and self.result_matches and not (closed and self.new_commands)


def replay_history(bundle: Bundle, make_sandbox: SandboxFactory) -> HistoryReplay:
    """Replay the bundle's whole history through the run's module (from the bundle) and compare
    the outcome with the recorded one."""

    def module_source(digest: str) -> bytes:
        try:
            return bundle.modules[digest]
        except KeyError:
            raise ModuleUnavailable(
                f"the bundle holds no module {digest[:12]}", digest=digest
            ) from None

    run = bundle.run
    sandbox = make_sandbox(module_source, ManualClock(bundle.exported_at))
    activation = WorkflowActivation(
        run_id=run.run_id,
        workflow_type=run.workflow_type,
        digest=run.digest,
        input=run.input,
        events=bundle.events,
        limits=SandboxLimits(),
    )
    try:
        step = activate_workflow(sandbox, activation)
    except GuestFault as fault:
        return HistoryReplay(
            recorded_status=run.status.value,
            replayed_status=fault.reason.value,
            result_matches=False,
            new_commands=0,
            message=str(fault),
        )
    status = {WorkflowStatus.CONTINUE_AS_NEW: RunStatus.CONTINUED_AS_NEW.value}.get(
        step.status, step.status.value
    )
    matches = _recorded_outcome(bundle) == _replayed_outcome(step)
    return HistoryReplay(
        recorded_status=run.status.value,
        replayed_status=status,
        result_matches=matches,
        new_commands=len(step.new_commands),
        message=(
            f"replayed {len(bundle.events)} events: every recorded command matched;"
            f" the workflow ends {status}"
            + ("" if matches else ", with a different result than the recorded one")
        ),
    )


def _recorded_outcome(bundle: Bundle) -> tuple[object, ...]:
    """What the closing event recorded (the run's row in a bundle carries no result)."""
    closing = bundle.events[-1] if bundle.events else None
    if closing is None or closing.type not in _OUTCOME_EVENTS:
        return ()
    payload = closing.payload
    if closing.type is EventType.RUN_FAILED:
        return ("failed", payload.get("error_type"), payload.get("message"))
    key = "input" if closing.type is EventType.RUN_CONTINUED_AS_NEW else "result"
    return (closing.type.value, payload.get(key))


def _replayed_outcome(step: WorkflowStep) -> tuple[object, ...]:
    if step.status is WorkflowStatus.FAILED:
        error = step.error
        return ("failed", error.type if error else None, error.message if error else None)
    kinds = {
        WorkflowStatus.COMPLETED: EventType.RUN_COMPLETED,
        WorkflowStatus.CONTINUE_AS_NEW: EventType.RUN_CONTINUED_AS_NEW,
    }
    kind = kinds.get(step.status)
    return () if kind is None else (kind.value, step.result)


_OUTCOME_EVENTS = frozenset(
    {EventType.RUN_COMPLETED, EventType.RUN_FAILED, EventType.RUN_CONTINUED_AS_NEW}
)

_WALL_CLOCK = frozenset({FailureReason.DEADLINE.value})
"""Failure reasons decided by the wall clock, where the fuel burnt before it varies."""


def failure_to_replay(bundle: Bundle, task_id: int | None = None) -> FailureRecord:
    """The newest failure with a repro (of one task, if given)."""
    for failure in bundle.failures:
        if failure.repro and (task_id is None or failure.task_id == task_id):
            return failure
    raise InvalidInput("no failure in the bundle carries a repro to replay")


def replay_bundle(
    bundle: Bundle, make_sandbox: SandboxFactory, *, failure: FailureRecord | None = None
) -> ReplayResult:
    """Replay one failure of the bundle (default: the newest with a repro)."""
    failure = failure or failure_to_replay(bundle)
    assert failure.repro is not None
    repro = Repro.decode(failure.repro)

    def module_source(digest: str) -> bytes:
        try:
            return bundle.modules[digest]
        except KeyError:
            raise ModuleUnavailable(
                f"the bundle holds no module {digest[:12]}", digest=digest
            ) from None

    clock = ManualClock(repro.started_at)
    sandbox = RecordingSandbox(make_sandbox(module_source, clock), clock)
    try:
        if repro.kind is ActivationKind.WORKFLOW:
            _replay_workflow(bundle, repro, sandbox)
        else:
            _replay_activity(repro, sandbox)
    except GuestFault as fault:
        return _result(failure, repro, sandbox, fault.reason.value, fault)
    return _result(failure, repro, sandbox, "completed", None)


def _replay_workflow(bundle: Bundle, repro: Repro, sandbox: SandboxRunner) -> None:
    last = repro.last_seq if repro.last_seq is not None else bundle.run.last_seq
    activation = WorkflowActivation(
        run_id=bundle.run.run_id,
        workflow_type=bundle.run.workflow_type,
        digest=repro.digest,
        input=bundle.run.input,
        events=tuple(e for e in bundle.events if e.seq <= last),
        limits=repro.limits,
    )
    activate_workflow(sandbox, activation)


def _replay_activity(repro: Repro, sandbox: SandboxRunner) -> None:
    if repro.input is None:
        raise InvalidInput("the activity's repro lacks its input envelope")
    host = ActivityHost(
        idempotency_key=repro.idempotency_key,
        http=None,
        heartbeat=lambda details: False,
        cancel_requested=lambda: False,
    )
    request = ActivationRequest(
        kind=ActivationKind.ACTIVITY,
        digest=repro.digest,
        export=repro.export,
        input=repro.input,
        run_id=repro.run_id,
        step=repro.step,
        limits=repro.limits,
        activity=host,
    )
    run_activity_request(sandbox, request)


def _result(
    failure: FailureRecord,
    repro: Repro,
    sandbox: RecordingSandbox,
    reason: str,
    fault: GuestFault | None,
) -> ReplayResult:
    seen = sandbox.last[0].input if sandbox.last is not None else None
    matches = seen is not None and hashlib.sha256(seen).hexdigest() == repro.input_sha256
    return ReplayResult(
        recorded=failure,
        reason=reason,
        trap_code=fault.trap_code if fault else None,
        fuel_used=fault.fuel_used if fault else None,
        memory_bytes=fault.memory_bytes if fault else None,
        message=str(fault) if fault else "the activation completed: the failure did not recur",
        input_matches=matches,
    )
