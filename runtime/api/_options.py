"""The channel options both ends of the gRPC connection use, and the metadata keys an API
credential and an operator token travel under."""

from __future__ import annotations

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
STREAM_MESSAGE_BUDGET = 8 * 1024 * 1024
"""What one message of a worker's stream gathers before the rest goes in the next: items whose
sizes are each within the limits would otherwise add up past `MAX_MESSAGE_BYTES`."""


GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]


OPERATOR_TOKEN_HEADER = "x-amber-operator-token"
AUTHORIZATION_HEADER = "authorization"
"""The metadata key of the API credential: `authorization: Bearer amb_...`."""
