"""The activity side: `@activity.defn` and what an attempt may call while it runs.

Activities are not replayed: every call here is a plain host call, and clocks and randomness
may be used freely (prefer `sleep` to `time.sleep`: the host bounds it by the attempt's budget).
An attempt runs at least once and may run again, so make external effects idempotent with
`info().idempotency_key` (the host also sends it as the `Idempotency-Key` of every request).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, overload

from . import _http, _msgpack, _registry
from ._host import GuestHost
from ._http import HttpResponse
from ._log import Logger, LogLevel
from ._options import Duration, to_ms
from ._registry import F

__all__ = [
    "HEARTBEAT_MAX",
    "ActivityInfo",
    "attempt",
    "defn",
    "heartbeat",
    "http",
    "info",
    "is_cancelled",
    "logger",
    "sleep",
]

HEARTBEAT_MAX = 64 * 1024
"""Largest heartbeat details (bytes of msgpack)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityInfo:
    """What an attempt knows about itself."""

    run_id: str
    activity: str
    attempt: int
    """1 for the first attempt."""
    idempotency_key: str
    """The same for every attempt of this activity in this run: deduplicate effects with it."""
    deadline_ms: int
    """Wall-clock deadline of this attempt, ms since the epoch."""
    heartbeat_details: Any
    """What the last heartbeat of an earlier attempt carried (decoded), or None: where a retried
    attempt resumes from."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Attempt:
    info: ActivityInfo
    host: GuestHost


_current: _Attempt | None = None


def _attempt() -> _Attempt:
    if _current is None:
        raise RuntimeError("not in an activity: this call works only inside an @activity.defn")
    return _current


@contextmanager
def attempt(info: ActivityInfo, host: GuestHost) -> Iterator[None]:
    """Make (info, host) the current attempt while the block runs (used by the entry point)."""
    global _current
    previous, _current = _current, _Attempt(info=info, host=host)
    try:
        yield
    finally:
        _current = previous


@overload
def defn(fn: F, /) -> F: ...
@overload
def defn(*, name: str | None = None) -> Callable[[F], F]: ...
def defn(fn: F | None = None, /, *, name: str | None = None) -> F | Callable[[F], F]:
    """Register an activity: `@activity.defn` (named after the function) or
    `@activity.defn(name="charge_payment")`. The function takes the decoded arguments (or
    nothing) and returns a msgpack-able value; raise `ApplicationError` to fail the attempt
    with a chosen type, non-retryably if you say so."""

    def register(f: F) -> F:
        return _registry.register(_registry.Kind.ACTIVITY, f, name)

    return register if fn is None else register(fn)


def info() -> ActivityInfo:
    """The running attempt's run id, activity name, attempt, idempotency key, deadline and the
    details an earlier attempt heartbeated."""
    return _attempt().info


def heartbeat(details: object = None) -> bool:
    """Report progress: resets the heartbeat timeout and hands `details` (a msgpack-able value;
    None sends none) to the next attempt should this one fail. Returns True when the run asked
    the activity to stop: wind down and raise `CancelledError`."""
    data = b"" if details is None else _msgpack.encode(details)
    if len(data) > HEARTBEAT_MAX:
        raise ValueError(f"heartbeat details are {len(data)} bytes; the limit is {HEARTBEAT_MAX}")
    return bool(_attempt().host.heartbeat(data))


def is_cancelled() -> bool:
    """Whether the run asked this activity to stop (as last seen through the worker's
    heartbeats), without heartbeating."""
    return bool(_attempt().host.cancel_requested())


def http(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: bytes | str | None = None,
    timeout_ms: int | None = None,
) -> HttpResponse:
    """Perform an HTTP request through the host; the module must allow the host with
    `amber_sdk.declare(capabilities={"http": {"allow": [...]}})`. Returns the response whatever
    its status; raises `HttpError` when there was none (`HostNotAllowed`, `Timeout`,
    `ConnectionError`, `BadRequest`). A `str` body is sent as UTF-8."""
    request = _http.encode_request(method, url, headers, body, timeout_ms)
    return _http.decode_response(bytes(_attempt().host.http_request(request)))


def sleep(duration: Duration) -> None:
    """Block for `duration` (seconds or a timedelta) within the attempt's wall-clock budget;
    sleeping past the deadline fails the attempt."""
    _attempt().host.sleep(to_ms(duration, "sleep duration"))


def _emit(level: LogLevel, line: Callable[[], str]) -> None:
    _attempt().host.log(int(level), line())


logger = Logger(_emit)
"""The attempt's logger (the host's `log` import)."""
