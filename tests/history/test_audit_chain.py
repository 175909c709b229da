"""The audit log's hash chain on a real PostgreSQL: an untouched log verifies; a record edited,
deleted, inserted or reordered directly in the database is named; the head catches the last
records deleted and an anchor catches a wholesale rewrite; concurrent writers in separate
transactions still form one gap-free chain; rows written before migration 0008 are chained."""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from importlib.resources import files
from typing import Any

import msgpack
import psycopg
import pytest
from psycopg import sql

from amber import history
from amber.history import (
    AUDIT_GENESIS_HASH,
    AuditEntry,
    AuditVerification,
    Cursor,
    Database,
    apply_migrations,
    audit_head_txn,
    list_audit_txn,
    load_migrations,
    record_audit_txn,
    verify_audit_txn,
)

NOW = datetime(2026, 3, 1, 9, 30, 15, 123456, tzinfo=UTC)


@pytest.fixture
def chain_db(db: Database) -> Database:
    """An empty log with no head yet (the shared fixture empties `amber_audit` only)."""
    db.run(lambda cur: cur.execute("TRUNCATE amber_audit, amber_audit_head"))
    return db


def _entry(n: int, **changes: Any) -> AuditEntry:
    fields: dict[str, Any] = {
        "actor": f"ops{n}@example.com",
        "action": "run.cancel",
        "target": f"run-{n}",
        "reason": f"reason {n}",
        "detail": {"n": n, "blob": bytes([n % 256]) * 3},
        "at": NOW + timedelta(microseconds=n),
    }
    return AuditEntry(**(fields | changes))


def _append(db: Database, count: int, *, start: int = 1, per_txn: int = 1000) -> None:
    for first in range(start, start + count, per_txn):
        last = min(first + per_txn, start + count)

        def txn(cur: Cursor, first: int = first, last: int = last) -> None:
            for n in range(first, last):
                record_audit_txn(cur, _entry(n))

        db.run(txn)


def _verify(db: Database, **kwargs: Any) -> AuditVerification:
    return db.run(lambda cur: verify_audit_txn(cur, **kwargs))


def _sql(db: Database, statement: str, params: tuple[Any, ...] = ()) -> None:
    """Tamper with the log directly, as someone who can switch the append-only trigger off (a
    superuser, the table's owner) could."""

    def txn(cur: Cursor) -> None:
        cur.execute("SET LOCAL session_replication_role = replica")  # triggers do not fire
        cur.execute(statement, params or None)

    db.run(txn)


def _audit_id(db: Database, seq: int) -> int:
    def txn(cur: Cursor) -> int:
        cur.execute("SELECT audit_id FROM amber_audit WHERE seq = %s", (seq,))
        row = cur.fetchone()
        assert row is not None
        return int(row[0])

    return db.run(txn)


def _all(db: Database) -> list[AuditEntry]:
    return db.run(lambda cur: list_audit_txn(cur, target=None, after_seq=0, limit=10_000))


def test_an_untouched_chain_verifies_and_links_every_record(chain_db: Database) -> None:
    assert _verify(chain_db) == AuditVerification(
        ok=True, checked=0, head_seq=0, head_hash=AUDIT_GENESIS_HASH
    )
    long_reason = "é" * 5000
    chain_db.run(lambda cur: record_audit_txn(cur, _entry(1, reason=long_reason, actor="ü" * 300)))
    _append(chain_db, 4, start=2)

    result = _verify(chain_db, batch=2)

    entries = _all(chain_db)
    assert [e.seq for e in entries] == [1, 2, 3, 4, 5]
    assert result == AuditVerification(ok=True, checked=5, head_seq=5, head_hash=entries[-1].hash)
    assert chain_db.run(audit_head_txn) == (5, entries[-1].hash)
    assert len({e.hash for e in entries}) == 5 and all(len(e.hash) == 32 for e in entries)
    # What is hashed is what is stored: the truncated reason and actor.
    assert entries[0].reason == "é" * 4096 and entries[0].actor == "ü" * 256
    assert entries[1].detail == {"n": 2, "blob": b"\x02\x02\x02"}
    assert entries[1].at == NOW + timedelta(microseconds=2)


