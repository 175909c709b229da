"""The surgical pool's detailed tracing: a span per replayed event and per host call.

Each span is a child of the worker's activation span, so one trace shows a poisoned task's
whole attempt, and carries the activation's attributes (run id, step, attempt, module digest)
besides its own. Host-call spans are made from the records the isolated sandbox streams out of
its child process, with the call's own start and end times — a call recorded just before the
child died still gets its span. The batch ABI replays all recorded results in one guest call,
so a replayed event has no duration of its own: its span marks the event (seq, type, command,
the digest that wrote it) inside the activation.

The last `keep` host calls of the current activation are kept as one-line summaries; the worker
sends them with a failure report, where `amber triage show` prints them.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from amber.history import Event
from amber.runtime.sandbox import HostCallRecord

_EVENT_SPAN_LIMIT = 10_000
"""Replayed events traced per activation (a history is capped well below this anyway)."""
HOST_CALL_SPAN_LIMIT = 1_000
"""Host calls traced per activation: a guest looping on `log` must not flood the exporter. One
`amber.host.truncated` span marks where tracing stopped; the recent-calls list goes on."""


class SurgicalTrace:
    """Turns host calls and replayed events into spans; remembers the last host calls."""

    def __init__(self, tracer: trace.Tracer | None = None, *, keep: int = 32) -> None:
        self._tracer = tracer or trace.get_tracer("amber.surgical")
        self._recent: collections.deque[str] = collections.deque(maxlen=keep)
        self._attributes: dict[str, Any] = {}
        self._spans = 0

    def begin(self, attributes: Mapping[str, Any]) -> None:
        """A new activation starts (its attributes go on every span)."""
        self._recent.clear()
        self._attributes = dict(attributes)
        self._spans = 0

    def on_host_call(self, record: HostCallRecord) -> None:
        """Trace one host call (called by the sandbox, on the worker's thread)."""
        self._recent.append(_summary(record))
        self._spans += 1
        if self._spans > HOST_CALL_SPAN_LIMIT:
            if self._spans == HOST_CALL_SPAN_LIMIT + 1:
                note = {**self._attributes, "amber.host_calls.traced": HOST_CALL_SPAN_LIMIT}
                self._tracer.start_span("amber.host.truncated", attributes=note).end()
            return
        attributes = {
            **self._attributes,
            "amber.host_call": record.name,
            "amber.host_call.detail": record.detail,
            "amber.host_call.duration_us": (record.ended_ns - record.started_ns) // 1000,
        }
        if record.error:
            attributes["amber.host_call.error"] = record.error
        span = self._tracer.start_span(
            f"amber.host.{record.name}", start_time=record.started_ns, attributes=attributes
        )
        if record.error:
            span.set_status(trace.Status(trace.StatusCode.ERROR, record.error))
        span.end(end_time=max(record.ended_ns, record.started_ns))

    def replayed(self, events: Sequence[Event], digest: str) -> None:
        """Trace each history event a workflow activation replays on `digest`."""
        now = time.time_ns()
        for event in events[:_EVENT_SPAN_LIMIT]:
            attributes = {
                **self._attributes,
                "amber.event.seq": event.seq,
                "amber.event.type": event.type.value,
                "amber.event.digest": event.digest,
                "amber.replay_digest": digest,
            }
            cmd = getattr(event.payload, "cmd", None)  # the events of a command carry its index
            if isinstance(cmd, int):
                attributes["amber.event.cmd"] = cmd
            span = self._tracer.start_span(
                f"amber.replay.{event.type.value}", start_time=now, attributes=attributes
            )
            span.end(end_time=now)

    def recent_calls(self) -> tuple[str, ...]:
        return tuple(self._recent)


def _summary(record: HostCallRecord) -> str:
    at = datetime.fromtimestamp(record.started_ns / 1e9, UTC).strftime("%H:%M:%S.%f")[:-3]
    took = (record.ended_ns - record.started_ns) / 1e6
    text = f"{at} {record.name}({record.detail}) {took:.2f} ms"
    return text + (f" !{record.error}" if record.error else "")
