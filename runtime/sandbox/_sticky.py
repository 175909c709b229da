"""`StickySandbox`: one live instance per running workflow, fed each new activation where the
last one waited.

A workflow activation replays the run from the top in a fresh instance (the reference path).
A module built with an SDK that waits through `await_next` can instead stay alive: when the
guest waits, its output goes out as the activation's, and its thread stays parked inside
`await_next` until the run's next activation hands it the new input envelope. The guest
re-reads its results and goes on from the await, so it issues exactly the commands a replay from
the top would, and everything above the sandbox (the matcher, the determinism check, the
report) is unchanged. What it saves is the instantiation and the replay of the prefix.

When a live instance may take a later activation of its run: history only grows, so the
results it consumed are still there, unchanged, in every later input, and the instance is a
replay paused at an await. What history must also hold is every command the instance issued,
with the `now` and `random` values the host handed it: if its report was refused (a lost lease,
a conflict) and another activation recorded other values, the guest has already decided with
its own. So the input is checked before it is handed over (same module digest, the results
seen so far a prefix of the new ones, the same cancel request, every issued command recorded
with the values the instance used), and anything else starts a fresh instance.

A module whose manifest says `"await_next": ["delta"]` (the Python SDK's) is handed a *delta*
instead of the whole envelope: the results added since the input it read last, with the
`recorded` count and the cancel request (abi/README.md). The checks above run on the whole
envelope either way; the delta only spares the guest re-reading its history, which in CPython
is most of a step's cost once the history is long.

Never sticky: queries (they must not move the instance), activities, and modules built before
`await_next` existed. Dropped: on any fault in a later stretch (the activation is then run again
from the top, so the recorded failure — reason, fuel, memory — is the reference path's), on a
module digest change (a migration), when its memory passes `max_memory_bytes`, beyond `runs`
live instances (least recently used first) and after `idle_s` without an activation. Kept only
while the run waits for an activity or a child workflow, whose results come back promptly: a
run that waits only for a timer, a signal or an approval may wait for days, so its instance is
dropped at once and it costs the worker no memory (its next activation replays from the top).

Threads: wasmtime-py keeps a raised host exception in a module global, so guests must not run
on two threads at once; every stretch runs holding the engine's `activation_lock`, and a parked
guest releases it while it waits (it is blocked inside a host call, not running).

Rejected: re-running the workflow from the top in a kept instance (saves the instantiation,
~0.1 ms, not the replay); snapshotting the instance's memory (a C stack lives in memory, but
the host side of a parked call does not); asyncify-style unwinding (a build step and ~30 % code
size for what a parked thread does for free).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final

from amber.abi import ABI_VERSION, NotMsgpack, pack, unpack
from amber.runtime.model import GuestFault, SandboxBusy, Wakeup

from . import _samecpu
from ._host import ActivationKind
from ._http import HttpPolicy
from ._sandbox import ActivationRequest, Places, RawOutput, Sandbox, _Slice

STICKY_RUNS: Final = 64
"""Live instances a worker keeps by default."""
IDLE_S: Final = 30.0
"""A live instance without an activation this long is dropped."""
MAX_LIVE_MEMORY_BYTES: Final = 16 * 1024 * 1024
"""A live instance whose linear memory grew past this is dropped after its activation (the
SDK's allocator never frees, so a long run's instance grows with every stretch)."""


_SOON: Final = frozenset({"activity", "child"})
"""Command kinds whose results a worker's activations bring back promptly."""
_HOST_VALUES: Final = frozenset({"now", "random"})
"""Command kinds whose value the host handed to the guest (the rest follow from history)."""


class _Evicted(BaseException):
    """Raised inside a parked guest's `await_next` to unwind it. A `BaseException`, like
    `Suspended`, so nothing between the host call and the sandbox can swallow it."""


