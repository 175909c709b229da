"""`ParallelSandbox`: up to N guests at once per worker, so that one long guest never stalls the
others.

wasmtime-py cannot run guests on several threads of one process safely: a host import's Python
exception (how a workflow suspends) travels through a module global that another thread can take
or overwrite (measured: 4-19 % of calls got the other thread's exception, field notes
execution-costs.md §3). So one guest runs in the worker process itself — the fast path, no IPC —
and while it is busy, the next ones run in reused child processes (`IsolatedSandbox` with
`reuse`), each with its own engine on the shared artifact cache: processes scale with the cores.
A lone stream of activations never leaves the process; a fuel bomb holding the in-process
sandbox for seconds only moves the others to a child. An activation waits a moment
(`OVERFLOW_AFTER_S`) for the in-process sandbox before it goes to a child: most activations
take a fraction of a millisecond, and a child costs a pipe round trip and a wake-up on each side,
so overflowing at once cost a busy worker more than it saved (`amber bench --scaling` compares).

A long guest gets only the CPU the rest leaves. An activity runs first on a slice of its fuel
(`slice_fuel`) and of its thread's CPU (`slice_cpu_s`, which catches what costs CPU beyond
instructions, a memory bomb's page faults: `_cpuslice`); one that uses either up is run again
from the start, with its whole budget, in the
`BackgroundLane`: child processes at low priority that start once this worker's other guests
are quiet, holding none of the `guests` places. A fuel bomb then costs the healthy path its
slice (about 20 ms at 5·10⁷ fuel), not its budget (about 0.4 s of CPU at 10⁹), and a heavy
activity keeps its budget and its outcome: fuel use is deterministic, so the second run ends as
the first would have with the whole budget. Its price is the slice run twice, and the wait,
which counts against its deadline (wall time, from the first run's start). Activities
of modules with the HTTP capability are never sliced (the request would be sent twice within
one attempt); workflow activations are not either (their code only orchestrates, and a live
instance cannot be started again).

Rejected: threads (above); a child per activation (the surgical pool's isolation costs a process
start-up each); all guests in children (a pipe round trip and a copy of every envelope even when
nothing else runs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import TracebackType

from amber.runtime.model import Clock, SliceUsed

from ._background import BackgroundLane
from ._engine import SandboxEngine
from ._host import ActivationKind
from ._http import HttpPolicy
from ._isolated import IsolatedSandbox
from ._sandbox import ActivationRequest, RawOutput, Sandbox, Slice
from ._sticky import StickySandbox
from ._warm import WARM_RUNS, WarmActivities

OVERFLOW_AFTER_S = 0.002
"""How long an activation waits for the in-process sandbox before it runs in a child."""
SLICE_FUEL = 50_000_000
"""Fuel an activity runs on before it moves to the background lane (≈ 20 ms of C guest CPU)."""
SLICE_CPU_S = 0.01
"""Thread CPU an activity runs on before it moves to the background lane, whatever its fuel:
what a guest costs beyond its instructions (a memory bomb's page faults) counts too
(`_cpuslice`). Checked at each epoch tick (10 ms), so a guest that uses it up ends within a
tick after: at 10 ms, a 64 MiB memory bomb ends after about 20 ms instead of 30–65 (its page
faults); a fresh Python activation (about 3 ms) stays well inside it."""
BACKGROUND_NICENESS = 10
"""A tenth of a contended core or so: the lane is held back while other guests run, and once
let go (quiet, or out of patience) it must still get somewhere on a machine that stays busy."""
LIVE_PATIENCE_S = 0.05
"""How long a workflow activation whose run has a live Python instance in process waits for it:
in a child it would replay from the top (milliseconds of CPython, more with each step), and the
run would lose its live instance for the activations after it too."""


class ParallelSandbox:
    """A `SandboxRunner` running up to `guests` activations at once: one in process, the rest in
    reused child processes. Callers beyond `guests` wait for one to end."""

    def __init__(
        self,
        inline: Sandbox | StickySandbox,
        overflow: IsolatedSandbox,
        guests: int,
        *,
        background: BackgroundLane | None = None,
        slice_fuel: int = SLICE_FUEL,
        slice_cpu_s: float | None = SLICE_CPU_S,
    ) -> None:
        """`background`: where an activity that used up `slice_fuel`, or `slice_cpu_s` of its
        thread's CPU, runs again (None: every activation runs once, on its whole budget)."""
        if guests < 2:
            raise ValueError("a parallel sandbox runs at least two guests; use Sandbox for one")
        self._inline = inline
        self._overflow = overflow
        self._background = background
        self._slice_fuel = slice_fuel
        self._slice_cpu_s = slice_cpu_s
        self._watchers: tuple[Callable[[], None], Callable[[], None]] = (_nothing, _nothing)
        self._running = threading.BoundedSemaphore(guests)
        self._inline_free = threading.Lock()
        self.guests = guests
        self._counting = threading.Lock()
        self.in_children = 0
        """Activations that ran in a child (the in-process sandbox was busy)."""
        self.in_background = 0
        """Activities run again in the background lane (they used up their slice)."""
        self._child_waits = 0
        # An activity waiting in a host call (a sleep, an HTTP exchange) uses no CPU: it gives
        # up its places here meanwhile, or two of them would hold both places of a two-guest
        # worker for as long as they wait.
        inline.give_places_with(self._inline_places)
        overflow.give_places_with(self._child_places)

    def activities(self, digest: str) -> frozenset[str]:
        return self._inline.activities(digest)

    def http_policy(self, digest: str) -> HttpPolicy | None:
        return self._inline.http_policy(digest)

    def run(self, request: ActivationRequest) -> RawOutput:
        """Run one activation in process if it is free (or frees within `OVERFLOW_AFTER_S`, or
        `LIVE_PATIENCE_S` for a run whose live Python instance is parked here), else in a
        child; an activity that uses up its slice runs again in the background lane."""
        if not self._sliced(request):
            return self._run_once(request)
        sliced = replace(request, slice=Slice(fuel=self._slice_fuel, cpu_s=self._slice_cpu_s))
        deadline_at = time.monotonic() + request.limits.deadline_s
        try:
            return self._run_once(sliced)
        except SliceUsed:  # its fuel or its CPU slice; a run that waited left its slice
            pass
        assert self._background is not None
        with self._counting:
            self.in_background += 1
        started, ended = self._watchers
        started()
        try:
            return self._background.run(request, deadline_at)
        finally:
            ended()

    def watch_background(self, started: Callable[[], None], ended: Callable[[], None]) -> None:
        """Call `started()` when an activation moves to the background lane (on its caller's
        thread, before it waits there) and `ended()` when it is done: a caller whose thread it
        holds meanwhile can put another to work (the worker adds a slot)."""
        self._watchers = (started, ended)

    def _foreground(
        self, run: Callable[[ActivationRequest], RawOutput], request: ActivationRequest
    ) -> RawOutput:
        if self._background is None:
            return run(request)
        self._background.foreground_started()
        try:
            return run(request)
        finally:
            self._background.foreground_ended()

    def _sliced(self, request: ActivationRequest) -> bool:
        return (
            self._background is not None
            and request.kind is ActivationKind.ACTIVITY
            and request.limits.fuel > self._slice_fuel
            and self._inline.http_policy(request.digest) is None
        )

    def _run_once(self, request: ActivationRequest) -> RawOutput:
        with self._running:
            inline = self._inline
            patience = OVERFLOW_AFTER_S
            if isinstance(inline, StickySandbox) and inline.keeps_costly(request):
                patience = LIVE_PATIENCE_S
            if self._inline_free.acquire(timeout=patience):
                try:
                    return self._foreground(self._inline.run, request)
                finally:
                    self._inline_free.release()
            with self._counting:
                self.in_children += 1
            workflow = request.kind is ActivationKind.WORKFLOW and not request.query
            if workflow and isinstance(inline, StickySandbox):
                # The run moves on without its live instance, which would fall behind; and an
                # activation sent here to be replayed from the top (`fresh`) must not leave the
                # instance that needed it behind.
                inline.forget(request.run_id)
            return self._foreground(self._overflow.run, request)

    @contextmanager
    def _inline_places(self) -> Iterator[None]:
        # The in-process sandbox is taken back first, then a place among `guests`: a woken
        # guest waiting for the first holds no place a child could use meanwhile. Everyone
        # else who holds a place waits for the in-process sandbox with a timeout (and goes to
        # a child), so the reversed order cannot deadlock.
        self._inline_free.release()
        self._give_place()
        try:
            yield
        finally:
            self._inline_free.acquire()
            self._take_place()

    @contextmanager
    def _child_places(self) -> Iterator[None]:
        with self._counting:
            self._child_waits += 1
        self._give_place()
        try:
            yield
        finally:
            with self._counting:
                self._child_waits -= 1
            self._take_place()

    def waiting_now(self) -> int:
        """Activities waiting in a host call now, in process or in a child: they hold a worker
        slot but none of the `guests` places."""
        return self._inline.waiting_now() + self._child_waits

    def _give_place(self) -> None:
        self._running.release()
        if self._background is not None:
            self._background.foreground_ended()

    def _take_place(self) -> None:
        self._running.acquire()
        if self._background is not None:
            self._background.foreground_started()

    def in_background_now(self) -> int:
        """Activities in the background lane now (0 without one)."""
        return 0 if self._background is None else self._background.activities()

    def warm_instances(self) -> int:
        """Python activity instances kept in this process now (children keep their own)."""
        return self._inline.warm_instances()

    def live_runs(self) -> int:
        """Live workflow instances parked in process (0 without sticky instances)."""
        return self._inline.live_runs() if isinstance(self._inline, StickySandbox) else 0

    def close(self) -> None:
        """Stop the waiting children (and unwind live instances)."""
        if isinstance(self._inline, StickySandbox):
            self._inline.close()
        self._overflow.close()
        if self._background is not None:
            self._background.close()

    def __enter__(self) -> ParallelSandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _nothing() -> None:
    pass


def guest_runner(
    engine: SandboxEngine,
    clock: Clock,
    module_source: Callable[[str], bytes],
    *,
    artifact_dir: Path,
    guests: int,
    sticky_runs: int = 0,
    slice_fuel: int = SLICE_FUEL,
    slice_cpu_s: float | None = SLICE_CPU_S,
    warm_runs: int = WARM_RUNS,
) -> Sandbox | StickySandbox | ParallelSandbox:
    """The sandbox a worker runs its activations in: in process for one guest at a time, a
    `ParallelSandbox` for more; with `sticky_runs`, the in-process one keeps that many live
    workflow instances (`StickySandbox`); with `slice_fuel` > 0 (and more than one guest),
    an activity that uses up that much fuel (or `slice_cpu_s` of CPU; None: fuel alone) runs
    again in the background lane; with `warm_runs`,
    each process keeps that many runs' Python activity instances (`WarmActivities`)."""
    warm = WarmActivities(warm_runs) if warm_runs > 0 else None
    plain = Sandbox(engine, clock, module_source, warm=warm)
    inline = (
        StickySandbox(plain, engine.activation_lock, runs=sticky_runs) if sticky_runs else plain
    )
    if guests <= 1:
        return inline
    overflow = IsolatedSandbox(
        module_source,
        clock,
        artifact_dir=artifact_dir,
        keep_spare=False,
        reuse=guests - 1,
        warm_runs=warm_runs,
    )
    if slice_fuel <= 0:
        return ParallelSandbox(inline, overflow, guests)
    if slice_cpu_s is not None and slice_cpu_s <= 0:
        slice_cpu_s = None
    background = BackgroundLane(
        IsolatedSandbox(
            module_source,
            clock,
            artifact_dir=artifact_dir,
            keep_spare=False,
            reuse=guests,
            niceness=BACKGROUND_NICENESS,
            warm_runs=0,  # a heavy activity's instantiation is a small part of it, and one
            # that ran out of fuel in a kept instance would run again afresh: twice its budget
        ),
        slots=guests,
    )
    return ParallelSandbox(
        inline,
        overflow,
        guests,
        background=background,
        slice_fuel=slice_fuel,
        slice_cpu_s=slice_cpu_s,
    )
