"""Carrying a trace across processes: W3C `traceparent` in gRPC metadata and on a run's row.

One run reads as one trace: the client's context travels to the server in the call's metadata;
the server keeps the `traceparent` of the call that started the run on the run's row and hands it
out with every task it leases, so the worker's (and the surgical pool's) spans for that run are
children of the start. Rejected: a trace per attempt with span links (a run's story split over
as many traces as it has tasks, which a trace viewer does not put back together).
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry import propagate, trace
from opentelemetry.context import Context

TRACEPARENT = "traceparent"
MAX_TRACEPARENT_CHARS = 256


def current_traceparent() -> str:
    """The current span's `traceparent` (empty when there is no recording span)."""
    if not trace.get_current_span().get_span_context().is_valid:
        return ""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get(TRACEPARENT, "")


def trace_metadata() -> tuple[tuple[str, str], ...]:
    """gRPC metadata carrying the current trace context (empty outside a span)."""
    carrier: dict[str, str] = {}
    if trace.get_current_span().get_span_context().is_valid:
        propagate.inject(carrier)
    return tuple((k, v) for k, v in carrier.items() if len(v) <= MAX_TRACEPARENT_CHARS)


def context_from_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> Context:
    """The trace context a call's metadata carries (the root context when it carries none)."""
    carrier: dict[str, str] = {}
    for key, value in metadata or ():
        if isinstance(value, str) and len(value) <= MAX_TRACEPARENT_CHARS:
            carrier[key.lower()] = value
    return propagate.extract(carrier)


def context_from_traceparent(traceparent: str) -> Context | None:
    """The context a stored `traceparent` names, or None when it is empty or malformed."""
    if not traceparent or len(traceparent) > MAX_TRACEPARENT_CHARS:
        return None
    extracted = propagate.extract({TRACEPARENT: traceparent})
    if not trace.get_current_span(extracted).get_span_context().is_valid:
        return None
    return extracted
