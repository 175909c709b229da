"""Approvals in the store: requests, single-use tokens (hashes only), decisions, and roles.

Every state change is a conditional update: a token goes pending → used or pending → revoked
only if it is still pending; an approval goes pending → approved/rejected/expired only if it is
still pending; a decision is one row per (approval, approver). Callers hold the approval's row
lock (`get_approval_txn(for_update=True)`) for the whole decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._database import Cursor


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """One approval a workflow requested."""

    approval_id: str
    tenant: str
    run_id: str
    cmd: int
    action: str
    approvers: tuple[str, ...]
    roles: tuple[str, ...]
    required: int
    policy_version: str
    """sha256 of the policy (approvers, roles, required): what tokens were issued under."""
    status: str
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None = None
    delivered_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalToken:
    """A token as stored: its hash and what it is bound to."""

    token_hash: bytes
    approval_id: str
    approver: str
    tenant: str
    run_id: str
    cmd: int
    action_sha256: bytes
    policy_version: str
    status: str
    """pending, used or revoked."""
    issued_at: datetime
    expires_at: datetime
    closed_at: datetime | None = None
    issued_by: str | None = None
    """The operator who minted it by hand; None when it went out through the delivery sink."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    approval_id: str
    approver: str
    approve: bool
    comment: str
    via: str
    decided_at: datetime


_APPROVAL = (
    "approval_id::text, tenant, run_id::text, cmd, action, approvers, roles, required,"
    " policy_version, status, created_at, expires_at, decided_at, delivered_at"
)
_TOKEN = (
    "token_hash, approval_id::text, approver, tenant, run_id::text, cmd, action_sha256,"
    " policy_version, status, issued_at, expires_at, closed_at, issued_by"
)


def _approval(row: tuple[Any, ...]) -> Approval:
    (approval_id, tenant, run_id, cmd, action, approvers, roles, required, policy_version,
     status, created_at, expires_at, decided_at, delivered_at) = row  # fmt: skip
    return Approval(
        approval_id=approval_id,
        tenant=tenant,
        run_id=run_id,
        cmd=cmd,
        action=action,
        approvers=tuple(approvers),
        roles=tuple(roles),
        required=required,
        policy_version=policy_version,
        status=status,
        created_at=created_at,
        expires_at=expires_at,
        decided_at=decided_at,
        delivered_at=delivered_at,
    )


def _token(row: tuple[Any, ...]) -> ApprovalToken:
    (token_hash, approval_id, approver, tenant, run_id, cmd, action_sha256, policy_version,
     status, issued_at, expires_at, closed_at, issued_by) = row  # fmt: skip
    return ApprovalToken(
        token_hash=bytes(token_hash),
        approval_id=approval_id,
        approver=approver,
        tenant=tenant,
        run_id=run_id,
        cmd=cmd,
        action_sha256=bytes(action_sha256),
        policy_version=policy_version,
        status=status,
        issued_at=issued_at,
        expires_at=expires_at,
        closed_at=closed_at,
        issued_by=issued_by,
    )


def insert_approval_txn(cur: Cursor, approval: Approval) -> bool:
    """Record a requested approval; False if the run's command already has one (a replay)."""
    cur.execute(
        "INSERT INTO amber_approvals (approval_id, tenant, run_id, cmd, action, approvers, roles,"
        " required, policy_version, status, created_at, expires_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 'pending', %s, %s)"
        " ON CONFLICT (run_id, cmd) DO NOTHING",
        (
            approval.approval_id,
            approval.tenant,
            approval.run_id,
            approval.cmd,
            approval.action,
            list(approval.approvers),
            list(approval.roles),
            approval.required,
            approval.policy_version,
            approval.created_at,
            approval.expires_at,
        ),
    )
    return cur.rowcount == 1


def get_approval_txn(cur: Cursor, approval_id: str, *, for_update: bool = False) -> Approval | None:
    lock = " FOR UPDATE" if for_update else ""
    cur.execute(
        f"SELECT {_APPROVAL} FROM amber_approvals WHERE approval_id = %s{lock}", (approval_id,)
    )
    row = cur.fetchone()
    return None if row is None else _approval(row)


def approval_of_step_txn(
    cur: Cursor, run_id: str, cmd: int, *, for_update: bool = False
) -> Approval | None:
    lock = " FOR UPDATE" if for_update else ""
    cur.execute(
        f"SELECT {_APPROVAL} FROM amber_approvals WHERE run_id = %s AND cmd = %s{lock}",
        (run_id, cmd),
    )
    row = cur.fetchone()
    return None if row is None else _approval(row)


def list_approvals_txn(
    cur: Cursor, *, tenant: str, status: str | None, run_id: str | None, limit: int
) -> list[Approval]:
    """A tenant's approvals, newest first."""
    where, params = ["tenant = %s"], [tenant]
    if status:
        where.append("status = %s")
        params.append(status)
    if run_id:
        where.append("run_id = %s")
        params.append(run_id)
    cur.execute(
        f"SELECT {_APPROVAL} FROM amber_approvals WHERE {' AND '.join(where)}"
        " ORDER BY created_at DESC, approval_id LIMIT %s",
        (*params, limit),
    )
    return [_approval(row) for row in cur.fetchall()]


def undelivered_approvals_txn(cur: Cursor, now: datetime, *, limit: int) -> list[Approval]:
    """Pending approvals whose tokens were not minted yet (locked, skipping busy ones)."""
    cur.execute(
        f"SELECT {_APPROVAL} FROM amber_approvals WHERE status = 'pending'"
        " AND delivered_at IS NULL AND expires_at > %s ORDER BY created_at LIMIT %s"
        " FOR UPDATE SKIP LOCKED",
        (now, limit),
    )
    return [_approval(row) for row in cur.fetchall()]


