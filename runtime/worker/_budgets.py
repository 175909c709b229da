"""Budgets per workflow type and per activity: the worker's limits, tightened or widened where an
operator knows better than the defaults.

A fuel bomb costs its whole budget on every crash (past its first slice in the background lane,
`ParallelSandbox`), so an activity known to be cheap is best held to a small one (10⁹ fuel, the
default, is about a quarter of a second of guest CPU in a tight loop on this machine; 10⁷ ends
the same bomb a hundred times sooner). The worker applies
them; they travel with nothing else, so every worker serving a queue should be given the same
file (`amber worker --budgets FILE`).

Rejected: budgets in the module's manifest (the code under suspicion would set its own limits).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from amber.abi import InvalidInput
from amber.runtime.sandbox import Repro, SandboxLimits

MAX_FUEL = 10**13
MAX_DEADLINE_S = 24 * 3600.0
MAX_MEMORY_MB = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Limits for one workflow type or activity; None keeps the worker's default."""

    fuel: int | None = None
    deadline_s: float | None = None
    memory_mb: int | None = None

    def applied_to(self, limits: SandboxLimits) -> SandboxLimits:
        return replace(
            limits,
            fuel=limits.fuel if self.fuel is None else self.fuel,
            deadline_s=limits.deadline_s if self.deadline_s is None else self.deadline_s,
            memory_bytes=limits.memory_bytes
            if self.memory_mb is None
            else self.memory_mb * 1024 * 1024,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Budgets:
    """Budgets by workflow type and by activity name."""

    workflows: Mapping[str, Budget] = field(default_factory=dict)
    activities: Mapping[str, Budget] = field(default_factory=dict)

    def for_workflow(self, workflow_type: str, default: SandboxLimits) -> SandboxLimits:
        budget = self.workflows.get(workflow_type)
        return default if budget is None else budget.applied_to(default)

    def for_activity(self, activity: str, default: SandboxLimits) -> SandboxLimits:
        budget = self.activities.get(activity)
        return default if budget is None else budget.applied_to(default)

    @classmethod
    def from_json(cls, doc: object) -> Budgets:
        """`{"workflows": {name: budget}, "activities": {name: budget}}`, a budget being
        `{"fuel": int, "deadline_s": number, "memory_mb": int}` (each optional)."""
        if not isinstance(doc, dict) or set(doc) - {"workflows", "activities"}:
            raise InvalidInput('budgets must be {"workflows": {...}, "activities": {...}}')
        return cls(
            workflows=_budgets(doc.get("workflows", {}), "workflows"),
            activities=_budgets(doc.get("activities", {}), "activities"),
        )

    @classmethod
    def from_file(cls, path: Path) -> Budgets:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise InvalidInput(f"cannot read budgets from {path}: {exc}") from None
        return cls.from_json(doc)


def _budgets(doc: object, where: str) -> dict[str, Budget]:
    if not isinstance(doc, dict):
        raise InvalidInput(f"budgets {where!r} must map names to budgets")
    return {str(name): _budget(value, f"{where}.{name}") for name, value in doc.items()}


def _budget(doc: Any, where: str) -> Budget:
    if not isinstance(doc, dict) or set(doc) - {"fuel", "deadline_s", "memory_mb"}:
        raise InvalidInput(f"budget {where} takes fuel, deadline_s and memory_mb")
    fuel, deadline, memory = doc.get("fuel"), doc.get("deadline_s"), doc.get("memory_mb")
    if fuel is not None and (not _int(fuel) or not 1 <= fuel <= MAX_FUEL):
        raise InvalidInput(f"budget {where}: fuel must be an integer in [1, {MAX_FUEL}]")
    if deadline is not None and (
        not isinstance(deadline, int | float)
        or isinstance(deadline, bool)
        or not 0 < deadline <= MAX_DEADLINE_S
    ):
        raise InvalidInput(f"budget {where}: deadline_s must be in (0, {MAX_DEADLINE_S:g}]")
    if memory is not None and (not _int(memory) or not 1 <= memory <= MAX_MEMORY_MB):
        raise InvalidInput(f"budget {where}: memory_mb must be an integer in [1, {MAX_MEMORY_MB}]")
    return Budget(
        fuel=fuel, deadline_s=None if deadline is None else float(deadline), memory_mb=memory
    )


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def no_tighter_than_crash(
    limits: SandboxLimits, crash_repro: bytes, *, deadline: bool = True, exact: bool = False
) -> SandboxLimits:
    """`limits` (fuel, memory, deadline: what flags and budgets set), raised wherever the
    task's last crash (`crash_repro`, its repro) ran under more. A crashed task's next attempt,
    in either pool and on any worker, is diagnosed under at least the limits it failed under: a
    surgical worker with less memory than the main worker turned a trap at 100 MiB into
    `memory_limit`, with a new fingerprint, a crash count starting over and a bundle replaying
    the wrong failure. Raised only up to what a budget may set (a repro is a worker's report).
    `deadline`: raise the wall-clock limit too (not where the attempt has its own
    start-to-close deadline). `exact` (the surgical pool, which diagnoses): lowered to them
    too, so that a surgical worker with looser flags neither turns a 1 s `deadline` into
    `out_of_fuel` 40 s later (another fingerprint, the count starting over) nor lets the task
    pass there while it crashes everywhere else."""
    if not crash_repro:
        return limits
    try:
        crashed = Repro.decode(crash_repro).limits
    except InvalidInput:
        return limits  # unreadable: the worker's own limits, as for a task that never crashed
    fuel = min(crashed.fuel, MAX_FUEL)
    memory = min(crashed.memory_bytes, MAX_MEMORY_MB << 20)
    wall = min(crashed.deadline_s, MAX_DEADLINE_S)
    if not exact:
        fuel, memory, wall = (
            max(limits.fuel, fuel),
            max(limits.memory_bytes, memory),
            max(limits.deadline_s, wall),
        )
    return replace(
        limits,
        fuel=fuel,
        memory_bytes=memory,
        deadline_s=wall if deadline else limits.deadline_s,
    )