@dataclass(frozen=True, slots=True)
class _Seen:
    """What an activation's input told the guest: its results and cancel request."""

    results: list[Any]
    cancel: Any
    recorded: int

    @classmethod
    def of(cls, envelope: bytes) -> _Seen | None:
        try:
            doc = unpack(envelope, what="input envelope")
        except NotMsgpack:
            return None
        if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
            return None
        recorded = doc.get("recorded", 0)
        return cls(
            results=doc["results"],
            cancel=doc.get("cancel"),
            recorded=recorded if isinstance(recorded, int) else 0,
        )

    def continued_by(self, later: _Seen, issued: _Issued) -> bool:
        """Whether `later` is this input with history grown, and records every command the
        guest issued since (`issued`, from its last output) with the values it used. A `now`
        or `random` value is the host's: if another activation's was recorded instead (this
        guest's report was refused), the guest has already decided with the wrong one."""
        n = len(self.results)
        if (
            len(later.results) < n
            or later.results[:n] != self.results
            or (self.cancel is not None and later.cancel != self.cancel)
            or later.recorded < len(issued.commands)
        ):
            return False
        if not issued.host_valued:
            return True
        values = {result[0]: result for result in later.results}
        for i in issued.host_valued:
            result = values.get(i)
            if result is None or result[2] != 0 or result[3] != issued.commands[i][1]:
                return False
        return True


@dataclass(frozen=True, slots=True)
class _Issued:
    """The commands a waiting guest handed over in its last output, read as far as the
    keeper needs them: each a non-empty array that begins with its kind."""

    commands: list[Any]
    host_valued: tuple[int, ...]
    """Positions of its `now` and `random` commands."""

    @classmethod
    def read(cls, output: bytes, before: _Issued | None = None) -> _Issued | None:
        """The commands of `output` (None: not an envelope to go on from). Where they begin
        with `before`'s, which were read from the guest's last output, only the rest are
        looked at: an output lists every command since the run's start."""
        try:
            doc = unpack(output, what="output envelope")
            commands = doc["commands"]
        except (NotMsgpack, KeyError, TypeError):
            return None
        if not isinstance(commands, list):
            return None
        start, host_valued = 0, NOTHING_ISSUED.host_valued
        if before is not None and commands[: len(before.commands)] == before.commands:
            start, host_valued = len(before.commands), before.host_valued
        found: list[int] = []
        for i in range(start, len(commands)):  # a loop, not a <genexpr>: this runs every step
            command = commands[i]
            if not isinstance(command, list) or not command or not isinstance(command[0], str):
                return None
            if command[0] in _HOST_VALUES:
                found.append(i)
        return cls(commands, host_valued + tuple(found) if found else host_valued)


NOTHING_ISSUED: Final = _Issued([], ())


def _delta(seen: _Seen, later: _Seen) -> bytes:
    """The input for a guest that read `seen` and reads deltas, standing for `later` (which
    `continued_by` accepted: its results begin with `seen`'s): the results added since, the
    `recorded` count and the cancel request."""
    start = len(seen.results)
    doc: dict[str, Any] = {
        "abi": ABI_VERSION,
        "delta": True,
        "from": start,
        "more": later.results[start:],
        "recorded": later.recorded,
    }
    if later.cancel is not None:
        doc["cancel"] = later.cancel
    return pack(doc)


def _soon_resumed(issued: Sequence[Any], seen: _Seen) -> bool:
    """Whether a guest that issued `issued` on input `seen` waits for an activity or a child
    workflow, whose results come back in seconds. A run waiting only for a timer, a signal or
    an approval may wait for days, and its instance is not kept."""
    # The commands past `seen.recorded` are new to history, so none has a result yet: what a
    # step usually waits for is there, and the results need not be read at all.
    for i in range(max(0, seen.recorded), len(issued)):
        if issued[i][0] in _SOON:
            return True
    answered = {result[0] for result in seen.results if result}
    for i in range(min(seen.recorded, len(issued))):
        if issued[i][0] in _SOON and i not in answered:
            return True
    return False


