"""The servicer's error translation: Amber errors become gRPC statuses carrying their type and
fields."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from amber.abi import AmberError
from amber.runtime.api import error_details, error_metadata, status_of

_log = logging.getLogger("amber.runtime.server._servicer")

R = TypeVar("R")


def rpc(method: Callable[..., R]) -> Callable[..., R]:
    """Turn Amber errors into gRPC statuses carrying the error's type and fields."""

    @functools.wraps(method)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> R:
        try:
            return method(self, request, context)
        except AmberError as exc:
            context.set_trailing_metadata(error_metadata(exc))
            context.abort(status_of(exc), error_details(exc))
        except Exception:
            _log.exception("internal error in %s", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method.__name__}")
        raise AssertionError("unreachable")

    return wrapper
