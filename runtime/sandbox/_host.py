"""The host imports of ABI v1 (module `amber`), and the per-activation state they act on.

The functions are defined once on the engine's linker; each call is routed to the activation
that is running (one per process at a time — wasmtime-py keeps a raised host exception in a
module global while unwinding, so guests must not run on two threads at once). An activation may
ask for every host call to be reported as a `HostCallRecord` as it ends (the surgical pool streams
them out of a process that may not survive the guest).
"""

from __future__ import annotations

import enum
import logging
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import wasmtime

from amber.abi import HOST_MODULE, MAX_ENVELOPE_BYTES, MAX_RANDOM_BYTES, allowed_host_imports
from amber.runtime.model import AbiViolation, Clock, DeadlineExceeded, to_ms

from ._http import MAX_REQUEST_BYTES, HttpPolicy, perform

MAX_LOG_BYTES = 4096
MAX_LOG_LINES = 100
"""Lines kept and forwarded per activation; the rest are only counted."""
SLEEP_CHECK_S = 0.25
"""How often an activity's `sleep` asks whether the run still wants the activity."""
MAX_HANDED_OUT = 1000
"""now/random values one workflow activation may take (each becomes a command)."""
MAX_PUBLISHED_BYTES = 64 * 1024
"""A published query value, and heartbeat details, are capped at this size."""
MAX_PUBLISHED_NAMES = 64
MAX_RECORD_DETAIL = 200
"""Characters of a `HostCallRecord.detail`."""
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
class HostCallRecord:
    """One host import call of a guest, for operators working out what a crashing guest did.

    Holds sizes and small values only, never payload bytes: records may be kept and shown where
    the payloads themselves must not be.
    """

    name: str
    """The import's name in module `amber`."""
    started_ns: int
    """Wall clock (`time.time_ns()`) when the call began."""
    ended_ns: int
    detail: str
    """A short summary of the arguments and result (lengths, log level, milliseconds)."""
    error: str | None = None
    """The exception type name if the call failed (a workflow suspending is not a failure)."""


HostCallObserver = Callable[[HostCallRecord], None]
"""Receives each `HostCallRecord` of an activation as its call ends."""


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
    observer: HostCallObserver | None = None
    """Told about every host call of the activation (None: calls are not recorded)."""
    resume: Callable[[bytes], bytes] | None = None
    """For a sticky instance: hands the suspended output envelope over, waits for the run's next
    activation and returns its input envelope (this state then describes that activation).
    None: `await_next` ends the activation like `await_results`."""
    waiting: Callable[[], AbstractContextManager[None]] | None = None
    """Wraps a host call's wait (an activity's sleep, an HTTP exchange): the guest's place in
    its process is given up meanwhile, so that other guests run (`Sandbox`); None: kept."""


def _waiting(state: HostCalls) -> AbstractContextManager[None]:
    return nullcontext() if state.waiting is None else state.waiting()


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


def take_now(state: HostCalls) -> int:
    """The host's clock in ms; a workflow's value is handed out (it becomes a `now` command)."""
    value = to_ms(state.clock.now())
    if state.kind is ActivationKind.WORKFLOW:
        _hand_out(state, "now", value)
    return value


def take_random(state: HostCalls, length: int) -> bytes:
    """`length` CSPRNG bytes; a workflow's are handed out (they become a `random` command)."""
    if not 0 <= length <= MAX_RANDOM_BYTES:
        raise AbiViolation(f"random asked for {length} bytes; the cap is {MAX_RANDOM_BYTES}")
    value = os.urandom(length)
    if state.kind is ActivationKind.WORKFLOW:
        _hand_out(state, "random", value)
    return value


def write_log(state: HostCalls, level: int, text: bytes) -> None:
    """Keep and forward one guest log line (none during a query; counted past the cap)."""
    if state.query:
        return  # a query replays history: its log lines were written the first time
    if len(state.logs) >= MAX_LOG_LINES:
        state.dropped_logs += 1
        return
    line = text[:MAX_LOG_BYTES].decode("utf-8", errors="replace")
    state.logs.append((level, line))
    py_level = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING}.get(level, logging.ERROR)
    _guest_log.log(py_level, "[%s] %s", state.run_id, line)


