"""A run's history as the replayer sees it: recorded commands by index, results in delivery order.

Most results are events of their own (an activity completing, a timer firing). Signals are the
exception: a signal is recorded when it *arrives* (`SignalReceived`, buffered if nobody waits)
and a wait when the workflow *issues* it (`SignalAwaited`); the k-th wait for a name receives the
k-th signal of that name, delivered at whichever of the two came later. Everything here depends
on the history alone, so live activations and replays see the same thing.

A projection can be *extended*: `extend_projection(p, events)`, where `p` is the projection of
the first `p.length` of `events`, goes on from `p` with the rest and gives exactly what
`project(events)` gives, in time proportional to the new events (a run's next activation
brings one or two). Where that cannot be shown cheaply (a new event not after every old one,
commands out of order), it gives None and the caller projects from the top.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from amber.abi import CancelRequest, Command, ErrorInfo, RecordedResult
from amber.history import (
    ActivityCancelled,
    ActivityCompleted,
    ActivityFailed,
    ActivityTimedOut,
    ApprovalResolved,
    CancelRequested,
    ChildCompleted,
    ChildFailed,
    CommandPayload,
    Event,
    MarkerRecorded,
    Payload,
    SignalAwaited,
    SignalReceived,
    TimerCancelled,
    TimerFired,
)

from ._errors import CorruptHistory

_NIL = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedCommand:
    """A command as history recorded it: the typed command replay compares the guest's to."""

    cmd: int
    seq: int
    command: Command


@dataclass(frozen=True, slots=True, kw_only=True)
class Projection:
    """A history as the replayer sees it."""

    commands: tuple[RecordedCommand, ...]
    results: tuple[RecordedResult, ...]
    """Every result, ordered by the history position it was delivered at."""
    last_seq: int
    cancel: CancelRequest | None = None
    buffered_signals: dict[str, int] = field(default_factory=dict)
    """Signals received that no wait has taken yet, by name."""
    length: int = 0
    """How many events it was projected from (`extend_projection` goes on after them)."""
    top_seq: int = 0
    """The highest seq among those events."""
    pending: _Pending | None = field(default=None, repr=False, compare=False)
    """Signal waits and signals not matched yet, to go on matching them (None: none)."""

    def resolved(self) -> set[int]:
        return {r.cmd for r in self.results}


@dataclass(frozen=True, slots=True)
class _Pending:
    waits: dict[str, tuple[tuple[int, int], ...]]
    signals: dict[str, tuple[tuple[int, bytes], ...]]


@dataclass(slots=True)
class _Builder:
    commands: list[RecordedCommand] = field(default_factory=list)
    results: list[RecordedResult] = field(default_factory=list)
    cancel: CancelRequest | None = None
    waits: dict[str, deque[tuple[int, int]]] = field(default_factory=lambda: defaultdict(deque))
    signals: dict[str, deque[tuple[int, bytes]]] = field(default_factory=lambda: defaultdict(deque))

    def ok(self, cmd: int, seq: int, value: object) -> None:
        self.results.append(RecordedResult(cmd=cmd, seq=seq, value=value))  # type: ignore[arg-type]

    def error(self, cmd: int, seq: int, kind: str, message: str) -> None:
        error = ErrorInfo(type=kind, message=message)
        self.results.append(RecordedResult(cmd=cmd, seq=seq, error=error))

    def match_signals(self, name: str) -> None:
        waits, signals = self.waits[name], self.signals[name]
        while waits and signals:
            cmd, wait_seq = waits.popleft()
            signal_seq, payload = signals.popleft()
            self.ok(cmd, max(wait_seq, signal_seq), payload)

    def pending(self) -> _Pending | None:
        waits = {n: tuple(q) for n, q in self.waits.items() if q}
        signals = {n: tuple(q) for n, q in self.signals.items() if q}
        return _Pending(waits, signals) if waits or signals else None

    @classmethod
    def after(cls, pending: _Pending | None, cancel: CancelRequest | None) -> _Builder:
        """A builder for the events after a projection's (its own lists start empty)."""
        b = cls(cancel=cancel)
        if pending is not None:
            for name, waits in pending.waits.items():
                b.waits[name].extend(waits)
            for name, signals in pending.signals.items():
                b.signals[name].extend(signals)
        return b


def _marker(b: _Builder, seq: int, p: Any) -> None:
    b.ok(p.cmd, seq, p.value)


def _result(b: _Builder, seq: int, p: Any) -> None:
    b.ok(p.cmd, seq, p.result)


