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

Rejected: threads (above); a child per activation (the surgical pool's isolation costs a process
start-up each); all guests in children (a pipe round trip and a copy of every envelope even when
nothing else runs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from amber.runtime.model import Clock

from ._engine import SandboxEngine
from ._host import ActivationKind
from ._http import HttpPolicy
from ._isolated import IsolatedSandbox
from ._sandbox import ActivationRequest, RawOutput, Sandbox
from ._sticky import StickySandbox

OVERFLOW_AFTER_S = 0.002
"""How long an activation waits for the in-process sandbox before it runs in a child."""
LIVE_PATIENCE_S = 0.05
"""How long a workflow activation whose run has a live Python instance in process waits for it:
in a child it would replay from the top (milliseconds of CPython, more with each step), and the
run would lose its live instance for the activations after it too."""


class ParallelSandbox:
    """A `SandboxRunner` running up to `guests` activations at once: one in process, the rest in
    reused child processes. Callers beyond `guests` wait for one to end."""

    def __init__(
        self, inline: Sandbox | StickySandbox, overflow: IsolatedSandbox, guests: int
    ) -> None:
        if guests < 2:
            raise ValueError("a parallel sandbox runs at least two guests; use Sandbox for one")
        self._inline = inline
        self._overflow = overflow
        self._running = threading.BoundedSemaphore(guests)
        self._inline_free = threading.Lock()
        self.guests = guests
        self._counting = threading.Lock()
        self.in_children = 0
        """Activations that ran in a child (the in-process sandbox was busy)."""

    def activities(self, digest: str) -> frozenset[str]:
        return self._inline.activities(digest)

    def http_policy(self, digest: str) -> HttpPolicy | None:
        return self._inline.http_policy(digest)

    def run(self, request: ActivationRequest) -> RawOutput:
        """Run one activation in process if it is free (or frees within `OVERFLOW_AFTER_S`, or
        `LIVE_PATIENCE_S` for a run whose live Python instance is parked here), else in a
        child."""
        with self._running:
            inline = self._inline
            patience = OVERFLOW_AFTER_S
            if isinstance(inline, StickySandbox) and inline.keeps_costly(request):
                patience = LIVE_PATIENCE_S
            if self._inline_free.acquire(timeout=patience):
                try:
                    return self._inline.run(request)
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
            return self._overflow.run(request)

    def live_runs(self) -> int:
        """Live workflow instances parked in process (0 without sticky instances)."""
        return self._inline.live_runs() if isinstance(self._inline, StickySandbox) else 0

    def close(self) -> None:
        """Stop the waiting children (and unwind live instances)."""
        if isinstance(self._inline, StickySandbox):
            self._inline.close()
        self._overflow.close()

    def __enter__(self) -> ParallelSandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def guest_runner(
    engine: SandboxEngine,
    clock: Clock,
    module_source: Callable[[str], bytes],
    *,
    artifact_dir: Path,
    guests: int,
    sticky_runs: int = 0,
) -> Sandbox | StickySandbox | ParallelSandbox:
    """The sandbox a worker runs its activations in: in process for one guest at a time, a
    `ParallelSandbox` for more; with `sticky_runs`, the in-process one keeps that many live
    workflow instances (`StickySandbox`)."""
    plain = Sandbox(engine, clock, module_source)
    inline = (
        StickySandbox(plain, engine.activation_lock, runs=sticky_runs) if sticky_runs else plain
    )
    if guests <= 1:
        return inline
    overflow = IsolatedSandbox(
        module_source, clock, artifact_dir=artifact_dir, keep_spare=False, reuse=guests - 1
    )
    return ParallelSandbox(inline, overflow, guests)
