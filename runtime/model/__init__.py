"""What the runtime's parts say to each other: wire-level dataclasses, errors, faults, settings,
the clock, and the pure projection of a history into recorded commands.

Rule: no I/O and no heavy imports (no wasmtime, gRPC, psycopg or Flask at import time); it
imports only `amber.abi`, `amber.history` and `amber.versions` types. Every other sub-package may
import it.
"""

from __future__ import annotations

from ._approvals import (
    ApprovalDesk,
    ApprovalDetail,
    ApprovalView,
    DecisionOutcome,
    DecisionRequest,
    IssuedToken,
)
from ._bundle import MAX_BUNDLE_FAILURES, MAX_BUNDLE_REPRO_BYTES, Bundle
from ._checks import RunCheck
from ._clock import Clock, ManualClock, SystemClock, from_ms, from_ms_or_none, to_ms, to_ms_or_zero
from ._errors import (
    ApprovalClosed,
    CorruptHistory,
    InvalidToken,
    NotAuthenticated,
    NotAuthorised,
    NotTroubled,
    PayloadTooLarge,
    PrincipalNotFound,
    QueryFailed,
    QueryTimedOut,
    RemoteError,
    RunClosed,
    RunFailed,
    RunStillOpen,
    SandboxBusy,
)
from ._faults import (
    AbiViolation,
    DeadlineExceeded,
    FailureReason,
    GuestFault,
    GuestTrap,
    HostCrash,
    MalformedOutput,
    MemoryLimitExceeded,
    ModuleUnavailable,
    NonDeterminism,
    OutOfFuel,
    StackOverflow,
)
from ._ids import new_run_id
from ._projection import Projection, RecordedCommand, extend_projection, project
from ._runs import (
    DEFAULT_TENANT,
    MAX_HISTORY_PAGE,
    RunDescription,
    SignalRequest,
    StartRequest,
    StartResult,
)
from ._settings import EngineSettings, PoisonPolicy, RetryPolicy
from ._status import QueueDepth, ServerStatus, WorkerSeen
from ._tasks import (
    MAX_NEW_COMMANDS,
    ActivationStats,
    ClaimedTask,
    FailureReport,
    HeartbeatAck,
    LeasedTask,
    NewCommand,
    Recorded,
    Reported,
    ThenWorkflow,
    WorkflowCompletion,
    idempotency_key,
)
from ._throttle import THROTTLE_LIMIT, Throttle, source_of
from ._triage import TriageAction, TriageCommand, TriageOutcome
from ._wakeup import Wakeup

__all__ = [
    "DEFAULT_TENANT",
    "MAX_BUNDLE_FAILURES",
    "MAX_BUNDLE_REPRO_BYTES",
    "MAX_HISTORY_PAGE",
    "MAX_NEW_COMMANDS",
    "THROTTLE_LIMIT",
    "AbiViolation",
    "ActivationStats",
    "ApprovalClosed",
    "ApprovalDesk",
    "ApprovalDetail",
    "ApprovalView",
    "Bundle",
    "ClaimedTask",
    "Clock",
    "CorruptHistory",
    "DeadlineExceeded",
    "DecisionOutcome",
    "DecisionRequest",
    "EngineSettings",
    "FailureReason",
    "FailureReport",
    "GuestFault",
    "GuestTrap",
    "HeartbeatAck",
    "HostCrash",
    "InvalidToken",
    "IssuedToken",
    "LeasedTask",
    "MalformedOutput",
    "ManualClock",
    "MemoryLimitExceeded",
    "ModuleUnavailable",
    "NewCommand",
    "NonDeterminism",
    "NotAuthenticated",
    "NotAuthorised",
    "NotTroubled",
    "OutOfFuel",
    "PayloadTooLarge",
    "PoisonPolicy",
    "PrincipalNotFound",
    "Projection",
    "QueryFailed",
    "QueryTimedOut",
    "QueueDepth",
    "Recorded",
    "RecordedCommand",
    "RemoteError",
    "Reported",
    "RetryPolicy",
    "RunCheck",
    "RunClosed",
    "RunDescription",
    "RunFailed",
    "RunStillOpen",
    "SandboxBusy",
    "ServerStatus",
    "SignalRequest",
    "StackOverflow",
    "StartRequest",
    "StartResult",
    "SystemClock",
    "ThenWorkflow",
    "Throttle",
    "TriageAction",
    "TriageCommand",
    "TriageOutcome",
    "Wakeup",
    "WorkerSeen",
    "WorkflowCompletion",
    "extend_projection",
    "from_ms",
    "from_ms_or_none",
    "idempotency_key",
    "new_run_id",
    "project",
    "source_of",
    "to_ms",
    "to_ms_or_zero",
]
