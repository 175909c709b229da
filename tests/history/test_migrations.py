"""Migrations on a real PostgreSQL: each applies exactly once, even with concurrent starters, and
a numbering gap is refused before anything runs."""

from __future__ import annotations

import secrets
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from amber import history, versions
from amber.history import Database, Migration, apply_migrations, load_migrations
from tests.conftest import ROOT, wait_for

# Each creates a table without IF NOT EXISTS: applying one twice is an error, not a no-op.
SYNTHETIC = [
    Migration(version=n, name=f"step_{n}", sql=f"CREATE TABLE synthetic_{n} (id int)")
    for n in (1, 2, 3)
]


def _with_database(url: str, name: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo("", **info)


@pytest.fixture
def fresh_url(server_url: str) -> Iterator[str]:
    """An empty database on the test server, dropped afterwards."""
    name = f"amber_migrations_{secrets.token_hex(4)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield _with_database(server_url, name)
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _bookkeeping(url: str) -> list[tuple[str, int, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT component, version, name FROM amber_schema_migrations"
            " ORDER BY component, version"
        ).fetchall()
    return [(str(c), int(v), str(n)) for c, v, n in rows]


def _tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    return {str(row[0]) for row in rows}


def test_the_session_schema_is_fully_applied(db: Database) -> None:
    assert history.migrate(db) == []
    assert versions.migrate(db) == []
    recorded = _bookkeeping(db.dsn)
    assert ("history", 1, "core") in recorded
    assert ("versions", 1, "modules") in recorded
    assert len(recorded) == len(set(recorded))


def _version_files() -> list[str]:
    return sorted(p.name for p in (ROOT / "versions" / "migrations").glob("*.sql"))


def _history_files() -> list[str]:
    return sorted(p.name for p in (ROOT / "history" / "migrations").glob("*.sql"))


def test_migrations_apply_once_then_never_again(fresh_url: str) -> None:
    db = Database(fresh_url)  # apply_migrations uses its own connections; no pool needed

    assert history.migrate(db) == list(range(1, len(_history_files()) + 1))
    assert versions.migrate(db) == list(range(1, len(_version_files()) + 1))
    assert apply_migrations(db, "synthetic", SYNTHETIC) == [1, 2, 3]

    assert history.migrate(db) == []
    assert versions.migrate(db) == []
    assert apply_migrations(db, "synthetic", SYNTHETIC) == []
    assert {"amber_runs", "amber_events", "amber_tasks", "amber_modules"} <= _tables(fresh_url)
    assert [r for r in _bookkeeping(fresh_url) if r[0] == "synthetic"] == [
        ("synthetic", n, f"step_{n}") for n in (1, 2, 3)
    ]


def test_a_later_migration_is_applied_on_its_own(fresh_url: str) -> None:
    db = Database(fresh_url)
    assert apply_migrations(db, "synthetic", SYNTHETIC[:2]) == [1, 2]
    assert apply_migrations(db, "synthetic", SYNTHETIC) == [3]
    assert {"synthetic_1", "synthetic_2", "synthetic_3"} <= _tables(fresh_url)


def test_a_failing_migration_is_not_recorded(fresh_url: str) -> None:
    db = Database(fresh_url)
    broken = [*SYNTHETIC[:1], Migration(version=2, name="broken", sql="CREATE TABLE (")]

    with pytest.raises(psycopg.errors.SyntaxError):
        apply_migrations(db, "synthetic", broken)

    assert [r[1] for r in _bookkeeping(fresh_url) if r[0] == "synthetic"] == [1]
    assert apply_migrations(db, "synthetic", SYNTHETIC) == [2, 3]


def _write(folder: Path, *names: str) -> Path:
    folder.mkdir()
    for name in names:
        (folder / name).write_text(f"-- {name}\nSELECT 1;\n", encoding="utf-8")
    return folder


def test_load_migrations_reads_numbered_files_in_order(tmp_path: Path) -> None:
    folder = _write(
        tmp_path / "m", "0002_second.sql", "0001_first.sql", "README.md", "0003_x.sql.bak"
    )

    loaded = load_migrations(folder)

    assert [(m.version, m.name) for m in loaded] == [(1, "first"), (2, "second")]
    assert loaded[0].sql == "-- 0001_first.sql\nSELECT 1;\n"


@pytest.mark.parametrize(
    ("names", "missing"),
    [
        (("0001_a.sql", "0003_c.sql"), "0002"),
        (("0002_b.sql", "0003_c.sql"), "0001"),
        (("0001_a.sql", "0002_b.sql", "0004_d.sql"), "0003"),
    ],
)
def test_load_migrations_refuses_a_gap(
    tmp_path: Path, names: tuple[str, ...], missing: str
) -> None:
    with pytest.raises(ValueError, match=f"migration {missing} is missing"):
        load_migrations(_write(tmp_path / "m", *names))


def test_load_migrations_refuses_two_files_with_one_number(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        load_migrations(_write(tmp_path / "m", "0001_a.sql", "0001_b.sql"))


def test_concurrent_starters_apply_each_migration_exactly_once(fresh_url: str) -> None:
    # The bookkeeping table is created first, alone: concurrent creation of that one table is a
    # known bug (test_concurrent_starters_survive_the_bookkeeping_table_race) that would make this
    # test fail at random. Every migration is still unapplied when the starters race.
    assert apply_migrations(Database(fresh_url), "history", []) == []
    starters = 4
    barrier = threading.Barrier(starters, timeout=20)
    applied: list[list[tuple[str, int]]] = [[] for _ in range(starters)]
    errors: list[BaseException] = []

    def start(index: int) -> None:
        db = Database(fresh_url)
        try:
            barrier.wait()
            for component, migrate in (
                ("history", history.migrate),
                ("versions", versions.migrate),
                ("synthetic", lambda d: apply_migrations(d, "synthetic", SYNTHETIC)),
            ):
                applied[index] += [(component, v) for v in migrate(db)]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(starters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert not any(t.is_alive() for t in threads)
    assert errors == []
    counts = Counter(entry for per_starter in applied for entry in per_starter)
    assert counts == {
        **{("history", v): 1 for v in range(1, len(_history_files()) + 1)},
        **{("versions", v): 1 for v in range(1, len(_version_files()) + 1)},
        ("synthetic", 1): 1,
        ("synthetic", 2): 1,
        ("synthetic", 3): 1,
    }
    assert [(c, v) for c, v, _ in _bookkeeping(fresh_url)] == sorted(counts)


def _waiting_for_a_lock(conn: psycopg.Connection[tuple[object, ...]], query: str) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND query LIKE %s",
        (f"%{query}%",),
    ).fetchone()
    return row is not None and row[0] == 1


def test_concurrent_starters_survive_the_bookkeeping_table_race(fresh_url: str) -> None:
    """Stage the race deterministically: starter A has created the bookkeeping table but not yet
    committed; starter B checks IF NOT EXISTS (A's table is invisible), then is held on pg_class
    until A has committed, so B's own CREATE finds the table already there."""
    with (
        psycopg.connect(fresh_url, autocommit=True) as watcher,
        psycopg.connect(fresh_url) as starter_a,
        psycopg.connect(fresh_url) as holder,
    ):
        starter_a.execute(
            "CREATE TABLE amber_schema_migrations (component text NOT NULL,"
            " version integer NOT NULL, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (component, version))"
        )
        holder.execute("LOCK TABLE pg_catalog.pg_class IN SHARE MODE")
        outcome: list[object] = []

        def starter_b() -> None:
            try:
                outcome.append(history.migrate(Database(fresh_url)))
            except Exception as exc:
                outcome.append(exc)

        thread = threading.Thread(target=starter_b)
        thread.start()
        try:
            wait_for(
                lambda: _waiting_for_a_lock(watcher, "CREATE TABLE IF NOT EXISTS amber_schema"),
                10,
                "starter B to block on pg_class",
            )
        finally:
            starter_a.commit()
            holder.rollback()
            thread.join(timeout=20)

    assert outcome == [list(range(1, len(_history_files()) + 1))]
