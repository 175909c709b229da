"""`WarmActivities`: a run's Python activity instance, kept for that run's next activity.

A Python activity in a fresh instance pays for the instance (instantiating a few dozen core
modules, then CPython's page faults on its memory snapshot) several times what the activity
itself costs. A run's activities follow one another, usually on the same worker (each report
brings the run's next step back to it), so after an activity that ended cleanly its instance
is kept, keyed by the run, the module digest and the store's limits, and the run's next
activity in this process goes on in it, with a new fuel budget and deadline.

What the activities of one run share, then, is the activity code's module-level state, on one
worker process at a time, as activities share their worker process in Temporal's Python SDK;
code must not rely on it (any other worker, child process or fault starts afresh). Never shared:

- between runs: two runs' data never meet in one instance, whatever tenants they belong to
  (module versions are content-addressed and may be shared);
- across a fault: an activity that faults (a trap, its fuel, memory or deadline spent) in a
  kept instance is run again in a fresh one within the same attempt, on what is left of its
  deadline, so the failure recorded, fingerprinted and exported for triage is the one a fresh
  instance gives, with that run's fuel (the caller does this; `Sandbox`). An activity that
  raises is no fault: its error is a clean outcome, and the instance stays kept;
- by modules with the HTTP capability, whose activities are never kept (that re-run would send
  a request twice), and by workflows (their live instances are `StickySandbox`'s).

Bounds: `runs` kept instances per process (least recently used dropped first), and with
`max_bytes` as many as their stores' memory limits fit in (a child process caps its writable
memory, which a kept instance's linear memory counts against); each dropped after `max_uses`
activities (CPython's heap only grows) or `idle_s` without one. Idle ones are freed by the
process's next activity (`sweep`): a worker that goes quiet keeps them until then.

Rejected: one instance per module digest for all runs (one run's data would reach another's
activity); keeping an instance across a fault (state a trap left half-written).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

import wasmtime
from wasmtime.component import Instance as ComponentInstance

WARM_RUNS: Final = 16
"""Runs whose activity instance a process keeps."""
WARM_IDLE_S: Final = 30.0
"""A kept instance without an activity this long is dropped."""
WARM_MAX_USES: Final = 64
"""Activities one kept instance serves before it is dropped."""


@dataclass(frozen=True, slots=True)
class WarmKey:
    """Which activities may go on in a kept instance: the same run, module and store limits
    (a store's memory and table limits are set when it is made)."""

    run_id: str
    digest: str
    memory_bytes: int
    table_elements: int


@dataclass(slots=True)
class WarmInstance:
    """A store and the component instance in it, with what it has served."""

    store: wasmtime.Store
    instance: ComponentInstance
    uses: int = 0
    kept_at: float = 0.0


class WarmActivities:
    """The kept instances of one process. Thread-safe; an instance is out of it while in use."""

    def __init__(
        self,
        runs: int = WARM_RUNS,
        *,
        idle_s: float = WARM_IDLE_S,
        max_uses: int = WARM_MAX_USES,
        max_bytes: int | None = None,
    ) -> None:
        self._runs = runs
        self._idle_s = idle_s
        self._max_uses = max_uses
        self._max_bytes = max_bytes
        self._kept: OrderedDict[WarmKey, WarmInstance] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        """Activities that went on in a kept instance."""

    def take(self, key: WarmKey) -> WarmInstance | None:
        """The instance kept for `key`, now the caller's (None: none). Its owner sweeps the
        idle ones first (`Sandbox.run`, before each activation)."""
        with self._lock:
            kept = self._kept.pop(key, None)
            if kept is None:
                return None
            self.hits += 1
            return kept

    def give(self, key: WarmKey, kept: WarmInstance) -> None:
        """Keep `kept` after an activity that ended cleanly (it is dropped if it served its
        share, and the least recently used ones go beyond `runs`)."""
        kept.uses += 1
        if self._runs <= 0 or kept.uses >= self._max_uses:
            _release([kept])
            return
        kept.kept_at = time.monotonic()
        dropped: list[WarmInstance] = []
        with self._lock:
            replaced = self._kept.pop(key, None)
            if replaced is not None and replaced is not kept:
                # Two activities of one run in process at once (one waited in a host call):
                # the run keeps the later one.
                dropped.append(replaced)
            self._kept[key] = kept
            while len(self._kept) > self._runs or (
                self._max_bytes is not None
                and sum(k.memory_bytes for k in self._kept) > self._max_bytes
            ):
                dropped.append(self._kept.popitem(last=False)[1])
        _release(dropped)

    def sweep(self) -> None:
        """Drop the instances idle for longer than `idle_s` (oldest first, so it stops at the
        first one still fresh)."""
        now = time.monotonic()
        dropped: list[WarmInstance] = []
        with self._lock:
            while self._kept:
                oldest = next(iter(self._kept.values()))
                if now - oldest.kept_at <= self._idle_s:
                    break
                dropped.append(self._kept.popitem(last=False)[1])
        _release(dropped)

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

    def clear(self) -> None:
        """Drop every kept instance."""
        with self._lock:
            dropped, self._kept = list(self._kept.values()), OrderedDict()
        _release(dropped)


def _release(dropped: list[WarmInstance]) -> None:
    """Free dropped instances' stores now (their slots in the engine's pool with them), not
    whenever the last reference to them goes."""
    for one in dropped:
        one.store.close()
