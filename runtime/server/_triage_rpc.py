"""The triage RPCs (a mixin of the servicer): authorise the operator, call, map."""

from __future__ import annotations

from typing import Any

import grpc

from amber.abi import InvalidInput
from amber.runtime.api import OPERATOR_TOKEN_HEADER, tenant_of
from amber.runtime.api import amber_pb2 as pb
from amber.runtime.api import mapping as m
from amber.runtime.model import TriageAction, TriageCommand
from amber.runtime.services import TriageService

from ._operators import Operators
from ._rpc import rpc


def operator_token(context: grpc.ServicerContext) -> str:
    """The operator token a call carries (metadata), or ""."""
    return str(dict(context.invocation_metadata() or ()).get(OPERATOR_TOKEN_HEADER, ""))


class TriageRpcs:
    """ListTroubled, ExportRun and Triage."""

    def __init__(self, triage: TriageService, operators: Operators) -> None:
        self._triage = triage
        self._operators = operators

    @rpc
    def ListTroubled(
        self, request: pb.ListTroubledRequest, context: Any
    ) -> pb.ListTroubledResponse:
        troubled = self._triage.troubled(
            tenant=tenant_of(request),
            fingerprint=request.fingerprint,
            limit=request.limit or 100,
        )
        return pb.ListTroubledResponse(runs=[m.troubled_to_pb(t) for t in troubled])

    @rpc
    def ExportRun(self, request: pb.ExportRunRequest, context: Any) -> pb.ExportRunResponse:
        operator = self._operators.authorise(operator_token(context), request.operator)
        bundle = self._triage.export(request.run_id, operator=operator, tenant=tenant_of(request))
        return pb.ExportRunResponse(bundle=bundle.encode())

    @rpc
    def Triage(self, request: pb.TriageRequest, context: Any) -> pb.TriageResponse:
        operator = self._operators.authorise(operator_token(context), request.operator)
        try:
            action = TriageAction(request.action)
        except ValueError:
            raise InvalidInput(f"no triage action {request.action!r}") from None
        outcomes = self._triage.apply(
            TriageCommand(
                action=action,
                operator=operator,
                reason=request.reason,
                run_ids=tuple(request.run_ids),
                fingerprint=request.fingerprint,
                tenant=tenant_of(request),
                version=request.version,
                step=request.step if request.has_step else None,
                result=request.result,
            )
        )
        return pb.TriageResponse(
            outcomes=[m.triage_outcome_to_pb(o) for o in outcomes], operator=operator
        )
