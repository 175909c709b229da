"""Poison-pill policy: which failures are crashes, how a crash is fingerprinted, and when a task
that keeps crashing is poisoned (routed to the surgical pool) or its run suspended.

A *crash* is a failure of the sandbox or its host, not of the business logic: a trap, running
out of fuel or memory, a deadline without an activity timeout behind it, malformed output, an
ABI violation, a lost worker, a dead sandbox host process. An activity's own error is not a
crash (its retry policy decides), nor is an activity timeout. Crashes are counted per task, per
step, per fingerprint; three in a row (configurable) poison the task, and a trap or divergence in
workflow code poisons it at once (replaying it again cannot succeed). Crashes do not consume an
activity's retry attempts: a crashing activity is not "failing", it is broken, and an operator
decides.

Rejected: counting trailing error entries in history (Golem #1798: other entries in between
made retries infinite); moving poisoned tasks to another table (two queues can lose a task in
between); a boolean "paused" status (Obelisk replaced it with a lifecycle field, as we do).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from amber.history import Crash, Task, TaskKind
from amber.runtime.model import FailureReason, PoisonPolicy

CRASHES = frozenset(
    {
        FailureReason.TRAP,
        FailureReason.OUT_OF_FUEL,
        FailureReason.MEMORY_LIMIT,
        FailureReason.DEADLINE,
        FailureReason.NON_DETERMINISM,
        FailureReason.MALFORMED_OUTPUT,
        FailureReason.ABI_VIOLATION,
        FailureReason.STACK_OVERFLOW,
        FailureReason.WORKER_LOST,
        FailureReason.MODULE_UNAVAILABLE,
        FailureReason.PAYLOAD_TOO_LARGE,
        "host_crash",
        "worker_error",
    }
)
"""Failure reasons that count as crashes (anything else follows the retry policy)."""

POISON_AT_ONCE = frozenset(
    {FailureReason.TRAP, FailureReason.STACK_OVERFLOW, FailureReason.NON_DETERMINISM}
)
"""Deterministic faults: in workflow code they poison on their first occurrence."""

GUEST_FAULTS = frozenset(
    {
        FailureReason.TRAP,
        FailureReason.STACK_OVERFLOW,
        FailureReason.OUT_OF_FUEL,
        FailureReason.MEMORY_LIMIT,
        FailureReason.NON_DETERMINISM,
        FailureReason.MALFORMED_OUTPUT,
        FailureReason.ABI_VIOLATION,
        FailureReason.PAYLOAD_TOO_LARGE,
    }
)
"""Crashes the guest's code causes by itself: when one fingerprint of these has poisoned a run,
the same crash in another run is poisoned at once. Lost workers, dead host processes and
deadlines are left out: they say as much about the machine as about the code."""


_ORDINALS: Final = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}


def is_crash(reason: str) -> bool:
    return reason in CRASHES


def fingerprint(task: Task, step: int | None, reason: str, trap_code: str | None) -> str:
    """What identifies one kind of crash: the same code failing the same way at the same step.

    The message is left out (it carries addresses, sizes, times); the module digest is in,
    since a fixed version is a different crash. 16 hex digits.
    """
    key = "\x00".join((task.kind.value, task.name, str(step), reason, trap_code or "", task.digest))
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What a crash does to its task: where it goes, when it is seen again, and whether its
    run is suspended."""

    pool: str
    visible_at: datetime
    crash: Crash
    poisoned_at: datetime | None
    poison_reason: str | None
    suspend: bool = False


def judge(
    task: Task,
    crash: Crash,
    reason: str,
    now: datetime,
    policy: PoisonPolicy,
    surgical: int,
    *,
    known: str | None = None,
) -> Verdict:
    """The consequence of `task`'s crash (`crash` is its counter including this one);
    `surgical` is how many times it has failed in the surgical pool since it was poisoned;
    `known`: why the same fingerprint (same code, step, fault and version) is a known crash (it
    already poisoned another run, or crashed often enough lately), so this one is poisoned at
    its first crash instead of spending two more attempts of the healthy pool's capacity."""
    if task.poisoned_at is not None and task.pool == "surgical":
        if now - task.poisoned_at >= policy.suspend_after:
            return Verdict(
                pool="held",
                visible_at=now,
                crash=crash,
                poisoned_at=task.poisoned_at,
                poison_reason=task.poison_reason,
                suspend=True,
            )
        return Verdict(
            pool="surgical",
            visible_at=now + policy.surgical_delay(surgical),
            crash=crash,
            poisoned_at=task.poisoned_at,
            poison_reason=task.poison_reason,
        )
    at_once = task.kind is TaskKind.WORKFLOW and reason in POISON_AT_ONCE
    if at_once or known is not None or crash.count >= policy.crashes_to_poison:
        if at_once:
            why = f"{reason} in workflow code (deterministic: poisoned at once)"
        elif known is not None and crash.count < policy.crashes_to_poison:
            nth = _ORDINALS.get(crash.count, f"#{crash.count}")
            why = (
                f"{reason} {_where(crash)}: fingerprint {crash.fingerprint} {known}"
                f" (poisoned at its {nth} crash)"
            )
        else:
            why = f"{crash.count} consecutive crashes ({reason}) {_where(crash)}"
        return Verdict(
            pool="surgical",
            visible_at=now + policy.surgical_delay(0),
            crash=crash,
            poisoned_at=now,
            poison_reason=why,
        )
    backoff = policy.crash_backoff * (2 ** min(crash.count - 1, 10))
    return Verdict(
        pool="main", visible_at=now + backoff, crash=crash, poisoned_at=None, poison_reason=None
    )


def _where(crash: Crash) -> str:
    """Where a crash happened, for a poison reason: the step, when the fault names one."""
    return "with no step recorded" if crash.step is None else f"at step {crash.step}"