class _Live:
    """One run's instance, on a thread of its own, parked inside `await_next` between
    activations."""

    def __init__(
        self, sandbox: Sandbox, lock: threading.Lock, request: ActivationRequest, seen: _Seen
    ) -> None:
        self.run_id = request.run_id
        self.digest = request.digest
        self.seen = seen
        self.issued = NOTHING_ISSUED
        """The commands of its last output: what it has issued so far."""
        self.reads_delta = sandbox.reads_delta(request.digest)
        """Its module reads delta answers: its next input need not repeat what it read."""
        self.used_at = time.monotonic()
        self.memory_bytes = 0
        self.fuel_spent = 0
        """Fuel of every stretch so far: at least what a replay from the top to here costs
        (docs/execution.md, *Budget*), so a stretch gets only what is left of the
        activation's budget, and never succeeds where that replay would run out."""
        self.seconds_spent = 0.0
        """Guest time of every stretch so far, likewise against the deadline."""
        self._sandbox = sandbox
        self._lock = lock
        self._to_guest = Wakeup()
        self._to_caller = Wakeup()
        self._next: ActivationRequest | None = None
        self._evict = False
        self._answer: RawOutput | BaseException | None = None
        self._parked = False
        self._native_id = 0
        """Its thread's id with the kernel (set by the thread itself, before it first parks)."""
        self._thread = threading.Thread(
            target=self._main, args=(request,), name="amber-sticky", daemon=True
        )
        self._thread.start()

    def first(self) -> tuple[RawOutput, bool]:
        """The first activation's output, and whether the instance is parked (can go on)."""
        return self._wait_answer()

    def resume(self, request: ActivationRequest, seen: _Seen) -> tuple[RawOutput, bool]:
        """Hand the run's next activation to the parked guest; its output, and whether it
        parked again."""
        self._parked = False
        self._next = request
        _samecpu.pull(self._native_id)  # the guest's turn and the answer: each on this CPU
        self._to_guest.wake()
        self.seen = seen
        try:
            return self._wait_answer()
        finally:
            _samecpu.let_go()

    def evict(self) -> None:
        """Unwind the parked guest (at once if it is parked; its thread then ends)."""
        self._evict = True
        self._to_guest.wake()

    def _wait_answer(self) -> tuple[RawOutput, bool]:
        try:
            while self._answer is None:
                self._to_caller.wait()
        except BaseException:  # the caller was interrupted: nobody else will unwind it
            self.evict()
            raise
        answer, self._answer = self._answer, None
        parked = self._parked
        self.used_at = time.monotonic()
        if isinstance(answer, BaseException):
            raise answer
        self.memory_bytes = answer.memory_bytes
        self.fuel_spent += answer.fuel_used
        self.seconds_spent += answer.duration_s
        return answer, parked

    def left_of(self, request: ActivationRequest, later: _Seen) -> ActivationRequest | None:
        """`request` for its stretch: the budget it may still use, and the input this
        instance reads (a delta from what it saw to `later`, the request's input, where its
        module reads deltas; `continued_by` must have accepted `later`); None: nothing left,
        so a replay from the top must decide."""
        limits = request.limits
        fuel = limits.fuel - self.fuel_spent
        seconds = limits.deadline_s - self.seconds_spent
        if fuel <= 0 or seconds <= 0:
            return None
        return request.narrowed(
            input=_delta(self.seen, later) if self.reads_delta else request.input,
            fuel=fuel,
            deadline_s=seconds,
        )

    def _main(self, request: ActivationRequest) -> None:
        self._native_id = threading.get_native_id()
        try:
            with self._lock:
                raw = self._sandbox.run_live(request, self)
        except _Evicted:
            return
        except BaseException as exc:  # a fault: the keeper decides what it means
            self._give(exc, parked=False)
        else:  # the workflow ended (or gave up through await_results): nothing to go on with
            self._give(raw, parked=False)

    def _give(self, answer: RawOutput | BaseException, *, parked: bool) -> None:
        self._parked = parked
        self._answer = answer
        self._to_caller.wake()

    def suspended(self, slice_: _Slice, envelope: bytes) -> bytes:
        # On the guest's thread, inside await_next, holding the activation lock.
        raw = slice_.output(envelope, suspended=True, parked=True)
        slice_.pause()
        self._lock.release()
        try:
            self._next = None
            self._parked = True
            self._answer = raw
            self._to_caller.wake()
            while self._next is None and not self._evict:
                self._to_guest.wait()
            _samecpu.let_go()
            request, evict = self._next, self._evict
        finally:
            self._lock.acquire()
        if evict or request is None:
            raise _Evicted()
        return slice_.resume(request)