EDITS = {
    "at": "at = at + interval '1 microsecond'",
    "actor": "actor = 'mallory'",
    "action": "action = 'version.promote'",
    "target": "target = 'run-somebody-else'",
    "reason": "reason = 'x'",
    "detail": "detail = '\\x80'::bytea",
    "prev_hash": "prev_hash = sha256('x')",
    "hash": "hash = sha256('x')",
}


@pytest.mark.parametrize("column", sorted(EDITS))
def test_editing_any_column_of_a_record_names_that_record(chain_db: Database, column: str) -> None:
    _append(chain_db, 6)
    audit_id = _audit_id(chain_db, 3)

    _sql(chain_db, f"UPDATE amber_audit SET {EDITS[column]} WHERE seq = 3")

    for batch in (1, 2, 3, 1000):  # record 3 at a page's start, middle and end
        result = _verify(chain_db, batch=batch)
        assert not result.ok
        assert result.first_bad_seq == 3 and result.first_bad_audit_id == audit_id
        assert result.checked == 2
        expected = (
            "record 3's prev_hash does not match record 2"
            if column == "prev_hash"
            else "record 3 was edited (hash mismatch)"
        )
        assert result.problem == expected


def test_a_time_edited_beyond_what_python_can_read_names_the_record(chain_db: Database) -> None:
    _append(chain_db, 4)
    _sql(chain_db, "UPDATE amber_audit SET at = 'infinity' WHERE seq = 3")

    result = _verify(chain_db, batch=2)

    assert not result.ok and result.first_bad_seq == 3
    assert result.problem.startswith("record 3 was edited (unreadable")


def test_a_deleted_middle_record_is_named_by_the_gap(chain_db: Database) -> None:
    _append(chain_db, 6)
    _sql(chain_db, "DELETE FROM amber_audit WHERE seq = 3")

    result = _verify(chain_db, batch=2)

    assert not result.ok
    assert (result.first_bad_seq, result.first_bad_audit_id) == (3, None)
    assert result.problem == "record 3 is missing (seq gap after 2)"


def test_a_deleted_first_record_is_named(chain_db: Database) -> None:
    _append(chain_db, 3)
    _sql(chain_db, "DELETE FROM amber_audit WHERE seq = 1")

    result = _verify(chain_db)

    assert result.first_bad_seq == 1
    assert result.problem == "record 1 is missing (the log starts at 2)"


def test_a_deletion_hidden_by_renumbering_breaks_the_link(chain_db: Database) -> None:
    _append(chain_db, 6)
    _sql(chain_db, "DELETE FROM amber_audit WHERE seq = 3")
    _sql(chain_db, "UPDATE amber_audit SET seq = seq - 1 WHERE seq > 3")
    _sql(chain_db, "UPDATE amber_audit_head SET seq = 5")

    result = _verify(chain_db)

    assert result.first_bad_seq == 3 and result.checked == 2
    assert result.problem == "record 3's prev_hash does not match record 2"


@pytest.mark.parametrize(("deleted", "what"), [(1, "the last record"), (3, "the last 3")])
def test_deleting_the_last_records_is_caught_by_the_head(
    chain_db: Database, deleted: int, what: str
) -> None:
    _append(chain_db, 6)
    _sql(chain_db, "DELETE FROM amber_audit WHERE seq > %s", (6 - deleted,))

    result = _verify(chain_db, batch=2)

    assert not result.ok and result.checked == 6 - deleted
    assert (result.first_bad_seq, result.first_bad_audit_id) == (7 - deleted, None)
    verb = "was" if deleted == 1 else "were"
    assert result.problem == (
        f"the head says 6 records but the log ends at {6 - deleted} ({what} {verb} deleted)"
    )


def test_deleting_every_record_is_caught_by_the_head(chain_db: Database) -> None:
    _append(chain_db, 3)
    _sql(chain_db, "DELETE FROM amber_audit")

    result = _verify(chain_db)

    assert result.first_bad_seq == 1
    assert (
        result.problem == "the head says 3 records but the log ends at 0 (the last 3 were deleted)"
    )


