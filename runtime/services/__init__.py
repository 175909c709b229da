"""The server's transaction steps over `amber.history` and `amber.versions`: runs, tasks, timers,
lifecycle, attempts and poison, migration, reset, triage, audit, notifications.

Rule: imports `model` only (never wasmtime, gRPC or `replay`); public methods own their
transactions, `*_txn` helpers compose inside one.
"""

from __future__ import annotations

from ._approvals import resolve_approval_txn
from ._audit import MAX_AUDIT_PAGE, AuditService
from ._credentials import ROLES, TOKEN_PREFIX, CredentialService, Issued, credential_hash
from ._lifecycle import Lifecycle, RunSpec, RunWatch, Wake
from ._migration import MigrationService
from ._notify import Notifier, poke
from ._poison import fingerprint
from ._recorder import Claim, Report
from ._runs import MAX_REASON_LENGTH, RunService, check_queue, find_run_txn
from ._stats import HealthCounter
from ._tasks import TaskService
from ._timers import TimerService
from ._triage import TriageService

__all__ = [
    "MAX_AUDIT_PAGE",
    "MAX_REASON_LENGTH",
    "ROLES",
    "TOKEN_PREFIX",
    "AuditService",
    "Claim",
    "CredentialService",
    "HealthCounter",
    "Issued",
    "Lifecycle",
    "MigrationService",
    "Notifier",
    "Report",
    "RunService",
    "RunSpec",
    "RunWatch",
    "TaskService",
    "TimerService",
    "TriageService",
    "Wake",
    "check_queue",
    "credential_hash",
    "find_run_txn",
    "fingerprint",
    "poke",
    "resolve_approval_txn",
]
