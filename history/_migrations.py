"""Ordered raw-SQL migrations, applied automatically at start-up.

Each package that owns tables keeps `NNNN_name.sql` files in its own `migrations/` folder and
applies them under its own component name. Concurrent starters are safe without advisory locks (kept
out of the SQL so a failover or a sharded store changes nothing): each migration first inserts its
bookkeeping row with ON CONFLICT DO NOTHING, so a second starter blocks on the primary key until the
first commits, then inserts nothing and skips the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.resources.abc import Traversable

import psycopg
from psycopg import errors as pgerrors

from ._database import Database

_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")
_BOOKKEEPING = """
CREATE TABLE IF NOT EXISTS amber_schema_migrations (
    component  text NOT NULL,
    version    integer NOT NULL,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (component, version)
)
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    """One numbered SQL file."""

    version: int
    name: str
    sql: str


def load_migrations(folder: Traversable) -> list[Migration]:
    """Read `NNNN_name.sql` files from a package folder, in order; gaps are an error."""
    found = []
    for entry in folder.iterdir():
        match = _FILE.fullmatch(entry.name)
        if match:
            found.append(
                Migration(
                    version=int(match.group(1)), name=match.group(2), sql=entry.read_text("utf-8")
                )
            )
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"two migrations share a number in {folder}")
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise ValueError(f"migration {expected:04d} is missing in {folder}")
    return found


def _ensure_bookkeeping(db: Database) -> None:
    # Two starters racing on CREATE TABLE IF NOT EXISTS can make the loser fail on the table's
    # row type or name; by the time it retries, the table exists.
    for attempt in range(1, 4):
        try:
            with psycopg.connect(db.dsn, autocommit=True) as conn:
                conn.execute(_BOOKKEEPING)
            return
        except (pgerrors.UniqueViolation, pgerrors.DuplicateTable, pgerrors.DuplicateObject):
            if attempt == 3:
                raise


def apply_migrations(db: Database, component: str, migrations: list[Migration]) -> list[int]:
    """Apply the migrations of `component` that are not applied yet; return their versions."""
    _ensure_bookkeeping(db)
    applied: list[int] = []
    with psycopg.connect(db.dsn) as conn:
        for migration in migrations:
            with conn.transaction():
                claimed = conn.execute(
                    "INSERT INTO amber_schema_migrations (component, version, name)"
                    " VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                    (component, migration.version, migration.name),
                ).rowcount
                if claimed:
                    conn.execute(migration.sql.encode("utf-8"))
                    applied.append(migration.version)
    return applied
