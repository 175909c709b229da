"""A replay check's verdict on one run against a candidate version (compatible, or the first
divergence), as migration, `versions check` and the API report it."""

from __future__ import annotations

from dataclasses import dataclass


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
    """migrate only: migrated, refused, moved_on (history grew since the check), closed (it
    closed after the check: a concurrent reset or terminate), skipped (closed or already on the
    version when checked)."""
