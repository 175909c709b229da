"""The host imports of ABI v1 (module `amber`), and the per-activation state they act on.

The functions are defined once on the engine's linker; each call is routed to the activation
that is running (one per process at a time — wasmtime-py keeps a raised host exception in a
module global while unwinding, so guests must not run on two threads at once).
"""

from __future__ import annotations

import enum
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import wasmtime

from abi import HOST_IMPORTS, HOST_MODULE, MAX_ENVELOPE_BYTES, MAX_RANDOM_BYTES

from ._clock import Clock, to_ms
from ._faults import AbiViolation, DeadlineExceeded
from ._http import MAX_REQUEST_BYTES, HttpPolicy, perform

MAX_LOG_BYTES = 4096
MAX_LOG_LINES = 100
"""Lines kept and forwarded per activation; the rest are only counted."""
MAX_HANDED_OUT = 1000
"""now/random values one workflow activation may take (each becomes a command)."""
MAX_PUBLISHED_BYTES = 64 * 1024
"""A published query value, and heartbeat details, are capped at this size."""
MAX_PUBLISHED_NAMES = 64
_guest_log = logging.getLogger("amber.guest")


class ActivationKind(enum.StrEnum):
    WORKFLOW = "workflow"
    ACTIVITY = "activity"


class Suspended(BaseException):
    """Raised by `await_results` to unwind the guest; carries its output envelope.

    A `BaseException` so that nothing between the host function and the sandbox can swallow it.
    """

    def __init__(self, envelope: bytes) -> None:
        super().__init__("workflow suspended")
        self.envelope = envelope


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityHost:
    """What an activity's host imports reach outside the sandbox (supplied by the worker)."""

    idempotency_key: str
    http: HttpPolicy | None
    """The module's HTTP allowlist, or None when it declares no HTTP capability."""
    heartbeat: Callable[[bytes], bool]
    """Record heartbeat details; returns whether the run asked the activity to stop."""
    cancel_requested: Callable[[], bool]


@dataclass(slots=True, kw_only=True)
class HostCalls:
    """What the host imports see and record during one activation."""

    kind: ActivationKind
    clock: Clock
    deadline: float
    """`time.monotonic()` value after which the activation is out of time."""
    run_id: str = ""
    handed_out: list[tuple[str, Any]] = field(default_factory=list)
    """Values given to a workflow through `now`/`random`, in order (they become commands)."""
    logs: list[tuple[int, str]] = field(default_factory=list)
    dropped_logs: int = 0
    calls: int = 0
    memory: wasmtime.Memory | None = None
    query: bool = False
    """A query replay: logs are dropped, nothing the workflow issues is kept."""
    published: dict[str, bytes] = field(default_factory=dict)
    """Query values the workflow published, by name (last one wins)."""
    activity: ActivityHost | None = None
    held: bytes | None = None
    """An envelope waiting for the guest's `take` (after `http_request`)."""


def _read(caller: wasmtime.Caller, state: HostCalls, ptr: int, length: int, cap: int) -> bytes:
    if length < 0 or length > cap or ptr < 0:
        raise AbiViolation(f"host call passed a buffer of {length} bytes at {ptr} (cap {cap})")
    assert state.memory is not None
    if ptr + length > state.memory.data_len(caller):
        raise AbiViolation(f"host call passed a buffer [{ptr}, {ptr + length}) outside memory")
    return bytes(state.memory.read(caller, ptr, ptr + length))


def _hand_out(state: HostCalls, kind: str, value: object) -> None:
    if len(state.handed_out) >= MAX_HANDED_OUT:
        raise AbiViolation(
            f"a workflow activation may take at most {MAX_HANDED_OUT} now/random values"
        )
    state.handed_out.append((kind, value))


