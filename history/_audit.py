"""The audit log: one append-only, hash-chained row per operator action, written in the
action's transaction.

Who did what to which target, why, and the details (msgpack). Every record takes the next place
in one gap-free chain, `seq` 1, 2, 3, ..., and stores

    hash = sha256(prev_hash || canonical bytes of the record)

where `prev_hash` is the previous record's hash (32 zero bytes, `AUDIT_GENESIS_HASH`, for record 1).
The canonical bytes are fixed-width or length-prefixed, so no two records encode alike: `seq`
and the time in whole microseconds since the Unix epoch (UTC), each an 8-byte big-endian signed
integer; then actor, action, target, reason (UTF-8) and detail (the stored msgpack bytes), each
as a 4-byte big-endian length followed by its bytes. What is hashed is exactly what is stored
(actor and reason after their truncation). `audit_id` is the table's storage key and is not
hashed: the chain's order is `seq`. Migration 0008 chained the rows written before it, in
audit_id order, with the same encoding in SQL.

Appends are serialised by one head row (`amber_audit_head`: the last record's seq and hash),
updated by `record_audit_txn` inside the caller's transaction. Its row lock is held until that
transaction ends, so concurrent operator commands on any number of servers queue there and the
log stays one chain; a command that rolls back gives its place back. No advisory lock is needed.

What the chain detects (`verify_audit_txn`): a record whose fields were edited (its hash no
longer matches), a record deleted from the middle (a gap in `seq`, or a `prev_hash` that does
not link), the last records deleted (the head names more records than the log holds), records
inserted or reordered without going through the head, and a head edited on its own.

What it does not: someone with write access to the database can rewrite the whole log from any
record onwards *and* the head consistently, recomputing every hash (sha256 needs no secret). The
defence is an external anchor: `AuditVerification.head_hash` is printed by `amber audit verify`
so that operators record it somewhere the database's writers cannot change (a ticket, a log
shipped elsewhere, a notary); passing it back as `expect_head` later fails unless the anchored
record is still in the chain, unchanged, with everything before it. Records appended after the
last anchor are protected only against careless edits. The chain does not say who wrote a
record (no signatures), nor stop deletion: it makes it visible.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from amber.abi import pack, unpack

if TYPE_CHECKING:
    from ._database import Cursor


AUDIT_GENESIS_HASH = bytes(32)
"""The `prev_hash` of record 1."""
AUDIT_VERIFY_BATCH = 5000
"""Records read per query while verifying: memory stays bounded whatever the log's length."""
_MAX_ACTOR = 256
_MAX_REASON = 4096

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_FIXED = struct.Struct(">qq")
_LENGTH = struct.Struct(">I")
_MIN_SEQ = -(2**63)

