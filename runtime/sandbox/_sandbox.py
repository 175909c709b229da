"""One activation: a fresh Store with fuel, memory and deadline limits, one call, typed faults.

Every activation gets a new `Store` (so no state leaks between runs or attempts; one exception
below), instantiated from the cached `InstancePre` of its module digest. Its input envelope is
written through `amber_alloc`; its output is read back bounds-checked. Whatever goes wrong comes
out as one `GuestFault` subclass carrying the run, step, digest, fuel and memory used.

Replay and the worker depend only on `SandboxRunner`: `Sandbox` runs guests in this process, the
surgical pool's `IsolatedSandbox` runs each activation in a child process.

A Python guest (a component) takes the same path with its own call (`_component`): the same
limits, faults and outputs, so nothing above the sandbox tells the two kinds apart. The
exception to "a new Store": given a `WarmActivities`, a Python activity goes on in the instance
its run's last clean activity left (never another run's; a fault there is run again afresh, on
what is left of the deadline, and that outcome is the one returned).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Protocol

import wasmtime
from wasmtime.component import Component

from amber.abi import (
    ALLOC_EXPORT,
    ALLOC_SIGNATURE,
    ENTRY_SIGNATURE,
    MAX_ENVELOPE_BYTES,
    MEMORY_EXPORT,
    AmberError,
    NotMsgpack,
    RetryableError,
    unpack,
)
from amber.runtime.model import (
    AbiViolation,
    Clock,
    DeadlineExceeded,
    GuestFault,
    GuestTrap,
    MalformedOutput,
    MemoryLimitExceeded,
    ModuleUnavailable,
    OutOfFuel,
    SandboxBusy,
    SliceUsed,
    StackOverflow,
)

from . import _fastcall as _fastcall
from ._component import DEADLINE_DETAIL, classify, component_store, output_bytes
from ._cpuslice import CpuWatch, watch
from ._engine import EPOCH_TICK_S, LoadedModule, SandboxEngine
from ._host import (
    ActivationKind,
    ActivityHost,
    HostCallObserver,
    HostCalls,
    HostImports,
    Suspended,
)
from ._http import HttpPolicy
from ._pooling import instantiating
from ._warm import WarmActivities, WarmInstance, WarmKey
from ._wasi import GuestIO, WasiStubs

LEAVE_SLICE_AFTER_WAIT_S = 1.0
"""Waits in host calls after which a sliced run goes on with its whole budget: run again from
the start in the background lane, it would wait that long again, on what is left of its
deadline. Shorter waits are cheap to repeat, and must not let a guest out of its slice (an
attacker's `sleep(1)` before a fuel bomb)."""
_WASM_PAGE = 65536
_U64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxLimits:
    """The budget of one activation."""

    fuel: int = 1_000_000_000
    """Wasm instructions, roughly (1e9 ≈ 0.1–0.3 s of guest CPU here)."""
    memory_bytes: int = 64 * 1024 * 1024
    deadline_s: float = 10.0
    """Wall-clock limit covering guest code and host calls."""
    table_elements: int = 10_000
    """Function-table size limit (a `table.grow` is memory the store limit does not count)."""
    max_output_bytes: int = MAX_ENVELOPE_BYTES


Places = Callable[[], AbstractContextManager[None]]
"""Gives up an owner's places for the length of a `with` block, and takes them back."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Slice:
    """What an activity's first run may use before its caller runs it again on its whole
    budget (`ActivationRequest.slice`)."""

    fuel: int
    cpu_s: float | None = None
    """Thread CPU, user and system (None: fuel alone; `_cpuslice`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivationRequest:
    """Run one export of one module version on one input envelope."""

    kind: ActivationKind
    digest: str
    export: str
    input: bytes
    run_id: str
    step: int | None
    limits: SandboxLimits
    query: bool = False
    """A query replay (logs dropped; see `HostCalls.query`)."""
    fresh: bool = False
    """Replay from the top in a new instance even where a live one could go on (a sticky
    keeper drops the run's live instance)."""
    slice: Slice | None = None
    """An activity's first run, which its caller runs again from the start on its whole budget
    if it uses this up (`ParallelSandbox`): using it up ends the run with `SliceUsed`, not its
    outcome. A run whose waits in host calls add up to `LEAVE_SLICE_AFTER_WAIT_S` leaves its
    slice (run again, it would wait again)."""
    activity: ActivityHost | None = None
    """For activities: heartbeats, cancellation and the HTTP capability."""
    observer: HostCallObserver | None = None
    """Told about each host call as it ends (None: calls are only counted)."""

    def narrowed(self, *, input: bytes, fuel: int, deadline_s: float) -> ActivationRequest:
        """This request on another input, within less fuel and time: a live instance's next
        stretch. `dataclasses.replace`'s result, built directly (it runs on every live step,
        and `replace` costs about twice as much); a test holds the two equal."""
        limits = self.limits
        return ActivationRequest(
            kind=self.kind,
            digest=self.digest,
            export=self.export,
            input=input,
            run_id=self.run_id,
            step=self.step,
            limits=SandboxLimits(
                fuel=fuel,
                memory_bytes=limits.memory_bytes,
                deadline_s=deadline_s,
                table_elements=limits.table_elements,
                max_output_bytes=limits.max_output_bytes,
            ),
            query=self.query,
            fresh=self.fresh,
            slice=self.slice,
            activity=self.activity,
            observer=self.observer,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RawOutput:
    """What came out of a successful activation, before the envelope is decoded."""

    envelope: bytes
    suspended: bool
    """True when the guest ended through `await_results`."""
    handed_out: tuple[tuple[str, object], ...]
    logs: tuple[tuple[int, str], ...]
    fuel_used: int
    memory_bytes: int
    host_calls: int
    duration_s: float
    published: dict[str, bytes]
    """Query values the workflow published during the activation."""
    continued: bool = False
    """A live instance went on from its last wait instead of replaying from the top
    (`StickySandbox`): fuel and memory are this stretch's, not a replay's."""
    parked: bool = False
    """The guest handed this output over while it waits in `await_next` (a live instance, its
    first stretch included): a replay from the top, whose guest unwinds instead, uses more fuel
    for the same output."""


class SandboxRunner(Protocol):
    """What replay and the worker need from a sandbox: run activations, describe modules.

    `Sandbox` runs guests in this process; `surgical_pool.IsolatedSandbox` runs each activation in
    a child process, for tasks whose guests crashed the worker.
    """

    def run(self, request: ActivationRequest) -> RawOutput:
        """Run one activation. Raises a `GuestFault` subclass for anything the guest did wrong."""
        ...

    def activities(self, digest: str) -> frozenset[str]:
        """The activity names a module version exports."""
        ...

    def http_policy(self, digest: str) -> HttpPolicy | None:
        """The HTTP allowlist a module version declares (None: no HTTP capability)."""
        ...


@dataclass(slots=True)
class _Usage:
    store: wasmtime.Store
    fuel: int
    memory: wasmtime.Memory | None = None
    released: tuple[int, int] | None = None
    """Fuel used and memory held when the store was released (`release`)."""
    sliced: bool = False
    """`fuel` is a slice of the budget: running out of it ends the run with `SliceUsed`."""
    waited_s: float = 0.0
    """Time the activation spent waiting in host calls (a sleep, an HTTP exchange)."""
    watch: CpuWatch | None = None

    def fuel_used(self) -> int:
        if self.released is not None:
            return self.released[0]
        try:
            return self.fuel - self.store.get_fuel()
        except wasmtime.WasmtimeError:
            return self.fuel

    def memory_bytes(self) -> int:
        if self.released is not None:
            return self.released[1]
        return 0 if self.memory is None else self.memory.data_len(self.store)

    def release(self) -> None:
        """Free the store now, keeping what it used for the record: its slot in the engine's
        instance pool must not wait for the last reference to it (a fault's traceback, a
        reference cycle) to go."""
        if self.released is None:
            self.released = (self.fuel_used(), self.memory_bytes())
            self.store.close()

    def leave_slice(self, whole_fuel: int) -> None:
        """Go on with the whole budget: fuel and, if watched, no CPU slice (the store must not
        be running guest code on another thread)."""
        if self.sliced:
            self.store.set_fuel(max(whole_fuel - self.fuel_used(), 0))
            self.fuel = whole_fuel
            self.sliced = False
        if self.watch is not None:
            self.watch.lift()

    def at_memory_limit(self, limit: int) -> bool:
        """Whether memory was (nearly) full when the guest trapped.

        wasmtime refuses a `memory.grow` past the limit silently (-1), so the refusal itself
        cannot be observed; a trap with memory within 1/8 of the limit (at least one page) is
        taken to be the guest giving up after a refused allocation.
        """
        if self.memory is None:
            return False
        headroom = max(_WASM_PAGE, limit // 8)
        return self.memory_bytes() + headroom > limit


def fresh_store(engine: wasmtime.Engine, limits: SandboxLimits) -> wasmtime.Store:
    """A new store for one activation, with its fuel, memory and wall-clock budget set (the
    epoch deadline must be: once epoch interruption is on, a store without one traps at once)."""
    store = wasmtime.Store(engine)
    store.set_fuel(limits.fuel)
    store.set_limits(
        memory_size=limits.memory_bytes,
        table_elements=limits.table_elements,
        instances=1,
        tables=1,
        memories=1,
    )
    store.set_epoch_deadline(_deadline_ticks(limits))
    return store


def _usage(store: wasmtime.Store, request: ActivationRequest, *, rewatch: bool) -> _Usage:
    """What the activation about to run on `store` uses, on its slice if it has one: the
    store's fuel set to it, and a watch on its CPU (also on a kept store (`rewatch`), whose
    earlier watch would keep its own deadline)."""
    first = request.slice
    fuel = request.limits.fuel
    sliced = first is not None and first.fuel < fuel
    if sliced:
        assert first is not None
        fuel = first.fuel
        store.set_fuel(fuel)
    cpu = None if first is None else first.cpu_s
    found = None
    if cpu is not None or rewatch:
        found = watch(store, cpu, request.limits.deadline_s)
    return _Usage(store=store, fuel=fuel, sliced=sliced, watch=found)


def _deadline_ticks(limits: SandboxLimits) -> int:
    return max(1, round(limits.deadline_s / EPOCH_TICK_S))


def _output(
    envelope: bytes,
    suspended: bool,
    state: HostCalls,
    usage: _Usage,
    started: float,
    *,
    continued: bool = False,
    parked: bool = False,
) -> RawOutput:
    return RawOutput(
        envelope=envelope,
        suspended=suspended,
        handed_out=tuple(state.handed_out),
        logs=tuple(state.logs),
        fuel_used=usage.fuel_used(),
        memory_bytes=usage.memory_bytes(),
        host_calls=state.calls,
        duration_s=time.monotonic() - started,
        published=dict(state.published),
        continued=continued,
        parked=parked,
    )


@dataclass(slots=True, kw_only=True)
class _Slice:
    """What one stretch of a live instance's run between two waits used and handed out; the
    state and store carry over, and `resume` resets them for the next stretch."""

    state: HostCalls
    usage: _Usage
    started: float
    host: HostImports

    continued: bool = False
    """It went on from a wait (not the instance's first stretch)."""
    wasi: WasiStubs | None = None
    """A component's WASI routing, switched with the host calls' (None: a core module)."""
    io: GuestIO | None = None

    def output(self, envelope: bytes, *, suspended: bool, parked: bool = False) -> RawOutput:
        return _output(
            envelope,
            suspended,
            self.state,
            self.usage,
            self.started,
            continued=self.continued,
            parked=parked,
        )

    def pause(self) -> None:
        """The guest waits: host calls route nowhere until `resume`."""
        self.host.activate(None)
        if self.wasi is not None:
            self.wasi.activate(None)

    def resume(self, request: ActivationRequest) -> bytes:
        """Set the next stretch up for `request` (same run) and return its input envelope.

        Query values carry over: a replay from the top would have published them again."""
        limits = request.limits
        self.started = time.monotonic()
        self.continued = True
        state = self.state
        state.deadline = self.started + limits.deadline_s
        state.handed_out = []
        state.logs = []
        state.dropped_logs = 0
        state.calls = 0
        state.observer = request.observer
        store = self.usage.store
        store.set_fuel(limits.fuel)
        store.set_epoch_deadline(_deadline_ticks(limits))
        self.usage.fuel = limits.fuel
        self.host.activate(state)
        if self.wasi is not None and self.io is not None:
            self.io.stderr.clear()  # a fault's explanation is this stretch's
            self.wasi.activate(self.io)
        return request.input


class LiveHooks(Protocol):
    """How a live instance's waits reach its keeper (`StickySandbox`)."""

    def suspended(self, slice_: _Slice, envelope: bytes) -> bytes:
        """Called on the guest's thread, holding the activation lock, when the guest waits with
        `envelope`: publish `slice_.output(...)`, `slice_.pause()`, release the lock, wait for
        the run's next activation, take the lock again and return `slice_.resume(request)` —
        or raise a `BaseException` that unwinds the guest (eviction)."""
        ...


class Sandbox:
    """Runs activations one at a time on a shared `SandboxEngine`."""

    def __init__(
        self,
        engine: SandboxEngine,
        clock: Clock,
        module_source: Callable[[str], bytes],
        *,
        warm: WarmActivities | None = None,
    ) -> None:
        """`warm`: where Python activity instances are kept for their run's next activity
        (None: every activation instantiates afresh)."""
        self._engine = engine
        self._clock = clock
        self._module_source = module_source
        self.warm = warm
        self._places: Places | None = None
        self._waits_now = 0
        self._waits_lock = threading.Lock()

    def give_places_with(self, places: Places | None) -> None:
        """Enter `places` while an activity's host call waits, to give up its owner's places
        meanwhile (`ParallelSandbox`); this sandbox gives up its own, the activation lock,
        either way."""
        self._places = places

    def waiting_now(self) -> int:
        """Activities in this process waiting in a host call now (`HostCalls.waiting`)."""
        return self._waits_now

    def activities(self, digest: str) -> frozenset[str]:
        """The activity names a module version exports (loading it if needed)."""
        return self._load(digest).activities

    def warm_instances(self) -> int:
        """Python activity instances kept now (`WarmActivities`; 0 without a keeper)."""
        return 0 if self.warm is None else len(self.warm)

    def http_policy(self, digest: str) -> HttpPolicy | None:
        """The HTTP allowlist a module version declares (loading it if needed)."""
        return self._load(digest).http

    def run(self, request: ActivationRequest) -> RawOutput:
        """Run one activation. Raises a `GuestFault` subclass for anything the guest did wrong,
        `SandboxBusy` when the process has no room for its instance even after dropping the
        kept activity instances."""
        with self._engine.activation_lock:
            if self.warm is not None:
                self.warm.sweep()
            try:
                return self._run(request)
            except SandboxBusy:
                if self.warm is None or not len(self.warm):
                    raise
                self.warm.clear()  # their slots are the ones this process can give back now
                return self._run(request)

    def _load(self, digest: str) -> LoadedModule:
        try:
            return self._engine.load(digest, lambda: self._module_source(digest))
        except RetryableError:
            raise  # the server is unreachable: nothing is wrong with the module
        except AmberError as exc:
            raise ModuleUnavailable(f"cannot load module: {exc}", digest=digest) from None

    def continues(self, digest: str) -> bool:
        """Whether the module can go on after a wait (it imports `await_next`), so that one
        live instance can serve a run's successive activations (`StickySandbox`)."""
        return self._load(digest).continues

    def reads_delta(self, digest: str) -> bool:
        """Whether a live instance of the module may be handed a delta instead of its run's
        whole next input envelope (its manifest says `"await_next": ["delta"]`)."""
        return self._load(digest).reads_delta

    def is_component(self, digest: str) -> bool:
        """Whether the module version is a Python guest (a component), whose replay from the top
        costs milliseconds where a core module's costs tens of microseconds."""
        return self._load(digest).component is not None

    def run_live(self, request: ActivationRequest, live: LiveHooks) -> RawOutput:
        """Run a workflow activation whose instance stays alive while it waits: each
        `await_next` hands its output to `live.suspended` and goes on with what it returns.
        Returns the output of the activation that ended the workflow (or raises its fault).
        The caller holds the engine's `activation_lock`; `live` releases it while waiting."""
        return self._run(request, live)

    def _run(self, request: ActivationRequest, live: LiveHooks | None = None) -> RawOutput:
        loaded = self._load(request.digest)
        if loaded.component is not None:
            return self._run_component(loaded.component, request, live)
        pre = loaded.pre
        assert pre is not None
        limits = request.limits
        started = time.monotonic()
        state = self._host_calls(request, started)
        store = fresh_store(self._engine.engine, limits)
        usage = _usage(store, request, rewatch=False)
        if request.kind is ActivationKind.ACTIVITY:
            state.waiting = self._waits(request, state, usage)
        host = self._engine.host
        if live is not None:
            slice_ = _Slice(state=state, usage=usage, started=started, host=host)
            state.resume = lambda envelope: live.suspended(slice_, envelope)
        host.activate(state)
        try:
            envelope, suspended = self._call(pre, store, request, state, usage)
        except Suspended as signal:
            envelope, suspended = signal.envelope, True
        except GuestFault as fault:
            raise self._published(
                self._contextual(type(fault), fault.detail, request, usage), state
            ) from None
        except wasmtime.Trap as trap:
            ended = self._watch_ended(request, usage)
            ended = ended or self._classify_trap(trap, request, usage)
            raise self._published(ended, state) from None
        except wasmtime.WasmtimeError as exc:
            ended = self._watch_ended(request, usage)
            ended = ended or self._classify_error(exc, request, usage)
            raise self._published(ended, state) from None
        finally:
            host.activate(None)
            usage.release()  # the instance is done with (a live one: its workflow ended)
        if live is not None:
            return slice_.output(envelope, suspended=suspended)
        return _output(envelope, suspended, state, usage, started)

    def _waits(
        self,
        request: ActivationRequest,
        state: HostCalls,
        usage: _Usage,
        io: GuestIO | None = None,
    ) -> Callable[[], AbstractContextManager[None]]:
        """What an activity's host call does while it waits (`HostCalls.waiting`): lets other
        activations run in this process meanwhile (the activation lock; the host imports' and
        WASI's routing, which the next activation takes over), gives up its owner's places
        (`give_places_with`), and takes everything back before the guest goes on. As a parked
        live instance does (`StickySandbox`): no other thread touches this store meanwhile,
        and every call into wasmtime still happens under the lock. A run on a slice leaves it
        once its waits add up to `LEAVE_SLICE_AFTER_WAIT_S`: run again, it would wait again.
        Not at its first wait: a wait of a millisecond would take any guest out of its slice."""
        engine = self._engine
        wasi = engine.components.wasi if io is not None else None
        places = self._places

        @contextmanager
        def waiting() -> Iterator[None]:
            began = time.monotonic()
            with self._waits_lock:
                self._waits_now += 1
            engine.host.activate(None)
            if wasi is not None:
                wasi.activate(None)
            engine.activation_lock.release()
            try:
                with nullcontext() if places is None else places():
                    yield
            finally:
                engine.activation_lock.acquire()
                engine.host.activate(state)
                if wasi is not None:
                    wasi.activate(io)
                with self._waits_lock:
                    self._waits_now -= 1
                usage.waited_s += time.monotonic() - began
                if usage.waited_s >= LEAVE_SLICE_AFTER_WAIT_S:
                    usage.leave_slice(request.limits.fuel)

        return waiting

    def _host_calls(self, request: ActivationRequest, started: float) -> HostCalls:
        """What the host imports see during `request` (either kind of guest)."""
        return HostCalls(
            kind=request.kind,
            clock=self._clock,
            deadline=started + request.limits.deadline_s,
            run_id=request.run_id,
            query=request.query,
            activity=request.activity,
            observer=request.observer,
        )

    def _run_component(
        self,
        component: Component,
        request: ActivationRequest,
        live: LiveHooks | None = None,
        *,
        keep: bool = True,
    ) -> RawOutput:
        """A Python guest's activation, in a fresh instance (or, for an activity, the instance
        its run's last activity left, `WarmActivities`); with `live`, the instance goes on
        through its waits (`await-next`) as a core module's does through `await_next`."""
        limits = request.limits
        started = time.monotonic()
        state = self._host_calls(request, started)
        warm = self.warm if keep and live is None else None
        key = None if warm is None else self._warm_key(request)
        kept = None if warm is None or key is None else warm.take(key)
        if kept is None:
            store = component_store(
                self._engine.engine,
                fuel=limits.fuel,
                memory_bytes=limits.memory_bytes,
                table_elements=limits.table_elements,
                ticks=_deadline_ticks(limits),
            )
        else:
            store = kept.store
            store.set_fuel(limits.fuel)
            store.set_epoch_deadline(_deadline_ticks(limits))
        usage = _usage(store, request, rewatch=kept is not None)
        io = GuestIO(deterministic=request.kind is ActivationKind.WORKFLOW, seed=request.run_id)
        if request.kind is ActivationKind.ACTIVITY:
            state.waiting = self._waits(request, state, usage, io)
        name = request.export.partition(".")[2]
        host = self._engine.host
        components = self._engine.components
        if live is not None:
            slice_ = _Slice(
                state=state,
                usage=usage,
                started=started,
                host=host,
                wasi=components.wasi,
                io=io,
            )
            state.resume = lambda envelope: live.suspended(slice_, envelope)
        host.activate(state)
        failed: GuestFault | None
        try:
            instance = (
                components.instantiate(component, store, io) if kept is None else kept.instance
            )
            text = components.invoke(instance, store, request.kind, name, request.input, io)
            envelope = output_bytes(text, limits.max_output_bytes)
        except GuestFault as fault:
            failed = self._contextual(type(fault), fault.detail, request, usage)
        except (wasmtime.Trap, wasmtime.WasmtimeError) as exc:
            failed = self._watch_ended(request, usage, deadline_detail=DEADLINE_DETAIL)
            if failed is None:
                found = classify(exc, bytes(io.stderr))
                failed = self._contextual(found.kind, found.detail, request, usage)
                failed.trap_code = found.trap_code
        except BaseException:
            usage.release()  # an interrupted or evicted instance is done with
            raise
        else:
            failed = None
        finally:
            host.activate(None)
        if failed is not None:
            usage.release()  # a faulted instance is never kept
            left = limits.deadline_s - (time.monotonic() - started)
            settled_above = isinstance(failed, SliceUsed)
            if kept is not None and left > 0 and not settled_above:
                # What a fresh instance gives is what is recorded.
                again = replace(request, limits=replace(limits, deadline_s=left))
                return self._run_component(component, again, keep=False)
            raise self._published(failed, state) from None
        suspended = request.kind is ActivationKind.WORKFLOW and _status(envelope) == "suspended"
        if live is not None:
            output = slice_.output(envelope, suspended=suspended)
        else:
            output = _output(envelope, suspended, state, usage, started)
        if warm is not None and key is not None:
            warm.give(key, kept or WarmInstance(store=store, instance=instance))
        else:
            usage.release()
        return output

    def _warm_key(self, request: ActivationRequest) -> WarmKey | None:
        """Where an activity of a Python module without the HTTP capability is kept (None:
        anything else runs in a fresh instance)."""
        if request.kind is not ActivationKind.ACTIVITY:
            return None
        if self._load(request.digest).http is not None:
            return None
        limits = request.limits
        return WarmKey(
            run_id=request.run_id,
            digest=request.digest,
            memory_bytes=limits.memory_bytes,
            table_elements=limits.table_elements,
        )

    def _call(
        self,
        pre: wasmtime.InstancePre,
        store: wasmtime.Store,
        request: ActivationRequest,
        state: HostCalls,
        usage: _Usage,
    ) -> tuple[bytes, bool]:
        with instantiating():
            instance = pre.instantiate(store)
        exports = _fastcall.exports(pre, store, instance)
        memory = exports[MEMORY_EXPORT]
        alloc = exports[ALLOC_EXPORT]
        entry = exports.get(request.export)
        if entry is None:
            raise AbiViolation(f"the module does not export {request.export}")
        assert isinstance(memory, wasmtime.Memory)
        assert isinstance(alloc, wasmtime.Func) and isinstance(entry, wasmtime.Func)
        usage.memory = state.memory = memory
        size = len(request.input)
        ptr = exports.call(ALLOC_EXPORT, ALLOC_SIGNATURE, size) & 0xFFFF_FFFF
        if ptr == 0 or ptr + size > memory.data_len(store):
            raise MemoryLimitExceeded(f"amber_alloc could not provide {size} bytes for the input")
        if size:
            memory.write(store, request.input, ptr)
        packed = exports.call(request.export, ENTRY_SIGNATURE, ptr, size) & _U64
        out_ptr, out_len = packed >> 32, packed & 0xFFFF_FFFF
        if out_len > request.limits.max_output_bytes:
            raise MalformedOutput(
                f"output of {out_len} bytes exceeds the cap of {request.limits.max_output_bytes}"
            )
        if out_ptr + out_len > memory.data_len(store):
            raise MalformedOutput(f"output [{out_ptr}, {out_ptr + out_len}) lies outside memory")
        return bytes(memory.read(store, out_ptr, out_ptr + out_len)), False

    @staticmethod
    def _published(fault: GuestFault, state: HostCalls) -> GuestFault:
        fault.published = dict(state.published)  # a query still answers from these
        return fault

    def _contextual(
        self, kind: type[GuestFault], detail: str, request: ActivationRequest, usage: _Usage
    ) -> GuestFault:
        if kind is OutOfFuel and usage.sliced:
            kind, detail = SliceUsed, f"used the {usage.fuel} fuel slice of its first run"
        return kind(
            detail,
            run_id=request.run_id,
            step=request.step,
            digest=request.digest,
            fuel_used=usage.fuel_used(),
            memory_bytes=usage.memory_bytes(),
        )

    def _watch_ended(
        self, request: ActivationRequest, usage: _Usage, *, deadline_detail: str | None = None
    ) -> GuestFault | None:
        """The fault a watched activation's end stands for (None: the watch did not end it).
        `deadline_detail`: what the guest's kind says of a deadline (a core module's, if None)."""
        watched = usage.watch
        if watched is None:
            return None
        if watched.spent:
            return self._contextual(
                SliceUsed,
                f"used the {watched.budget_s:g} s CPU slice of its first run",
                request,
                usage,
            )
        if watched.deadline:
            if deadline_detail is not None:
                return self._contextual(DeadlineExceeded, deadline_detail, request, usage)
            return self._deadline(request, usage)
        return None

    def _deadline(self, request: ActivationRequest, usage: _Usage) -> GuestFault:
        return self._contextual(
            DeadlineExceeded,
            f"guest code ran past the {request.limits.deadline_s:g} s deadline",
            request,
            usage,
        )

    def _classify_trap(
        self, trap: wasmtime.Trap, request: ActivationRequest, usage: _Usage
    ) -> GuestFault:
        code = trap.trap_code
        name = code.name.lower() if code is not None else "unknown"
        if code == wasmtime.TrapCode.OUT_OF_FUEL:
            return self._contextual(
                OutOfFuel, f"used all {usage.fuel} units of fuel", request, usage
            )
        if code == wasmtime.TrapCode.INTERRUPT:
            return self._deadline(request, usage)
        if code == wasmtime.TrapCode.STACK_OVERFLOW or (
            code == wasmtime.TrapCode.MEMORY_OUT_OF_BOUNDS and _recursing(trap)
        ):
            fault = self._contextual(
                StackOverflow, f"runaway recursion ({name}): {trap.message}", request, usage
            )
        elif usage.at_memory_limit(request.limits.memory_bytes):
            fault = self._contextual(
                MemoryLimitExceeded,
                f"trapped ({name}) with memory at its limit of {request.limits.memory_bytes} bytes",
                request,
                usage,
            )
        else:
            fault = self._contextual(GuestTrap, f"trap {name}: {trap.message}", request, usage)
        fault.trap_code = name
        return fault

    def _classify_error(
        self, exc: wasmtime.WasmtimeError, request: ActivationRequest, usage: _Usage
    ) -> GuestFault:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        if usage.memory is None and ("memory" in message or "table" in message):
            # Instantiation refused: the module's initial memory or table exceeds the limits.
            return self._contextual(MemoryLimitExceeded, message, request, usage)
        return self._contextual(GuestTrap, message, request, usage)


def _status(envelope: bytes) -> object:
    """An output envelope's status, or None when it is not a map (the decoder says why)."""
    try:
        doc = unpack(envelope, what="output envelope")
    except NotMsgpack:
        return None
    return doc.get("status") if isinstance(doc, dict) else None


_RECURSION_FRAMES = 16


def _recursing(trap: wasmtime.Trap) -> bool:
    """Whether a trap happened deep in a recursion: its (truncated) backtrace is at least
    `_RECURSION_FRAMES` frames of one or two functions calling each other. A C guest's stack
    lives in linear memory below its data; recursing past it is an out-of-bounds access, and
    this is how it is told from a stray pointer."""
    frames = trap.frames or []
    if len(frames) < _RECURSION_FRAMES:
        return False
    return len({frame.func_index for frame in frames[:_RECURSION_FRAMES]}) <= 2
