"""`ReplayMemo`: what a worker keeps of each run's last workflow activation, so that the run's
next activation does only the new part: project the events added since, and decode the output's
new commands.

Use one per worker (its slots share it) and pass it to `activate_workflow`. Both halves give
exactly what doing the whole again gives; each is a cache, never a source of truth.

Projections: a run's activations come with its whole history each time, and the worker's own
copy of a run (the one it keeps to activate a workflow after the run's activity) grows by
appending events to the events it already holds, so an entry is reused when the new
history begins with the entry's events: the very same objects (a pointer comparison each), or
where one is not, an event with the same seq, type and stored payload (the worker's own record
of an activity's completion beside the server's copy of it), which is all a projection reads of
an event. Anything else — another history of the run (a reset), fewer events, a new event that
does not come after the old ones — projects from the top, so the answer is always
`project(events)`'s (`extend_projection`).

Outputs: every output lists each command since the run's start; the commands the run's last
output held are taken over where this one begins with their bytes (`KnownCommands`).

Checks: the determinism check compares every recorded command with the guest's at its position.
Where both are the very objects a passed check of the run's last activation compared (the
projection and the output's commands both go on from the last ones), they still agree, so the
check starts after them (`agreed`, `note_agreed`): a step's check then costs the new commands,
not the run's length. Identity, never equality, decides: anything re-projected or re-decoded is
compared again.

Bounds: `runs` runs (least recently used out first) and `max_events` events held across them;
a history longer than a tenth of that is not kept, nor an output's commands past
`MAX_KNOWN_BYTES`.
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from amber.abi import (
    NOTHING_KNOWN,
    Command,
    KnownCommands,
    WorkflowOutcome,
    decode_workflow_output_after,
)
from amber.history import Event
from amber.runtime.model import Projection, RecordedCommand, extend_projection, project

RUNS: Final = 256
MAX_EVENTS: Final = 200_000
MAX_KNOWN_BYTES: Final = 64 * 1024
"""A run's last output commands are kept only up to this many bytes."""


@dataclass(frozen=True, slots=True)
class _Entry:
    events: Sequence[Event]
    projection: Projection
    known: KnownCommands = NOTHING_KNOWN
    agreed: tuple[tuple[RecordedCommand, ...], tuple[Command, ...]] = ((), ())
    """The recorded and issued commands a passed determinism check found equal, position by
    position."""


class ReplayMemo:
    """A bounded, thread-safe memo of run id → (history, its projection, the last output's
    commands); see the module docstring."""

    def __init__(self, *, runs: int = RUNS, max_events: int = MAX_EVENTS) -> None:
        self._runs = runs
        self._max_events = max_events
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._events = 0
        self._lock = threading.Lock()
        self.extended = 0
        """Projections that went on from a run's last one."""
        self.projected = 0
        """Projections from the top."""
        self.commands_reused = 0
        """Commands of outputs taken over from the run's last output, not parsed again."""

    def project(self, run_id: str, events: Sequence[Event]) -> Projection:
        """`project(events)`, going on from the run's last projection where `events` begins
        with its events (see the module docstring)."""
        entry = self._pop(run_id)
        projection = None
        if entry is not None and _begins(events, entry.events):
            projection = extend_projection(entry.projection, events)
        extended = projection is not None
        if projection is None:
            projection = project(events)
        with self._lock:
            self.extended += extended
            self.projected += not extended
            if len(events) <= self._max_events // 10:
                if entry is None:
                    self._keep(run_id, _Entry(events, projection))
                else:
                    self._keep(run_id, _Entry(events, projection, entry.known, entry.agreed))
        return projection

    def decode(self, run_id: str, raw: bytes) -> WorkflowOutcome:
        """`decode_workflow_output(raw)` for the run's output, taking over the commands its last
        output began with."""
        with self._lock:
            entry = self._entries.get(run_id)
        known = entry.known if entry is not None else NOTHING_KNOWN
        outcome, now_known = decode_workflow_output_after(raw, known)
        with self._lock:
            if known.commands and now_known.commands[: len(known.commands)] == known.commands:
                self.commands_reused += len(known.commands)
            entry = self._entries.get(run_id)
            if entry is not None:
                kept = now_known if len(now_known.raw) <= MAX_KNOWN_BYTES else NOTHING_KNOWN
                self._entries[run_id] = _Entry(entry.events, entry.projection, kept, entry.agreed)
        return outcome

    def agreed(
        self, run_id: str, recorded: Sequence[RecordedCommand], issued: Sequence[Command]
    ) -> int:
        """How many leading positions of `recorded` and `issued` a passed check of the run
        already found equal: they hold the very objects it compared (0: check from the top)."""
        with self._lock:
            entry = self._entries.get(run_id)
        if entry is None:
            return 0
        old_recorded, old_issued = entry.agreed
        n = len(old_recorded)
        if (
            n == 0
            or len(recorded) < n
            or len(issued) < n
            or not all(map(operator.is_, recorded[:n], old_recorded))
            or not all(map(operator.is_, issued[:n], old_issued))
        ):
            return 0
        return n

    def note_agreed(
        self, run_id: str, recorded: Sequence[RecordedCommand], issued: Sequence[Command]
    ) -> None:
        """Remember that the determinism check found `recorded` and `issued` equal at every
        position both have."""
        n = min(len(recorded), len(issued))
        with self._lock:
            entry = self._entries.get(run_id)
            if entry is not None:
                agreed = (tuple(recorded[:n]), tuple(issued[:n]))
                self._entries[run_id] = _Entry(entry.events, entry.projection, entry.known, agreed)

    def drop(self, run_id: str) -> None:
        """Forget the run (it closed)."""
        self._pop(run_id)

    def _pop(self, run_id: str) -> _Entry | None:
        with self._lock:
            entry = self._entries.pop(run_id, None)
            if entry is not None:
                self._events -= len(entry.events)
            return entry

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _keep(self, run_id: str, entry: _Entry) -> None:
        self._entries[run_id] = entry
        self._events += len(entry.events)
        while self._entries and (
            len(self._entries) > self._runs or self._events > self._max_events
        ):
            _, old = self._entries.popitem(last=False)
            self._events -= len(old.events)


def _begins(events: Sequence[Event], prefix: Sequence[Event]) -> bool:
    """Whether `events` starts with `prefix`, as a projection reads events."""
    n = len(prefix)
    if not 0 < n <= len(events):
        return False
    head = events[:n]
    return all(map(operator.is_, head, prefix)) or all(map(_same, head, prefix))


def _same(a: Event, b: Event) -> bool:
    return a is b or (a.seq == b.seq and a.type is b.type and a.raw == b.raw)
