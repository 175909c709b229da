"""`BackgroundLane`: where a worker runs activities that outran their fuel slice, on the CPU its
other guests leave.

Its guests run in reused child processes (`IsolatedSandbox`) at low CPU priority: a session of
their own (an autogroup) at niceness 10 (`_priority`). Priority alone did not protect the
healthy path here: measured on this machine's two virtual cores, a background fuel bomb at
niceness 19, even in the idle scheduling class, still took 0.5–0.9 CPU-s per second, the CPU
the latency-bound healthy path left idle between its steps, and healthy throughput fell as much
as with the bomb at normal priority (isolation ratio 0.70–0.81 against 0.80). A busy virtual
core slows its neighbour whatever the guest's scheduler thinks. So the lane also holds back:
while the worker's other guests are busy, and until they have been quiet for `QUIET_S`, an
activation waits to start. It waits at most `PATIENCE_S`, and at most half of what is left of
its deadline, which keeps counting wall time as the author's start-to-close timeout on the
server does: past that it starts beside the other guests, at its low priority, so a worker
that is never quiet still finishes its heavy activities.

Rejected: priority alone (above); the idle scheduling class (on a machine that stays busy it
starves, and an unprivileged process cannot leave it); stopping a running child while others
run (SIGSTOP: a few points of isolation at most, within the machine's drift, for a child whose
deadline clock, reuse and death with a killed worker all need handling apart: see
docs/execution.md); cgroup CPU weights (root-only here, and the deployment's job: systemd's
`CPUWeight=`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from amber.runtime.model import DeadlineExceeded

from ._isolated import IsolatedSandbox
from ._sandbox import ActivationRequest, RawOutput

QUIET_S = 0.2
"""How long the worker's other guests must have been idle before a held activation starts."""
PATIENCE_S = 30.0
"""The longest an activation waits to start (less if its deadline is near)."""
_RECHECK_S = 0.1
"""A waiting activation looks again this often (a deadline or its patience may end it)."""


class BackgroundLane:
    """Runs activations in low-priority child processes, each once this worker's other guests
    are quiet (or it has waited its patience).

    The worker calls `foreground_started()` and `foreground_ended()` around each of its other
    activations."""

    def __init__(
        self, children: IsolatedSandbox, slots: int, *, patience_s: float = PATIENCE_S
    ) -> None:
        """`slots`: activations run at once (more wait their turn; give `children` as many
        reused processes, or each extra one costs a process start-up)."""
        self._children = children
        self._slots = threading.BoundedSemaphore(slots)
        self._patience_s = patience_s
        self._changed = threading.Condition()
        self._busy = 0
        """Foreground activations in flight."""
        self._quiet_since = time.monotonic()
        self._in_lane = 0
        """Activations in the lane, waiting or running."""

    def activities(self) -> int:
        """Activations in the lane now, waiting or running."""
        return self._in_lane

    def run(self, request: ActivationRequest, deadline_at: float) -> RawOutput:
        """Run `request` once the lane may; `deadline_at` (`time.monotonic()`) is when its
        deadline ends, whatever waiting it does here."""
        with self._changed:
            self._in_lane += 1
        try:
            entered = time.monotonic()
            patience = min(self._patience_s, max(0.0, (deadline_at - entered) / 2))
            with self._slots:
                with self._changed:
                    while (wait := self._wait_s(entered + patience)) > 0:
                        self._changed.wait(min(wait, _RECHECK_S))
                left = deadline_at - time.monotonic()
                if left <= 0:
                    raise DeadlineExceeded(
                        "the activation's deadline passed before it could run again",
                        run_id=request.run_id,
                        step=request.step,
                        digest=request.digest,
                    )
                limits = replace(request.limits, deadline_s=left)
                return self._children.run(replace(request, limits=limits))
        finally:
            with self._changed:
                self._in_lane -= 1

    def _wait_s(self, give_up_at: float) -> float:
        """How much longer to wait before starting (0: start now). Holding `_changed`."""
        now = time.monotonic()
        if now >= give_up_at:
            return 0.0
        if self._busy:
            return give_up_at - now
        return max(0.0, self._quiet_since + QUIET_S - now)

    def foreground_started(self) -> None:
        with self._changed:
            self._busy += 1

    def foreground_ended(self) -> None:
        with self._changed:
            self._busy -= 1
            if self._busy == 0:
                self._quiet_since = time.monotonic()
                self._changed.notify_all()

    def close(self) -> None:
        self._children.close()