class StickySandbox:
    """A `SandboxRunner` that keeps a live instance per running workflow (see the module
    docstring); everything else it runs on the wrapped in-process `Sandbox`.

    Counters (`hits`, `misses`, `restarts`, `dropped`, `deltas`) say how often it could go on.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        lock: threading.Lock,
        *,
        runs: int = STICKY_RUNS,
        idle_s: float = IDLE_S,
        max_memory_bytes: int = MAX_LIVE_MEMORY_BYTES,
        keep_long_waits: bool = False,
    ) -> None:
        """`lock`: the engine's `activation_lock` (the one `sandbox.run` takes).
        `keep_long_waits` keeps instances that wait only for timers, signals or approvals too
        (for workflows whose waits are short)."""
        if runs < 1:
            raise ValueError("a sticky sandbox keeps at least one run")
        self._sandbox = sandbox
        self._lock = lock
        self._runs = runs
        self._idle_s = idle_s
        self._max_memory = max_memory_bytes
        self._keep_long_waits = keep_long_waits
        self._live: OrderedDict[str, _Live] = OrderedDict()
        self._guard = threading.Lock()
        self._closed = False
        self.hits = 0
        """Activations a live instance went on with."""
        self.misses = 0
        """Workflow activations that started an instance (replaying from the top)."""
        self.restarts = 0
        """Stretches that faulted and were run again from the top."""
        self.dropped = 0
        """Live instances unwound (evicted, idle, too big, replaced, digest changed)."""
        self.deltas = 0
        """Activations handed to a live instance as a delta (only what history added)."""

    def activities(self, digest: str) -> frozenset[str]:
        return self._sandbox.activities(digest)

    def http_policy(self, digest: str) -> HttpPolicy | None:
        return self._sandbox.http_policy(digest)

    def warm_instances(self) -> int:
        """Python activity instances the wrapped sandbox keeps now."""
        return self._sandbox.warm_instances()

    def give_places_with(self, places: Places | None) -> None:
        """See `Sandbox.give_places_with`."""
        self._sandbox.give_places_with(places)

    def waiting_now(self) -> int:
        """Activities of the wrapped sandbox waiting in a host call now."""
        return self._sandbox.waiting_now()

    def live_runs(self) -> int:
        """How many live instances are parked now."""
        with self._guard:
            return len(self._live)

    def keeps_costly(self, request: ActivationRequest) -> bool:
        """Whether `request` is a workflow activation of a run parked here whose module is a
        component: moving it elsewhere would replay it from the top, milliseconds of CPython."""
        if request.kind is not ActivationKind.WORKFLOW or request.query or request.fresh:
            return False
        with self._guard:
            live = self._live.get(request.run_id)
        return live is not None and self._sandbox.is_component(live.digest)

    def run(self, request: ActivationRequest) -> RawOutput:
        """Run one activation: a workflow's on its live instance when it has one that can go
        on, else on a new one; anything else as `Sandbox.run` does."""
        if (
            request.kind is not ActivationKind.WORKFLOW
            or request.query
            or not self._sandbox.continues(request.digest)
        ):
            return self._sandbox.run(request)
        seen = _Seen.of(request.input)
        live = self._take(request.run_id)
        if seen is None or request.fresh:
            if live is not None:
                self._drop(live)
            return self._sandbox.run(request)
        if live is not None:
            if live.digest == request.digest and live.seen.continued_by(seen, live.issued):
                stretch = live.left_of(request, seen)
                if stretch is not None:
                    return self._go_on(live, stretch, request, seen)
            self._drop(live)
        with self._guard:
            self.misses += 1
        live = _Live(self._sandbox, self._lock, request, seen)
        try:
            raw, parked = live.first()  # a fault here is the reference path's own
        except SandboxBusy:
            # The process's instance pool is full: give back the older half of the live
            # instances (they unwind on their own threads) and run this one from the top.
            self._shed()
            return self._sandbox.run(request)
        self._keep(live, parked, raw)
        return raw

    def _shed(self) -> None:
        """Drop the least recently used half of the live instances."""
        with self._guard:
            count = (len(self._live) + 1) // 2
            oldest = [self._live.popitem(last=False)[1] for _ in range(count)]
        for one in oldest:
            self._drop(one)

    def _go_on(
        self, live: _Live, stretch: ActivationRequest, request: ActivationRequest, seen: _Seen
    ) -> RawOutput:
        """Hand `stretch` (`request` within what is left of its budget) to the run's live
        instance; on a fault, the reference path decides."""
        if live.reads_delta:
            with self._guard:
                self.deltas += 1
        try:
            raw, parked = live.resume(stretch, seen)
        except GuestFault:
            # Its reason, fuel and memory are what a replay of the bundle reproduces (and a
            # stretch that ran out of what was left of the budget may well succeed there).
            with self._guard:
                self.restarts += 1
            return self._sandbox.run(request)
        with self._guard:
            self.hits += 1
        self._keep(live, parked, raw)
        return raw

    def forget(self, run_id: str) -> None:
        """Drop the run's live instance, if any (its activation is about to run elsewhere: a
        child process, so this one would fall behind)."""
        live = self._take(run_id)
        if live is not None:
            self._drop(live)

    def close(self) -> None:
        """Unwind every live instance (and any an activation still running would keep)."""
        with self._guard:
            self._closed = True
            live, self._live = list(self._live.values()), OrderedDict()
        for one in live:
            one.evict()

    def __enter__(self) -> StickySandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _take(self, run_id: str) -> _Live | None:
        """The run's live instance, out of the cache (so no other activation can use it), after
        dropping the idle ones."""
        now = time.monotonic()
        idle: list[_Live] = []
        with self._guard:
            live = self._live.pop(run_id, None)
            while self._live:
                oldest = next(iter(self._live.values()))
                if now - oldest.used_at < self._idle_s:
                    break
                idle.append(self._live.popitem(last=False)[1])
        for one in idle:
            self._drop(one)
        return live

    def _keep(self, live: _Live, parked: bool, raw: RawOutput) -> None:
        if not parked:
            return  # it ended: its thread is gone
        issued = _Issued.read(raw.envelope, live.issued)
        if (
            issued is None
            or live.memory_bytes > self._max_memory
            or not (self._keep_long_waits or _soon_resumed(issued.commands, live.seen))
        ):
            self._drop(live)
            return
        live.issued = issued
        evicted: list[_Live] = []
        with self._guard:
            if self._closed:  # closed while this activation ran
                evicted.append(live)
            else:
                replaced = self._live.pop(live.run_id, None)
                if replaced is not None:
                    evicted.append(replaced)
                self._live[live.run_id] = live
                while len(self._live) > self._runs:
                    evicted.append(self._live.popitem(last=False)[1])
        for one in evicted:
            self._drop(one)

    def _drop(self, live: _Live) -> None:
        live.evict()
        with self._guard:
            self.dropped += 1
