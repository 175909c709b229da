"""A workflow's `approval` command, as the engine records it: the approval row, its expiry
timer and the `ApprovalRequested` event, in the transaction that appends the command.

Tokens are not minted here: the approval deliverer (`ApprovalService.deliver_pending`) mints
them after this transaction commits and hands them to the delivery sink, so a token never
exists for an approval that was rolled back, and no plain token is ever written anywhere.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from amber.abi import RequestApproval, pack
from amber.history import (
    Approval,
    ApprovalRequested,
    ApprovalResolved,
    AuditEntry,
    Cursor,
    Decision,
    DecisionRecord,
    NewEvent,
    Run,
    Timer,
    TimerKind,
    approval_of_step_txn,
    approval_result,
    close_approval_txn,
    decisions_txn,
    delete_timer_txn,
    insert_approval_txn,
    insert_timer_txn,
    record_audit_txn,
    revoke_tokens_txn,
)
from amber.runtime.model import CorruptHistory, from_ms, new_run_id, to_ms

if TYPE_CHECKING:
    from ._lifecycle import Lifecycle, Wake


def approval_timer_id(cmd: int) -> str:
    return f"approval:{cmd}"


def policy_version(approvers: tuple[str, ...], roles: tuple[str, ...], required: int) -> str:
    """What a token is bound to: a change of the policy is a different version."""
    packed = pack([sorted(approvers), sorted(roles), required])
    return hashlib.sha256(packed).hexdigest()[:32]


def restore_approval_txn(
    cur: Cursor, run: Run, requested: ApprovalRequested, now: datetime
) -> None:
    """A reset copied an unresolved `ApprovalRequested` into `run`: the approval is requested
    again for it (new id, new tokens), expiring when the original would have."""
    approvers, roles, required = requested.approvers, requested.roles, requested.required
    expires_at = from_ms(requested.expires_at_ms)
    insert_approval_txn(
        cur,
        Approval(
            approval_id=new_run_id(),
            tenant=run.tenant,
            run_id=run.run_id,
            cmd=requested.cmd,
            action=requested.action,
            approvers=approvers,
            roles=roles,
            required=required,
            policy_version=policy_version(approvers, roles, required),
            status="pending",
            created_at=now,
            expires_at=expires_at,
        ),
    )
    insert_timer_txn(
        cur,
        Timer(
            run_id=run.run_id,
            timer_id=approval_timer_id(requested.cmd),
            kind=TimerKind.APPROVAL,
            cmd=requested.cmd,
            fire_at=expires_at,
        ),
    )


def request_approval_txn(
    cur: Cursor, run: Run, digest: str, cmd: int, command: RequestApproval, now: datetime
) -> NewEvent:
    """Record the approval command `cmd` of `run`; returns its event (the caller appends it)."""
    expires_at = now + timedelta(milliseconds=command.expires_ms)
    approval = Approval(
        approval_id=new_run_id(),
        tenant=run.tenant,
        run_id=run.run_id,
        cmd=cmd,
        action=command.action,
        approvers=command.approvers,
        roles=command.roles,
        required=command.required,
        policy_version=policy_version(command.approvers, command.roles, command.required),
        status="pending",
        created_at=now,
        expires_at=expires_at,
    )
    if not insert_approval_txn(cur, approval):
        raise CorruptHistory(f"run {run.run_id} already has an approval at command {cmd}")
    insert_timer_txn(
        cur,
        Timer(
            run_id=run.run_id,
            timer_id=approval_timer_id(cmd),
            kind=TimerKind.APPROVAL,
            cmd=cmd,
            fire_at=expires_at,
        ),
    )
    requested = ApprovalRequested(
        cmd=cmd,
        approval_id=approval.approval_id,
        action=command.action,
        approvers=command.approvers,
        roles=command.roles,
        required=command.required,
        expires_ms=command.expires_ms,
        expires_at_ms=to_ms(expires_at),
    )
    return NewEvent(requested, digest)


def resolve_approval_txn(
    cur: Cursor,
    life: Lifecycle,
    run: Run,
    approval: Approval,
    outcome: str,
    decisions: Sequence[Decision],
) -> list[Wake]:
    """Close the approval and give the workflow its result (approved, rejected, expired)."""
    now = life.clock.now()
    if not close_approval_txn(cur, approval.approval_id, outcome, now):
        return []
    revoke_tokens_txn(cur, approval.approval_id, now)
    delete_timer_txn(cur, run.run_id, approval_timer_id(approval.cmd))
    records = tuple(
        DecisionRecord(
            approver=d.approver, approve=d.approve, comment=d.comment, at_ms=to_ms(d.decided_at)
        )
        for d in decisions
    )
    resolved = ApprovalResolved(
        cmd=approval.cmd,
        approval_id=approval.approval_id,
        outcome=outcome,  # type: ignore[arg-type]  # checked by the callers: a closed set
        decisions=records,
        result=approval_result(outcome, records),
    )
    event = NewEvent(resolved, run.digest)
    if run.status.closed:
        return []
    return life.deliver_txn(cur, run, event)


def expire_approval_txn(cur: Cursor, life: Lifecycle, run: Run, cmd: int) -> list[Wake]:
    """An approval's expiry timer fired: if still pending, it ends `expired` (the workflow's
    timeout path)."""
    approval = approval_of_step_txn(cur, run.run_id, cmd, for_update=True)
    if approval is None or approval.status != "pending":
        return []
    record_audit_txn(
        cur,
        AuditEntry(
            actor="amber",
            action="approval.expire",
            target=f"approval:{approval.approval_id}",
            reason="",
            detail={"run_id": run.run_id, "step": cmd},
            at=life.clock.now(),
        ),
    )
    decisions = decisions_txn(cur, approval.approval_id)
    return resolve_approval_txn(cur, life, run, approval, "expired", decisions)