def test_a_row_inserted_past_the_head_is_named(chain_db: Database) -> None:
    _append(chain_db, 4)
    _sql(
        chain_db,
        "INSERT INTO amber_audit (seq, at, actor, action, target, reason, detail, prev_hash, hash)"
        " SELECT 5, at, actor, action, target, reason, detail, hash, sha256(hash)"
        " FROM amber_audit WHERE seq = 4",
    )

    result = _verify(chain_db)

    assert not result.ok and result.first_bad_seq == 5
    assert result.first_bad_audit_id == _audit_id(chain_db, 5)
    assert result.problem.startswith("record 5 (audit_id ") and "without the head" in result.problem


def test_reordered_records_are_caught(chain_db: Database) -> None:
    _append(chain_db, 4)
    _sql(chain_db, "UPDATE amber_audit SET seq = -seq WHERE seq IN (2, 3)")
    _sql(chain_db, "UPDATE amber_audit SET seq = CASE seq WHEN -2 THEN 3 ELSE 2 END WHERE seq < 0")

    result = _verify(chain_db)

    assert result.first_bad_seq == 2
    assert result.problem == "record 2's prev_hash does not match record 1"


def test_a_record_out_of_place_is_named(chain_db: Database) -> None:
    _append(chain_db, 3)
    _sql(chain_db, "UPDATE amber_audit SET seq = 0 WHERE seq = 1")

    result = _verify(chain_db)

    assert result.first_bad_seq == 0
    assert "seq 0" in result.problem and "record 1 was expected next" in result.problem


def test_a_head_edited_on_its_own_is_caught(chain_db: Database) -> None:
    _append(chain_db, 3)
    _sql(chain_db, "UPDATE amber_audit_head SET hash = sha256('x')")

    result = _verify(chain_db)

    assert not result.ok and result.first_bad_seq == 3
    assert result.problem.startswith("the head's hash does not match record 3's")


def test_a_missing_head_is_caught_while_records_remain(chain_db: Database) -> None:
    _append(chain_db, 2)
    _sql(chain_db, "DELETE FROM amber_audit_head")

    result = _verify(chain_db)

    assert not result.ok
    assert result.problem == "the chain's head is missing but the log holds 2 records"


def test_an_anchor_catches_a_rewrite_that_the_chain_alone_cannot(chain_db: Database) -> None:
    _append(chain_db, 3)
    anchor = _verify(chain_db).head_hash
    _append(chain_db, 2, start=4)
    assert _verify(chain_db, expect_head=anchor).ok  # the log grew past the anchor: fine
    assert _verify(chain_db, expect_head=AUDIT_GENESIS_HASH).ok

    # Someone with write access rebuilds the whole log and its head consistently.
    _sql(chain_db, "TRUNCATE amber_audit, amber_audit_head")
    chain_db.run(lambda cur: record_audit_txn(cur, _entry(1, reason="nothing to see")))
    _append(chain_db, 4, start=2)

    assert _verify(chain_db).ok
    result = _verify(chain_db, expect_head=anchor)
    assert not result.ok and result.checked == 5
    assert result.first_bad_seq is None
    assert result.problem.startswith(f"the expected head {anchor.hex()} is not in the chain")


def test_concurrent_writers_form_one_gap_free_chain(chain_db: Database) -> None:
    writers, each = 8, 50
    barrier = threading.Barrier(writers, timeout=20)
    errors: list[BaseException] = []

    def write(writer: int) -> None:
        try:
            barrier.wait()
            for n in range(each):
                entry = _entry(n, actor=f"writer-{writer}", target=f"w{writer}-{n}")
                chain_db.run(lambda cur, e=entry: record_audit_txn(cur, e))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    result = _verify(chain_db, batch=64)
    assert result.ok and result.checked == writers * each
    entries = _all(chain_db)
    assert [e.seq for e in entries] == list(range(1, writers * each + 1))
    assert {e.target for e in entries} == {f"w{w}-{n}" for w in range(writers) for n in range(each)}
    # The writers really interleaved: no writer's records form one contiguous run.
    runs = sum(1 for a, b in itertools.pairwise(entries) if a.actor != b.actor)
    assert runs > writers


