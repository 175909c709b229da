"""The approval RPCs (a mixin of the servicer): authorise operators, call, map."""

from __future__ import annotations

from typing import Any

from amber.abi import InvalidInput
from amber.runtime.api import amber_pb2 as pb
from amber.runtime.api import approval_mapping as m
from amber.runtime.api import tenant_of
from amber.runtime.approvals import ApprovalService
from amber.runtime.model import DecisionRequest, InvalidToken, Throttle, source_of, to_ms

from ._operators import Operators
from ._rpc import rpc
from ._triage_rpc import operator_token


def _reason(reason: str) -> str:
    if not reason.strip():
        raise InvalidInput("an operator command needs a reason (it goes into the audit log)")
    return reason


class ApprovalRpcs:
    """ListApprovals, GetApproval, DecideApproval, IssueApprovalToken, RevokeApprovalTokens,
    ChangeApproverRole, ListApproverRoles."""

    def __init__(self, approvals: ApprovalService, operators: Operators) -> None:
        self.decision_throttle = Throttle("refused approval decisions")
        """Invalid approval links per source address; past the limit, refused unchecked."""
        self._approvals = approvals
        self._approval_operators = operators

    def _operator(self, context: Any, claimed: str) -> str:
        return self._approval_operators.authorise(operator_token(context), claimed)

    @rpc
    def ListApprovals(
        self, request: pb.ListApprovalsRequest, context: Any
    ) -> pb.ListApprovalsResponse:
        found = self._approvals.list_approvals(
            tenant=tenant_of(request),
            status=request.status,
            run_id=request.run_id,
            limit=request.limit or 100,
        )
        return pb.ListApprovalsResponse(approvals=[m.approval_to_pb(a) for a in found])

    @rpc
    def GetApproval(self, request: pb.GetApprovalRequest, context: Any) -> pb.ApprovalDetail:
        detail = self._approvals.show(request.approval_id, tenant=tenant_of(request))
        return m.detail_to_pb(detail)

    @rpc
    def DecideApproval(
        self, request: pb.DecideApprovalRequest, context: Any
    ) -> pb.DecideApprovalResponse:
        source, throttle = source_of(context.peer()), self.decision_throttle
        wait = throttle.blocked(source)
        if wait is not None:
            throttle.refused(source)
            raise InvalidToken(
                f"approval link refused unchecked: too many invalid links from {source}; try"
                f" again in {wait:.0f} s"
            )
        try:
            outcome = self._approvals.submit(
                DecisionRequest(
                    token=request.token,
                    approve=request.approve,
                    comment=request.comment,
                    via="grpc",
                    approver=request.approver,
                    tenant=request.tenant,
                    run_id=request.run_id,
                    step=request.step if request.has_step else None,
                )
            )
        except InvalidToken:
            throttle.refused(source)
            raise
        return pb.DecideApprovalResponse(
            approval_id=outcome.approval_id,
            status=outcome.status,
            counted=outcome.counted,
            approvals=outcome.approvals,
            required=outcome.required,
        )

    @rpc
    def IssueApprovalToken(
        self, request: pb.IssueApprovalTokenRequest, context: Any
    ) -> pb.IssueApprovalTokenResponse:
        issued = self._approvals.issue(
            request.approval_id,
            request.approver,
            operator=self._operator(context, request.operator),
            reason=_reason(request.reason),
            tenant=tenant_of(request),
        )
        return pb.IssueApprovalTokenResponse(
            token=issued.token, link=issued.link, expires_ms=to_ms(issued.expires_at)
        )

    @rpc
    def RevokeApprovalTokens(
        self, request: pb.RevokeApprovalTokensRequest, context: Any
    ) -> pb.RevokeApprovalTokensResponse:
        count = self._approvals.revoke(
            request.approval_id,
            operator=self._operator(context, request.operator),
            reason=_reason(request.reason),
            tenant=tenant_of(request),
            approver=request.approver or None,
        )
        return pb.RevokeApprovalTokensResponse(revoked=count)

    @rpc
    def ChangeApproverRole(
        self, request: pb.ChangeApproverRoleRequest, context: Any
    ) -> pb.ChangeApproverRoleResponse:
        changed = self._approvals.change_role(
            grant=request.grant,
            tenant=tenant_of(request),
            role=request.role,
            approver=request.approver,
            operator=self._operator(context, request.operator),
            reason=_reason(request.reason),
        )
        return pb.ChangeApproverRoleResponse(changed=changed)

    @rpc
    def ListApproverRoles(
        self, request: pb.ListApproverRolesRequest, context: Any
    ) -> pb.ListApproverRolesResponse:
        members = self._approvals.roles(tenant=tenant_of(request))
        return pb.ListApproverRolesResponse(
            members=[pb.RoleMember(role=r, approver=a) for r, a in members]
        )
