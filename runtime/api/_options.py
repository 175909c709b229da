"""The channel options both ends of the gRPC connection use, and the metadata keys an API
credential and an operator token travel under."""

from __future__ import annotations

MAX_MESSAGE_BYTES = 64 * 1024 * 1024


GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]


OPERATOR_TOKEN_HEADER = "x-amber-operator-token"
AUTHORIZATION_HEADER = "authorization"
"""The metadata key of the API credential: `authorization: Bearer amb_...`."""
