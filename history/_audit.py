"""The audit log: one append-only row per operator action, written in the action's transaction.

Who did what to which target, why, and the details (msgpack). Rows are never updated or
deleted; issue #6 adds a hash chain so that an edit or a deletion can be detected.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgpack

from ._database import Cursor


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """One operator action."""

    actor: str
    action: str
    """What was done: version.promote, version.ramp, run.cancel, run.migrate, ..."""
    target: str
    """What it was done to: a workflow type, a version digest, a run id."""
    reason: str
    detail: dict[str, Any]
    at: datetime


def record_audit_txn(cur: Cursor, entry: AuditEntry) -> None:
    cur.execute(
        "INSERT INTO amber_audit (at, actor, action, target, reason, detail)"
        " VALUES (%s, %s, %s, %s, %s, %s)",
        (
            entry.at,
            entry.actor[:256],
            entry.action,
            entry.target,
            entry.reason[:4096],
            msgpack.packb(entry.detail, use_bin_type=True),
        ),
    )


def audit_for_txn(cur: Cursor, target: str, *, limit: int = 50) -> list[AuditEntry]:
    """The most recent audit entries about `target`, newest first."""
    cur.execute(
        "SELECT at, actor, action, target, reason, detail FROM amber_audit WHERE target = %s"
        " ORDER BY audit_id DESC LIMIT %s",
        (target, limit),
    )
    return [
        AuditEntry(
            at=at,
            actor=actor,
            action=action,
            target=tgt,
            reason=reason,
            detail=msgpack.unpackb(bytes(detail), raw=False),
        )
        for at, actor, action, tgt, reason, detail in cur.fetchall()
    ]