def sleep_ms(state: HostCalls, ms: int) -> None:
    """An activity's sleep, within its wall-clock budget. It ends early once the run asks the
    activity to stop (or its lease is gone): the guest goes on, and `cancel_requested` says why,
    instead of holding its guest slot to the end for a result nobody will take."""
    if state.kind is not ActivationKind.ACTIVITY:
        raise AbiViolation("sleep is not available to workflow code (use a durable timer)")
    if ms < 0:
        raise AbiViolation(f"sleep of {ms} ms")
    now = time.monotonic()
    past_deadline = ms / 1000 > state.deadline - now
    until = min(now + ms / 1000, state.deadline)
    stop = state.activity.cancel_requested if state.activity is not None else None
    if until > now:  # a sleep of nothing keeps its place (a guest looping on sleep(0) computes)
        with _waiting(state):
            while (left := until - time.monotonic()) > 0:
                time.sleep(min(left, SLEEP_CHECK_S))
                if stop is not None and left > SLEEP_CHECK_S and stop():
                    return
    if past_deadline:
        raise DeadlineExceeded(f"host call sleep({ms} ms) ran past the activation deadline")


def publish_value(state: HostCalls, name: str, value: bytes) -> None:
    """Set the value queries named `name` answer with (workflows only)."""
    if state.kind is not ActivationKind.WORKFLOW:
        raise AbiViolation("publish is only available to workflow code")
    if len(value) > MAX_PUBLISHED_BYTES:
        raise AbiViolation(f"published value of {len(value)} B; the cap is {MAX_PUBLISHED_BYTES}")
    if name not in state.published and len(state.published) >= MAX_PUBLISHED_NAMES:
        raise AbiViolation(f"a workflow may publish at most {MAX_PUBLISHED_NAMES} names")
    state.published[name] = value


def activity_host(state: HostCalls, name: str) -> ActivityHost:
    """What an activity's import `name` reaches; `AbiViolation` from workflow code."""
    if state.kind is not ActivationKind.ACTIVITY or state.activity is None:
        raise AbiViolation(f"{name} is only available to activity code")
    return state.activity


def http_call(state: HostCalls, request: bytes) -> bytes:
    """Perform an activity's HTTP request under its allowlist and remaining budget; returns
    the response envelope."""
    host = activity_host(state, "http_request")
    if len(request) > MAX_REQUEST_BYTES:
        raise AbiViolation(f"HTTP request of {len(request)} B; the cap is {MAX_REQUEST_BYTES}")
    with _waiting(state):
        return perform(
            request, policy=host.http, deadline=state.deadline, idempotency_key=host.idempotency_key
        )


_DETAILS: dict[str, str] = {
    "await_results": "{1} B",
    "await_next": "{1} B",
    "now": "",
    "random": "{1} B",
    "log": "level {0}, {2} B",
    "sleep": "{0} ms",
    "publish": "name {1} B, value {3} B",
    "heartbeat": "{1} B",
    "cancel_requested": "",
    "http_request": "{1} B",
    "take": "{1} B",
    "test_exit": "code {0}",
}
"""How each import's arguments (all integers: lengths, levels, ms) appear in a record."""


