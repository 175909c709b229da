"""Lowering a process's CPU priority, so that it gets only the CPU the rest of the machine leaves.

Linux's autogroup scheduling (`kernel.sched_autogroup_enabled`, on here and on many distribution
kernels) shares the CPU between sessions first; a process's niceness then only weighs against
the other processes of its own session. Measured here with two busy processes in sessions of
their own: a third at niceness 19 in its parent's session still took its full third of the CPU,
while one in a session of its own with that session's niceness at 19 took 0.23 CPU-s of 3 s.
So a process meant to yield starts in a session of its own (`start_new_session`) and gets
both its session's weight lowered (`/proc/PID/autogroup`) and its own niceness (what counts
where autogroups are off). Under a cgroup manager (systemd's `CPUWeight=`, Kubernetes) the same is
better done by giving the workers' slices their weights.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Final

_AUTOGROUP_TRIES: Final = 5


def lower_priority(pid: int, niceness: int) -> None:
    """Make process `pid` (and its session, if it leads one) yield the CPU: niceness 1–19.
    Done by the parent right after the start, so that the child's own start-up (imports, about
    0.5 CPU-s) already yields. Never the idle scheduling class: on a machine that stays busy
    it gets next to no CPU, and an unprivileged process cannot leave it again.

    Best effort: where a knob is not allowed or not present the process runs without it."""
    if niceness <= 0:
        return
    niceness = min(niceness, 19)
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, pid, niceness)
    with contextlib.suppress(OSError):
        if os.getsid(pid) == pid:  # never re-weigh a session the process merely joined
            _set_autogroup(pid, niceness)


def _set_autogroup(pid: int, niceness: int) -> None:
    # Without CAP_SYS_ADMIN the kernel takes one such write per 100 ms, machine-wide, and
    # answers EAGAIN to the others: a few lanes starting at once would lose theirs.
    for _ in range(_AUTOGROUP_TRIES - 1):
        try:
            Path(f"/proc/{pid}/autogroup").write_text(str(niceness))
            return
        except BlockingIOError:
            time.sleep(0.1)
    Path(f"/proc/{pid}/autogroup").write_text(str(niceness))
