"""The audit RPCs (a mixin of the servicer): verify the chain, list records."""

from __future__ import annotations

from typing import Any

from amber.runtime.api import amber_pb2 as pb
from amber.runtime.api import mapping as m
from amber.runtime.services import AuditService

from ._rpc import rpc


class AuditRpcs:
    """VerifyAudit and ListAudit."""

    def __init__(self, audit: AuditService) -> None:
        self._audit = audit

    @rpc
    def VerifyAudit(self, request: pb.VerifyAuditRequest, context: Any) -> pb.VerifyAuditResponse:
        if request.head_only:
            seq, digest = self._audit.head()
            return pb.VerifyAuditResponse(ok=True, head_seq=seq, head_hash=digest)
        result = self._audit.verify(request.expect_head or None)
        return pb.VerifyAuditResponse(
            ok=result.ok,
            checked=result.checked,
            head_seq=result.head_seq,
            head_hash=result.head_hash,
            first_bad_seq=result.first_bad_seq or 0,
            first_bad_audit_id=result.first_bad_audit_id or 0,
            problem=result.problem,
        )

    @rpc
    def ListAudit(self, request: pb.ListAuditRequest, context: Any) -> pb.ListAuditResponse:
        entries = self._audit.list(
            request.target or None, request.limit or 100, after_seq=request.after_seq
        )
        return pb.ListAuditResponse(records=[m.audit_to_pb(e) for e in entries])