class HostImports:
    """Owns the linker definitions and routes each call to the active `HostCalls`."""

    def __init__(self) -> None:
        self.active: HostCalls | None = None
        self._observer: HostCallObserver | None = None

    def activate(self, state: HostCalls | None) -> None:
        """Route host calls to `state` (None between activations)."""
        self.active = state
        self._observer = None if state is None else state.observer

    def define(self, linker: wasmtime.Linker) -> None:
        i32, i64 = wasmtime.ValType.i32(), wasmtime.ValType.i64()
        types = {"i32": i32, "i64": i64}
        imports = allowed_host_imports()
        handlers: dict[str, Callable[..., Any]] = {
            "await_results": self._await_results,
            "await_next": self._await_next,
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
        test_handlers: dict[str, Callable[..., Any]] = {"test_exit": self._test_exit}
        handlers |= {name: h for name, h in test_handlers.items() if name in imports}
        assert handlers.keys() == imports.keys()
        assert handlers.keys() <= _DETAILS.keys()
        for name, (params, results) in imports.items():
            ty = wasmtime.FuncType([types[p] for p in params], [types[r] for r in results])
            handler = self._observed(name, handlers[name])
            linker.define_func(HOST_MODULE, name, ty, handler, access_caller=True)

    def _observed(self, name: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        template = _DETAILS[name]

        def call(caller: wasmtime.Caller, *args: int) -> Any:
            observer = self._observer
            if observer is None:
                return handler(caller, *args)
            started = time.time_ns()
            error: str | None = None
            try:
                result = handler(caller, *args)
            except Suspended:
                detail = "suspended"
                raise
            except BaseException as exc:
                error = type(exc).__name__
                detail = template.format(*args)
                raise
            else:
                detail = template.format(*args)
                if result is not None:
                    detail = f"{detail} -> {result}".lstrip()
                return result
            finally:
                observer(
                    HostCallRecord(
                        name=name,
                        started_ns=started,
                        ended_ns=time.time_ns(),
                        detail=detail[:MAX_RECORD_DETAIL],
                        error=error,
                    )
                )

        return call

    def _state(self, name: str) -> HostCalls:
        return self.current(name)

    def current(self, name: str) -> HostCalls:
        """The running activation's state, counting a call of import `name` (for the
        component host's functions, which share this routing)."""
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

    def _await_next(self, caller: wasmtime.Caller, ptr: int, length: int) -> int:
        state = self._state("await_next")
        if state.kind is not ActivationKind.WORKFLOW:
            raise AbiViolation("await_next is only available to workflow code")
        envelope = _read(caller, state, ptr, length, MAX_ENVELOPE_BYTES)
        if state.resume is None or state.query:
            raise Suspended(envelope)
        state.held = state.resume(envelope)
        return len(state.held)

    def _now(self, caller: wasmtime.Caller) -> int:
        return take_now(self._state("now"))

    def _random(self, caller: wasmtime.Caller, ptr: int, length: int) -> None:
        state = self._state("random")
        if not 0 <= length <= MAX_RANDOM_BYTES:
            raise AbiViolation(f"random asked for {length} bytes; the cap is {MAX_RANDOM_BYTES}")
        _read(caller, state, ptr, length, MAX_RANDOM_BYTES)  # bounds check only
        value = take_random(state, length)
        assert state.memory is not None
        state.memory.write(caller, value, ptr)

    def _log(self, caller: wasmtime.Caller, level: int, ptr: int, length: int) -> None:
        state = self._state("log")
        text = _read(caller, state, ptr, min(max(length, 0), MAX_LOG_BYTES), MAX_LOG_BYTES)
        write_log(state, level, text)

    def _sleep(self, caller: wasmtime.Caller, ms: int) -> None:
        sleep_ms(self._state("sleep"), ms)

    def _publish(
        self, caller: wasmtime.Caller, name_ptr: int, name_len: int, ptr: int, length: int
    ) -> None:
        state = self._state("publish")
        if state.kind is not ActivationKind.WORKFLOW:
            raise AbiViolation("publish is only available to workflow code")
        raw_name = _read(caller, state, name_ptr, name_len, 256)
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:  # no query could name it: the guest's bug, said plainly
            raise AbiViolation(f"publish name {raw_name[:64]!r} is not UTF-8") from None
        publish_value(state, name, _read(caller, state, ptr, length, MAX_PUBLISHED_BYTES))

    def _heartbeat(self, caller: wasmtime.Caller, ptr: int, length: int) -> int:
        state = self._state("heartbeat")
        host = activity_host(state, "heartbeat")
        details = _read(caller, state, ptr, length, MAX_PUBLISHED_BYTES)
        return 1 if host.heartbeat(details) else 0

    def _cancel_requested(self, caller: wasmtime.Caller) -> int:
        host = activity_host(self._state("cancel_requested"), "cancel_requested")
        return 1 if host.cancel_requested() else 0

    def _http_request(self, caller: wasmtime.Caller, ptr: int, length: int) -> int:
        state = self._state("http_request")
        activity_host(state, "http_request")
        state.held = http_call(state, _read(caller, state, ptr, length, MAX_REQUEST_BYTES))
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

    def _test_exit(self, caller: wasmtime.Caller, code: int) -> None:
        self._state("test_exit")
        observer = self._observer
        if observer is not None:  # the call never returns: report it before it happens
            now = time.time_ns()
            observer(
                HostCallRecord(
                    name="test_exit", started_ns=now, ended_ns=now, detail=f"code {code}"
                )
            )
        os._exit(code & 0xFF)
