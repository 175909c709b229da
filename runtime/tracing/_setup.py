"""OpenTelemetry set-up: one span per activation, exported where the operator says.

`AMBER_TRACE_FILE=path` writes finished spans as JSON lines to a file; an OTLP endpoint
(`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, with the other standard
`OTEL_EXPORTER_OTLP_*` variables) exports them over OTLP/gRPC. With neither, no SDK provider is
installed: spans are the API's non-recording ones, which still carry the context they were
started in (a task's span keeps its run's trace id, and passes it on), and cost next to nothing.
Recording spans that went nowhere was about an eighth of a busy worker's Python time. A process
that installed its own provider (an application embedding a worker) keeps it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

TRACE_FILE_ENV = "AMBER_TRACE_FILE"
_configured = False
_exporting = False
OTLP_ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


class JsonLinesExporter(SpanExporter):
    """Appends each finished span to a file as one JSON object per line."""

    def __init__(self, path: str) -> None:
        self._file: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            for span in spans:
                self._file.write(json.dumps(json.loads(span.to_json()), separators=(",", ":")))
                self._file.write("\n")
            self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            self._file.close()


def configure_tracing(service_name: str, *, default_file: Path | None = None) -> None:
    """Install a tracer provider for this process (once), with exporters from the environment.

    `default_file`: where spans go when neither a trace file nor an OTLP endpoint is configured
    (the surgical pool always keeps its traces).
    """
    global _configured, _exporting
    if _configured:
        return
    _configured = True
    otlp = any(os.environ.get(name) for name in OTLP_ENDPOINT_ENVS)
    path = os.environ.get(TRACE_FILE_ENV)
    if not path and not otlp and default_file is not None:
        default_file.parent.mkdir(parents=True, exist_ok=True)
        path = str(default_file)
    if not path and not otlp:
        return  # nothing would receive them: no recording spans
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if path:
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    if otlp:  # endpoint, headers, TLS and timeout come from the standard OTEL_* variables
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _exporting = bool(path or otlp)
    trace.set_tracer_provider(provider)


def exporting() -> bool:
    """Whether this process's spans go anywhere (a process that exports nothing skips the
    optional spans, such as one per server transaction)."""
    return _exporting


def tracer() -> trace.Tracer:
    return trace.get_tracer("amber")
