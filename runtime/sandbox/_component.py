"""Python guests: components that speak ABI v1's envelopes through `abi/wit/amber.wit`.

A component activation is the same batch call as a core module's: a fresh store and instance,
one call of export `workflow` or `activity` with the type name and the input envelope, the
output envelope back. The `amber:guest/host` functions are the `amber` host imports taking
strings instead of pointers, and share their routing and rules (`_host`); WASI is stubbed
(`_wasi`). A component cannot go on after a trap, and the C API has no component `InstancePre`,
so every activation instantiates afresh, except a Python activity that goes on in the instance
its run's last clean one left (`instantiate` and `invoke` apart; `_warm`).

A Python exception that escapes guest code ends in an `unreachable` trap after CPython printed
its traceback to stderr; the trap message alone cannot tell a `MemoryError` from a `KeyError`,
so faults are classified from the message and the captured stderr together (`classify`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import wasmtime
from wasmtime.component import Component, Linker
from wasmtime.component import Instance as ComponentInstance

from amber.abi import COMPONENT_HOST_INTERFACE, MAX_ENVELOPE_BYTES, latin1_bytes, latin1_text
from amber.runtime.model import (
    AbiViolation,
    DeadlineExceeded,
    GuestFault,
    GuestTrap,
    MalformedOutput,
    MemoryLimitExceeded,
    OutOfFuel,
    StackOverflow,
)

from . import _fasthost as _fasthost  # host functions' types read once
from . import _fastlist as _fastlist  # bytes into components in one copy
from ._host import (
    MAX_LOG_BYTES,
    MAX_RECORD_DETAIL,
    ActivationKind,
    HostCallRecord,
    HostCalls,
    HostImports,
    activity_host,
    http_call,
    publish_value,
    sleep_ms,
    take_now,
    take_random,
    write_log,
)
from ._pooling import instantiating
from ._wasi import GuestIO, WasiStubs

T = TypeVar("T")

COMPONENT_INSTANCES: Final = 64
"""Core instances, tables and memories a component's store may create (a componentize-py
guest instantiates a few dozen core modules: CPython, its libc, adapters)."""
MIN_TABLE_ELEMENTS: Final = 1 << 16
"""CPython's function table alone is larger than a C guest's default limit."""
MIN_MEMORY_BYTES: Final = 16 * 1024 * 1024
"""The smallest memory limit CPython starts under (measured: 12 MiB fails, 13 MiB works)."""


class _Carried(Exception):
    """A `BaseException` raised in a host function (a live instance's eviction), carried
    through wasmtime-py's component trampoline, which forwards only `Exception`s: anything else
    it prints as "ignored" and the guest goes on as if the call had returned."""

    def __init__(self, inner: BaseException) -> None:
        super().__init__(repr(inner))
        self.inner = inner


@dataclass(frozen=True, slots=True, kw_only=True)
class Classified:
    """What a component's `WasmtimeError` was."""

    kind: type[GuestFault]
    detail: str
    trap_code: str | None


class ComponentHost:
    """The component linker of one engine: WASI stubs, the `amber:guest/host` functions, and
    traps for every other import."""

    def __init__(self, engine: wasmtime.Engine, host: HostImports) -> None:
        self._engine = engine
        self._host = host
        self.wasi = WasiStubs()
        self.linker = Linker(engine)
        self.wasi.define(self.linker)
        self._define_host()
        self._lock = threading.Lock()

    def prepare(self, component: Component) -> None:
        """Make every import of `component` that Amber does not provide a trap (wasmtime reports
        the import's name when it is called)."""
        with self._lock:
            self.linker.define_unknown_imports_as_traps(component)

    def instantiate(
        self, component: Component, store: wasmtime.Store, io: GuestIO
    ) -> ComponentInstance:
        """A new instance of `component` in `store` (the caller holds the activation lock)."""
        self.wasi.activate(io)
        try:
            # `prepare` may change the linker from a thread without the activation lock (a
            # module's first load, to read its manifest).
            with instantiating(), self._lock:
                return self.linker.instantiate(store, component)
        except _Carried as carried:
            raise carried.inner from None
        finally:
            self.wasi.activate(None)

    def invoke(
        self,
        instance: ComponentInstance,
        store: wasmtime.Store,
        kind: ActivationKind,
        name: str,
        envelope: bytes,
        io: GuestIO,
    ) -> str:
        """Run one activation on `instance` (a new one, or one kept after a clean activity);
        the caller holds the engine's activation lock and has activated the host imports'
        state."""
        self.wasi.activate(io)
        try:
            func = instance.get_func(store, kind.value)
            if func is None:
                raise AbiViolation(f"the component does not export {kind.value!r}")
            result = func(store, name, latin1_text(envelope))
        except _Carried as carried:
            raise carried.inner from None
        finally:
            self.wasi.activate(None)
        if not isinstance(result, str):
            raise MalformedOutput(f"export {kind.value!r} returned {type(result).__name__}")
        return result

    def _define_host(self) -> None:
        with self.linker.root() as root, root.add_instance(COMPONENT_HOST_INTERFACE) as inst:
            inst.add_func("await-next", self._wrap("await_next", _await_next))
            inst.add_func("now", self._wrap("now", lambda st: take_now(st)))
            inst.add_func(
                "random", self._wrap("random", lambda st, n: latin1_text(take_random(st, n)))
            )
            inst.add_func("log", self._wrap("log", _log))
            inst.add_func("publish", self._wrap("publish", _publish))
            inst.add_func("heartbeat", self._wrap("heartbeat", _heartbeat))
            inst.add_func("cancel-requested", self._wrap("cancel_requested", _cancel_requested))
            inst.add_func("http-request", self._wrap("http_request", _http))
            inst.add_func("sleep", self._wrap("sleep", lambda st, ms: sleep_ms(st, ms)))

    def _wrap(self, name: str, op: Callable[..., T]) -> Callable[..., T]:
        host = self._host

        def call(_store: Any, *args: Any) -> T:
            try:
                return observed(*args)
            except Exception:
                raise
            except BaseException as exc:
                raise _Carried(exc) from None

        def observed(*args: Any) -> T:
            state = host.current(name)
            observer = state.observer
            if observer is None:
                return op(state, *args)
            started = time.time_ns()
            error: str | None = None
            try:
                return op(state, *args)
            except BaseException as exc:
                error = type(exc).__name__
                raise
            finally:
                observer(
                    HostCallRecord(
                        name=name,
                        started_ns=started,
                        ended_ns=time.time_ns(),
                        detail=_detail(args)[:MAX_RECORD_DETAIL],
                        error=error,
                    )
                )

        return call


def _detail(args: tuple[Any, ...]) -> str:
    return ", ".join(f"{len(a)} B" if isinstance(a, str) else str(a) for a in args)


def _await_next(state: HostCalls, envelope: str) -> str | None:
    """A waiting workflow's output; the run's next input when a keeper holds this instance
    (`StickySandbox`: the call blocks until then), else None (the guest returns the output)."""
    if state.kind is not ActivationKind.WORKFLOW:
        raise AbiViolation("await-next is only available to workflow code")
    output = _bytes_arg("await-next", envelope)
    if len(output) > MAX_ENVELOPE_BYTES:
        raise AbiViolation(f"await-next: an envelope of {len(output)} B")
    if state.resume is None or state.query:
        return None
    return latin1_text(state.resume(output))


def _log(state: HostCalls, level: int, line: str) -> None:
    write_log(state, level, line.encode("utf-8", errors="replace")[:MAX_LOG_BYTES])


def _publish(state: HostCalls, name: str, value: str) -> None:
    publish_value(state, name, _bytes_arg("publish", value))


def _heartbeat(state: HostCalls, details: str) -> bool:
    return activity_host(state, "heartbeat").heartbeat(_bytes_arg("heartbeat", details))


def _cancel_requested(state: HostCalls) -> bool:
    return activity_host(state, "cancel_requested").cancel_requested()


def _http(state: HostCalls, request: str) -> str:
    return latin1_text(http_call(state, _bytes_arg("http-request", request)))


def _bytes_arg(where: str, text: str) -> bytes:
    try:
        return latin1_bytes(text)
    except ValueError as exc:
        raise AbiViolation(f"{where}: {exc}") from None


def output_bytes(result: str, max_bytes: int) -> bytes:
    """The output envelope a component returned, within the cap."""
    if len(result) > max_bytes:
        raise MalformedOutput(f"output of {len(result)} bytes exceeds the cap of {max_bytes}")
    try:
        return latin1_bytes(result)
    except ValueError as exc:
        raise MalformedOutput(f"output envelope: {exc}") from None


def component_store(
    engine: wasmtime.Engine, *, fuel: int, memory_bytes: int, table_elements: int, ticks: int
) -> wasmtime.Store:
    """A fresh store for one component activation (`memory_bytes` is per memory, and never
    below what CPython needs to start)."""
    store = wasmtime.Store(engine)
    store.set_fuel(fuel)
    store.set_limits(
        memory_size=max(memory_bytes, MIN_MEMORY_BYTES),
        table_elements=max(table_elements, MIN_TABLE_ELEMENTS),
        instances=COMPONENT_INSTANCES,
        tables=COMPONENT_INSTANCES,
        memories=COMPONENT_INSTANCES,
    )
    store.set_epoch_deadline(ticks)
    return store


DEADLINE_DETAIL: Final = "ran past its deadline"
"""A component's deadline fault, whether the epoch or the store's watch (`_cpuslice`) ended it."""

_CAUSE = re.compile(r"wasm trap: (.+)$", re.MULTILINE)
_UNKNOWN_IMPORT = re.compile(r"unknown import: `?([^`\s]+)`? has not been defined")
_LOST_TRACEBACK = re.compile(r"^object type name: (\w+)$", re.M)
_PY_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)[^\n]*)$", re.M)


