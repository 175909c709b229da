"""Why an activation failed: one typed error per failure reason, carrying where it happened.

Guest faults are what the guest did (trap, ran out of fuel, hit its memory limit or deadline,
returned garbage, broke the ABI, diverged from its history); they are distinct from host errors
(database, network), which are `RetryableError`s and say nothing about the guest.
"""

from __future__ import annotations

import enum
from typing import ClassVar

from amber.abi import AmberError


class FailureReason(enum.StrEnum):
    """The typed reason stored with every failed activation."""

    TRAP = "trap"
    OUT_OF_FUEL = "out_of_fuel"
    MEMORY_LIMIT = "memory_limit"
    DEADLINE = "deadline"
    NON_DETERMINISM = "non_determinism"
    MALFORMED_OUTPUT = "malformed_output"
    ABI_VIOLATION = "abi_violation"
    WORKER_LOST = "worker_lost"
    """The lease expired without a report (the worker crashed or hung)."""
    MODULE_UNAVAILABLE = "module_unavailable"
    """The worker could not load the module version (not stored, does not compile)."""
    PAYLOAD_TOO_LARGE = "payload_too_large"
    """The guest produced an argument or result above the server's payload limit."""
    APPLICATION_ERROR = "application_error"
    """An activity returned an error (not a fault of the sandbox)."""
    HOST_CRASH = "host_crash"
    """The process hosting the sandbox died (exit code or signal) before the activation ended."""
    STACK_OVERFLOW = "stack_overflow"
    """Runaway recursion: wasm's call stack ran out, or a C guest's stack in linear memory ran
    past its end (which wasm sees as an out-of-bounds access deep in a recursion)."""


class GuestFault(AmberError):
    """An activation failed because of what the guest did."""

    reason: ClassVar[FailureReason] = FailureReason.TRAP

    def __init__(
        self,
        message: str,
        *,
        run_id: str = "",
        step: int | None = None,
        digest: str = "",
        trap_code: str | None = None,
        fuel_used: int | None = None,
        memory_bytes: int | None = None,
    ) -> None:
        where = f"run {run_id}" if run_id else "activation"
        if step is not None:
            where += f", step {step}"
        if digest:
            where += f", module {digest[:12]}"
        super().__init__(f"{self.reason.value}: {message} ({where})")
        self.detail = message
        self.run_id = run_id
        self.step = step
        self.digest = digest
        self.trap_code = trap_code
        self.fuel_used = fuel_used
        self.memory_bytes = memory_bytes
        self.published: dict[str, bytes] = {}
        """Query values the workflow published before the fault."""


class GuestTrap(GuestFault):
    """The guest trapped (unreachable, out-of-bounds access, division by zero, ...)."""

    reason = FailureReason.TRAP


class StackOverflow(GuestFault):
    """The guest recursed past its stack."""

    reason = FailureReason.STACK_OVERFLOW


class OutOfFuel(GuestFault):
    """The guest used up its instruction budget."""

    reason = FailureReason.OUT_OF_FUEL


class SliceUsed(OutOfFuel):
    """A sliced activity used the fuel or CPU slice of its first run (`ActivationRequest.slice`):
    not its outcome, and never recorded; whoever sliced it runs it again from the start on its
    whole budget. An `OutOfFuel`, as a used-up budget would be, for any handler of that."""


class MemoryLimitExceeded(GuestFault):
    """The guest needed more memory than the activation's limit."""

    reason = FailureReason.MEMORY_LIMIT


class DeadlineExceeded(GuestFault):
    """The activation ran past its wall-clock deadline (in guest code or a host call)."""

    reason = FailureReason.DEADLINE


class MalformedOutput(GuestFault):
    """The guest's output was not a valid envelope."""

    reason = FailureReason.MALFORMED_OUTPUT


class AbiViolation(GuestFault):
    """The guest called host imports against the ABI's rules."""

    reason = FailureReason.ABI_VIOLATION


class NonDeterminism(GuestFault):
    """Replay issued a command different from the one recorded at the same position."""

    reason = FailureReason.NON_DETERMINISM

    def __init__(
        self,
        *,
        run_id: str,
        digest: str,
        position: int,
        recorded: str,
        issued: str,
        seq: int | None = None,
    ) -> None:
        at = f"at command {position}" + (f" (history seq {seq})" if seq is not None else "")
        super().__init__(
            f"{at} history recorded {recorded} but the workflow issued {issued}",
            run_id=run_id,
            step=position,
            digest=digest,
        )
        self.position = position
        self.seq = seq
        self.recorded = recorded
        self.issued = issued


class ModuleUnavailable(GuestFault):
    """The module version could not be loaded on this worker."""

    reason = FailureReason.MODULE_UNAVAILABLE


class HostCrash(GuestFault):
    """The process hosting the sandbox died (exit code or signal) before the activation ended.

    Raised by the surgical pool's `IsolatedSandbox`, whose child process ran the guest: the guest
    (or the host code it drove) took that process down, and only that process.
    """

    reason = FailureReason.HOST_CRASH
