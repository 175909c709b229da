"""OpenTelemetry for every Amber process: the tracer provider and its exporters (from the
standard `OTEL_*` variables, or `AMBER_TRACE_FILE`), and the trace context carried from client to
server to worker so that one run reads as one trace.

Rule: imports nothing of the runtime's; client, server and worker import it.
"""

from __future__ import annotations

from ._context import (
    TRACEPARENT,
    context_from_metadata,
    context_from_traceparent,
    current_traceparent,
    trace_metadata,
)
from ._setup import JsonLinesExporter, configure_tracing, exporting, tracer

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
