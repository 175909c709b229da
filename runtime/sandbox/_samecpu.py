"""Keeping a live instance's thread and its caller on one CPU while they hand each other turns.

Use it around a handover where one thread wakes another and blocks until it answers (a live
workflow instance's caller and the instance's thread, twice per step). Left to the scheduler,
the woken thread usually starts on the other, idle CPU: an inter-processor interrupt, which a
virtual machine's hypervisor must deliver, and then a second wake, because the waker still held
the GIL the woken thread needs. On one CPU there is no interrupt, and the woken thread mostly
runs once the waker has blocked and left the GIL free.

`pull` (by the waker, before it wakes the other thread) ties both threads to the waker's CPU;
`let_go` (by each of them, once it runs again) gives the calling thread back every CPU the
process may use, so a long stretch never stays tied to one CPU while another is idle.

Measured with the bench's own figure (`run_step_by_step`'s live steps of a 20-step Python run,
in separate processes, with and without, alternating six times): median 336 µs against 430, each
of the six pairs lower with it (297-424 against 385-448). From a wake to the woken thread
running: 38 µs to the guest and 40 back as the scheduler placed the threads, 10 and 22-25 with
`pull` and `let_go`, which cost four system calls and a `sched_getcpu` per step (5 µs and 3 µs
a call here). Rejected: tying the two threads to one CPU for good (a worker's parallel guests
would then crowd one CPU); tying only the woken thread (the answer's way back then woke the
caller on the idle CPU again; measured slower).

Best effort: where the calls are missing (not Linux, one CPU), both functions do nothing; once
a tie is refused (a CPU set that changed under the process, a failed `sched_getcpu`), `pull`
does nothing from then on and `let_go` goes on untying the threads tied before, until it is
refused itself.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from typing import Final


def _allowed() -> frozenset[int]:
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return frozenset()


def _getcpu() -> Callable[[], int] | None:
    try:
        getcpu = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):
        return None
    getcpu.restype = ctypes.c_int
    getcpu.argtypes = ()
    return getcpu


_ALLOWED: Final = _allowed()
_GETCPU: Final = _getcpu() if len(_ALLOWED) > 1 else None
_pulling = _GETCPU is not None
"""Whether `pull` ties threads (off for good after a refusal)."""
_restoring = _GETCPU is not None
"""Whether `let_go` unties: it stays on after `pull` stops, so a thread tied before that is
still untied."""


def pull(native_id: int) -> None:
    """Before waking thread `native_id` (blocked, about to get its turn): let it and the calling
    thread run only on the calling thread's CPU until each calls `let_go`."""
    global _pulling
    if not _pulling or _GETCPU is None:
        return
    try:
        here = (_GETCPU(),)
        os.sched_setaffinity(native_id, here)
        os.sched_setaffinity(0, here)
    except ProcessLookupError:  # it ended meanwhile: nothing to hand over
        pass
    except (OSError, ValueError):  # refused, or `sched_getcpu` failed (-1)
        _pulling = False


def let_go() -> None:
    """Once running again after a `pull`: the calling thread may run on any CPU the process may
    use."""
    global _pulling, _restoring
    if not _restoring:
        return
    try:
        os.sched_setaffinity(0, _ALLOWED)
    except OSError:
        _pulling = _restoring = False


def enabled() -> bool:
    """Whether `pull` acts (Linux, more than one CPU allowed, nothing refused)."""
    return _pulling
