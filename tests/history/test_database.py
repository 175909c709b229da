"""`Database.run`'s transaction discipline against a real PostgreSQL: what it retries, what it
does not, and how an outage (a closed port, a cut TCP connection) reaches the caller."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import errors as pgerrors

from amber.abi import RetryableError
from amber.history import (
    Cursor,
    Database,
    DuplicateRow,
    NewEvent,
    NewRun,
    RunStarted,
    StoreUnavailable,
    VersionConflict,
    append_events_txn,
    insert_run_txn,
)

from ._proxy import PgProxy, upstream_of

NOW = datetime(2025, 1, 1, tzinfo=UTC)
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/x"
RETRY_LOG = "transient database error"


def _new_run(run_id: str) -> NewRun:
    return NewRun(
        run_id=run_id,
        tenant="t",
        workflow_id=f"wf-{run_id}",
        workflow_type="orders",
        digest="d" * 64,
        queue="q",
        input=b"\x80",
        created_at=NOW,
    )


def _count_runs(db: Database) -> int:
    row = db.run(lambda cur: cur.execute("SELECT count(*) FROM amber_runs").fetchone())
    assert row is not None
    return int(row[0])


def _raise_on_server(cur: Cursor, sqlstate: str) -> None:
    # The server itself raises the error, so psycopg maps it exactly as it would a real one.
    cur.execute(f"DO $$ BEGIN RAISE EXCEPTION 'simulated' USING ERRCODE = '{sqlstate}'; END $$")


def _retries_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if RETRY_LOG in r.getMessage()]


@pytest.mark.parametrize(
    ("sqlstate", "error"),
    [
        ("serialization_failure", pgerrors.SerializationFailure),
        ("deadlock_detected", pgerrors.DeadlockDetected),
    ],
)
def test_a_transient_failure_is_retried_as_a_whole_transaction(
    db: Database, sqlstate: str, error: type[Exception]
) -> None:
    run_id = str(uuid.uuid4())
    calls: list[int] = []
    raised: list[type[Exception]] = []

    def txn(cur: Cursor) -> str:
        calls.append(1)
        # Inserting the same run twice would be a unique violation: it only works because the
        # first attempt's transaction was rolled back.
        insert_run_txn(cur, _new_run(run_id))
        if len(calls) == 1:
            try:
                _raise_on_server(cur, sqlstate)
            except Exception as exc:
                raised.append(type(exc))
                raise
        return "done"

    assert db.run(txn) == "done"
    assert len(calls) == 2
    assert raised == [error]
    assert _count_runs(db) == 1


def test_a_persistent_serialization_failure_becomes_store_unavailable(database_url: str) -> None:
    calls: list[int] = []

    def txn(cur: Cursor) -> None:
        calls.append(1)
        _raise_on_server(cur, "serialization_failure")

    with Database(database_url, attempts=3) as db, pytest.raises(StoreUnavailable) as err:
        db.run(txn)
    assert len(calls) == 3
    assert isinstance(err.value, RetryableError)
    assert isinstance(err.value.__cause__, pgerrors.SerializationFailure)


def test_other_errors_propagate_after_one_call(db: Database) -> None:
    run_id = str(uuid.uuid4())
    db.run(lambda cur: insert_run_txn(cur, _new_run(run_id)))
    calls: list[str] = []

    def duplicate(cur: Cursor) -> None:
        calls.append("duplicate")
        insert_run_txn(cur, _new_run(run_id))

    def buggy(cur: Cursor) -> None:
        calls.append("buggy")
        raise ValueError("a bug in the caller")

    def stale(cur: Cursor) -> None:
        calls.append("stale")
        started = RunStarted(workflow_type="w", workflow_id="w", tenant="t", input=b"")
        event = NewEvent(started, "d" * 64)
        append_events_txn(cur, run_id, [event], expected_last_seq=7, now=NOW)

    with pytest.raises(DuplicateRow) as raised:
        db.run(duplicate)
    assert isinstance(raised.value.__cause__, pgerrors.UniqueViolation)
    with pytest.raises(ValueError, match="a bug in the caller"):
        db.run(buggy)
    with pytest.raises(VersionConflict):  # a stale writer must re-read, never blindly retry
        db.run(stale)
    assert calls == ["duplicate", "buggy", "stale"]


def test_an_unreachable_server_becomes_store_unavailable_after_the_attempts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    def txn(cur: Cursor) -> None:
        calls.append(1)

    db = Database(UNREACHABLE, connect_timeout_s=0.3, attempts=3).open(wait=False)
    started = time.monotonic()
    try:
        with (
            caplog.at_level(logging.WARNING, logger="amber.history"),
            pytest.raises(
                StoreUnavailable, match="database unavailable: couldn't get a connection"
            ) as err,
        ):
            db.run(txn)
    finally:
        db.close()
    assert time.monotonic() - started < 5
    assert calls == []
    assert isinstance(err.value.__cause__, psycopg.OperationalError)
    retries = _retries_logged(caplog)  # three attempts: two logged retries, then the error
    assert len(retries) == 2
    assert "(attempt 1)" in retries[0]
    assert "(attempt 2)" in retries[1]


def test_a_dedicated_connection_to_an_unreachable_server_is_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable, match="cannot connect to PostgreSQL"):
        Database(UNREACHABLE).connect()


def test_open_fails_fast_when_the_server_is_unreachable() -> None:
    db = Database(UNREACHABLE, connect_timeout_s=0.3)
    outcome: list[BaseException] = []

    def open_db() -> None:
        try:
            db.open()
        except BaseException as exc:  # reported to the test below
            outcome.append(exc)

    opener = threading.Thread(target=open_db, daemon=True)
    opener.start()
    opener.join(timeout=1.5)
    try:
        assert not opener.is_alive(), "open() was still waiting after 1.5 s"
        assert isinstance(outcome[0], StoreUnavailable)
    finally:
        db.close()


@pytest.fixture
def proxy(database_url: str) -> Iterator[PgProxy]:
    upstream = upstream_of(database_url)
    if upstream is None:
        pytest.skip(f"cannot tell the server's host/port or socket from {database_url!r}")
    the_proxy = PgProxy(upstream)
    yield the_proxy
    the_proxy.close()


def _current_database(cur: Cursor) -> str:
    row = cur.execute("SELECT current_database()").fetchone()
    assert row is not None
    return str(row[0])


def test_a_cut_connection_becomes_store_unavailable(proxy: PgProxy, database_url: str) -> None:
    expected = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
    with Database(proxy.dsn(database_url), attempts=3, connect_timeout_s=0.5) as db:
        assert db.run(_current_database) == expected
        proxy.cut()
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="database unavailable") as err:
            db.run(_current_database)
        assert time.monotonic() - started < 5
    assert isinstance(err.value.__cause__, psycopg.OperationalError)


def test_an_outage_shorter_than_the_retries_is_ridden_out(
    proxy: PgProxy, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    expected = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
    with Database(proxy.dsn(database_url), attempts=5, connect_timeout_s=3) as db:
        assert db.run(_current_database) == expected
        proxy.cut()
        restorer = threading.Timer(0.3, proxy.restore)
        restorer.start()
        with caplog.at_level(logging.WARNING, logger="amber.history"):
            assert db.run(_current_database) == expected
        restorer.join()
    assert _retries_logged(caplog), "the outage was never noticed"


def test_a_connection_lost_mid_transaction_commits_nothing_and_is_retried(
    proxy: PgProxy, database_url: str, db: Database
) -> None:
    run_id = str(uuid.uuid4())
    calls: list[int] = []

    def txn(cur: Cursor) -> str:
        calls.append(1)
        insert_run_txn(cur, _new_run(run_id))
        if len(calls) == 1:
            proxy.cut()
            threading.Timer(0.3, proxy.restore).start()
        return _current_database(cur)

    with Database(proxy.dsn(database_url), attempts=5, connect_timeout_s=3) as through_proxy:
        through_proxy.run(txn)
    assert len(calls) == 2
    assert _count_runs(db) == 1


def test_a_commit_whose_answer_is_lost_is_not_applied_twice(
    proxy: PgProxy, database_url: str, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    # The server commits, the connection is cut before its answer arrives: a blind retry would
    # insert the run again (a DuplicateRow here; a second signal, say, where nothing is unique).
    run_id = str(uuid.uuid4())
    calls: list[int] = []

    def txn(cur: Cursor) -> str:
        calls.append(1)
        insert_run_txn(cur, _new_run(run_id))
        return run_id

    with Database(proxy.dsn(database_url), attempts=5, connect_timeout_s=3) as through_proxy:
        proxy.lose_commit_answer()
        with caplog.at_level(logging.WARNING, logger="amber.history"):
            assert through_proxy.run(txn) == run_id
    assert proxy.commits_lost == 1
    assert calls == [1], "the committed transaction ran again"
    assert _count_runs(db) == 1
    assert "the transaction committed" in caplog.text


def test_a_read_only_transaction_is_retried_whatever_happened_to_its_commit(
    proxy: PgProxy, database_url: str
) -> None:
    calls: list[int] = []

    def txn(cur: Cursor) -> str:
        calls.append(1)
        return _current_database(cur)

    with Database(proxy.dsn(database_url), attempts=5, connect_timeout_s=3) as through_proxy:
        proxy.lose_commit_answer()
        assert through_proxy.run(txn)
    assert proxy.commits_lost == 1
    assert len(calls) == 2  # it wrote nothing, so running it again is the safe answer