_COLUMNS = "audit_id, seq, at, actor, action, target, reason, detail, prev_hash, hash"


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
    """When, timezone-aware (hashed to the microsecond, in UTC)."""
    seq: int = 0
    """Its place in the chain, from 1; 0 for an entry not recorded yet."""
    hash: bytes = b""
    """Its chain hash (see the module docstring); empty for an entry not recorded yet."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditVerification:
    """What `verify_audit_txn` found: the whole chain verifies, or where it first breaks."""

    ok: bool
    checked: int
    """Records whose hash and link verified, in chain order (all of them when `ok`)."""
    head_seq: int
    """The number of records the head named when the verification began."""
    head_hash: bytes
    """The head's hash then: record it outside the database and pass it back as `expect_head`."""
    first_bad_seq: int | None = None
    """The first record that is edited, missing or out of place (None when `ok`, or when the
    problem is not one record's, such as a missing head or an unknown anchor)."""
    first_bad_audit_id: int | None = None
    """That record's `audit_id`, when the row is there (a deleted record has none)."""
    problem: str = ""
    """What is wrong, for a person: "record 17 was edited (hash mismatch)"."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Record:
    """A record's hashed content, exactly as stored."""

    seq: int
    at: datetime
    actor: str
    action: str
    target: str
    reason: str
    detail: bytes

    def chain_hash(self, prev_hash: bytes) -> bytes:
        digest = hashlib.sha256(prev_hash)
        digest.update(_FIXED.pack(self.seq, (self.at - _EPOCH) // _MICROSECOND))
        for field in (
            self.actor.encode(),
            self.action.encode(),
            self.target.encode(),
            self.reason.encode(),
            self.detail,
        ):
            digest.update(_LENGTH.pack(len(field)))
            digest.update(field)
        return digest.digest()


def record_audit_txn(cur: Cursor, entry: AuditEntry) -> None:
    """Append `entry` as the next record of the chain, in the caller's transaction.

    It locks the chain's head until that transaction ends, so other appenders wait: call it
    after the command's other locks are taken and keep the rest of the transaction short.
    """
    if entry.at.tzinfo is None:
        raise ValueError("an audit entry's time must be timezone-aware")
    # Creating the head when it is missing lets a wiped log (an emptied test database) start a
    # fresh chain; with records left, record 1 then collides with the one already there.
    cur.execute(
        "INSERT INTO amber_audit_head (id, seq, hash) VALUES (1, 1, %s)"
        " ON CONFLICT (id) DO UPDATE SET seq = amber_audit_head.seq + 1"
        " RETURNING seq, hash",
        (AUDIT_GENESIS_HASH,),
    )
    row = cur.fetchone()
    assert row is not None
    seq, prev_hash = int(row[0]), bytes(row[1])
    record = _Record(
        seq=seq,
        at=entry.at,
        actor=entry.actor[:_MAX_ACTOR],
        action=entry.action,
        target=entry.target,
        reason=entry.reason[:_MAX_REASON],
        detail=pack(entry.detail),
    )
    digest = record.chain_hash(prev_hash)
    cur.execute(
        "INSERT INTO amber_audit"
        " (seq, at, actor, action, target, reason, detail, prev_hash, hash)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            seq,
            record.at,
            record.actor,
            record.action,
            record.target,
            record.reason,
            record.detail,
            prev_hash,
            digest,
        ),
    )
    cur.execute("UPDATE amber_audit_head SET hash = %s WHERE id = 1", (digest,))


def audit_head_txn(cur: Cursor) -> tuple[int, bytes]:
    """The chain's head: how many records it holds and the last one's hash (the value to
    anchor outside the database). An empty log gives `(0, AUDIT_GENESIS_HASH)`."""
    head = _head_txn(cur)
    return head if head is not None else (0, AUDIT_GENESIS_HASH)


def audit_for_txn(cur: Cursor, target: str, *, limit: int = 50) -> list[AuditEntry]:
    """The most recent audit entries about `target`, newest first."""
    cur.execute(
        f"SELECT {_COLUMNS} FROM amber_audit WHERE target = %s ORDER BY seq DESC LIMIT %s",
        (target, limit),
    )
    return [_entry(row) for row in cur.fetchall()]


def list_audit_txn(
    cur: Cursor, *, target: str | None, after_seq: int, limit: int
) -> list[AuditEntry]:
    """Audit entries in chain order after `after_seq`, about `target` or (None) about anything;
    page by passing the last entry's `seq` back."""
    if target is None:
        cur.execute(
            f"SELECT {_COLUMNS} FROM amber_audit WHERE seq > %s ORDER BY seq LIMIT %s",
            (after_seq, limit),
        )
    else:
        cur.execute(
            f"SELECT {_COLUMNS} FROM amber_audit WHERE target = %s AND seq > %s"
            " ORDER BY seq LIMIT %s",
            (target, after_seq, limit),
        )
    return [_entry(row) for row in cur.fetchall()]


def verify_audit_txn(
    cur: Cursor, *, batch: int = AUDIT_VERIFY_BATCH, expect_head: bytes | None = None
) -> AuditVerification:
    """Walk the whole chain in `seq` order, `batch` records per query, recomputing every hash;
    report the first record that is edited, missing or out of place.

    Records appended while it runs are not walked. `expect_head` is a head hash recorded
    earlier outside the database: the verification fails unless some record of the chain still
    has it (the log was not rewritten up to there).
    """
    if batch < 1:
        raise ValueError("batch must be at least 1")
    head = _head_txn(cur)
    head_seq, head_hash = head if head is not None else (0, AUDIT_GENESIS_HASH)
    walk = _Walk(head_seq=head_seq, head_hash=head_hash, expect_head=expect_head)
    # Records up to the head's seq had all committed when the head was read (each append
    # advances the head in its own transaction), so every page below sees all of them.
    import psycopg  # here, not at the top: the audit types are read by clients without a driver

    lower = _MIN_SEQ
    while True:
        cur.execute(
            f"SELECT {_COLUMNS} FROM amber_audit WHERE seq >= %s AND seq <= %s"
            " ORDER BY seq LIMIT %s",
            (lower, head_seq, batch),
        )
        read = 0
        try:
            for row in cur:
                read += 1
                if (broken := walk.step(row)) is not None:
                    return broken
        except psycopg.DataError as exc:  # e.g. a time edited beyond Python's datetime range
            return walk.fail(
                walk.expected, None, f"record {walk.expected} was edited (unreadable: {exc})"
            )
        if read < batch:
            break
        lower = walk.expected
    return walk.finish(cur, head_present=head is not None)


class _Walk:
    """The verification's position in the chain: the next seq expected and the hash before it."""

    def __init__(self, *, head_seq: int, head_hash: bytes, expect_head: bytes | None) -> None:
        self.head_seq = head_seq
        self.head_hash = head_hash
        self.expect_head = expect_head
        self.anchored = expect_head is None or expect_head == AUDIT_GENESIS_HASH
        self.expected = 1
        self.prev_hash = AUDIT_GENESIS_HASH
        self.last_audit_id: int | None = None

    def step(self, row: tuple[Any, ...]) -> AuditVerification | None:
        audit_id, seq, at, actor, action, target, reason, detail, prev_hash, stored = row
        last = self.expected - 1
        if seq > self.expected:
            where = f"seq gap after {last}" if last else f"the log starts at {seq}"
            return self.fail(self.expected, None, f"record {self.expected} is missing ({where})")
        if seq < self.expected:
            return self.fail(
                seq,
                audit_id,
                f"a record with seq {seq} (audit_id {audit_id}) is out of place: record"
                f" {self.expected} was expected next",
            )
        if bytes(prev_hash) != self.prev_hash:
            link = f"record {last}" if last else "the genesis hash"
            return self.fail(seq, audit_id, f"record {seq}'s prev_hash does not match {link}")
        record = _Record(
            seq=seq,
            at=at,
            actor=actor,
            action=action,
            target=target,
            reason=reason,
            detail=bytes(detail),
        )
        if record.chain_hash(self.prev_hash) != bytes(stored):
            return self.fail(seq, audit_id, f"record {seq} was edited (hash mismatch)")
        self.prev_hash = bytes(stored)
        self.last_audit_id = audit_id
        self.expected += 1
        if not self.anchored and self.prev_hash == self.expect_head:
            self.anchored = True
        return None

    def finish(self, cur: Cursor, *, head_present: bool) -> AuditVerification:
        last = self.expected - 1
        if last < self.head_seq:
            gone = self.head_seq - last
            what = "the last record was deleted" if gone == 1 else f"the last {gone} were deleted"
            return self.fail(
                last + 1,
                None,
                f"the head says {self.head_seq} records but the log ends at {last} ({what})",
            )
        if self.prev_hash != self.head_hash:
            if not last:
                return self.fail(None, None, "the empty chain's head hash is not the genesis hash")
            return self.fail(
                last,
                self.last_audit_id,
                f"the head's hash does not match record {last}'s (the head or the record was"
                " rewritten)",
            )
        stray = _stray_txn(cur, head_present=head_present)
        if stray is not None:
            return self.fail(*stray)
        if not self.anchored:
            assert self.expect_head is not None
            return self.fail(
                None,
                None,
                f"the expected head {self.expect_head.hex()} is not in the chain (the log was"
                " rewritten, or the anchor is another log's)",
            )
        return self.result(ok=True)

    def fail(self, seq: int | None, audit_id: int | None, problem: str) -> AuditVerification:
        return self.result(ok=False, seq=seq, audit_id=audit_id, problem=problem)

    def result(
        self, *, ok: bool, seq: int | None = None, audit_id: int | None = None, problem: str = ""
    ) -> AuditVerification:
        return AuditVerification(
            ok=ok,
            checked=self.expected - 1,
            head_seq=self.head_seq,
            head_hash=self.head_hash,
            first_bad_seq=seq,
            first_bad_audit_id=audit_id,
            problem=problem,
        )


def _stray_txn(cur: Cursor, *, head_present: bool) -> tuple[int | None, int | None, str] | None:
    """A row that is not in the chain, inserted past the head (or with no head at all), as
    (its seq, its audit_id, the problem).

    One statement, one snapshot: every append committed by then has both its row and its head.
    """
    cur.execute(
        "SELECT (SELECT count(*) FROM amber_audit), (SELECT seq FROM amber_audit_head WHERE id = 1)"
    )
    row = cur.fetchone()
    assert row is not None
    count, head_seq = int(row[0]), int(row[1] or 0)
    if count == head_seq:
        return None
    if not head_present:
        return None, None, f"the chain's head is missing but the log holds {count} records"
    cur.execute(
        "SELECT seq, audit_id FROM amber_audit WHERE seq IS NULL OR seq > %s"
        " ORDER BY seq NULLS FIRST, audit_id LIMIT 1",
        (head_seq,),
    )
    found = cur.fetchone()
    if found is None:
        return None, None, f"the log holds {count} records but the head says {head_seq}"
    seq, audit_id = found[0], int(found[1])
    return (
        seq,
        audit_id,
        f"record {seq} (audit_id {audit_id}) is not in the chain: it was inserted without the"
        f" head, which says {head_seq} records",
    )


def _head_txn(cur: Cursor) -> tuple[int, bytes] | None:
    cur.execute("SELECT seq, hash FROM amber_audit_head WHERE id = 1")
    row = cur.fetchone()
    return None if row is None else (int(row[0]), bytes(row[1]))


def _entry(row: tuple[Any, ...]) -> AuditEntry:
    _audit_id, seq, at, actor, action, target, reason, detail, _prev_hash, digest = row
    return AuditEntry(
        seq=seq,
        hash=bytes(digest),
        at=at,
        actor=actor,
        action=action,
        target=target,
        reason=reason,
        detail=unpack(bytes(detail), what="an audit record's detail"),
    )
