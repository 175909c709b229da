"""Human approval: the policy map an `approval` command carries and the result it resolves to
(abi/README.md, "Workflow output"; `amber_request_approval` in `amber_commands.h`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from . import _msgpack

__all__ = [
    "MAX_ACTION_CHARS",
    "MAX_APPROVERS",
    "ApprovalDecision",
    "ApprovalOutcome",
    "ApprovalResult",
    "check_action",
    "parse_result",
    "policy_map",
]

MAX_ACTION_CHARS = 1000
MAX_APPROVERS = 64


class ApprovalOutcome(StrEnum):
    """How an approval ended. An expiry is the workflow's timeout path, not an error."""

    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecision:
    """One person's decision."""

    approver: str
    approve: bool
    comment: str
    at_ms: int
    """When it was made, ms since the epoch."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalResult:
    """What an approval resolved to."""

    outcome: ApprovalOutcome
    decisions: tuple[ApprovalDecision, ...]

    @property
    def approved(self) -> bool:
        return self.outcome is ApprovalOutcome.APPROVED


def _names(items: Sequence[str], what: str) -> list[str]:
    if isinstance(items, str) or not all(isinstance(i, str) and i for i in items):
        raise TypeError(f"{what} must be a list of non-empty str")
    if len(items) > MAX_APPROVERS:
        raise ValueError(f"at most {MAX_APPROVERS} {what}")
    return list(items)


def check_action(action: str) -> str:
    """`action` if approvers can be shown it: 1 to 1,000 printable characters."""
    if not isinstance(action, str) or not 1 <= len(action) <= MAX_ACTION_CHARS:
        raise ValueError(f"an approval's action has 1 to {MAX_ACTION_CHARS} characters")
    if not action.isprintable():
        raise ValueError("an approval's action must be printable (it is shown verbatim)")
    return action


def policy_map(approvers: Sequence[str], roles: Sequence[str], required: int) -> dict[str, object]:
    """The policy map {approvers, roles, required}, all three always written, in that order."""
    people, groups = _names(approvers, "approvers"), _names(roles, "roles")
    if not people and not groups:
        raise ValueError("an approval needs at least one approver or role")
    if isinstance(required, bool) or not isinstance(required, int) or required < 1:
        raise ValueError(f"required must be an int >= 1, not {required!r}")
    if not groups and required > len(people):
        raise ValueError(f"{required} approvals required of {len(people)} approvers")
    return {"approvers": people, "roles": groups, "required": required}


def parse_result(payload: bytes) -> ApprovalResult:
    """The approval's recorded result (a msgpack map in a bin)."""
    doc: Any = _msgpack.decode(payload)
    if not isinstance(doc, dict) or not isinstance(doc.get("outcome"), str):
        raise ValueError("an approval result must be a map with an 'outcome'")
    decisions = doc.get("decisions", [])
    if not isinstance(decisions, list):
        raise ValueError("an approval result's 'decisions' must be an array")
    parsed: list[ApprovalDecision] = []
    for d in decisions:
        if (
            not isinstance(d, dict)
            or not isinstance(d.get("approver"), str)
            or not isinstance(d.get("approve"), bool)
            or not isinstance(d.get("comment", ""), str)
            or isinstance(d.get("at_ms"), bool)
            or not isinstance(d.get("at_ms"), int)
        ):
            raise ValueError(f"malformed approval decision {d!r}")
        parsed.append(
            ApprovalDecision(
                approver=d["approver"],
                approve=d["approve"],
                comment=d.get("comment", ""),
                at_ms=d["at_ms"],
            )
        )
    return ApprovalResult(outcome=ApprovalOutcome(doc["outcome"]), decisions=tuple(parsed))