def mark_delivered_txn(cur: Cursor, approval_id: str, now: datetime) -> None:
    cur.execute(
        "UPDATE amber_approvals SET delivered_at = %s WHERE approval_id = %s", (now, approval_id)
    )


def close_approval_txn(cur: Cursor, approval_id: str, status: str, now: datetime) -> bool:
    """pending → approved, rejected or expired; False if it was no longer pending."""
    cur.execute(
        "UPDATE amber_approvals SET status = %s, decided_at = %s"
        " WHERE approval_id = %s AND status = 'pending'",
        (status, now, approval_id),
    )
    return cur.rowcount == 1


def insert_token_txn(cur: Cursor, token: ApprovalToken) -> None:
    cur.execute(
        f"INSERT INTO amber_approval_tokens ({_TOKEN.replace('::text', '')})"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            token.token_hash,
            token.approval_id,
            token.approver,
            token.tenant,
            token.run_id,
            token.cmd,
            token.action_sha256,
            token.policy_version,
            token.status,
            token.issued_at,
            token.expires_at,
            token.closed_at,
            token.issued_by,
        ),
    )


def get_token_txn(
    cur: Cursor, token_hash: bytes, *, for_update: bool = False
) -> ApprovalToken | None:
    lock = " FOR UPDATE" if for_update else ""
    cur.execute(
        f"SELECT {_TOKEN} FROM amber_approval_tokens WHERE token_hash = %s{lock}", (token_hash,)
    )
    row = cur.fetchone()
    return None if row is None else _token(row)


def approval_tokens_txn(cur: Cursor, approval_id: str) -> list[ApprovalToken]:
    cur.execute(
        f"SELECT {_TOKEN} FROM amber_approval_tokens WHERE approval_id = %s ORDER BY issued_at",
        (approval_id,),
    )
    return [_token(row) for row in cur.fetchall()]


def use_token_txn(cur: Cursor, token_hash: bytes, now: datetime) -> bool:
    """pending → used; False if the token was not pending any more (single use)."""
    cur.execute(
        "UPDATE amber_approval_tokens SET status = 'used', closed_at = %s"
        " WHERE token_hash = %s AND status = 'pending'",
        (now, token_hash),
    )
    return cur.rowcount == 1


def revoke_tokens_txn(
    cur: Cursor, approval_id: str, now: datetime, *, approver: str | None = None
) -> int:
    """pending → revoked for an approval's tokens (or one approver's); how many."""
    extra, params = "", [now, approval_id]
    if approver is not None:
        extra = " AND approver = %s"
        params.append(approver)
    cur.execute(
        "UPDATE amber_approval_tokens SET status = 'revoked', closed_at = %s"
        f" WHERE approval_id = %s AND status = 'pending'{extra}",
        params,
    )
    return cur.rowcount


def record_decision_txn(cur: Cursor, decision: Decision) -> bool:
    """One decision per approver per approval; False if this approver had decided already."""
    cur.execute(
        "INSERT INTO amber_approval_decisions (approval_id, approver, approve, comment, via,"
        " decided_at) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (
            decision.approval_id,
            decision.approver,
            decision.approve,
            decision.comment,
            decision.via,
            decision.decided_at,
        ),
    )
    return cur.rowcount == 1


def decisions_txn(cur: Cursor, approval_id: str) -> list[Decision]:
    cur.execute(
        "SELECT approval_id::text, approver, approve, comment, via, decided_at"
        " FROM amber_approval_decisions WHERE approval_id = %s ORDER BY decided_at, approver",
        (approval_id,),
    )
    return [
        Decision(approval_id=a, approver=who, approve=yes, comment=comment, via=via, decided_at=at)
        for a, who, yes, comment, via, at in cur.fetchall()
    ]


def grant_role_txn(cur: Cursor, tenant: str, role: str, approver: str, now: datetime) -> bool:
    cur.execute(
        "INSERT INTO amber_approver_roles (tenant, role, approver, granted_at)"
        " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (tenant, role, approver, now),
    )
    return cur.rowcount == 1


def revoke_role_txn(cur: Cursor, tenant: str, role: str, approver: str) -> bool:
    cur.execute(
        "DELETE FROM amber_approver_roles WHERE tenant = %s AND role = %s AND approver = %s",
        (tenant, role, approver),
    )
    return cur.rowcount == 1


def has_role_txn(cur: Cursor, tenant: str, roles: tuple[str, ...], approver: str) -> bool:
    """Whether `approver` holds one of `roles` now; the row is share-locked so that a role
    removal waits for the decision that relied on it."""
    if not roles:
        return False
    cur.execute(
        "SELECT 1 FROM amber_approver_roles WHERE tenant = %s AND role = ANY(%s)"
        " AND approver = %s LIMIT 1 FOR SHARE",
        (tenant, list(roles), approver),
    )
    return cur.fetchone() is not None


def role_members_txn(cur: Cursor, tenant: str, roles: tuple[str, ...]) -> list[str]:
    if not roles:
        return []
    cur.execute(
        "SELECT DISTINCT approver FROM amber_approver_roles WHERE tenant = %s AND role = ANY(%s)"
        " ORDER BY approver",
        (tenant, list(roles)),
    )
    return [row[0] for row in cur.fetchall()]


def roles_txn(cur: Cursor, tenant: str) -> list[tuple[str, str]]:
    """Every (role, approver) of a tenant."""
    cur.execute(
        "SELECT role, approver FROM amber_approver_roles WHERE tenant = %s ORDER BY role, approver",
        (tenant,),
    )
    return [(role, who) for role, who in cur.fetchall()]
