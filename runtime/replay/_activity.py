"""Activity activations: one attempt of one activity, in its own fresh sandbox."""

from __future__ import annotations

from dataclasses import dataclass

from amber.abi import (
    ActivityInput,
    ActivityOutcome,
    MalformedEnvelope,
    decode_activity_output,
    encode_activity_input,
)
from amber.runtime.model import ActivationStats, MalformedOutput
from amber.runtime.sandbox import (
    ActivationKind,
    ActivationRequest,
    ActivityHost,
    SandboxLimits,
    SandboxRunner,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityAttempt:
    """One attempt of an activity on the module version that scheduled it."""

    digest: str
    cmd: int
    input: ActivityInput
    limits: SandboxLimits
    host: ActivityHost | None = None
    """Heartbeats, cancellation and HTTP for the guest (None: those imports are refused)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityReport:
    """An activity attempt's outcome and what it cost."""

    outcome: ActivityOutcome
    stats: ActivationStats


def run_activity(sandbox: SandboxRunner, attempt: ActivityAttempt) -> ActivityReport:
    """Run the attempt and decode its outcome. Raises `GuestFault`s."""
    return run_activity_request(sandbox, activity_request(attempt))


def activity_request(attempt: ActivityAttempt) -> ActivationRequest:
    """The activation that runs `attempt` (its input envelope built)."""
    return ActivationRequest(
        kind=ActivationKind.ACTIVITY,
        digest=attempt.digest,
        export="amber_activity." + attempt.input.activity,
        input=encode_activity_input(attempt.input),
        run_id=attempt.input.run_id,
        step=attempt.cmd,
        limits=attempt.limits,
        activity=attempt.host,
    )


def run_activity_request(sandbox: SandboxRunner, request: ActivationRequest) -> ActivityReport:
    """Run an activity activation whose input envelope is already built (an offline replay of
    a recorded one) and decode its outcome. Raises `GuestFault`s."""
    raw = sandbox.run(request)
    if raw.suspended:  # unreachable: the host refuses await_results from activities
        raise MalformedOutput(
            "an activity cannot suspend",
            run_id=request.run_id,
            step=request.step,
            digest=request.digest,
            fuel_used=raw.fuel_used,
            memory_bytes=raw.memory_bytes,
        )
    try:
        outcome = decode_activity_output(raw.envelope)
    except MalformedEnvelope as exc:
        raise MalformedOutput(
            str(exc),
            run_id=request.run_id,
            step=request.step,
            digest=request.digest,
            fuel_used=raw.fuel_used,
            memory_bytes=raw.memory_bytes,
        ) from None
    stats = ActivationStats(
        fuel_used=raw.fuel_used,
        memory_bytes=raw.memory_bytes,
        host_calls=raw.host_calls,
        duration_s=raw.duration_s,
        logs=raw.logs,
    )
    return ActivityReport(outcome=outcome, stats=stats)
