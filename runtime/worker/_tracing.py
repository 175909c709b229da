"""OpenTelemetry set-up: one span per activation, exported where the operator says.

`AMBER_TRACE_FILE=path` writes finished spans as JSON lines to a file; an OTLP endpoint
(`OTEL_EXPORTER_OTLP_ENDPOINT`) is used when the optional OTLP exporter package is installed.
With neither, spans are created (so attributes and ids exist) but not exported.
"""

from __future__ import annotations

import json
import logging
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
    global _configured
    if _configured:
        return
    _configured = True
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    otlp = bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    path = os.environ.get(TRACE_FILE_ENV)
    if not path and not otlp and default_file is not None:
        default_file.parent.mkdir(parents=True, exist_ok=True)
        path = str(default_file)
    if path:
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    if otlp:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter,
            )
        except ImportError:
            logging.getLogger(__name__).warning(
                "OTEL_EXPORTER_OTLP_ENDPOINT is set but opentelemetry-exporter-otlp is not"
                " installed; spans are not exported over OTLP"
            )
        else:
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)


def tracer() -> trace.Tracer:
    return trace.get_tracer("amber")
