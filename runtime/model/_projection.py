"""A run's history as the replayer sees it: recorded commands by index, results in delivery order.

Most results are events of their own (an activity completing, a timer firing). Signals are the
exception: a signal is recorded when it *arrives* (`SignalReceived`, buffered if nobody waits)
and a wait when the workflow *issues* it (`SignalAwaited`); the k-th wait for a name receives the
k-th signal of that name, delivered at whichever of the two came later. Everything here depends
on the history alone, so live activations and replays see the same thing.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

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

    def resolved(self) -> set[int]:
        return {r.cmd for r in self.results}


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


def _deliver(b: _Builder, seq: int, payload: Payload) -> None:
    """What an event means to the workflow beyond the command it may record; run lifecycle
    events and operators' records mean nothing to it."""
    match payload:
        case MarkerRecorded(cmd=cmd, value=value):
            b.ok(cmd, seq, value)
        case ActivityCompleted(cmd=cmd, result=result) | ChildCompleted(cmd=cmd, result=result):
            b.ok(cmd, seq, result)
        case ApprovalResolved(cmd=cmd, result=result):
            b.ok(cmd, seq, result)
        case TimerFired(cmd=cmd):
            b.ok(cmd, seq, _NIL)
        case ActivityFailed(cmd=cmd, error_type=kind, message=message):
            b.error(cmd, seq, kind, message)
        case ChildFailed(cmd=cmd, error_type=kind, message=message):
            b.error(cmd, seq, kind, message)
        case ActivityCancelled(cmd=cmd, message=message):
            b.error(cmd, seq, "Cancelled", message)
        case ActivityTimedOut(cmd=cmd, timeout=timeout, attempt=attempt):
            b.error(cmd, seq, f"amber.timeout.{timeout}", f"attempt {attempt} timed out")
        case TimerCancelled(cmd=cmd, timer=timer, cancelled=cancelled):
            b.ok(cmd, seq, _NIL)
            if cancelled:
                b.error(timer, seq, "TimerCancelled", "the workflow cancelled this timer")
        case SignalAwaited(cmd=cmd, name=name):
            b.waits[name].append((cmd, seq))
            b.match_signals(name)
        case SignalReceived(name=name, payload=data):
            b.signals[name].append((seq, data))
            b.match_signals(name)
        case CancelRequested(reason=reason) if b.cancel is None:
            b.cancel = CancelRequest(seq=seq, reason=reason)


def project(events: Sequence[Event]) -> Projection:
    """Split a history into recorded commands (by index) and results (in delivery order)."""
    b = _Builder()
    for event in events:
        payload = event.payload
        if isinstance(payload, CommandPayload):
            b.commands.append(
                RecordedCommand(cmd=payload.cmd, seq=event.seq, command=payload.command())
            )
        _deliver(b, event.seq, payload)
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
    )
