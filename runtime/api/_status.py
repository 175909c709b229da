"""Amber errors ↔ gRPC status codes, so a typed error raised in the server is raised again,
with the same type, by the client."""

from __future__ import annotations

import grpc

from amber.abi import AmberError, Conflict, InvalidInput, NotFound, RetryableError
from amber.history import LeaseLost, RunNotFound, StoreUnavailable, VersionConflict, WorkflowIdInUse
from amber.runtime.model import (
    ApprovalClosed,
    InvalidToken,
    NotAuthorised,
    NotTroubled,
    PayloadTooLarge,
    QueryFailed,
    QueryTimedOut,
    RemoteError,
    RunClosed,
)
from amber.versions import (
    AmbiguousVersion,
    InvalidModule,
    LabelConflict,
    ModuleTooLarge,
    UnknownWorkflowType,
    VersionInUse,
    VersionNotFound,
)

ERROR_TYPE_KEY = "amber-error-type"

_BY_NAME: dict[str, type[AmberError]] = {
    cls.__name__: cls
    for cls in (
        AmbiguousVersion,
        ApprovalClosed,
        InvalidToken,
        Conflict,
        InvalidInput,
        InvalidModule,
        LabelConflict,
        LeaseLost,
        VersionInUse,
        QueryFailed,
        QueryTimedOut,
        RunClosed,
        ModuleTooLarge,
        NotAuthorised,
        NotFound,
        NotTroubled,
        PayloadTooLarge,
        RetryableError,
        RunNotFound,
        StoreUnavailable,
        UnknownWorkflowType,
        VersionConflict,
        VersionNotFound,
        WorkflowIdInUse,
    )
}

_CODES: list[tuple[type[AmberError], grpc.StatusCode]] = [
    (PayloadTooLarge, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (NotAuthorised, grpc.StatusCode.PERMISSION_DENIED),
    (InvalidToken, grpc.StatusCode.PERMISSION_DENIED),
    (InvalidInput, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (WorkflowIdInUse, grpc.StatusCode.ALREADY_EXISTS),
    (Conflict, grpc.StatusCode.ABORTED),
    (RetryableError, grpc.StatusCode.UNAVAILABLE),
]


def status_of(exc: AmberError) -> grpc.StatusCode:
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    return grpc.StatusCode.INTERNAL


def error_from_rpc(exc: grpc.RpcError) -> AmberError:
    """Rebuild the typed error the server raised (or a transport error)."""
    code = exc.code()
    details = exc.details() or ""
    meta = dict(exc.trailing_metadata() or ())
    name = meta.get(ERROR_TYPE_KEY)
    cls = _BY_NAME.get(str(name)) if name else None
    if cls is not None:
        err = cls.__new__(cls)
        Exception.__init__(err, details)
        return err
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return RetryableError(f"server unavailable: {details}")
    return RemoteError(f"{code.name}: {details}")
