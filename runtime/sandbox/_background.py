"""`BackgroundLane`: where a worker runs activities that outran their fuel slice, on the CPU its
other guests leave.

Its guests run in child processes (`IsolatedSandbox`) at low CPU priority: a session of their
own (an autogroup) at niceness 10 (`_priority`), their deadlines counting their own CPU time.
Priority alone did not protect the healthy path here: measured on this machine's two virtual
cores, a background fuel bomb at niceness 19, even in the idle scheduling class, still took
0.5–0.9 CPU-s per second, the CPU the latency-bound healthy path left idle between its steps,
and healthy throughput fell as much as with the bomb at normal priority (isolation ratio
0.70–0.81 against 0.80). A busy virtual core slows its neighbour whatever the guest's scheduler
thinks. So the lane also holds back: while the worker's other guests are busy, and until they
have been quiet for `QUIET_S`, its activations wait to start and its running children are
stopped (SIGSTOP), continued (SIGCONT) once the others are quiet. A stopped guest's deadline
does not run; a child is only ever stopped after it said `ready`, by when it has asked to die
with its parent (a worker killed while holding it would otherwise leave it stopped for good).
A guest is never held back more than `PATIENCE_S` in all: past that it runs beside the other
guests at its low priority, so a worker that is never quiet still finishes its heavy
activities.

Rejected: priority alone (above); the idle scheduling class (on a machine that stays busy it
starves: the suite on both cores held such children for minutes, and an unprivileged process
cannot leave it); cgroup CPU weights (root-only here, and the deployment's job: systemd's
`CPUWeight=`); pausing through the wasm epoch (a paused guest would hold the worker's
in-process sandbox).
"""

from __future__ import annotations

import signal
import threading
import time

from ._isolated import IsolatedSandbox
from ._sandbox import ActivationRequest, RawOutput

QUIET_S = 0.2
"""How long the worker's other guests must have been idle before the lane goes on."""
PATIENCE_S = 30.0
"""The longest a background guest is held back in all, before it runs regardless."""
_TICK_S = 0.02


class BackgroundLane:
    """Runs activations in low-priority child processes, held back while foreground guests run.

    The worker calls `foreground_started()` and `foreground_ended()` around each of its other
    activations. A background activation waits to start (a child's start-up is half a CPU-second
    of imports) and its child is stopped while the lane is held, which is while foreground guests
    run and for `QUIET_S` after, until its activations have been held `patience_s` in all."""

    def __init__(
        self, children: IsolatedSandbox, slots: int, *, patience_s: float = PATIENCE_S
    ) -> None:
        """`slots`: activations run at once (more wait their turn; give `children` as many
        reused processes, or each extra one costs a process start-up); `patience_s`: the
        longest they are held back in all (give `children` at least that in `pauses_s`)."""
        self._children = children
        self._slots = threading.BoundedSemaphore(slots)
        self._patience_s = patience_s
        self._changed = threading.Condition()
        self._busy = 0
        """Foreground activations in flight."""
        self._quiet_since = time.monotonic()
        self._waiting = 0
        """Background activations in flight."""
        self._held = False
        self._held_s = 0.0
        """How long the background activations in flight have been held back."""
        self._stop = threading.Event()
        self._gate = threading.Thread(target=self._watch, name="amber-background", daemon=True)
        self._gate.start()

    def run(self, request: ActivationRequest) -> RawOutput:
        with self._changed:
            self._waiting += 1
        try:
            with self._slots:
                with self._changed:
                    while self._held and not self._stop.is_set():
                        self._changed.wait()
                return self._children.run(request)
        finally:
            with self._changed:
                self._waiting -= 1
                if not self._waiting:
                    self._held_s = 0.0

    def activities(self) -> int:
        """Activations in the lane now, held back or running."""
        return self._waiting

    def foreground_started(self) -> None:
        with self._changed:
            self._busy += 1
            if self._waiting and self._held_s < self._patience_s:
                self._hold(True)

    def foreground_ended(self) -> None:
        with self._changed:
            self._busy -= 1
            if self._busy == 0:
                self._quiet_since = time.monotonic()

    def close(self) -> None:
        self._stop.set()
        with self._changed:
            self._hold(False)
        self._children.close()

    def _watch(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(_TICK_S):
            now = time.monotonic()
            with self._changed:
                if self._held and self._waiting:
                    self._held_s += now - last
                quiet = self._busy == 0 and now - self._quiet_since >= QUIET_S
                self._hold(bool(self._waiting) and not quiet and self._held_s < self._patience_s)
            last = now

    def _hold(self, held: bool) -> None:
        if held == self._held:
            return
        self._held = held
        self._children.signal_running(signal.SIGSTOP if held else signal.SIGCONT)
        self._changed.notify_all()
