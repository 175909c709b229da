"""Workflow activations: replay the whole history through the pinned module, match, extend.

The history is projected (`_projection`) into what the guest needs (every recorded result, in
delivery order, and any cancellation request) and what the host checks (every recorded command,
by index). The guest re-issues all its commands from the start; the first `n` must equal the `n`
recorded ones, and the rest are new. The same function serves live workers and offline replay
(tests, triage): there is one path. A query is the same replay with nothing appended.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from amber.abi import (
    AwaitSignal,
    CancelTimer,
    Command,
    ErrorInfo,
    MalformedEnvelope,
    NotMsgpack,
    Patched,
    RecordNow,
    RecordRandom,
    RequestApproval,
    ScheduleActivity,
    StartChild,
    StartTimer,
    WorkflowOutcome,
    WorkflowStatus,
    command_kind,
    decode_workflow_output,
    encode_workflow_input,
    unpack,
)
from amber.history import Event, RunStarted
from amber.runtime.model import (
    MAX_NEW_COMMANDS,
    AbiViolation,
    ActivationStats,
    GuestFault,
    MalformedOutput,
    NonDeterminism,
    Projection,
    RecordedCommand,
    project,
)
from amber.runtime.sandbox import (
    ActivationKind,
    ActivationRequest,
    RawOutput,
    SandboxLimits,
    SandboxRunner,
)

from ._memo import ReplayMemo


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowActivation:
    """Everything needed to activate a workflow: the run, its module and its history."""

    run_id: str
    workflow_type: str
    digest: str
    input: bytes
    events: tuple[Event, ...]
    limits: SandboxLimits


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowStep:
    """The outcome of a workflow activation that matched its history."""

    expected_last_seq: int
    """The history position the activation was computed from."""
    first_new_cmd: int
    new_commands: tuple[Command, ...]
    """Commands to append, with indexes `first_new_cmd`, `first_new_cmd + 1`, ..."""
    status: WorkflowStatus
    result: bytes | None
    error: ErrorInfo | None
    stats: ActivationStats
    reactivate: bool = False
    """A new signal wait can already be served from a buffered signal: activate again."""


def _fingerprint(data: bytes) -> str:
    return f"{len(data)} B sha256:{hashlib.sha256(data).hexdigest()[:12]}"


def _describe_issued(command: Command | None) -> str:
    match command:
        case None:
            return "nothing (the workflow stopped before reaching it)"
        case ScheduleActivity(name=name, args=args):
            return f"activity {name!r} (args {_fingerprint(args)})"
        case AwaitSignal(name=name):
            return f"signal {name!r}"
        case StartChild(workflow_type=kind, workflow_id=wid, input=data):
            return f"child {kind!r} id {wid!r} (input {_fingerprint(data)})"
        case RecordRandom(value=value):
            return f"random ({len(value)} bytes)"
        case RecordNow(value=value):
            return f"now {value!r}"
        case StartTimer(duration_ms=ms):
            return f"timer {ms!r}"
        case CancelTimer(timer_cmd=target):
            return f"cancel_timer {target!r}"
        case Patched(change_id=change_id):
            return f"patched {change_id!r}"
        case RequestApproval() as approval:
            return f"approval {approval.action[:80]!r} ({_policy(approval)})"
    raise AssertionError(command)


def _payload_diff(recorded: Command, issued: Command) -> str:
    """Where the same activity or child differs only in its payload: which top-level keys of
    the two msgpack maps differ (values are left out: they may be personal data)."""
    match recorded, issued:
        case (ScheduleActivity(name=a, args=old), ScheduleActivity(name=b, args=new)) if a == b:
            what = "args"
        case (StartChild(workflow_type=a, input=old), StartChild(workflow_type=b, input=new)) if (
            a == b
        ):
            what = "input"
        case _:
            return ""
    try:
        before, after = unpack(old), unpack(new)
    except NotMsgpack:
        return ""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return f"; {what} differ from the recorded ones"
    keys = sorted({*before, *after}, key=str)
    changed = [
        ("+" if k not in before else "-" if k not in after else "") + str(k)[:64]
        for k in keys
        if before.get(k, _MISSING) != after.get(k, _MISSING)
    ]
    if not changed:
        return ""
    return f"; {what} keys that differ from the recorded ones: {', '.join(changed[:20])}"


_MISSING = object()


def _policy(approval: RequestApproval) -> str:
    who = ", ".join([*approval.approvers, *(f"role {r}" for r in approval.roles)])
    return f"{approval.required} of {who}; expires in {approval.expires_ms} ms"


def _host_values(
    issued: Sequence[Command], raw: RawOutput, activation: WorkflowActivation
) -> tuple[Command, ...]:
    """Replace the guest's copies of new now/random values by what the host handed out."""
    wanted = [c for c in issued if isinstance(c, RecordNow | RecordRandom)]
    if len(wanted) != len(raw.handed_out):
        raise AbiViolation(
            f"the workflow took {len(raw.handed_out)} values from now/random but issued"
            f" {len(wanted)} new now/random commands",
            run_id=activation.run_id,
            digest=activation.digest,
        )
    values = iter(raw.handed_out)
    fixed: list[Command] = []
    for command in issued:
        if isinstance(command, RecordNow | RecordRandom):
            kind, value = next(values)
            if kind != command_kind(command):
                raise AbiViolation(
                    f"the workflow took a {kind} value but issued a"
                    f" {command_kind(command)} command",
                    run_id=activation.run_id,
                    digest=activation.digest,
                )
            command = (
                RecordNow(value=value)  # type: ignore[arg-type]
                if kind == "now"
                else RecordRandom(value=value)  # type: ignore[arg-type]
            )
        fixed.append(command)
    return tuple(fixed)


