"""Operator triage commands on troubled runs (resume, retry, skip, terminate) and their outcome."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ._runs import DEFAULT_TENANT


class TriageAction(enum.StrEnum):
    RESUME = "resume"
    RETRY = "retry"
    SKIP = "skip"
    TERMINATE = "terminate"


@dataclass(frozen=True, slots=True, kw_only=True)
class TriageCommand:
    """One operator command, on named runs or (bulk) on every run one fingerprint poisoned."""

    action: TriageAction
    operator: str
    reason: str
    run_ids: tuple[str, ...] = ()
    fingerprint: str = ""
    tenant: str = DEFAULT_TENANT
    version: str = ""
    """resume: the fixed version to continue on (digest, prefix or label)."""
    step: int | None = None
    """skip: the activity step to complete."""
    result: bytes = b""
    """skip: the activity's result (msgpack)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TriageOutcome:
    """What a command did to one run."""

    run_id: str
    outcome: str
    """resumed, retried, skipped, terminated, or refused (see `detail`)."""
    detail: str = ""
    from_digest: str = ""
    to_digest: str = ""
