"""Workflow activations: replay the whole history through the pinned module, match, extend.

The history is projected into what the guest needs (every recorded result, in history order)
and what the host checks (every recorded command, by index). The guest re-issues all its
commands from the start; the first `n` must equal the `n` recorded ones, and the rest are new.
The same function serves live workers and offline replay (tests, triage): there is one path.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from abi import (
    Command,
    ErrorInfo,
    MalformedEnvelope,
    RecordedResult,
    RecordNow,
    RecordRandom,
    ScheduleActivity,
    WorkflowOutcome,
    WorkflowStatus,
    command_kind,
    decode_workflow_output,
    encode_workflow_input,
)
from history import Event, EventType

from ._errors import CorruptHistory
from ._faults import AbiViolation, MalformedOutput, NonDeterminism
from ._host import ActivationKind
from ._sandbox import ActivationRequest, RawOutput, Sandbox, SandboxLimits

MAX_NEW_COMMANDS = 1000
"""New commands one workflow activation may issue (Temporal caps pending activities at 2,000)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedCommand:
    """A command as history recorded it."""

    cmd: int
    seq: int
    kind: str
    name: str = ""
    args: bytes = b""
    value: object = None
    """The recorded value of a `now` or `random` marker."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Projection:
    """A history as the replayer sees it."""

    commands: tuple[RecordedCommand, ...]
    results: tuple[RecordedResult, ...]
    last_seq: int


def _describe_recorded(command: RecordedCommand) -> str:
    if command.kind == "activity":
        return f"activity {command.name!r} (args {_fingerprint(command.args)})"
    if command.kind == "random" and isinstance(command.value, bytes):
        return f"random ({len(command.value)} bytes)"
    return f"{command.kind} {command.value!r}"


def _describe_issued(command: Command | None) -> str:
    if command is None:
        return "nothing (the workflow stopped before reaching it)"
    if isinstance(command, ScheduleActivity):
        return f"activity {command.name!r} (args {_fingerprint(command.args)})"
    if isinstance(command, RecordRandom):
        return f"random ({len(command.value)} bytes)"
    return f"{command_kind(command)} {command.value!r}"


def _fingerprint(data: bytes) -> str:
    return f"{len(data)} B sha256:{hashlib.sha256(data).hexdigest()[:12]}"


def _on_scheduled(event: Event, commands: list[RecordedCommand], _: list[RecordedResult]) -> None:
    p = event.payload
    commands.append(
        RecordedCommand(
            cmd=p["cmd"], seq=event.seq, kind="activity", name=p["name"], args=p["args"]
        )
    )


def _on_marker(
    event: Event, commands: list[RecordedCommand], results: list[RecordedResult]
) -> None:
    p = event.payload
    commands.append(RecordedCommand(cmd=p["cmd"], seq=event.seq, kind=p["kind"], value=p["value"]))
    results.append(RecordedResult(cmd=p["cmd"], seq=event.seq, value=p["value"]))


def _on_completed(event: Event, _: list[RecordedCommand], results: list[RecordedResult]) -> None:
    p = event.payload
    results.append(RecordedResult(cmd=p["cmd"], seq=event.seq, value=p["result"]))


def _on_failed(event: Event, _: list[RecordedCommand], results: list[RecordedResult]) -> None:
    p = event.payload
    error = ErrorInfo(type=p["error_type"], message=p["message"])
    results.append(RecordedResult(cmd=p["cmd"], seq=event.seq, error=error))


_PROJECT = {
    EventType.ACTIVITY_SCHEDULED: _on_scheduled,
    EventType.MARKER_RECORDED: _on_marker,
    EventType.ACTIVITY_COMPLETED: _on_completed,
    EventType.ACTIVITY_FAILED: _on_failed,
}


def project(events: Sequence[Event]) -> Projection:
    """Split a history into recorded commands (by index) and results (in history order)."""
    commands: list[RecordedCommand] = []
    results: list[RecordedResult] = []
    for event in events:
        handler = _PROJECT.get(event.type)
        if handler is not None:
            handler(event, commands, results)
    for index, command in enumerate(commands):
        if command.cmd != index:
            raise CorruptHistory(f"command {index} is recorded with index {command.cmd}")
    return Projection(
        commands=tuple(commands),
        results=tuple(results),
        last_seq=events[-1].seq if events else 0,
    )


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
class ActivationStats:
    """What one activation cost (fuel is deterministic for a given module and input)."""

    fuel_used: int
    memory_bytes: int
    host_calls: int
    duration_s: float
    logs: tuple[tuple[int, str], ...] = ()


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


def _matches(recorded: RecordedCommand, issued: Command) -> bool:
    if recorded.kind != command_kind(issued):
        return False
    if isinstance(issued, ScheduleActivity):
        return recorded.name == issued.name and recorded.args == issued.args
    # A replayed now/random must hand back exactly the recorded value: a guest that reads the
    # clock or draws randomness afresh while replaying diverges here.
    return recorded.value == issued.value


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
            command = RecordNow(value=value) if kind == "now" else RecordRandom(value=value)  # type: ignore[arg-type]
        fixed.append(command)
    return tuple(fixed)


def _check_new_commands(
    sandbox: Sandbox,
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
    for command in new_commands:
        if isinstance(command, ScheduleActivity) and command.name not in exported:
            raise violation(
                f"scheduled activity {command.name[:128]!r}, which the module does not export"
            )
    if outcome.status is WorkflowStatus.SUSPENDED:
        resolved = {r.cmd for r in projection.results}
        pending = [
            i
            for i, c in enumerate(outcome.commands)
            if isinstance(c, ScheduleActivity) and i not in resolved
        ]
        if not pending:
            raise violation("suspended although every command it issued has its result")


def check_determinism(
    activation: WorkflowActivation, projection: Projection, outcome: WorkflowOutcome
) -> None:
    """Raise `NonDeterminism` at the first position where the guest and history disagree."""
    recorded = projection.commands
    for position, command in enumerate(outcome.commands[: len(recorded)]):
        if not _matches(recorded[position], command):
            raise NonDeterminism(
                run_id=activation.run_id,
                digest=activation.digest,
                position=position,
                seq=recorded[position].seq,
                recorded=_describe_recorded(recorded[position]),
                issued=_describe_issued(command),
            )
    if len(outcome.commands) < len(recorded):
        position = len(outcome.commands)
        raise NonDeterminism(
            run_id=activation.run_id,
            digest=activation.digest,
            position=position,
            seq=recorded[position].seq,
            recorded=_describe_recorded(recorded[position]),
            issued=_describe_issued(None),
        )


def activate_workflow(sandbox: Sandbox, activation: WorkflowActivation) -> WorkflowStep:
    """Replay the run through its module and return what to append. Raises `GuestFault`s."""
    projection = project(activation.events)
    envelope = encode_workflow_input(
        run_id=activation.run_id,
        workflow=activation.workflow_type,
        input=activation.input,
        results=projection.results,
    )
    raw = sandbox.run(
        ActivationRequest(
            kind=ActivationKind.WORKFLOW,
            digest=activation.digest,
            export="amber_workflow." + activation.workflow_type,
            input=envelope,
            run_id=activation.run_id,
            step=len(projection.commands),
            limits=activation.limits,
        )
    )
    stats = ActivationStats(
        fuel_used=raw.fuel_used,
        memory_bytes=raw.memory_bytes,
        host_calls=raw.host_calls,
        duration_s=raw.duration_s,
        logs=raw.logs,
    )
    try:
        outcome = decode_workflow_output(raw.envelope)
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
    check_determinism(activation, projection, outcome)
    first_new = len(projection.commands)
    new_commands = _host_values(outcome.commands[first_new:], raw, activation)
    _check_new_commands(sandbox, activation, projection, outcome, new_commands)
    return WorkflowStep(
        expected_last_seq=projection.last_seq,
        first_new_cmd=first_new,
        new_commands=new_commands,
        status=outcome.status,
        result=outcome.result,
        error=outcome.error,
        stats=stats,
    )
