"""The raw single-row commit rate of a PostgreSQL server: the ceiling a durable engine works under.

A durable workflow engine commits at least a few times per workflow (start, each activity's
result, completion: about K+2 for K activities), so `commits/s ÷ (K+2)` bounds the workflows/s any
design can reach on that database with one connection's worth of commit latency. `amber bench`
measures it on the same server, in the same run, to report Amber's throughput as a fraction of it.

The loop inserts one row per transaction into a *regular* table on one connection. A temporary
table would be the obvious choice, but a transaction that writes only temporary tables writes no
WAL of its own, and PostgreSQL then does not wait for the commit record to reach the disk — it
would measure memory speed, not what a durable commit costs. The table is named per run and
dropped at the end. The statements address the database server, not Amber's store, which is why
they are here and not in `history/`.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any, Final

import psycopg
from psycopg import sql

_SETTINGS: Final = ("fsync", "synchronous_commit", "wal_sync_method", "commit_delay")


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitRate:
    """Single-connection `INSERT` + `COMMIT` round trips per second on one server."""

    commits: int
    seconds: float
    commits_per_s: float
    settings: dict[str, str]
    """The server settings that decide what a commit costs (`fsync`, `synchronous_commit`…)."""

    def to_json(self) -> dict[str, Any]:
        """The figures as they go into the bench JSON."""
        return {
            "commits_per_s": round(self.commits_per_s, 1),
            "commits": self.commits,
            "seconds": round(self.seconds, 3),
            "method": "one connection, INSERT of one row + COMMIT into a regular (WAL-logged)"
            " table, for the duration",
            "settings": self.settings,
        }


def measure_commit_rate(url: str, seconds: float) -> CommitRate:
    """Commit single-row inserts for `seconds` on `url`'s database and return the rate.

    Use it while the system under test is idle: it competes with it for the disk's flushes.
    """
    table = sql.Identifier(f"amber_bench_commit_probe_{secrets.token_hex(4)}")
    with psycopg.connect(url) as conn:
        settings = {name: str(_show(conn, name)) for name in _SETTINGS}
        conn.execute(sql.SQL("CREATE TABLE {} (n bigint NOT NULL)").format(table))
        conn.commit()
        insert = sql.SQL("INSERT INTO {} (n) VALUES (%s)").format(table)
        try:
            commits = 0
            began = time.perf_counter()
            elapsed = 0.0
            while elapsed < seconds:
                conn.execute(insert, (commits,))
                conn.commit()
                commits += 1
                elapsed = time.perf_counter() - began
        finally:
            conn.rollback()
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
            conn.commit()
    return CommitRate(
        commits=commits,
        seconds=elapsed,
        commits_per_s=commits / elapsed if elapsed else 0.0,
        settings=settings,
    )


def _show(conn: psycopg.Connection[Any], name: str) -> Any:
    row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
    return row[0] if row else None
