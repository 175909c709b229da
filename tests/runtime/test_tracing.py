"""Each activation is an OpenTelemetry span carrying run id, step, attempt and module digest."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.tracing._setup import JsonLinesExporter

from ._engine_helpers import drive, make_worker

ORDER = {"order_id": "T-1", "sku": "S", "quantity": 1, "amount_cents": 100}


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    yield exporter


def test_every_activation_is_a_span_with_run_step_attempt_and_digest(
    spans: InMemorySpanExporter, make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    spans.clear()
    srv = make_server()
    srv.client.upload_version(modules["orders"], promote=True)
    digest = hashlib.sha256(modules["orders"]).hexdigest()
    run_id = srv.client.start_run("orders", ORDER).run.run_id
    drive(make_worker(srv.client, sandbox), srv.client, run_id)

    finished = [s for s in spans.get_finished_spans() if s.attributes["amber.run_id"] == run_id]
    kinds = [s.name for s in finished]
    assert kinds.count("amber.workflow") == 5  # start + one per completed activity
    assert kinds.count("amber.activity") == 4
    for span in finished:
        attrs = span.attributes
        assert attrs["amber.module_digest"] == digest
        assert attrs["amber.attempt"] == 1
        assert attrs["amber.fuel_used"] > 0
        assert attrs["amber.memory_bytes"] > 0
    steps = sorted(s.attributes["amber.step"] for s in finished if s.name == "amber.activity")
    assert steps == [1, 2, 3, 4]


def test_a_failed_activation_span_names_its_reason(
    spans: InMemorySpanExporter, make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    spans.clear()
    srv = make_server()
    srv.client.upload_version(modules["hostile"], promote=True)
    run_id = srv.client.start_run("boom", None).run.run_id
    make_worker(srv.client, sandbox).run_once(wait_s=2)
    (span,) = [s for s in spans.get_finished_spans() if s.attributes["amber.run_id"] == run_id]
    assert span.attributes["amber.failure"] == "trap"


def test_the_json_lines_exporter_writes_one_object_per_span(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    path = tmp_path / "spans.jsonl"
    exporter = JsonLinesExporter(str(path))
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("one", attributes={"amber.run_id": "r"}):
        pass
    provider.shutdown()
    (line,) = path.read_text().splitlines()
    assert json.loads(line)["attributes"]["amber.run_id"] == "r"
