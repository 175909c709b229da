"""The audit log is append-only in PostgreSQL: UPDATE and DELETE of audit records are refused
for the role the engine connects with, and the engine itself never needs them."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from amber.history import AuditEntry, Database, record_audit_txn


def _record(db: Database, n: int) -> None:
    for i in range(n):
        entry = AuditEntry(
            actor="ops", action="test.append", target=f"t{i}", reason="", detail={},
            at=datetime.now(UTC),
        )  # fmt: skip
        db.run(lambda cur, e=entry: record_audit_txn(cur, e))


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE amber_audit SET actor = 'mallory' WHERE seq = 2",
        "UPDATE amber_audit SET reason = 'nothing to see'",
        "DELETE FROM amber_audit WHERE seq = 3",
        "DELETE FROM amber_audit",
    ],
)
def test_updates_and_deletes_are_refused_and_change_nothing(db: Database, statement: str) -> None:
    _record(db, 3)
    with psycopg.connect(db.dsn) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            conn.execute(statement)
        conn.rollback()
        rows = conn.execute("SELECT seq, actor, reason FROM amber_audit ORDER BY seq").fetchall()
    assert rows == [(1, "ops", ""), (2, "ops", ""), (3, "ops", "")]


def test_appending_still_works(db: Database) -> None:
    _record(db, 2)
    with psycopg.connect(db.dsn) as conn:
        (count,) = conn.execute("SELECT count(*) FROM amber_audit").fetchone() or (0,)
    assert count == 2
