"""The engine: sandbox, replay, services, gRPC server, client and worker.

Design: a worker runs every activation in a fresh wasmtime `Store` instantiated from a cached
`InstancePre` of the exact module digest the run is pinned to (fuel, memory and epoch deadline
set every time). A workflow activation replays the whole history in one call and hands back its
full command list, which the host matches position by position (`_replay.activate_workflow`,
the same function for live work and offline replay). The server is stateless: services compose
`history` transaction helpers so that an outcome, its events, the next task and the deletion of
the finished task commit together; long polls wake on LISTEN/NOTIFY.

Rejected: sharing one instance across runs (state would leak between runs); a worker that talks
to PostgreSQL directly (every worker would need database credentials and the server could not
enforce leases); threads running guests in parallel in one process (wasmtime-py keeps the
in-flight host exception in a module global).
"""

from ._activity import ActivityAttempt, ActivityReport, run_activity, run_activity_request
from ._approval_page import ApprovalPage, make_approval_app
from ._approval_sinks import WEBHOOK_ENV, ConsoleSink, WebhookSink
from ._approval_types import (
    ApprovalClosed,
    ApprovalDesk,
    ApprovalView,
    DecisionOutcome,
    InvalidToken,
)
from ._approvals import (
    ApprovalDetail,
    ApprovalService,
    ApprovalSink,
    DecisionRequest,
    IssuedToken,
)
from ._attempts import FailureReport
from ._audit_service import MAX_AUDIT_PAGE, AuditService
from ._bundle import Bundle
from ._client import DEFAULT_TARGET, AmberClient, decode, encode
from ._clock import Clock, ManualClock, SystemClock, from_ms, to_ms
from ._engine import ENGINE_FLAGS, SandboxEngine
from ._errors import CorruptHistory, NotAuthorised, PayloadTooLarge
from ._fastcall import exports as instance_exports
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
)
from ._host import (
    MAX_RECORD_DETAIL,
    ActivationKind,
    ActivityHost,
    HostCallObserver,
    HostCallRecord,
)
from ._http import HttpPolicy, check_capabilities, http_policy
from ._lifecycle import Lifecycle, NewCommand, RunSpec
from ._migration import RunCheck
from ._operators import Operators, token_hash
from ._poison import PoisonPolicy, fingerprint
from ._projection import Projection, project
from ._recording import RecordingSandbox
from ._replay import (
    ActivationStats,
    QueryNotPublished,
    QueryResult,
    WorkflowActivation,
    WorkflowStep,
    activate_workflow,
    answer_query,
)
from ._repro import Repro
from ._runs_service import (
    DEFAULT_TENANT,
    QueryFailed,
    QueryTimedOut,
    RunClosed,
    RunDescription,
    RunService,
    SignalRequest,
    StartRequest,
    StartResult,
)
from ._sandbox import (
    ActivationRequest,
    RawOutput,
    Sandbox,
    SandboxLimits,
    SandboxRunner,
    fresh_store,
)
from ._server import AmberServer, ApprovalPageOptions, migrate_all
from ._settings import EngineSettings, RetryPolicy
from ._status import RemoteError
from ._tasks_service import (
    ClaimedTask,
    HeartbeatAck,
    LeasedTask,
    TaskService,
    WorkflowCompletion,
    idempotency_key,
)
from ._timers_service import TimerService
from ._tracing import JsonLinesExporter, configure_tracing, tracer
from ._triage import NotTroubled, TriageAction, TriageCommand, TriageOutcome, TriageService
from ._worker import DetailedTrace, Worker, WorkerSettings

__all__ = [
    "DEFAULT_TARGET",
    "DEFAULT_TENANT",
    "ENGINE_FLAGS",
    "MAX_AUDIT_PAGE",
    "MAX_RECORD_DETAIL",
    "WEBHOOK_ENV",
    "AbiViolation",
    "ActivationKind",
    "ActivationRequest",
    "ActivationStats",
    "ActivityAttempt",
    "ActivityHost",
    "ActivityReport",
    "AmberClient",
    "AmberServer",
    "ApprovalClosed",
    "ApprovalDesk",
    "ApprovalDetail",
    "ApprovalPage",
    "ApprovalPageOptions",
    "ApprovalService",
    "ApprovalSink",
    "ApprovalView",
    "AuditService",
    "Bundle",
    "ClaimedTask",
    "Clock",
    "ConsoleSink",
    "CorruptHistory",
    "DeadlineExceeded",
    "DecisionOutcome",
    "DecisionRequest",
    "DetailedTrace",
    "EngineSettings",
    "FailureReason",
    "FailureReport",
    "GuestFault",
    "GuestTrap",
    "HeartbeatAck",
    "HostCallObserver",
    "HostCallRecord",
    "HostCrash",
    "HttpPolicy",
    "InvalidToken",
    "IssuedToken",
    "JsonLinesExporter",
    "LeasedTask",
    "Lifecycle",
    "MalformedOutput",
    "ManualClock",
    "MemoryLimitExceeded",
    "ModuleUnavailable",
    "NewCommand",
    "NonDeterminism",
    "NotAuthorised",
    "NotTroubled",
    "Operators",
    "OutOfFuel",
    "PayloadTooLarge",
    "PoisonPolicy",
    "Projection",
    "QueryFailed",
    "QueryNotPublished",
    "QueryResult",
    "QueryTimedOut",
    "RawOutput",
    "RecordingSandbox",
    "RemoteError",
    "Repro",
    "RetryPolicy",
    "RunCheck",
    "RunClosed",
    "RunDescription",
    "RunService",
    "RunSpec",
    "Sandbox",
    "SandboxEngine",
    "SandboxLimits",
    "SandboxRunner",
    "SignalRequest",
    "StartRequest",
    "StartResult",
    "SystemClock",
    "TaskService",
    "TimerService",
    "TriageAction",
    "TriageCommand",
    "TriageOutcome",
    "TriageService",
    "WebhookSink",
    "Worker",
    "WorkerSettings",
    "WorkflowActivation",
    "WorkflowCompletion",
    "WorkflowStep",
    "activate_workflow",
    "answer_query",
    "check_capabilities",
    "configure_tracing",
    "decode",
    "encode",
    "fingerprint",
    "fresh_store",
    "from_ms",
    "http_policy",
    "idempotency_key",
    "instance_exports",
    "make_approval_app",
    "migrate_all",
    "project",
    "run_activity",
    "run_activity_request",
    "to_ms",
    "token_hash",
    "tracer",
]
