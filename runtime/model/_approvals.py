"""What an approver sees and does: the view of one token's approval, a decision, its outcome.

Shared by the approval service (gRPC, CLI) and the HTTP callback page, which talk to the
service only through `ApprovalDesk`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from amber.history import Approval, ApprovalToken, Decision


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalView:
    """One approval as the holder of a valid token may see it."""

    approval_id: str
    tenant: str
    run_id: str
    workflow_type: str
    step: int
    """The workflow command that requested the approval."""
    action: str
    """What is to be approved, as the workflow named it (e.g. "refund 120.00 EUR")."""
    approver: str
    """The approver this token was issued to."""
    status: str
    """pending, approved, rejected or expired."""
    required: int
    """Approvals needed (any N of the listed approvers or role members)."""
    approvals: int
    """Distinct approvers who approved so far."""
    expires_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionOutcome:
    """What a decision did."""

    approval_id: str
    status: str
    """The approval's status after the decision (pending while a quorum is still short)."""
    counted: bool
    """False when this approver had already decided (a duplicate click is counted once)."""
    approvals: int
    required: int


class ApprovalDesk(Protocol):
    """Where approvers' decisions go (implemented by `runtime.ApprovalService`)."""

    def view(self, token: str) -> ApprovalView:
        """The approval a token belongs to; `InvalidToken` otherwise. Writes nothing."""

    def decide(self, token: str, *, approve: bool, comment: str, via: str) -> DecisionOutcome:
        """Approve or reject with a token (single use). `via` says where it came from
        ("http", "grpc"). Raises `InvalidToken` (audited) or `ApprovalClosed`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IssuedToken:
    """A freshly minted token on its way to its approver (never stored as such)."""

    approval_id: str
    approver: str
    token: str
    link: str
    """The approval page's URL for this token ("" when no page is served)."""
    action: str
    tenant: str
    run_id: str
    expires_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionRequest:
    """An approver's decision, with what the caller says it decides (checked if given)."""

    token: str
    approve: bool
    comment: str = ""
    via: str = "grpc"
    approver: str = ""
    """The caller's identity, if it claims one: it must be the token's approver."""
    tenant: str = ""
    run_id: str = ""
    step: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDetail:
    approval: Approval
    tokens: tuple[ApprovalToken, ...]
    decisions: tuple[Decision, ...]
