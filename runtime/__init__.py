"""The engine, split by role into sub-packages; each sub-package's docstring states its rule.

- `model`: wire-level dataclasses, errors, faults, settings, the clock; no I/O.
- `sandbox`: wasmtime only (engine, artifacts, fast call, host imports, limits).
- `replay`: the one replay path, used live and offline.
- `services`: transaction steps over `amber.history`; never wasmtime, gRPC or `replay`.
- `approvals`: the approval feature, including its page (the only Flask user).
- `api`: the proto, generated code, conversions, status codes; no logic.
- `client`: imports only `api` and `model`.
- `worker`: reaches the server only through `client`.
- `server`: the composition root and the RPC handlers.

`tests/test_imports.py` holds the direction of imports between them.

Design: a worker runs every activation in a fresh wasmtime `Store` instantiated from a cached
`InstancePre` of the exact module digest the run is pinned to (fuel, memory and epoch deadline
set every time). A workflow activation replays the whole history in one call and hands back its
full command list, which the host matches position by position (`replay.activate_workflow`, the
same function for live work and offline replay). The server is stateless: services compose
`history` transaction helpers so that an outcome, its events, the next task and the deletion of
the finished task commit together; long polls wake on LISTEN/NOTIFY.

This package's own names are loaded lazily, so `from amber.runtime import AmberClient` costs what
`amber.runtime.client` costs and no more.

Rejected: one flat package of ~50 private modules (the architecture showed only in file-name
prefixes, and the client imported the server to reach wire types); sharing one instance across
runs (state would leak between runs); a worker that talks to PostgreSQL directly (every worker
would need database credentials and the server could not enforce leases).
"""

from __future__ import annotations

from amber import _checkout

_checkout.alias(__name__)


from typing import TYPE_CHECKING

from amber.abi import lazy_exports

if TYPE_CHECKING:
    from .client import DEFAULT_TARGET, AmberClient, AsyncAmberClient, decode, encode
    from .model import (
        Clock,
        EngineSettings,
        GuestFault,
        ManualClock,
        RemoteError,
        RetryPolicy,
        RunClosed,
        SystemClock,
    )
    from .server import AmberServer
    from .worker import Worker, WorkerSettings

_LAZY = {
    "AmberClient": "client",
    "AsyncAmberClient": "client",
    "DEFAULT_TARGET": "client",
    "decode": "client",
    "encode": "client",
    "RemoteError": "model",
    "Clock": "model",
    "EngineSettings": "model",
    "GuestFault": "model",
    "ManualClock": "model",
    "RetryPolicy": "model",
    "RunClosed": "model",
    "SystemClock": "model",
    "AmberServer": "server",
    "Worker": "worker",
    "WorkerSettings": "worker",
}

__all__ = [
    "DEFAULT_TARGET",
    "AmberClient",
    "AmberServer",
    "AsyncAmberClient",
    "Clock",
    "EngineSettings",
    "GuestFault",
    "ManualClock",
    "RemoteError",
    "RetryPolicy",
    "RunClosed",
    "SystemClock",
    "Worker",
    "WorkerSettings",
    "decode",
    "encode",
]


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
