"""`CpuWatch`: ends a sliced activity once its thread has used its CPU slice.

The fuel slice (`ParallelSandbox`) catches a guest that executes many instructions; it cannot
catch one whose cost is not instructions. A memory bomb grows its memory and touches every
page: a few million fuel, and tens of milliseconds of kernel time for its page faults (64 MiB is
about 16,000 of them). So a sliced activity is also watched: at each epoch tick (the engine's
ticker, `EPOCH_TICK_S`), wasmtime calls back here, and once the activation's thread has used
`budget_s` of CPU (user and system, `time.thread_time`), the call ends with `spent` set; the
sandbox raises `SliceUsed` and its caller runs the activity again from the start, on its whole
budget, in the background lane, exactly as for a used-up fuel slice. Thread CPU, not wall time:
an activity waiting in a host call (a sleep) uses none, and one preempted by its neighbours is
not charged for them.

Once a store has an epoch callback, wasmtime calls it instead of trapping at the deadline
(the C API cannot take one away), so the watch keeps the deadline itself: it ends the call with
`deadline` set when the wall-clock deadline has passed, which the sandbox raises as the
`DeadlineExceeded` an interrupt would have been. A kept activity instance (`WarmActivities`)
keeps its store, so every activation on a kept store is watched again (`watch`), sliced or not.

One C callback serves every store; `data` is a key into `_WATCHES`, and wasmtime's finalizer,
called when the store drops or its callback is replaced, removes the entry. A sliced activation
that ends within its first tick (nearly all of them) pays the registration only: a dictionary
entry, one C call and a `thread_time` read.

Rejected: a wall-clock slice (a short epoch deadline): it ends activities that wait in host
calls and charges one preempted on a busy machine for its neighbours; a memory slice (a first
run on a smaller memory limit): a refused `memory.grow` returns -1 to the guest, which may go
on and complete differently, where a used-up slice must never be visible to it.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import threading
import time
from typing import Any, Final

import wasmtime

from amber.versions import WASMTIME_VERSION

from ._engine import EPOCH_TICK_S

_CONTINUE: Final = 0
"""`WASMTIME_UPDATE_DEADLINE_CONTINUE`: go on with the deadline `delta` ticks ahead."""

_Callback: Final = ctypes.CFUNCTYPE(
    ctypes.c_void_p,  # wasmtime_error_t *, NULL: go on
    ctypes.c_void_p,  # wasmtime_context_t *
    ctypes.c_void_p,  # data
    ctypes.POINTER(ctypes.c_uint64),  # epoch_deadline_delta
    ctypes.POINTER(ctypes.c_uint8),  # wasmtime_update_deadline_kind_t
)
_Finalizer: Final = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


_SUPPORTED_MAJOR: Final = "50"
"""The wasmtime version whose C API callback contract this module was checked against (the
`uint8` update kind, a returned `wasmtime_error_t *`, the finalizer called when the store drops
or its callback is replaced)."""


def _c_api() -> tuple[Any, Any] | None:
    """The two C API functions this module calls, with its own ctypes signatures: fresh
    function pointers (`dll[name]`), so wasmtime-py's own bindings of them keep theirs. None
    where the library lacks them or is another major version."""
    if WASMTIME_VERSION.split(".")[0] != _SUPPORTED_MAJOR:
        return None
    try:
        from wasmtime import _ffi

        register = _ffi.dll["wasmtime_store_epoch_deadline_callback"]
        error_new = _ffi.dll["wasmtime_error_new"]
    except (ImportError, AttributeError, OSError):
        return None
    register.argtypes = [ctypes.c_void_p, _Callback, ctypes.c_void_p, _Finalizer]
    register.restype = None
    error_new.argtypes = [ctypes.c_char_p]
    error_new.restype = ctypes.c_void_p
    return register, error_new


_API: Final = _c_api()
AVAILABLE: Final = _API is not None
"""Whether stores can be watched here (without it, a sliced activity has its fuel slice only)."""


class CpuWatch:
    """One activation's CPU slice and deadline, checked at each epoch tick on its store."""

    __slots__ = ("budget_s", "cpu_at_start", "deadline", "deadline_at", "spent")

    def __init__(self, budget_s: float | None, deadline_s: float) -> None:
        """`budget_s`: thread CPU the activation may use (None: only the deadline is kept);
        must be set up on the thread that will run the guest."""
        self.budget_s = budget_s
        self.deadline_at = time.monotonic() + deadline_s
        self.cpu_at_start = time.thread_time()
        self.spent = False
        """The activation used its CPU slice (the call ended for that)."""
        self.deadline = False
        """The activation ran past its deadline (the call ended for that)."""

    def lift(self) -> None:
        """No CPU slice from now on, only the deadline (a run that waited in a host call is
        not run again: it would wait again)."""
        self.budget_s = None

    def on_tick(self, delta: Any) -> bool:
        """Whether the guest may go on; if so, sets `delta[0]` to the ticks until the next look."""
        now = time.monotonic()
        if now >= self.deadline_at:
            self.deadline = True
            return False
        if self.budget_s is not None:
            if time.thread_time() - self.cpu_at_start >= self.budget_s:
                self.spent = True
                return False
            delta[0] = 1
        else:
            delta[0] = max(1, math.ceil((self.deadline_at - now) / EPOCH_TICK_S))
        return True


_WATCHES: dict[int, CpuWatch] = {}
_keys = itertools.count(1)
_lock = threading.Lock()


def _tick(_context: Any, data: int | None, delta: Any, kind: Any) -> int:
    watch = _WATCHES.get(data or 0)
    try:
        if watch is None:
            delta[0] = 1
        if watch is None or watch.on_tick(delta):
            kind[0] = _CONTINUE
            return 0
    except BaseException:  # nothing may escape a C callback: look again at the next tick
        delta[0] = 1
        kind[0] = _CONTINUE
        return 0
    reason = b"amber: CPU slice used" if watch is not None and watch.spent else b"amber: deadline"
    assert _API is not None
    error: int = _API[1](reason)
    return error


def _finalize(data: int | None) -> None:
    _WATCHES.pop(data or 0, None)


_TICK: Final = _Callback(_tick)
_FINALIZE: Final = _Finalizer(_finalize)


def watch(store: wasmtime.Store, budget_s: float | None, deadline_s: float) -> CpuWatch | None:
    """Watch the next activation on `store` (run it on this thread): it ends, with the
    returned watch's `spent` set, once this thread has used `budget_s` of CPU (None: never),
    and with `deadline` set once `deadline_s` have passed. Replaces any earlier watch on the
    store (and its epoch deadline). None where the C API lacks epoch callbacks (`AVAILABLE`):
    the store keeps its plain deadline."""
    if _API is None:
        return None
    found = CpuWatch(budget_s, deadline_s)
    with _lock:
        key = next(_keys)
    _API[0](store.ptr(), _TICK, key, _FINALIZE)  # it cannot fire before the guest next runs
    _WATCHES[key] = found
    ticks = 1 if budget_s is not None else max(1, math.ceil(deadline_s / EPOCH_TICK_S))
    store.set_epoch_deadline(ticks)
    return found
