"""The channel options both ends of the gRPC connection use, and the metadata keys an API
credential and an operator token travel under."""

from __future__ import annotations

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
STREAM_MESSAGE_BUDGET = 8 * 1024 * 1024
"""What one message of a worker's stream gathers before the rest goes in the next: items whose
sizes are each within the limits would otherwise add up past `MAX_MESSAGE_BYTES`."""


KEEPALIVE_S = 10.0
"""How often each end pings a connection that carries nothing (the worker's idle stream, a
long poll): a peer that vanished without closing its connections (a host lost, a partition) is
noticed within `KEEPALIVE_S + KEEPALIVE_TIMEOUT_S` instead of TCP's retransmission timeout
(about 15 minutes). Every call on the dead connection then fails as unavailable, and the next
one connects afresh."""
KEEPALIVE_TIMEOUT_S = 5.0


def grpc_options(
    keepalive_s: float = KEEPALIVE_S, keepalive_timeout_s: float = KEEPALIVE_TIMEOUT_S
) -> list[tuple[str, int]]:
    """The channel options of both ends, with keepalive pings every `keepalive_s`."""
    every_ms = round(keepalive_s * 1000)
    return [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.keepalive_time_ms", every_ms),
        ("grpc.keepalive_timeout_ms", round(keepalive_timeout_s * 1000)),
        # Newer gRPC times a ping's answer by this one (default one minute), not the above.
        ("grpc.http2.ping_timeout_ms", round(keepalive_timeout_s * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        # The other end pings this often too: accept it (gRPC's default answers a ping every
        # 10 s with GOAWAY "too_many_pings" and drops the connection).
        ("grpc.http2.min_recv_ping_interval_without_data_ms", every_ms // 2),
        ("grpc.http2.min_ping_interval_without_data_ms", every_ms),
    ]


GRPC_OPTIONS = grpc_options()


OPERATOR_TOKEN_HEADER = "x-amber-operator-token"
AUTHORIZATION_HEADER = "authorization"
"""The metadata key of the API credential: `authorization: Bearer amb_...`."""