class HostImports:
    """Owns the linker definitions and routes each call to the active `HostCalls`."""

    def __init__(self) -> None:
        self.active: HostCalls | None = None

    def define(self, linker: wasmtime.Linker) -> None:
        i32, i64 = wasmtime.ValType.i32(), wasmtime.ValType.i64()
        types = {"i32": i32, "i64": i64}
        handlers: dict[str, Callable[..., Any]] = {
            "await_results": self._await_results,
            "now": self._now,
            "random": self._random,
            "log": self._log,
            "sleep": self._sleep,
            "publish": self._publish,
            "heartbeat": self._heartbeat,
            "cancel_requested": self._cancel_requested,
            "http_request": self._http_request,
            "take": self._take,
        }
        assert handlers.keys() == HOST_IMPORTS.keys()
        for name, (params, results) in HOST_IMPORTS.items():
            ty = wasmtime.FuncType([types[p] for p in params], [types[r] for r in results])
            linker.define_func(HOST_MODULE, name, ty, handlers[name], access_caller=True)

    def _state(self, name: str) -> HostCalls:
        state = self.active
        if state is None:  # a guest calling out after its activation: cannot happen, but be safe
            raise AbiViolation(f"host import {name!r} called outside an activation")
        state.calls += 1
        return state

    def _await_results(self, caller: wasmtime.Caller, ptr: int, length: int) -> None:
        state = self._state("await_results")
        if state.kind is not ActivationKind.WORKFLOW:
            raise AbiViolation("await_results is only available to workflow code")
        raise Suspended(_read(caller, state, ptr, length, MAX_ENVELOPE_BYTES))

    def _now(self, caller: wasmtime.Caller) -> int:
        state = self._state("now")
        value = to_ms(state.clock.now())
        if state.kind is ActivationKind.WORKFLOW:
            _hand_out(state, "now", value)
        return value

    def _random(self, caller: wasmtime.Caller, ptr: int, length: int) -> None:
        state = self._state("random")
        if not 0 <= length <= MAX_RANDOM_BYTES:
            raise AbiViolation(f"random asked for {length} bytes; the cap is {MAX_RANDOM_BYTES}")
        _read(caller, state, ptr, length, MAX_RANDOM_BYTES)  # bounds check only
        value = os.urandom(length)
        assert state.memory is not None
        state.memory.write(caller, value, ptr)
        if state.kind is ActivationKind.WORKFLOW:
            _hand_out(state, "random", value)

    def _log(self, caller: wasmtime.Caller, level: int, ptr: int, length: int) -> None:
        state = self._state("log")
        text = _read(caller, state, ptr, min(max(length, 0), MAX_LOG_BYTES), MAX_LOG_BYTES)
        if state.query:
            return  # a query replays history: its log lines were written the first time
        if len(state.logs) >= MAX_LOG_LINES:
            state.dropped_logs += 1
            return
        line = text.decode("utf-8", errors="replace")
        state.logs.append((level, line))
        py_level = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING}.get(level, logging.ERROR)
        _guest_log.log(py_level, "[%s] %s", state.run_id, line)

    def _sleep(self, caller: wasmtime.Caller, ms: int) -> None:
        state = self._state("sleep")
        if state.kind is not ActivationKind.ACTIVITY:
            raise AbiViolation("sleep is not available to workflow code (use a durable timer)")
        if ms < 0:
            raise AbiViolation(f"sleep of {ms} ms")
        remaining = state.deadline - time.monotonic()
        if ms / 1000 > remaining:
            time.sleep(max(remaining, 0.0))
            raise DeadlineExceeded(f"host call sleep({ms} ms) ran past the activation deadline")
        time.sleep(ms / 1000)

    def _publish(
        self, caller: wasmtime.Caller, name_ptr: int, name_len: int, ptr: int, length: int
    ) -> None:
        state = self._state("publish")
        if state.kind is not ActivationKind.WORKFLOW:
            raise AbiViolation("publish is only available to workflow code")
        name = _read(caller, state, name_ptr, name_len, 256).decode("utf-8", errors="replace")
        value = _read(caller, state, ptr, length, MAX_PUBLISHED_BYTES)
        if name not in state.published and len(state.published) >= MAX_PUBLISHED_NAMES:
            raise AbiViolation(f"a workflow may publish at most {MAX_PUBLISHED_NAMES} names")
        state.published[name] = value

    def _activity_host(self, name: str) -> tuple[HostCalls, ActivityHost]:
        state = self._state(name)
        if state.kind is not ActivationKind.ACTIVITY or state.activity is None:
            raise AbiViolation(f"{name} is only available to activity code")
        return state, state.activity

    def _heartbeat(self, caller: wasmtime.Caller, ptr: int, length: int) -> int:
        state, host = self._activity_host("heartbeat")
        details = _read(caller, state, ptr, length, MAX_PUBLISHED_BYTES)
        return 1 if host.heartbeat(details) else 0

    def _cancel_requested(self, caller: wasmtime.Caller) -> int:
        _, host = self._activity_host("cancel_requested")
        return 1 if host.cancel_requested() else 0

    def _http_request(self, caller: wasmtime.Caller, ptr: int, length: int) -> int:
        state, host = self._activity_host("http_request")
        request = _read(caller, state, ptr, length, MAX_REQUEST_BYTES)
        state.held = perform(
            request,
            policy=host.http,
            deadline=state.deadline,
            idempotency_key=host.idempotency_key,
        )
        return len(state.held)

    def _take(self, caller: wasmtime.Caller, ptr: int, length: int) -> None:
        state = self._state("take")
        held = state.held
        if held is None or length != len(held):
            raise AbiViolation("take: no envelope of that length is waiting")
        _read(caller, state, ptr, length, MAX_ENVELOPE_BYTES)  # bounds check only
        assert state.memory is not None
        if length:
            state.memory.write(caller, held, ptr)
        state.held = None