def classify(exc: wasmtime.WasmtimeError | wasmtime.Trap, stderr: bytes) -> Classified:
    """Which guest fault a component's `WasmtimeError` is (wasmtime-py raises component traps
    as `WasmtimeError` with the trap in the message's `Caused by:` text, and no trap code)."""
    message = str(exc)
    causes = _CAUSE.findall(message)
    cause = causes[-1].strip() if causes else ""
    text = stderr.decode("utf-8", errors="replace")
    last = _last_exception(text)
    if not last and (lost := _LOST_TRACEBACK.search(text)):
        last = lost.group(1)  # CPython could not print the traceback (out of memory)
    if "all fuel consumed" in message:
        return Classified(kind=OutOfFuel, detail="used all its fuel", trap_code=None)
    if cause == "interrupt":
        return Classified(kind=DeadlineExceeded, detail=DEADLINE_DETAIL, trap_code=None)
    if unknown := _UNKNOWN_IMPORT.search(message):
        return Classified(
            kind=AbiViolation,
            detail=f"called {unknown.group(1)}, which Amber does not provide to guests",
            trap_code=None,
        )
    if "call stack exhausted" in message or last.startswith("RecursionError"):
        return Classified(kind=StackOverflow, detail=last or cause, trap_code="stack_overflow")
    if last.startswith("MemoryError"):
        return Classified(kind=MemoryLimitExceeded, detail=last, trap_code=_code(cause))
    if last:
        # The exception's type is its trap code: every Python exception is one `unreachable`
        # trap to wasmtime, and a NameError and a KeyError of one workflow shared a
        # fingerprint. Its innermost frame says where, as a traceback's last line would.
        kind = last.split(":", 1)[0].rsplit(".", 1)[-1]
        return Classified(
            kind=GuestTrap, detail=f"Python {last}{_innermost(text)}", trap_code=f"python:{kind}"
        )
    first = message.strip().splitlines()[0] if message.strip() else repr(exc)
    return Classified(kind=GuestTrap, detail=cause or first, trap_code=_code(cause))


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?::|$)")


def _last_exception(stderr: str) -> str:
    """The `Type: message` line of the guest's last traceback (any exception class, a user's
    `OrderRejected` too; a chained one's, not the exception it was raised while handling), or
    else the last line that names an error."""
    start = stderr.rfind("Traceback (most recent call last):")
    if start >= 0:
        for line in stderr[start:].splitlines()[1:]:
            if line and not line[0].isspace():
                if _EXCEPTION_LINE.match(line):
                    return line.strip()
                break
    found = _PY_ERROR.findall(stderr)
    return found[-1].strip() if found else ""


_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)', re.M)


def _innermost(traceback: str) -> str:
    """` (at FILE:LINE in FUNCTION)` for a traceback's innermost frame, or ""."""
    frames = _FRAME.findall(traceback)
    if not frames:
        return ""
    path, line, function = frames[-1]
    return f" (at {path.rsplit('/', 1)[-1]}:{line} in {function})"


def _code(cause: str) -> str | None:
    if not cause:
        return None
    return "unreachable" if "unreachable" in cause else cause.split(":")[0].replace(" ", "_")
