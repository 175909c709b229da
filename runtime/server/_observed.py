"""What wraps every RPC the server answers: the database gate, the access check, a span, and
the timing.

- **Gate**: while the database probe says PostgreSQL is down, a call that needs it fails at once
  with `StoreUnavailable` ("database unavailable …; nothing was written, retrying with the same
  request id is safe") instead of waiting out the connection pool and the client's deadline.
  The health service is never gated.
- **Access** (when the server checks credentials): the bearer token is authenticated and the
  method and tenant authorised (`_access`) before the servicer sees the call.
- **Span**: each call is a server span, a child of the caller's trace context when the metadata
  carries one (`traceparent`), with the method and status code.
- **Timing**: seconds by method and status code, for the metrics.

A worker's stream (`Work`) gets the same: the gate before each batch, the access check of each
item as the unary call it stands for (a refusal ends the stream with that status), a timing per
batch, and a span per item, named as its unary call and in the trace the item carries (its
run's), lasting as long as its batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from amber.abi import AmberError
from amber.history import StoreUnavailable
from amber.runtime.api import error_details, error_metadata, status_of
from amber.runtime.model import source_of
from amber.runtime.tracing import context_from_metadata, context_from_traceparent

from ._worker_rpc import ITEM_METHODS

RpcObserver = Callable[[str, str, float], None]
"""Told each call's method name, status code name and seconds (a stream: each batch's)."""
BatchObserver = Callable[[int], None]
"""Told the items of each batch a worker's stream carried."""
Access = Callable[[str, Any, Any, str], object]
"""Given the method, the call's metadata, the request and the caller's address: raises an
`AmberError` to refuse."""

UNGATED_PREFIX = "/grpc.health.v1.Health/"


