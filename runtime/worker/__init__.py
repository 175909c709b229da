"""The worker: polls tasks through the client, runs them in the sandbox along the replay path,
heartbeats, and reports outcomes with their traces.

Rule: reaches the server only through `client`; imports `client`, `replay`, `sandbox`, `model`.
"""

from __future__ import annotations

from amber.runtime.tracing import JsonLinesExporter, configure_tracing, tracer

from ._budgets import Budget, Budgets
from ._worker import DetailedTrace, Worker, WorkerSettings

__all__ = [
    "Budget",
    "Budgets",
    "DetailedTrace",
    "JsonLinesExporter",
    "Worker",
    "WorkerSettings",
    "configure_tracing",
    "tracer",
]
