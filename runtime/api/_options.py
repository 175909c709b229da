"""The channel options both ends of the gRPC connection use, and the metadata key an operator
token travels under."""

from __future__ import annotations

MAX_MESSAGE_BYTES = 64 * 1024 * 1024


GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]


OPERATOR_TOKEN_HEADER = "x-amber-operator-token"
