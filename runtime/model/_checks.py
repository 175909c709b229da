"""A replay check's verdict on one run against a candidate version (compatible, or the first
divergence), as migration, `versions check` and the API report it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amber.history import Run

MAX_CHECKED_RUNS = 10_000
"""Open runs one check replays; a type with more is checked partly and not remembered."""


MAX_NAMED_RUNS = 1_000
"""Run ids one check or migration may name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCheck:
    """One run's verdict on a candidate version (and, for a migration, what was done)."""

    run_id: str
    status: str
    verdict: str
    """compatible, incompatible, failed (the replay faulted otherwise), already_on, timeout."""
    position: int | None = None
    seq: int | None = None
    recorded: str = ""
    issued: str = ""
    detail: str = ""
    checked_seq: int = 0
    outcome: str = ""
    """migrate only: migrated, refused, moved_on (history grew since the check), skipped."""


def run_check_of(run: Run, doc: dict[str, Any]) -> RunCheck:
    return RunCheck(
        run_id=run.run_id,
        status=run.status.value,
        verdict=str(doc.get("verdict", "failed")),
        position=doc.get("position"),
        seq=doc.get("seq"),
        recorded=str(doc.get("recorded", "")),
        issued=str(doc.get("issued", "")),
        detail=str(doc.get("detail", ""))[:2000],
        checked_seq=int(doc.get("checked_seq", 0)),
    )
