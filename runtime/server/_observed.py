"""Timing every RPC the server answers, by method and status code, for its metrics."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc

RpcObserver = Callable[[str, str, float], None]
"""Told each call's method name, status code name and seconds."""


class RpcTimer(grpc.ServerInterceptor):  # type: ignore[misc]
    """A server interceptor timing unary calls (every Amber RPC is unary)."""

    def __init__(self, observe: RpcObserver) -> None:
        self._observe = observe

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = str(handler_call_details.method).rsplit("/", 1)[-1]
        inner, observe = handler.unary_unary, self._observe

        def timed(request: Any, context: grpc.ServicerContext) -> Any:
            started = time.perf_counter()
            failed = True
            try:
                response = inner(request, context)
                failed = False
                return response
            finally:
                code = _code(context) or ("UNKNOWN" if failed else "OK")
                observe(method, code, time.perf_counter() - started)

        return grpc.unary_unary_rpc_method_handler(
            timed,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def _code(context: grpc.ServicerContext) -> str | None:
    """The status the call ends with, if the servicer set one (abort sets it)."""
    code = getattr(context, "code", None)
    value = code() if callable(code) else None
    return value.name if isinstance(value, grpc.StatusCode) else None
