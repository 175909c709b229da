"""One run reads as one trace: a real OTLP receiver (an in-process gRPC collector built from the
OTLP protos) sees the application's span, the server's spans and the worker's spans of a run,
all in one trace, exported by real `amber server` and `amber worker` processes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from amber.history import RunStatus
from amber.runtime.client import AmberClient
from tests.conftest import Process, wait_for


@dataclass(frozen=True)
class Received:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str


class Collector(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
    """Keeps every span exported to it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans: list[Received] = []

    def Export(self, request: Any, context: Any) -> Any:
        with self._lock:
            for resource_spans in request.resource_spans:
                service = next(
                    (
                        a.value.string_value
                        for a in resource_spans.resource.attributes
                        if a.key == "service.name"
                    ),
                    "",
                )
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        self.spans.append(
                            Received(
                                service=service,
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_id=span.parent_span_id.hex(),
                            )
                        )
        return trace_service_pb2.ExportTraceServiceResponse()

    def in_trace(self, trace_id: str) -> list[Received]:
        with self._lock:
            return [s for s in self.spans if s.trace_id == trace_id]


@pytest.fixture
def collector() -> Iterator[tuple[Collector, str]]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    servicer = Collector()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"http://127.0.0.1:{port}"
    server.stop(0.5)


def test_one_run_is_one_trace_across_client_server_and_worker(
    collector: tuple[Collector, str],
    amber_process: Callable[..., Process],
    tmp_path: Path,
    built: dict[str, Any],
) -> None:
    received, endpoint = collector
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    port_file = tmp_path / "port"
    server = amber_process(
        "server", "--listen", "127.0.0.1:0", "--port-file", str(port_file), env=env
    )
    wait_for(lambda: port_file.exists() or server.popen.poll() is not None, 60, "server start")
    assert port_file.exists(), server.output()
    target = f"127.0.0.1:{port_file.read_text()}"
    amber_process("--server", target, "worker", "--poll-wait", "1", env=env)

    provider = TracerProvider(resource=Resource.create({"service.name": "checkout-app"}))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True))
    )
    app = provider.get_tracer("test")
    client = AmberClient(target, timeout_s=30)
    try:
        client.upload_version(built["chain"].output.read_bytes(), promote=True)
        with app.start_as_current_span("checkout") as root:
            run_id = client.start_run("chain", {"k": 2, "value": 1}).run.run_id
        trace_id = format(root.get_span_context().trace_id, "032x")
        assert client.result(run_id, wait_s=60).status is RunStatus.COMPLETED
    finally:
        client.close()
        provider.shutdown()

    expected = {
        ("checkout-app", "checkout"),
        ("amber-server", "amber.rpc/StartRun"),
        ("amber-server", "amber.db.transaction"),
        ("amber-server", "amber.rpc/CompleteTask"),  # the worker's report, in the run's trace
        ("amber-worker-main", "amber.workflow"),
        ("amber-worker-main", "amber.activity"),
    }

    def names() -> set[tuple[str, str]]:
        return {(s.service, s.name) for s in received.in_trace(trace_id)}

    wait_for(lambda: expected <= names(), 30, f"{expected} in trace {trace_id}: {names()}")
    spans = received.in_trace(trace_id)
    start = next(s for s in spans if s.name == "amber.rpc/StartRun")
    assert start.parent_id == format(root.get_span_context().span_id, "016x")
    # Every worker span hangs under the span that started the run (the run's traceparent).
    assert all(
        s.parent_id
        for s in spans
        if s.service == "amber-worker-main" and s.name in ("amber.workflow", "amber.activity")
    )
