"""What checking credentials costs per RPC: the same call against two in-process servers on the
bench's database, one open and one with `check_credentials`, in alternating rounds; and the
access check alone (a cached principal, no I/O).

The call is `ListRuns` with a limit of 1 in a tenant with no runs: one indexed query, the cheapest
call that still goes through the whole stack (gRPC, interceptor, servicer, database) and
succeeds (an error answer costs more in gRPC's Python layer and would blur the difference). The
token is cached after the first call, so this is the steady state; a cache miss adds one indexed
lookup (about what the call itself costs) once per token every 2 s.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from amber.history import Database
from amber.runtime.api import amber_pb2 as pb
from amber.runtime.client import AmberClient
from amber.runtime.server import AccessCheck, AmberServer

ROUNDS = 10
_TENANT = "amber-bench-auth"
"""A tenant no run is in."""


def _round(client: AmberClient, calls: int) -> float:
    """Mean microseconds per call over `calls` calls."""
    began = time.perf_counter()
    for _ in range(calls):
        client.list_runs(tenant=_TENANT, limit=1)
    return (time.perf_counter() - began) / calls * 1e6


def measure_auth(url: str, calls: int) -> dict[str, Any]:
    """Per-call cost with and without credential checks, and the check alone, in µs."""
    db = Database(url, max_size=4).open()
    servers: list[AmberServer] = []
    clients: list[AmberClient] = []
    try:
        for check in (False, True):
            server = AmberServer(db, listen="127.0.0.1:0", check_credentials=check)
            servers.append(server)
            server.start()
        token = (
            servers[1]
            .credentials.grant(
                "bench-auth", "application", tenants=[_TENANT], by="amber bench", reason="auth"
            )
            .token
        )
        clients = [
            AmberClient(f"127.0.0.1:{servers[0].port}"),
            AmberClient(f"127.0.0.1:{servers[1].port}", token=token),
        ]
        per_round = max(1, calls // ROUNDS)
        for client in clients:  # warm both (connections, caches)
            _round(client, min(per_round, 50))
        open_us, checked_us = [], []
        for _ in range(ROUNDS):
            open_us.append(_round(clients[0], per_round))
            checked_us.append(_round(clients[1], per_round))
        access = AccessCheck(servers[1].credentials.by_hash, "main")
        request = pb.ListRunsRequest(tenant=_TENANT, limit=1)
        metadata = (("authorization", f"Bearer {token}"),)
        n = 20_000
        began = time.perf_counter()
        for _ in range(n):
            access("ListRuns", metadata, request)
        check_us = (time.perf_counter() - began) / n * 1e6
    finally:
        for client in clients:
            client.close()
        for server in servers:
            server.stop(grace_s=0.5)
        db.close()
    open_p50, checked_p50 = statistics.median(open_us), statistics.median(checked_us)
    return {
        "rpc": "ListRuns (limit 1, empty tenant)",
        "calls": per_round * ROUNDS,
        "open_us_per_call": round(open_p50, 1),
        "checked_us_per_call": round(checked_p50, 1),
        "auth_us_per_call": round(checked_p50 - open_p50, 1),
        "access_check_alone_us": round(check_us, 2),
        "method": f"median of {ROUNDS} alternating rounds, sequential calls on one connection;"
        " both servers in the bench process on the bench database",
    }
