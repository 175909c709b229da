"""Deduplication of signal deliveries, and the record of deliveries that changed nothing.

A delivery that arrives twice (a retried signal, a timer fired twice, a late or stale report)
must leave the run unchanged — but an operator should be able to see that it happened, so it is
written here instead of into the run's history.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._database import Cursor


def claim_signal_id_txn(cur: Cursor, run_id: str, request_id: str, seq: int) -> bool:
    """Remember a signal's request id; False if this run already received it."""
    cur.execute(
        "INSERT INTO amber_signal_ids (run_id, request_id, seq) VALUES (%s, %s, %s)"
        " ON CONFLICT DO NOTHING",
        (run_id, request_id, seq),
    )
    return cur.rowcount == 1


def inherit_signal_ids_txn(cur: Cursor, from_run_id: str, to_run_id: str) -> int:
    """Let a run that continues another (continue-as-new, reset) refuse the request ids its
    predecessor already received: a client retrying a signal after the chain moved on must not
    deliver it twice. Inherited ids carry seq 0 (received by an earlier run of the chain)."""
    cur.execute(
        "INSERT INTO amber_signal_ids (run_id, request_id, seq)"
        " SELECT %s, request_id, 0 FROM amber_signal_ids WHERE run_id = %s"
        " ON CONFLICT DO NOTHING",
        (to_run_id, from_run_id),
    )
    return cur.rowcount


@dataclass(frozen=True, slots=True, kw_only=True)
class Discarded:
    """A delivery recorded for audit but not applied."""

    run_id: str | None
    kind: str
    """duplicate_signal, duplicate_timer_fire, stale_report, late_report, ..."""
    detail: str
    created_at: datetime


def record_discarded_txn(cur: Cursor, discarded: Discarded) -> None:
    cur.execute(
        "INSERT INTO amber_discarded (run_id, kind, detail, created_at) VALUES (%s, %s, %s, %s)",
        (discarded.run_id, discarded.kind, discarded.detail[:4096], discarded.created_at),
    )


def run_discarded_txn(cur: Cursor, run_id: str, *, limit: int = 20) -> list[Discarded]:
    """The most recent discarded deliveries of a run, newest first."""
    cur.execute(
        "SELECT run_id::text, kind, detail, created_at FROM amber_discarded WHERE run_id = %s"
        " ORDER BY discarded_id DESC LIMIT %s",
        (run_id, limit),
    )
    return [Discarded(run_id=r[0], kind=r[1], detail=r[2], created_at=r[3]) for r in cur.fetchall()]
