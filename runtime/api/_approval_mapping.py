"""Approvals: domain types ↔ protobuf messages (the gRPC layer only converts)."""

from __future__ import annotations

from amber.history import Approval, ApprovalToken, Decision
from amber.runtime.model import ApprovalDetail, from_ms, from_ms_or_none, to_ms_or_zero

from . import amber_pb2 as pb


def approval_to_pb(a: Approval) -> pb.ApprovalInfo:
    return pb.ApprovalInfo(
        approval_id=a.approval_id,
        tenant=a.tenant,
        run_id=a.run_id,
        step=a.cmd,
        action=a.action,
        approvers=list(a.approvers),
        roles=list(a.roles),
        required=a.required,
        policy_version=a.policy_version,
        status=a.status,
        created_ms=to_ms_or_zero(a.created_at),
        expires_ms=to_ms_or_zero(a.expires_at),
        decided_ms=to_ms_or_zero(a.decided_at),
        delivered_ms=to_ms_or_zero(a.delivered_at),
    )


def approval_from_pb(m: pb.ApprovalInfo) -> Approval:
    return Approval(
        approval_id=m.approval_id,
        tenant=m.tenant,
        run_id=m.run_id,
        cmd=m.step,
        action=m.action,
        approvers=tuple(m.approvers),
        roles=tuple(m.roles),
        required=m.required,
        policy_version=m.policy_version,
        status=m.status,
        created_at=from_ms(m.created_ms),
        expires_at=from_ms(m.expires_ms),
        decided_at=from_ms_or_none(m.decided_ms),
        delivered_at=from_ms_or_none(m.delivered_ms),
    )


def detail_to_pb(d: ApprovalDetail) -> pb.ApprovalDetail:
    return pb.ApprovalDetail(
        approval=approval_to_pb(d.approval),
        tokens=[
            pb.ApprovalTokenInfo(
                hash_prefix=t.token_hash.hex()[:12],
                approver=t.approver,
                status=t.status,
                issued_ms=to_ms_or_zero(t.issued_at),
                expires_ms=to_ms_or_zero(t.expires_at),
                closed_ms=to_ms_or_zero(t.closed_at),
            )
            for t in d.tokens
        ],
        decisions=[
            pb.ApprovalDecisionInfo(
                approver=x.approver,
                approve=x.approve,
                comment=x.comment,
                via=x.via,
                decided_ms=to_ms_or_zero(x.decided_at),
            )
            for x in d.decisions
        ],
    )


def detail_from_pb(m: pb.ApprovalDetail) -> ApprovalDetail:
    approval = approval_from_pb(m.approval)
    return ApprovalDetail(
        approval=approval,
        tokens=tuple(
            ApprovalToken(
                token_hash=bytes.fromhex(t.hash_prefix),
                approval_id=approval.approval_id,
                approver=t.approver,
                tenant=approval.tenant,
                run_id=approval.run_id,
                cmd=approval.cmd,
                action_sha256=b"",
                policy_version=approval.policy_version,
                status=t.status,
                issued_at=from_ms(t.issued_ms),
                expires_at=from_ms(t.expires_ms),
                closed_at=from_ms_or_none(t.closed_ms),
            )
            for t in m.tokens
        ),
        decisions=tuple(
            Decision(
                approval_id=approval.approval_id,
                approver=x.approver,
                approve=x.approve,
                comment=x.comment,
                via=x.via,
                decided_at=from_ms(x.decided_ms),
            )
            for x in m.decisions
        ),
    )
