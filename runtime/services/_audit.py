"""The operator-facing side of the audit log: read it, and verify its hash chain.

Records are not written here: every audited command appends its own record inside its own
transaction (`history.record_audit_txn`), so the record exists exactly when the action does.
"""

from __future__ import annotations

from amber.abi import InvalidInput
from amber.history import (
    AUDIT_VERIFY_BATCH,
    AuditEntry,
    AuditVerification,
    Database,
    audit_head_txn,
    list_audit_txn,
    verify_audit_txn,
)

MAX_AUDIT_PAGE = 1000
"""Entries returned by one `AuditService.list` call; page with `after_seq`."""
_HASH_BYTES = 32


class AuditService:
    """List the audit log, show its head, and verify that no record was edited or deleted.

    Public methods own their transactions.
    """

    def __init__(self, db: Database) -> None:
        self._db = db

    def verify(
        self, expect_head: bytes | None = None, *, batch: int = AUDIT_VERIFY_BATCH
    ) -> AuditVerification:
        """Recompute the whole chain (streamed, `batch` records per query) and report the first
        bad record. `expect_head` is a head hash recorded earlier outside the database: it must
        still be in the chain, which catches a log rewritten wholesale."""
        if expect_head is not None and len(expect_head) != _HASH_BYTES:
            raise InvalidInput(f"an expected head hash is {_HASH_BYTES} bytes (64 hex digits)")
        if batch < 1:
            raise InvalidInput("batch must be at least 1")
        return self._db.run(lambda cur: verify_audit_txn(cur, batch=batch, expect_head=expect_head))

    def head(self) -> tuple[int, bytes]:
        """The number of records in the chain and the last one's hash: the value an operator
        records elsewhere as an anchor for later verifications."""
        return self._db.run(audit_head_txn)

    def list(self, target: str | None, limit: int, after_seq: int = 0) -> list[AuditEntry]:
        """Entries in chain order after `after_seq`, about `target` (a run id, a workflow type,
        a version digest) or, with None, about anything."""
        if not 1 <= limit <= MAX_AUDIT_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_AUDIT_PAGE}")
        if after_seq < 0:
            raise InvalidInput("after_seq must not be negative")
        return self._db.run(
            lambda cur: list_audit_txn(cur, target=target, after_seq=after_seq, limit=limit)
        )
