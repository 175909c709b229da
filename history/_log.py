"""The append-only event log. Every append names the position it expects history to end at."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ._errors import RunNotFound, VersionConflict
from ._event_types import EventType
from ._events import Event, NewEvent
from ._payloads import encode_payload

if TYPE_CHECKING:
    from ._database import Cursor


@dataclass(frozen=True, slots=True, kw_only=True)
class Appended:
    """A run's history size right after an append (for its limits, without reading it again)."""

    last_seq: int
    history_bytes: int
    history_warned: bool


def append_events_txn(
    cur: Cursor,
    run_id: str,
    events: Sequence[NewEvent],
    *,
    expected_last_seq: int | None,
    now: datetime,
    commands: tuple[int, int] | None = None,
) -> Appended:
    """Append `events` after position `expected_last_seq`; returns the history's new size.

    With `expected_last_seq=None` the events go at the current end (for facts that do not
    depend on what the writer read, such as an activity's result); the run row's lock orders
    concurrent writers. `commands=(first, count)` also claims the command indexes
    `[first, first + count)` the events record (`advance_commands_txn`, in the same statement).
    Raises `VersionConflict` if history has moved on (or those indexes are not next),
    `RunNotFound` if the run does not exist.
    """
    if not events:
        if expected_last_seq is None or commands is not None:
            raise ValueError("nothing to append")
        cur.execute(
            "SELECT last_seq, history_bytes, history_warned FROM amber_runs WHERE run_id = %s"
            " FOR UPDATE",
            (run_id,),
        )
        row = cur.fetchone()
        if row is None:
            raise RunNotFound(run_id)
        if row[0] != expected_last_seq:
            raise VersionConflict(run_id, expected_last_seq, int(row[0]))
        return Appended(last_seq=int(row[0]), history_bytes=int(row[1]), history_warned=row[2])
    count = len(events)
    payloads = [encode_payload(event.payload) for event in events]
    size = sum(len(p) for p in payloads)
    params: dict[str, Any] = {
        "run": run_id,
        "count": count,
        "size": size,
        "now": now,
        "expected": expected_last_seq,
        "types": [event.type.value for event in events],
        "payloads": payloads,
        "digests": [event.digest for event in events],
    }
    guards = "" if expected_last_seq is None else " AND last_seq = %(expected)s"
    advance = ""
    if commands is not None:
        params["first_cmd"], params["cmds"] = commands
        advance = ", next_cmd = next_cmd + %(cmds)s"
        guards += " AND next_cmd = %(first_cmd)s"
    # One round trip: the run row's new head, and the events below it. One statement with a
    # fixed number of parameters, however many events (a multi-row VALUES list would hit
    # PostgreSQL's 65,535-parameter limit at ~11,000 events).
    cur.execute(
        "WITH u AS (UPDATE amber_runs SET last_seq = last_seq + %(count)s,"
        f" history_bytes = history_bytes + %(size)s, updated_at = %(now)s{advance}"
        f" WHERE run_id = %(run)s{guards} RETURNING last_seq, history_bytes, history_warned),"
        " i AS (INSERT INTO amber_events (run_id, seq, type, payload, digest, created_at)"
        " SELECT %(run)s, (u.last_seq - %(count)s + e.n)::int, e.type, e.payload, e.digest,"
        " %(now)s FROM u, unnest(%(types)s::text[], %(payloads)s::bytea[], %(digests)s::text[])"
        " WITH ORDINALITY AS e(type, payload, digest, n))"
        " SELECT last_seq, history_bytes, history_warned FROM u",
        params,
    )
    row = cur.fetchone()
    if row is None:
        cur.execute("SELECT last_seq FROM amber_runs WHERE run_id = %s", (run_id,))
        actual = cur.fetchone()
        if actual is None:
            raise RunNotFound(run_id)
        raise VersionConflict(run_id, expected_last_seq or 0, int(actual[0]))
    return Appended(last_seq=int(row[0]), history_bytes=int(row[1]), history_warned=bool(row[2]))


def read_events_txn(
    cur: Cursor, run_id: str, *, after_seq: int = 0, limit: int | None = None
) -> list[Event]:
    """Events of a run with position > `after_seq`, in order."""
    cur.execute(
        "SELECT seq, type, payload, digest, created_at FROM amber_events"
        " WHERE run_id = %s AND seq > %s ORDER BY seq LIMIT %s",
        (run_id, after_seq, limit),
    )
    return [
        Event(
            run_id=run_id,
            seq=int(seq),
            type=EventType(type_),
            raw=bytes(payload),
            digest=str(digest),
            created_at=created_at,
        )
        for seq, type_, payload, digest, created_at in cur.fetchall()
    ]
