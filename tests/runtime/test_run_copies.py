"""The worker's copies of run histories stay within their bounds (runs and bytes)."""

from __future__ import annotations

from datetime import UTC, datetime

from amber.history import ActivityCompleted, Event, RunStarted
from amber.runtime.worker._histories import RunCopies, RunCopy

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _copy(run_id: str, payload_bytes: int) -> RunCopy:
    started = RunStarted(workflow_type="w", workflow_id=run_id, tenant="t", input=b"")
    done = ActivityCompleted(cmd=0, result=b"x" * payload_bytes, attempt=1)
    events = tuple(
        Event.of(run_id=run_id, seq=seq, payload=p, digest="d" * 64, created_at=NOW)
        for seq, p in ((1, started), (2, done))
    )
    return RunCopy(run_id=run_id, workflow_type="w", digest="d" * 64, input=b"", events=events)


def test_copies_are_bounded_by_count_and_bytes_least_recently_used_first() -> None:
    copies = RunCopies(capacity=3, max_bytes=10_000)
    for name in "abc":
        copies.put(_copy(name, 100))
    assert copies.get("a") is not None  # now the most recently used
    copies.put(_copy("d", 100))
    assert copies.get("b") is None and len(copies) == 3  # by count
    copies.put(_copy("e", 900))
    copies.put(_copy("f", 900))
    assert copies.bytes <= 10_000
    copies.put(_copy("big", 5_000))  # more than a tenth of the bound: not kept at all
    assert copies.get("big") is None
    copies.drop("a")
    assert copies.get("a") is None
    assert copies.bytes == sum(c.size for c in (copies.get(n) for n in "cdef") if c is not None)


def test_extending_a_copy_needs_the_very_next_events() -> None:
    copy = _copy("r", 10)
    later = Event.of(
        run_id="r",
        seq=4,
        payload=ActivityCompleted(cmd=1, result=b"", attempt=1),
        digest="d" * 64,
        created_at=NOW,
    )
    assert copy.extended((later,)) is None  # a gap: seq 3 is missing
    assert copy.extended(()) is None
