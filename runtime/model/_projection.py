"""A run's history as the replayer sees it: recorded commands by index, results in delivery order.

Most results are events of their own (an activity completing, a timer firing). Signals are the
exception: a signal is recorded when it *arrives* (`SignalReceived`, buffered if nobody waits)
and a wait when the workflow *issues* it (`SignalAwaited`); the k-th wait for a name receives the
k-th signal of that name, delivered at whichever of the two came later. Everything here depends
on the history alone, so live activations and replays see the same thing.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from amber.abi import CancelRequest, ErrorInfo, RecordedResult
from amber.history import Event, EventType

from ._errors import CorruptHistory

_NIL = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedCommand:
    """A command as history recorded it."""

    cmd: int
    seq: int
    kind: str
    name: str = ""
    """Activity name, signal name, child workflow type, or approval action."""
    args: bytes = b""
    """Activity arguments or child input."""
    value: object = None
    """`now`/`random` value, timer duration, cancelled timer's command, or child workflow id."""


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


def _scheduled(b: _Builder, e: Event) -> None:
    p = e.payload
    b.commands.append(
        RecordedCommand(cmd=p["cmd"], seq=e.seq, kind="activity", name=p["name"], args=p["args"])
    )


def _marker(b: _Builder, e: Event) -> None:
    p = e.payload
    b.commands.append(RecordedCommand(cmd=p["cmd"], seq=e.seq, kind=p["kind"], value=p["value"]))
    b.ok(p["cmd"], e.seq, p["value"])


def _timer_started(b: _Builder, e: Event) -> None:
    p = e.payload
    b.commands.append(
        RecordedCommand(cmd=p["cmd"], seq=e.seq, kind="timer", value=p["duration_ms"])
    )


def _timer_cancelled(b: _Builder, e: Event) -> None:
    p = e.payload
    b.commands.append(
        RecordedCommand(cmd=p["cmd"], seq=e.seq, kind="cancel_timer", value=p["timer"])
    )
    b.ok(p["cmd"], e.seq, _NIL)
    if p.get("cancelled"):
        b.error(p["timer"], e.seq, "TimerCancelled", "the workflow cancelled this timer")


def _signal_awaited(b: _Builder, e: Event) -> None:
    p = e.payload
    b.commands.append(RecordedCommand(cmd=p["cmd"], seq=e.seq, kind="signal", name=p["name"]))
    b.waits[p["name"]].append((p["cmd"], e.seq))
    b.match_signals(p["name"])


def _signal_received(b: _Builder, e: Event) -> None:
    p = e.payload
    b.signals[p["name"]].append((e.seq, p["payload"]))
    b.match_signals(p["name"])


def _child_started(b: _Builder, e: Event) -> None:
    p = e.payload
    b.commands.append(
        RecordedCommand(
            cmd=p["cmd"],
            seq=e.seq,
            kind="child",
            name=p["workflow_type"],
            args=p["input"],
            value=p["workflow_id"],
        )
    )


def _approval_requested(b: _Builder, e: Event) -> None:
    p = e.payload
    policy = (tuple(p["approvers"]), tuple(p["roles"]), p["required"], p["expires_ms"])
    b.commands.append(
        RecordedCommand(cmd=p["cmd"], seq=e.seq, kind="approval", name=p["action"], value=policy)
    )


def _cancel_requested(b: _Builder, e: Event) -> None:
    if b.cancel is None:
        b.cancel = CancelRequest(seq=e.seq, reason=e.payload.get("reason") or "")


def _ok_result(key: str) -> Callable[[_Builder, Event], None]:
    def handler(b: _Builder, e: Event) -> None:
        b.ok(e.payload["cmd"], e.seq, e.payload[key] if key else _NIL)

    return handler


def _error_result(kind: str | None = None) -> Callable[[_Builder, Event], None]:
    def handler(b: _Builder, e: Event) -> None:
        p = e.payload
        b.error(p["cmd"], e.seq, kind or p["error_type"], p.get("message") or "")

    return handler


def _timed_out(b: _Builder, e: Event) -> None:
    p = e.payload
    b.error(p["cmd"], e.seq, f"amber.timeout.{p['timeout']}", f"attempt {p['attempt']} timed out")


_HANDLERS: dict[EventType, Callable[[_Builder, Event], None]] = {
    EventType.ACTIVITY_SCHEDULED: _scheduled,
    EventType.MARKER_RECORDED: _marker,
    EventType.ACTIVITY_COMPLETED: _ok_result("result"),
    EventType.ACTIVITY_FAILED: _error_result(),
    EventType.ACTIVITY_CANCELLED: _error_result("Cancelled"),
    EventType.ACTIVITY_TIMED_OUT: _timed_out,
    EventType.TIMER_STARTED: _timer_started,
    EventType.TIMER_FIRED: _ok_result(""),
    EventType.TIMER_CANCELLED: _timer_cancelled,
    EventType.SIGNAL_AWAITED: _signal_awaited,
    EventType.SIGNAL_RECEIVED: _signal_received,
    EventType.CHILD_STARTED: _child_started,
    EventType.CHILD_COMPLETED: _ok_result("result"),
    EventType.CHILD_FAILED: _error_result(),
    EventType.CANCEL_REQUESTED: _cancel_requested,
    EventType.APPROVAL_REQUESTED: _approval_requested,
    EventType.APPROVAL_RESOLVED: _ok_result("result"),
}


def project(events: Sequence[Event]) -> Projection:
    """Split a history into recorded commands (by index) and results (in delivery order)."""
    b = _Builder()
    for event in events:
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(b, event)
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
