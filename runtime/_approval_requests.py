"""A workflow's `approval` command, as the engine records it: the approval row, its expiry
timer and the `ApprovalRequested` event, in the transaction that appends the command.

Tokens are not minted here: the approval deliverer (`ApprovalService.deliver_pending`) mints
them after this transaction commits and hands them to the delivery sink, so a token never
exists for an approval that was rolled back, and no plain token is ever written anywhere.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

import msgpack

from abi import RequestApproval
from history import (
    Approval,
    Cursor,
    EventType,
    NewEvent,
    Run,
    Timer,
    TimerKind,
    insert_approval_txn,
    insert_timer_txn,
)

from ._clock import from_ms, to_ms
from ._errors import CorruptHistory
from ._ids import new_run_id


def approval_timer_id(cmd: int) -> str:
    return f"approval:{cmd}"


def policy_version(approvers: tuple[str, ...], roles: tuple[str, ...], required: int) -> str:
    """What a token is bound to: a change of the policy is a different version."""
    packed = msgpack.packb([sorted(approvers), sorted(roles), required], use_bin_type=True)
    return hashlib.sha256(packed).hexdigest()[:32]


def restore_approval_txn(cur: Cursor, run: Run, payload: dict[str, Any], now: datetime) -> None:
    """A reset copied an unresolved `ApprovalRequested` into `run`: the approval is requested
    again for it (new id, new tokens), expiring when the original would have."""
    approvers, roles = tuple(payload["approvers"]), tuple(payload["roles"])
    expires_at = from_ms(payload["expires_at_ms"])
    insert_approval_txn(
        cur,
        Approval(
            approval_id=new_run_id(),
            tenant=run.tenant,
            run_id=run.run_id,
            cmd=payload["cmd"],
            action=payload["action"],
            approvers=approvers,
            roles=roles,
            required=payload["required"],
            policy_version=policy_version(approvers, roles, payload["required"]),
            status="pending",
            created_at=now,
            expires_at=expires_at,
        ),
    )
    insert_timer_txn(
        cur,
        Timer(
            run_id=run.run_id,
            timer_id=approval_timer_id(payload["cmd"]),
            kind=TimerKind.APPROVAL,
            cmd=payload["cmd"],
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
    payload = {
        "cmd": cmd,
        "approval_id": approval.approval_id,
        "action": command.action,
        "approvers": list(command.approvers),
        "roles": list(command.roles),
        "required": command.required,
        "expires_ms": command.expires_ms,
        "expires_at_ms": to_ms(expires_at),
    }
    return NewEvent(type=EventType.APPROVAL_REQUESTED, payload=payload, digest=digest)
