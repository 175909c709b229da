"""The credential RPCs (a mixin of the servicer): grant, rotate, revoke and list principals.
Only admins reach them (`_access`); the acting admin's name arrives in `operator`. A server that
does not check credentials refuses them: anyone could grant themselves an admin there, to be
used the day the server checks (the first admin comes from `amber auth bootstrap`)."""

from __future__ import annotations

from typing import Any

from amber.abi import InvalidInput
from amber.runtime.api import amber_pb2 as pb
from amber.runtime.api import mapping as m
from amber.runtime.model import NotAuthorised
from amber.runtime.services import CredentialService

from ._rpc import rpc


class AuthRpcs:
    """ChangeCredential and ListCredentials."""

    def __init__(self, credentials: CredentialService, *, checking: bool) -> None:
        self._credentials = credentials
        self._checking = checking

    def _need_checking(self) -> None:
        if not self._checking:
            raise NotAuthorised(
                "this server does not check credentials (started without --auth): credentials"
                " are managed on one that does, or with `amber auth bootstrap`"
            )

    @rpc
    def ChangeCredential(
        self, request: pb.ChangeCredentialRequest, context: Any
    ) -> pb.ChangeCredentialResponse:
        self._need_checking()
        by = request.operator
        if not request.reason.strip():
            raise InvalidInput("give a reason: credential changes are audited")
        if request.action == "grant":
            issued = self._credentials.grant(
                request.name,
                request.role,
                tenants=tuple(request.tenants),
                queues=tuple(request.queues),
                pools=tuple(request.pools),
                by=by,
                reason=request.reason,
            )
        elif request.action == "rotate":
            issued = self._credentials.rotate(request.name, by=by, reason=request.reason)
        elif request.action == "revoke":
            revoked = self._credentials.revoke(request.name, by=by, reason=request.reason)
            return pb.ChangeCredentialResponse(principal=m.principal_to_pb(revoked))
        else:
            raise InvalidInput(f"action must be grant, rotate or revoke, not {request.action!r}")
        return pb.ChangeCredentialResponse(
            principal=m.principal_to_pb(issued.principal), token=issued.token
        )

    @rpc
    def ListCredentials(
        self, request: pb.ListCredentialsRequest, context: Any
    ) -> pb.ListCredentialsResponse:
        self._need_checking()
        return pb.ListCredentialsResponse(
            principals=[m.principal_to_pb(p) for p in self._credentials.list()]
        )