_AWAITABLE = (ScheduleActivity, StartTimer, AwaitSignal, StartChild, RequestApproval)


def _check_new_commands(
    sandbox: SandboxRunner,
    activation: WorkflowActivation,
    projection: Projection,
    outcome: WorkflowOutcome,
    new_commands: Sequence[Command],
) -> None:
    """What the host refuses to append, whatever the guest says."""

    def violation(message: str) -> AbiViolation:
        return AbiViolation(message, run_id=activation.run_id, digest=activation.digest)

    if len(new_commands) > MAX_NEW_COMMANDS:
        raise violation(
            f"issued {len(new_commands)} new commands in one activation; the cap is"
            f" {MAX_NEW_COMMANDS}"
        )
    exported = sandbox.activities(activation.digest)
    first_new = len(projection.commands)
    for offset, command in enumerate(new_commands):
        if isinstance(command, ScheduleActivity) and command.name not in exported:
            raise violation(
                f"scheduled activity {command.name[:128]!r}, which the module does not export"
            )
        if isinstance(command, CancelTimer) and not (
            0 <= command.timer_cmd < first_new + offset
            and isinstance(outcome.commands[command.timer_cmd], StartTimer)
        ):
            raise violation(f"cancel_timer names command {command.timer_cmd}, which is no timer")
    if outcome.status is WorkflowStatus.SUSPENDED:
        resolved = projection.resolved()
        # The new commands first: a step usually waits for one it has just issued.
        order = itertools.chain(
            enumerate(new_commands, first_new), enumerate(outcome.commands[:first_new])
        )
        if not any(isinstance(c, _AWAITABLE) and i not in resolved for i, c in order):
            raise violation("suspended although every command it issued has its result")


def check_determinism(
    activation: WorkflowActivation,
    projection: Projection,
    outcome: WorkflowOutcome,
    *,
    start: int = 0,
) -> None:
    """Raise `NonDeterminism` at the first position where the guest and history disagree.
    `start`: positions before it are known to agree (`ReplayMemo.agreed`)."""
    recorded = projection.commands
    for position in range(start, min(len(recorded), len(outcome.commands))):
        command = outcome.commands[position]
        # Commands compare as replay means it (abi: options and close policies are left out);
        # a replayed now/random must hand back exactly the recorded value.
        if recorded[position].command != command:
            raise diverged(activation, recorded[position], position, command)
    if len(outcome.commands) < len(recorded):
        position = len(outcome.commands)
        raise diverged(activation, recorded[position], position, None)


def diverged(
    activation: WorkflowActivation,
    recorded: RecordedCommand,
    position: int,
    issued: Command | None,
) -> NonDeterminism:
    """The non-determinism of issuing `issued` (None: nothing) where history holds `recorded`."""
    what = _describe_issued(issued)
    if issued is not None:
        what += _payload_diff(recorded.command, issued)
    return NonDeterminism(
        run_id=activation.run_id,
        digest=activation.digest,
        position=position,
        seq=recorded.seq,
        recorded=_describe_issued(recorded.command),
        issued=what,
    )


def _run(
    sandbox: SandboxRunner,
    activation: WorkflowActivation,
    projection: Projection,
    query: str | None,
    *,
    fresh: bool = False,
) -> RawOutput:
    first = activation.events[0].payload if activation.events else None
    envelope = encode_workflow_input(
        run_id=activation.run_id,
        workflow=activation.workflow_type,
        workflow_id=first.workflow_id if isinstance(first, RunStarted) else "",
        input=activation.input,
        results=projection.results,
        recorded=len(projection.commands),
        cancel=projection.cancel,
        query=query,
    )
    return sandbox.run(
        ActivationRequest(
            kind=ActivationKind.WORKFLOW,
            digest=activation.digest,
            export="amber_workflow." + activation.workflow_type,
            input=envelope,
            run_id=activation.run_id,
            step=len(projection.commands),
            limits=activation.limits,
            query=query is not None,
            fresh=fresh,
        )
    )


def with_usage(fault: GuestFault, raw: RawOutput, *, step: int | None) -> GuestFault:
    """`fault`, found after the guest returned, with the fuel and memory it used and the step
    filled in where the fault did not say (a crash record carries them whatever its reason)."""
    if fault.fuel_used is None:
        fault.fuel_used = raw.fuel_used
    if fault.memory_bytes is None:
        fault.memory_bytes = raw.memory_bytes
    if fault.step is None:
        fault.step = step
    return fault


