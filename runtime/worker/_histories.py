"""The histories of the runs a worker has just served, so it can run a workflow's next
activation itself after one of the run's activities completes.

A copy is only a guess at the run's state: the server applies an activation computed on it only
if the run's head is still the copy's (`ThenWorkflow`), so a stale copy costs a fallback to the
ordinary workflow task, never a wrong history. Copies are dropped when a report does not extend
them exactly, when the run closes, and least recently used first beyond `capacity`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from itertools import pairwise

from amber.history import Event


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCopy:
    """What a worker knows of a run after serving it."""

    run_id: str
    workflow_type: str
    digest: str
    """The version the run replays on."""
    input: bytes
    events: tuple[Event, ...]
    """The whole history, 1..head without gaps."""

    @property
    def head(self) -> int:
        return self.events[-1].seq if self.events else 0

    @property
    def size(self) -> int:
        """Bytes it holds (payloads and input), for the copies' memory bound."""
        return len(self.input) + sum(len(e.raw) for e in self.events)

    def extended(self, appended: tuple[Event, ...]) -> RunCopy | None:
        """This copy with `appended` after its head, or None if they do not follow it."""
        if not appended or appended[0].seq != self.head + 1:
            return None
        if any(b.seq != a.seq + 1 for a, b in pairwise(appended)):
            return None
        return RunCopy(
            run_id=self.run_id,
            workflow_type=self.workflow_type,
            digest=self.digest,
            input=self.input,
            events=self.events + appended,
        )


class RunCopies:
    """Bounded, thread-safe map of run id → `RunCopy` (the worker's slots share it): at most
    `capacity` runs and `max_bytes` of their payloads, least recently used out first; a run
    bigger than a tenth of that is not kept (its workflow tasks bring its history as before)."""

    def __init__(self, capacity: int, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._copies: OrderedDict[str, RunCopy] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, run_id: str) -> RunCopy | None:
        with self._lock:
            copy = self._copies.get(run_id)
            if copy is not None:
                self._copies.move_to_end(run_id)
            return copy

    def put(self, copy: RunCopy) -> None:
        if self.capacity <= 0:
            return
        size = copy.size
        with self._lock:
            self._forget(copy.run_id)
            if size > self.max_bytes // 10:
                return
            self._copies[copy.run_id] = copy
            self._sizes[copy.run_id] = size
            self._bytes += size
            while len(self._copies) > self.capacity or self._bytes > self.max_bytes:
                oldest = next(iter(self._copies))
                self._forget(oldest)

    def drop(self, run_id: str) -> None:
        with self._lock:
            self._forget(run_id)

    @property
    def bytes(self) -> int:
        with self._lock:
            return self._bytes

    def _forget(self, run_id: str) -> None:
        if self._copies.pop(run_id, None) is not None:
            self._bytes -= self._sizes.pop(run_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._copies)