def _fired(b: _Builder, seq: int, p: Any) -> None:
    b.ok(p.cmd, seq, _NIL)


def _failed(b: _Builder, seq: int, p: Any) -> None:
    b.error(p.cmd, seq, p.error_type, p.message)


def _cancelled(b: _Builder, seq: int, p: Any) -> None:
    b.error(p.cmd, seq, "Cancelled", p.message)


def _timed_out(b: _Builder, seq: int, p: Any) -> None:
    b.error(p.cmd, seq, f"amber.timeout.{p.timeout}", f"attempt {p.attempt} timed out")


def _timer_cancelled(b: _Builder, seq: int, p: Any) -> None:
    b.ok(p.cmd, seq, _NIL)
    if p.cancelled:
        b.error(p.timer, seq, "TimerCancelled", "the workflow cancelled this timer")


def _awaited(b: _Builder, seq: int, p: Any) -> None:
    b.waits[p.name].append((p.cmd, seq))
    b.match_signals(p.name)


def _received(b: _Builder, seq: int, p: Any) -> None:
    b.signals[p.name].append((seq, p.payload))
    b.match_signals(p.name)


def _cancel_requested(b: _Builder, seq: int, p: Any) -> None:
    if b.cancel is None:
        b.cancel = CancelRequest(seq=seq, reason=p.reason)


_DELIVER: dict[type[Payload], Callable[[_Builder, int, Any], None]] = {
    MarkerRecorded: _marker,
    ActivityCompleted: _result,
    ChildCompleted: _result,
    ApprovalResolved: _result,
    TimerFired: _fired,
    ActivityFailed: _failed,
    ChildFailed: _failed,
    ActivityCancelled: _cancelled,
    ActivityTimedOut: _timed_out,
    TimerCancelled: _timer_cancelled,
    SignalAwaited: _awaited,
    SignalReceived: _received,
    CancelRequested: _cancel_requested,
}
"""What an event means to the workflow beyond the command it may record, by payload class;
run lifecycle events and operators' records mean nothing to it."""


def _nothing(b: _Builder, seq: int, p: Any) -> None:
    return None


def _fill(b: _Builder, events: Sequence[Event]) -> None:
    deliver = _DELIVER.get
    for event in events:
        payload = event.payload
        if isinstance(payload, CommandPayload):
            b.commands.append(
                RecordedCommand(cmd=payload.cmd, seq=event.seq, command=payload.command())
            )
        deliver(type(payload), _nothing)(b, event.seq, payload)


def _in_order(commands: list[RecordedCommand], first: int) -> bool:
    return all(command.cmd == index for index, command in enumerate(commands, first))


def project(events: Sequence[Event]) -> Projection:
    """Split a history into recorded commands (by index) and results (in delivery order)."""
    b = _Builder()
    _fill(b, events)
    b.commands.sort(key=lambda c: c.cmd)
    for index, command in enumerate(b.commands):
        if command.cmd != index:
            raise CorruptHistory(f"command {index} is recorded with index {command.cmd}")
    b.results.sort(key=lambda r: (r.seq, r.cmd))
    return Projection(
        commands=tuple(b.commands),
        results=tuple(b.results),
        last_seq=events[-1].seq if events else 0,
        cancel=b.cancel,
        buffered_signals={n: len(q) for n, q in b.signals.items() if q},
        length=len(events),
        top_seq=max((e.seq for e in events), default=0),
        pending=b.pending(),
    )


def extend_projection(since: Projection, events: Sequence[Event]) -> Projection | None:
    """`project(events)`, from `since`, the projection of `events[:since.length]` (the caller
    vouches for that prefix) and the events after it; None where the answer might differ from
    projecting the whole history (then project it)."""
    if since.length > len(events):
        return None
    new = events[since.length :]
    if not new:
        return since
    first = min(e.seq for e in new)
    if first <= since.top_seq:
        return None
    b = _Builder.after(since.pending, since.cancel)
    _fill(b, new)
    b.commands.sort(key=lambda c: c.cmd)
    if not _in_order(b.commands, len(since.commands)):
        return None  # projecting from the top says where
    # Every new result is delivered at a new event's seq, after every old result's.
    b.results.sort(key=lambda r: (r.seq, r.cmd))
    return Projection(
        commands=since.commands + tuple(b.commands),
        results=since.results + tuple(b.results),
        last_seq=new[-1].seq,
        cancel=b.cancel,
        buffered_signals={n: len(q) for n, q in b.signals.items() if q},
        length=since.length + len(new),
        top_seq=max(since.top_seq, max(e.seq for e in new)),
        pending=b.pending(),
    )