def test_a_rolled_back_append_leaves_no_gap(chain_db: Database) -> None:
    _append(chain_db, 2)

    def failing(cur: Cursor) -> None:
        record_audit_txn(cur, _entry(3))
        raise RuntimeError("the command failed after auditing")

    with pytest.raises(RuntimeError):
        chain_db.run(failing)
    _append(chain_db, 1, start=4)

    assert _verify(chain_db).ok
    assert [e.target for e in _all(chain_db)] == ["run-1", "run-2", "run-4"]


def test_a_naive_time_is_refused(chain_db: Database) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        chain_db.run(lambda cur: record_audit_txn(cur, _entry(1, at=datetime(2026, 1, 1))))


def test_twenty_thousand_records_verify_in_batches(chain_db: Database) -> None:
    count = 20_000
    began = time.perf_counter()
    _append(chain_db, count)
    appended = time.perf_counter() - began

    began = time.perf_counter()
    result = _verify(chain_db, batch=1000)
    verified = time.perf_counter() - began
    print(f"\nappended {count} audit records in {appended:.2f} s; verified in {verified:.2f} s")

    assert result.ok and result.checked == count
    _sql(chain_db, "UPDATE amber_audit SET reason = 'x' WHERE seq = 19999")
    broken = _verify(chain_db, batch=1000)
    assert broken.first_bad_seq == 19_999 and broken.checked == 19_998


# -- migration 0008 chains the rows written before it ---------------------------------------------


@pytest.fixture
def fresh_db(server_url: str) -> Iterator[Database]:
    """An empty database on the test server, dropped afterwards."""
    name = f"amber_audit_{secrets.token_hex(4)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    info = psycopg.conninfo.conninfo_to_dict(server_url) | {"dbname": name}
    with Database(psycopg.conninfo.make_conninfo("", **info)) as db:
        yield db
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def test_migration_chains_existing_rows_as_the_code_would(fresh_db: Database) -> None:
    migrations = load_migrations(files(history) / "migrations")
    before = [m for m in migrations if m.version < 8]
    assert apply_migrations(fresh_db, "history", before) == list(range(1, 8))
    times = [
        NOW,
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),  # before the epoch
        datetime(2031, 7, 4, 1, 2, 3, 7, tzinfo=UTC) + timedelta(hours=5),
    ]
    legacy = [
        (
            times[n % 3],
            f"ops-{n}",
            "version.promote",
            f"type-{n % 4}",
            "ñ" * n,
            msgpack.packb({"n": n, "blob": bytes([n % 256]) * n}),
        )
        for n in range(300)
    ]

    def insert(cur: Cursor) -> None:
        # Non-UTC session time zone: the encoding must not depend on it.
        cur.execute("SET LOCAL TIME ZONE 'Asia/Kolkata'")
        cur.executemany(
            "INSERT INTO amber_audit (at, actor, action, target, reason, detail)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            legacy,
        )

    fresh_db.run(insert)
    _sql(fresh_db, "DELETE FROM amber_audit WHERE actor = 'ops-7'")  # audit_ids need not be dense

    assert history.migrate(fresh_db)[0] == 8

    result = _verify(fresh_db, batch=64)
    assert result.ok and result.checked == 299 and result.head_seq == 299
    entries = _all(fresh_db)
    assert [e.actor for e in entries] == [f"ops-{n}" for n in range(300) if n != 7]
    fresh_db.run(lambda cur: record_audit_txn(cur, _entry(1)))
    assert _verify(fresh_db).checked == 300 and _verify(fresh_db).ok


def test_migration_of_an_empty_log_starts_at_the_genesis(fresh_db: Database) -> None:
    assert history.migrate(fresh_db)
    assert fresh_db.run(audit_head_txn) == (0, AUDIT_GENESIS_HASH)
    fresh_db.run(lambda cur: record_audit_txn(cur, _entry(1)))
    assert _verify(fresh_db).ok
