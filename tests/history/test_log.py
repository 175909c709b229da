"""The event log's contract on a real PostgreSQL: appends land at the expected positions, a stale
writer gets a typed `VersionConflict`, and `(run_id, seq)` is unique whatever the caller does."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

import msgpack
import pytest
from psycopg import errors as pgerrors

from amber.history import (
    ActivityCompleted,
    ActivityScheduled,
    Appended,
    Cursor,
    Database,
    DuplicateRow,
    Event,
    EventType,
    MalformedPayload,
    MarkerRecorded,
    NewEvent,
    NewRun,
    RunFailed,
    RunNotFound,
    RunStarted,
    VersionConflict,
    append_events_txn,
    get_run_txn,
    insert_run_txn,
    read_events_txn,
)

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
DIGEST = "ab" * 32


def _start_run(db: Database) -> str:
    run_id = str(uuid.uuid4())
    run = NewRun(
        run_id=run_id,
        tenant="t",
        workflow_id=f"wf-{run_id}",
        workflow_type="orders",
        digest=DIGEST,
        queue="q",
        input=msgpack.packb({"x": 1}),
        created_at=NOW,
    )
    db.run(lambda cur: insert_run_txn(cur, run))
    return run_id


def _event(cmd: int = 0) -> NewEvent:
    return NewEvent(MarkerRecorded(cmd=cmd, kind="now", value=cmd), DIGEST)


def _append(
    db: Database, run_id: str, events: list[NewEvent], expected: int | None, now: datetime = NOW
) -> int:
    return db.run(
        lambda cur: append_events_txn(cur, run_id, events, expected_last_seq=expected, now=now)
    ).last_seq


def _events(db: Database, run_id: str, after_seq: int = 0) -> list[Event]:
    return db.run(lambda cur: read_events_txn(cur, run_id, after_seq=after_seq))


def _last_seq(db: Database, run_id: str) -> int:
    run = db.run(lambda cur: get_run_txn(cur, run_id))
    assert run is not None
    return run.last_seq


def test_appends_land_at_the_expected_positions(db: Database) -> None:
    run_id = _start_run(db)

    assert _append(db, run_id, [_event(0), _event(1)], expected=0) == 2
    size = db.run(lambda cur: append_events_txn(cur, run_id, [], expected_last_seq=2, now=NOW))
    assert size.last_seq == 2 and size.history_bytes > 0 and not size.history_warned
    assert _append(db, run_id, [_event(2)], expected=2, now=NOW + timedelta(seconds=1)) == 3

    events = _events(db, run_id)
    assert [e.seq for e in events] == [1, 2, 3]
    assert [e.payload["cmd"] for e in events] == [0, 1, 2]
    assert [e.created_at for e in events] == [NOW, NOW, NOW + timedelta(seconds=1)]
    assert _last_seq(db, run_id) == 3
    assert [e.seq for e in _events(db, run_id, after_seq=2)] == [3]
    page = db.run(lambda cur: read_events_txn(cur, run_id, after_seq=1, limit=1))
    assert [e.seq for e in page] == [2]


@pytest.mark.parametrize("stale", [0, 1, 3, 9])
def test_a_stale_expected_position_is_a_version_conflict(db: Database, stale: int) -> None:
    run_id = _start_run(db)
    _append(db, run_id, [_event(0), _event(1)], expected=0)

    with pytest.raises(VersionConflict) as conflict:
        _append(db, run_id, [_event(2)], expected=stale)

    assert (conflict.value.run_id, conflict.value.expected, conflict.value.actual) == (
        run_id,
        stale,
        2,
    )
    assert [e.seq for e in _events(db, run_id)] == [1, 2]
    assert _last_seq(db, run_id) == 2


def test_an_empty_append_checks_the_position_and_writes_nothing(db: Database) -> None:
    run_id = _start_run(db)
    _append(db, run_id, [_event(0)], expected=0)

    assert _append(db, run_id, [], expected=1) == 1
    with pytest.raises(VersionConflict) as conflict:
        _append(db, run_id, [], expected=0)
    assert (conflict.value.expected, conflict.value.actual) == (0, 1)
    with pytest.raises(ValueError, match="nothing to append"):
        _append(db, run_id, [], expected=None)
    assert [e.seq for e in _events(db, run_id)] == [1]
    assert _last_seq(db, run_id) == 1


@pytest.mark.parametrize(
    ("events", "expected"),
    [([_event()], 0), ([_event()], None), ([], 0)],
    ids=["append", "append-at-end", "empty-append"],
)
def test_appending_to_a_missing_run_is_run_not_found(
    db: Database, events: list[NewEvent], expected: int | None
) -> None:
    missing = str(uuid.uuid4())
    with pytest.raises(RunNotFound) as err:
        _append(db, missing, events, expected=expected)
    assert err.value.run_id == missing
    assert _events(db, missing) == []


def test_run_and_seq_stay_unique_when_the_run_row_is_bypassed(db: Database) -> None:
    run_id = _start_run(db)
    _append(db, run_id, [_event(0)], expected=0)

    def insert_duplicate(cur: Cursor) -> None:
        cur.execute(
            "INSERT INTO amber_events (run_id, seq, type, payload, digest, created_at)"
            " VALUES (%s, 1, %s, %s, %s, %s)",
            (run_id, EventType.MARKER_RECORDED.value, b"\x80", DIGEST, NOW),
        )

    with pytest.raises(DuplicateRow) as raised:
        db.run(insert_duplicate)
    assert isinstance(raised.value.__cause__, pgerrors.UniqueViolation)
    assert [e.payload["cmd"] for e in _events(db, run_id)] == [0]


def test_events_round_trip_with_user_payloads_kept_as_bytes(db: Database) -> None:
    run_id = _start_run(db)
    user_input = msgpack.packb({"order_id": "A-7", "amount_cents": 2500, "blob": b"\x00\xff"})
    result = msgpack.packb(["shipped", None, 1.5])
    started = RunStarted(
        workflow_type="orders", workflow_id="order-A-7", tenant="t", input=user_input
    )
    appended = [
        NewEvent(started, DIGEST),
        NewEvent(ActivityScheduled(cmd=0, name="charge_payment", args=b""), DIGEST),
        NewEvent(ActivityCompleted(cmd=0, result=result, attempt=2), "cd" * 32),
        NewEvent(RunFailed(error_type="Declined", message="card declined: ünïcode"), "cd" * 32),
    ]
    _append(db, run_id, appended, expected=0)

    events = _events(db, run_id)
    assert [(e.run_id, e.seq, e.type, e.payload, e.digest) for e in events] == [
        (run_id, seq, new.type, new.payload, new.digest)
        for seq, new in enumerate(appended, start=1)
    ]
    assert type(events[0].payload["input"]) is bytes
    assert msgpack.unpackb(events[0].payload["input"]) == msgpack.unpackb(user_input)
    assert type(events[1].payload["args"]) is bytes
    assert type(events[2].payload["result"]) is bytes
    assert all(isinstance(e.type, EventType) for e in events)
    assert isinstance(events[1].payload, ActivityScheduled)
    assert events[2].payload_as(ActivityCompleted).attempt == 2


def test_a_payload_that_does_not_fit_its_type_is_refused_when_read(db: Database) -> None:
    run_id = _start_run(db)
    _append(db, run_id, [_event(0)], expected=0)
    db.run(
        lambda cur: cur.execute(
            "UPDATE amber_events SET payload = %s WHERE run_id = %s",
            (msgpack.packb({"cmd": "zero", "kind": "now", "value": 1}), run_id),
        )
    )
    (event,) = _events(db, run_id)  # reading the rows decodes nothing
    with pytest.raises(MalformedPayload, match=r"MarkerRecorded payload: Expected `int`.*\$\.cmd"):
        _ = event.payload


def test_append_at_end_goes_after_the_current_last_event(db: Database) -> None:
    run_id = _start_run(db)
    _append(db, run_id, [_event(0), _event(1)], expected=0)

    assert _append(db, run_id, [_event(2), _event(3)], expected=None) == 4
    assert [(e.seq, e.payload["cmd"]) for e in _events(db, run_id)] == [
        (1, 0),
        (2, 1),
        (3, 2),
        (4, 3),
    ]


def _race(db: Database, run_id: str, write: list[NewEvent], expected: int | None) -> list[object]:
    """Two writers, each reading the head then appending in one transaction, truly overlapping."""
    barrier = threading.Barrier(2, timeout=10)
    outcomes: list[object] = [None, None]

    def writer(index: int) -> None:
        def txn(cur: Cursor) -> int:
            cur.execute("SELECT last_seq FROM amber_runs WHERE run_id = %s", (run_id,))
            barrier.wait()  # both transactions are open and have read the same head
            return append_events_txn(
                cur, run_id, [write[index]], expected_last_seq=expected, now=NOW
            )

        try:
            outcomes[index] = db.run(txn)
        except Exception as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert not any(t.is_alive() for t in threads)
    return outcomes


def test_two_writers_with_the_same_expected_position_one_wins(db: Database) -> None:
    run_id = _start_run(db)
    _append(db, run_id, [_event(0)], expected=0)

    outcomes = _race(db, run_id, [_event(100), _event(200)], expected=1)

    winners = [i for i, o in enumerate(outcomes) if getattr(o, "last_seq", None) == 2]
    losers = [o for o in outcomes if isinstance(o, VersionConflict)]
    assert len(winners) == 1, outcomes
    assert len(losers) == 1, outcomes
    assert (losers[0].expected, losers[0].actual) == (1, 2)
    events = _events(db, run_id)
    assert [e.payload["cmd"] for e in events] == [0, (100, 200)[winners[0]]]


def test_two_writers_appending_at_the_end_are_serialised(db: Database) -> None:
    run_id = _start_run(db)
    _append(db, run_id, [_event(0)], expected=0)

    outcomes = _race(db, run_id, [_event(100), _event(200)], expected=None)

    assert sorted(o.last_seq for o in outcomes if isinstance(o, Appended)) == [2, 3]
    events = _events(db, run_id)
    assert [e.seq for e in events] == [1, 2, 3]
    assert sorted(e.payload["cmd"] for e in events[1:]) == [100, 200]
    assert _last_seq(db, run_id) == 3