class RpcFrame(grpc.ServerInterceptor):  # type: ignore[misc]
    """A server interceptor for unary calls and the workers' stream."""

    def __init__(
        self,
        observe: RpcObserver,
        database_down: Callable[[], str | None],
        spans: trace.Tracer | None,
        access: Access | None = None,
        batches: BatchObserver | None = None,
    ) -> None:
        """`database_down()`: why the database is unreachable, or None; `spans`: the tracer for
        server spans (None: no spans); `access`: the access check (None: every call admitted);
        `batches`: told each stream batch's size."""
        self._observe = observe
        self._batches = batches
        self._down = database_down
        self._spans = spans
        self._access = access

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is not None and handler.stream_stream is not None:
            return self._framed_stream(handler, handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        full = str(handler_call_details.method)
        method = full.rsplit("/", 1)[-1]
        gated = not full.startswith(UNGATED_PREFIX)
        metadata = handler_call_details.invocation_metadata
        inner, observe, down, spans = handler.unary_unary, self._observe, self._down, self._spans
        access = self._access if gated else None

        def call(request: Any, context: grpc.ServicerContext) -> Any:
            if gated:
                problem = down()
                if problem is not None:
                    exc = StoreUnavailable(
                        f"{problem}; nothing was written: retrying with the same request id is"
                        " safe once it is back"
                    )
                    context.set_trailing_metadata(error_metadata(exc))
                    context.abort(status_of(exc), error_details(exc))
            if access is not None:
                try:
                    access(method, metadata, request, source_of(context.peer()))
                except AmberError as refused:
                    context.set_trailing_metadata(error_metadata(refused))
                    context.abort(status_of(refused), error_details(refused))
            return inner(request, context)

        def framed(request: Any, context: grpc.ServicerContext) -> Any:
            started = time.perf_counter()
            failed = True
            # The caller's trace is current even without a span of ours: a run started here
            # keeps it (`current_traceparent`).
            parent = context_from_metadata(metadata)
            token = otel_context.attach(parent)
            span = None
            if spans is not None:
                span = spans.start_span(
                    f"amber.rpc/{method}",
                    context=parent,
                    kind=SpanKind.SERVER,
                    attributes={"rpc.system": "grpc", "rpc.method": method},
                )
            try:
                if span is None:
                    response = call(request, context)
                else:
                    with trace.use_span(span, end_on_exit=False):
                        response = call(request, context)
                failed = False
                return response
            finally:
                code = _code(context) or ("UNKNOWN" if failed else "OK")
                observe(method, code, time.perf_counter() - started)
                if span is not None:
                    span.set_attribute("rpc.grpc.status_code", code)
                    if code != "OK":
                        span.set_status(Status(StatusCode.ERROR, code))
                    span.end()
                otel_context.detach(token)

        return grpc.unary_unary_rpc_method_handler(
            framed,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _framed_stream(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        method = str(details.method).rsplit("/", 1)[-1]
        metadata = details.invocation_metadata
        inner, observe, down, spans, access, count_batch = (
            handler.stream_stream,
            self._observe,
            self._down,
            self._spans,
            self._access,
            self._batches,
        )

        def refuse(context: grpc.ServicerContext, exc: AmberError) -> None:
            context.set_trailing_metadata(error_metadata(exc))
            context.abort(status_of(exc), error_details(exc))

        def framed(batches: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
            source = source_of(context.peer())
            started = [time.perf_counter()]
            current: list[Any] = [None]
            if access is not None:  # the stream itself, before any item: who opens it
                try:
                    access(method, metadata, handler.request_deserializer(b""), source)
                except AmberError as refused:
                    refuse(context, refused)

            def checked() -> Iterator[Any]:
                for batch in batches:
                    started[0] = time.perf_counter()
                    current[0] = batch
                    problem = down()
                    if problem is not None:
                        refuse(context, StoreUnavailable(f"{problem}; the stream ends here"))
                    if access is not None:
                        for item in batch.items:
                            kind = item.WhichOneof("call")
                            if kind is None:
                                continue  # answered as invalid by the servicer
                            try:
                                access(ITEM_METHODS[kind], metadata, getattr(item, kind), source)
                            except AmberError as refused:
                                refuse(context, refused)
                    yield batch

            code = "OK"
            try:
                answered: list[Any] = []
                for answers in inner(checked(), context):
                    answered.append(answers)
                    if not answers.more and current[0] is not None:  # the batch is answered
                        seconds = time.perf_counter() - started[0]
                        observe(method, "OK", seconds)
                        if count_batch is not None:
                            count_batch(len(current[0].items))
                        if spans is not None:
                            _item_spans(spans, current[0], answered, seconds)
                        answered = []
                    yield answers
            except BaseException:
                code = _code(context) or "UNKNOWN"
                raise
            finally:
                if code != "OK":
                    observe(method, code, time.perf_counter() - started[0])

        return grpc.stream_stream_rpc_method_handler(
            framed,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def _item_spans(spans: trace.Tracer, batch: Any, messages: list[Any], seconds: float) -> None:
    """A span per item of an answered batch, in the item's own trace."""
    began = time.time_ns() - int(seconds * 1e9)
    errors = {
        a.id: a.error.code
        for answers in messages
        for a in answers.answers
        if a.WhichOneof("answer") == "error"
    }
    for item in batch.items:
        kind = item.WhichOneof("call")
        name = ITEM_METHODS.get(kind or "", "Work")
        span = spans.start_span(
            f"amber.rpc/{name}",
            context=context_from_traceparent(item.traceparent),
            kind=SpanKind.SERVER,
            start_time=began,
            attributes={
                "rpc.system": "grpc",
                "rpc.method": name,
                "amber.stream_batch_items": len(batch.items),
            },
        )
        code = errors.get(item.id)
        span.set_attribute("rpc.grpc.status_code", code or "OK")
        if code:
            span.set_status(Status(StatusCode.ERROR, code))
        span.end()


def _code(context: grpc.ServicerContext) -> str | None:
    """The status the call ends with, if the servicer set one (abort sets it)."""
    code = getattr(context, "code", None)
    value = code() if callable(code) else None
    return value.name if isinstance(value, grpc.StatusCode) else None
