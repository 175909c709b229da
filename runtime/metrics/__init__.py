"""What the server and workers count, as Prometheus metrics, and the small HTTP endpoint that
serves them beside liveness and readiness.

Rule: imports `model` only (and `history` for the store's gauges); the server and the worker
hand their numbers in, nothing here reaches into them.

Design: one `CollectorRegistry` per server or worker object, never the process-global one, so
that a test (or `amber dev`) running a server and a worker in one process serves each its own
figures. Events are counted where they happen, after their transaction commits (runs started
and closed, task outcomes, lease expiries, RPC and transaction latency); what the store holds
(queue depth and age, poisoned and suspended work) is read from the database at scrape time,
so every server sharing one database reports the same numbers. Rejected: OpenTelemetry metrics
with its Prometheus exporter (a second SDK pipeline for what `prometheus_client` does alone);
counting queue depth in memory (wrong as soon as two servers share the database).
"""

from __future__ import annotations

from ._endpoint import OpsEndpoint, OpsListen, Readiness
from ._server import ServerMetrics
from ._worker import WorkerMetrics

__all__ = ["OpsEndpoint", "OpsListen", "Readiness", "ServerMetrics", "WorkerMetrics"]