def _decode(
    raw: RawOutput, activation: WorkflowActivation, memo: ReplayMemo | None = None
) -> WorkflowOutcome:
    try:
        if memo is None:
            outcome = decode_workflow_output(raw.envelope)
        else:
            outcome = memo.decode(activation.run_id, raw.envelope)
    except MalformedEnvelope as exc:
        raise MalformedOutput(
            str(exc),
            run_id=activation.run_id,
            digest=activation.digest,
            fuel_used=raw.fuel_used,
            memory_bytes=raw.memory_bytes,
        ) from None
    if raw.suspended != (outcome.status is WorkflowStatus.SUSPENDED):
        raise MalformedOutput(
            f"status {outcome.status.value!r} returned "
            + ("through await_results" if raw.suspended else "as the export's result"),
            run_id=activation.run_id,
            digest=activation.digest,
        )
    return outcome


def _checked(
    sandbox: SandboxRunner,
    activation: WorkflowActivation,
    projection: Projection,
    raw: RawOutput,
    memo: ReplayMemo | None,
) -> tuple[WorkflowOutcome, tuple[Command, ...]]:
    """The guest's outcome and new commands, checked against its history."""
    first_new = len(projection.commands)
    outcome = _decode(raw, activation, memo)
    if memo is None:
        check_determinism(activation, projection, outcome)
    else:
        start = memo.agreed(activation.run_id, projection.commands, outcome.commands)
        check_determinism(activation, projection, outcome, start=start)
        memo.note_agreed(activation.run_id, projection.commands, outcome.commands)
    new_commands = _host_values(outcome.commands[first_new:], raw, activation)
    _check_new_commands(sandbox, activation, projection, outcome, new_commands)
    return outcome, new_commands


def activate_workflow(
    sandbox: SandboxRunner,
    activation: WorkflowActivation,
    *,
    fresh: bool = False,
    memo: ReplayMemo | None = None,
) -> WorkflowStep:
    """Replay the run through its module and return what to append. Raises `GuestFault`s.

    `fresh`: from the top in a new instance even where the run's live instance could go on
    (a version check: it must neither use nor leave a live instance of the run).
    `memo`: the worker's `ReplayMemo`, to project only the events added since the run's
    last activation and decode only the output's new commands."""
    if memo is None:
        projection = project(activation.events)
    else:
        projection = memo.project(activation.run_id, activation.events)
    raw = _run(sandbox, activation, projection, None, fresh=fresh)
    first_new = len(projection.commands)
    try:  # the guest ran: whatever is refused now is recorded with what it used, and where
        outcome, new_commands = _checked(sandbox, activation, projection, raw, memo)
    except GuestFault as fault:
        if not (raw.continued or raw.parked):
            raise with_usage(fault, raw, step=first_new) from None
        # A live instance handed its output over (parked in its wait, or gone on from the last
        # one): the failure is recorded from a replay from the top, whose fuel and memory a
        # triage bundle reproduces (a parked guest has not unwound, a replayed one has).
        raw = _run(sandbox, activation, projection, None, fresh=True)
        try:
            outcome, new_commands = _checked(sandbox, activation, projection, raw, memo)
        except GuestFault as again:
            raise with_usage(again, raw, step=first_new) from None
    waits = [c.name for c in new_commands if isinstance(c, AwaitSignal)]
    reactivate = any(projection.buffered_signals.get(name, 0) for name in waits)
    return WorkflowStep(
        expected_last_seq=projection.last_seq,
        first_new_cmd=first_new,
        new_commands=new_commands,
        status=outcome.status,
        result=outcome.result,
        error=outcome.error,
        stats=ActivationStats(
            fuel_used=raw.fuel_used,
            memory_bytes=raw.memory_bytes,
            host_calls=raw.host_calls,
            duration_s=raw.duration_s,
            logs=raw.logs,
            continued=raw.continued,
        ),
        reactivate=reactivate,
    )


class QueryNotPublished(AbiViolation):
    """The workflow never published a value under the queried name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryResult:
    """The value a query answers with, and how the replay behind it ended."""

    value: bytes
    ended: str
    """suspended, completed, failed, ... or the failure reason if the replay faulted."""


def answer_query(sandbox: SandboxRunner, activation: WorkflowActivation, name: str) -> QueryResult:
    """Replay the run and answer with the last value it published under `name`.

    Nothing is appended. A replay that faults half-way still answers from what was published
    before the fault, so a stuck or failing run can be inspected.
    """
    projection = project(activation.events)
    try:
        raw = _run(sandbox, activation, projection, name)
        published, ended = raw.published, _decode(raw, activation).status.value
    except GuestFault as fault:
        published, ended = fault.published, fault.reason.value
    if name not in published:
        raise QueryNotPublished(
            f"the workflow published nothing under {name!r} (its replay ended: {ended})",
            run_id=activation.run_id,
            digest=activation.digest,
        )
    return QueryResult(value=published[name], ended=ended)
