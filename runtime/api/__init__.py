"""The gRPC contract: the proto, its generated code, conversions between proto and domain types,
channel options and the status codes typed errors travel with.

Rule: conversions only, no logic; imports `model` only.
"""

from __future__ import annotations

from . import _approval_mapping as approval_mapping
from . import _mapping as mapping
from ._mapping import tenant_of
from ._options import (
    AUTHORIZATION_HEADER,
    GRPC_OPTIONS,
    KEEPALIVE_S,
    KEEPALIVE_TIMEOUT_S,
    MAX_MESSAGE_BYTES,
    OPERATOR_TOKEN_HEADER,
    STREAM_MESSAGE_BUDGET,
    grpc_options,
)
from ._status import (
    ERROR_FIELDS_KEY,
    ERROR_TYPE_KEY,
    error_details,
    error_from_rpc,
    error_metadata,
    error_of,
    error_parts,
    status_of,
)
from ._tls import SYSTEM_ROOTS, ClientTls, ServerTls

__all__ = [
    "AUTHORIZATION_HEADER",
    "ERROR_FIELDS_KEY",
    "ERROR_TYPE_KEY",
    "GRPC_OPTIONS",
    "KEEPALIVE_S",
    "KEEPALIVE_TIMEOUT_S",
    "MAX_MESSAGE_BYTES",
    "OPERATOR_TOKEN_HEADER",
    "STREAM_MESSAGE_BUDGET",
    "SYSTEM_ROOTS",
    "ClientTls",
    "ServerTls",
    "approval_mapping",
    "error_details",
    "error_from_rpc",
    "error_metadata",
    "error_of",
    "error_parts",
    "grpc_options",
    "mapping",
    "status_of",
    "tenant_of",
]
