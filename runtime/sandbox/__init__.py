"""The wasmtime sandbox: one engine per process, cached artifacts, the fast call path, host
imports (including the HTTP capability), fuel, memory and deadline limits, activation repros,
and guests in child processes: one fresh process per activation (`IsolatedSandbox`, the surgical
pool's isolation) or reused ones for a worker's parallel guests (`ParallelSandbox`), a
background lane at low CPU priority for activities that outrun their fuel slice, and a run's
Python activity instance kept for its next activity (`WarmActivities`).

Rule: the only sub-package that imports wasmtime; it imports `model` and nothing else of the
runtime.
"""

from __future__ import annotations

from ._engine import ENGINE_FLAGS, SandboxEngine
from ._fastcall import exports
from ._fastcall import exports as instance_exports
from ._host import MAX_RECORD_DETAIL, ActivationKind, ActivityHost, HostCallObserver, HostCallRecord
from ._http import HttpPolicy, check_capabilities, http_policy
from ._isolated import ChildStartFailed, IsolatedSandbox
from ._parallel import SLICE_CPU_S, SLICE_FUEL, ParallelSandbox, guest_runner
from ._pooling import pool_instances
from ._priority import lower_priority
from ._recording import RecordingSandbox
from ._repro import Repro, repro_of
from ._sandbox import (
    ActivationRequest,
    RawOutput,
    Sandbox,
    SandboxLimits,
    SandboxRunner,
    Slice,
    fresh_store,
)
from ._sticky import IDLE_S, STICKY_RUNS, StickySandbox
from ._warm import WARM_RUNS, WarmActivities

__all__ = [
    "ENGINE_FLAGS",
    "IDLE_S",
    "MAX_RECORD_DETAIL",
    "SLICE_CPU_S",
    "SLICE_FUEL",
    "STICKY_RUNS",
    "WARM_RUNS",
    "ActivationKind",
    "ActivationRequest",
    "ActivityHost",
    "ChildStartFailed",
    "HostCallObserver",
    "HostCallRecord",
    "HttpPolicy",
    "IsolatedSandbox",
    "ParallelSandbox",
    "RawOutput",
    "RecordingSandbox",
    "Repro",
    "Sandbox",
    "SandboxEngine",
    "SandboxLimits",
    "SandboxRunner",
    "Slice",
    "StickySandbox",
    "WarmActivities",
    "check_capabilities",
    "exports",
    "fresh_store",
    "guest_runner",
    "http_policy",
    "instance_exports",
    "lower_priority",
    "pool_instances",
    "repro_of",
]
