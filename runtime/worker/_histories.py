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
    """Bounded, thread-safe map of run id → `RunCopy` (the worker's slots share it)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._copies: OrderedDict[str, RunCopy] = OrderedDict()
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
        with self._lock:
            self._copies[copy.run_id] = copy
            self._copies.move_to_end(copy.run_id)
            while len(self._copies) > self.capacity:
                self._copies.popitem(last=False)

    def drop(self, run_id: str) -> None:
        with self._lock:
            self._copies.pop(run_id, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._copies)
