"""OpenTelemetry for every Amber process: the tracer provider and its exporters (from the
standard `OTEL_*` variables, or `AMBER_TRACE_FILE`), and the trace context carried from client to
server to worker so that one run reads as one trace.

Rule: imports nothing of the runtime's; client, server and worker import it. Names load on first
use (PEP 562): the client needs only the context helpers (the OpenTelemetry API), never the SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amber.abi import lazy_exports

if TYPE_CHECKING:
    from ._context import (
        TRACEPARENT,
        context_from_metadata,
        context_from_traceparent,
        current_traceparent,
        trace_metadata,
    )
    from ._setup import JsonLinesExporter, configure_tracing, exporting, tracer

_LAZY = {
    "TRACEPARENT": "_context",
    "context_from_metadata": "_context",
    "context_from_traceparent": "_context",
    "current_traceparent": "_context",
    "trace_metadata": "_context",
    "JsonLinesExporter": "_setup",
    "configure_tracing": "_setup",
    "exporting": "_setup",
    "tracer": "_setup",
}

__all__ = [
    "TRACEPARENT",
    "JsonLinesExporter",
    "configure_tracing",
    "context_from_metadata",
    "context_from_traceparent",
    "current_traceparent",
    "exporting",
    "trace_metadata",
    "tracer",
]

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
