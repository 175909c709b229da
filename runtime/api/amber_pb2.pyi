from collections.abc import Iterable as _Iterable
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from google.protobuf.internal import containers as _containers

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorInfo(_message.Message):
    __slots__ = ("message", "non_retryable", "type")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NON_RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    type: str
    message: str
    non_retryable: bool
    def __init__(self, type: str | None = ..., message: str | None = ..., non_retryable: bool | None = ...) -> None: ...

class RunInfo(_message.Message):
    __slots__ = ("closed_ms", "created_ms", "digest", "error", "input", "last_seq", "queue", "result", "run_id", "status", "tenant", "updated_ms", "workflow_id", "workflow_type")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_MS_FIELD_NUMBER: _ClassVar[int]
    CLOSED_MS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    tenant: str
    workflow_id: str
    workflow_type: str
    digest: str
    status: str
    input: bytes
    result: bytes
    error: ErrorInfo
    last_seq: int
    created_ms: int
    updated_ms: int
    closed_ms: int
    queue: str
    def __init__(self, run_id: str | None = ..., tenant: str | None = ..., workflow_id: str | None = ..., workflow_type: str | None = ..., digest: str | None = ..., status: str | None = ..., input: bytes | None = ..., result: bytes | None = ..., error: ErrorInfo | _Mapping | None = ..., last_seq: int | None = ..., created_ms: int | None = ..., updated_ms: int | None = ..., closed_ms: int | None = ..., queue: str | None = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("digest", "payload", "seq", "time_ms", "type")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    seq: int
    type: str
    payload: bytes
    digest: str
    time_ms: int
    def __init__(self, seq: int | None = ..., type: str | None = ..., payload: bytes | None = ..., digest: str | None = ..., time_ms: int | None = ...) -> None: ...

class StartRunRequest(_message.Message):
    __slots__ = ("input", "queue", "tenant", "version", "workflow_id", "workflow_type")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    workflow_type: str
    workflow_id: str
    input: bytes
    version: str
    queue: str
    def __init__(self, tenant: str | None = ..., workflow_type: str | None = ..., workflow_id: str | None = ..., input: bytes | None = ..., version: str | None = ..., queue: str | None = ...) -> None: ...

class StartRunResponse(_message.Message):
    __slots__ = ("already_started", "run")
    RUN_FIELD_NUMBER: _ClassVar[int]
    ALREADY_STARTED_FIELD_NUMBER: _ClassVar[int]
    run: RunInfo
    already_started: bool
    def __init__(self, run: RunInfo | _Mapping | None = ..., already_started: bool | None = ...) -> None: ...

class DescribeRunRequest(_message.Message):
    __slots__ = ("run_id", "tenant")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    tenant: str
    def __init__(self, run_id: str | None = ..., tenant: str | None = ...) -> None: ...

class TaskInfo(_message.Message):
    __slots__ = ("attempt", "cmd", "consecutive_failures", "has_cmd", "kind", "last_failure", "lease_expires_ms", "lease_owner", "max_attempts", "name", "state", "task_id", "visible_ms")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CMD_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    VISIBLE_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_OWNER_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_MS_FIELD_NUMBER: _ClassVar[int]
    CONSECUTIVE_FAILURES_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILURE_FIELD_NUMBER: _ClassVar[int]
    HAS_CMD_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    kind: str
    name: str
    cmd: int
    state: str
    attempt: int
    max_attempts: int
    visible_ms: int
    lease_owner: str
    lease_expires_ms: int
    consecutive_failures: int
    last_failure: str
    has_cmd: bool
    def __init__(self, task_id: int | None = ..., kind: str | None = ..., name: str | None = ..., cmd: int | None = ..., state: str | None = ..., attempt: int | None = ..., max_attempts: int | None = ..., visible_ms: int | None = ..., lease_owner: str | None = ..., lease_expires_ms: int | None = ..., consecutive_failures: int | None = ..., last_failure: str | None = ..., has_cmd: bool | None = ...) -> None: ...

class FailureInfo(_message.Message):
    __slots__ = ("attempt", "cmd", "digest", "fuel_used", "has_cmd", "kind", "memory_bytes", "message", "reason", "task_id", "time_ms", "trap_code", "worker")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CMD_FIELD_NUMBER: _ClassVar[int]
    HAS_CMD_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TRAP_CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FUEL_USED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    kind: str
    cmd: int
    has_cmd: bool
    attempt: int
    digest: str
    reason: str
    trap_code: str
    message: str
    fuel_used: int
    memory_bytes: int
    worker: str
    time_ms: int
    def __init__(self, task_id: int | None = ..., kind: str | None = ..., cmd: int | None = ..., has_cmd: bool | None = ..., attempt: int | None = ..., digest: str | None = ..., reason: str | None = ..., trap_code: str | None = ..., message: str | None = ..., fuel_used: int | None = ..., memory_bytes: int | None = ..., worker: str | None = ..., time_ms: int | None = ...) -> None: ...

class DescribeRunResponse(_message.Message):
    __slots__ = ("recent_failures", "run", "tasks")
    RUN_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    RECENT_FAILURES_FIELD_NUMBER: _ClassVar[int]
    run: RunInfo
    tasks: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    recent_failures: _containers.RepeatedCompositeFieldContainer[FailureInfo]
    def __init__(self, run: RunInfo | _Mapping | None = ..., tasks: _Iterable[TaskInfo | _Mapping] | None = ..., recent_failures: _Iterable[FailureInfo | _Mapping] | None = ...) -> None: ...

class GetHistoryRequest(_message.Message):
    __slots__ = ("after_seq", "run_id", "tenant")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    after_seq: int
    tenant: str
    def __init__(self, run_id: str | None = ..., after_seq: int | None = ..., tenant: str | None = ...) -> None: ...

class GetHistoryResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    def __init__(self, events: _Iterable[Event | _Mapping] | None = ...) -> None: ...

class GetResultRequest(_message.Message):
    __slots__ = ("run_id", "tenant", "wait_ms")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    wait_ms: int
    tenant: str
    def __init__(self, run_id: str | None = ..., wait_ms: int | None = ..., tenant: str | None = ...) -> None: ...

class GetResultResponse(_message.Message):
    __slots__ = ("closed", "run")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    run: RunInfo
    closed: bool
    def __init__(self, run: RunInfo | _Mapping | None = ..., closed: bool | None = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("limit", "page_token", "status", "tenant", "workflow_type")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    status: str
    workflow_type: str
    limit: int
    page_token: str
    def __init__(self, tenant: str | None = ..., status: str | None = ..., workflow_type: str | None = ..., limit: int | None = ..., page_token: str | None = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("next_page_token", "runs")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[RunInfo]
    next_page_token: str
    def __init__(self, runs: _Iterable[RunInfo | _Mapping] | None = ..., next_page_token: str | None = ...) -> None: ...

class VersionInfo(_message.Message):
    __slots__ = ("current_for", "digest", "manifest_json", "size", "uploaded_ms")
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_JSON_FIELD_NUMBER: _ClassVar[int]
    UPLOADED_MS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FOR_FIELD_NUMBER: _ClassVar[int]
    digest: str
    size: int
    manifest_json: str
    uploaded_ms: int
    current_for: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, digest: str | None = ..., size: int | None = ..., manifest_json: str | None = ..., uploaded_ms: int | None = ..., current_for: _Iterable[str] | None = ...) -> None: ...

class UploadVersionRequest(_message.Message):
    __slots__ = ("module", "promote")
    MODULE_FIELD_NUMBER: _ClassVar[int]
    PROMOTE_FIELD_NUMBER: _ClassVar[int]
    module: bytes
    promote: bool
    def __init__(self, module: bytes | None = ..., promote: bool | None = ...) -> None: ...

class UploadVersionResponse(_message.Message):
    __slots__ = ("created", "version")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    version: VersionInfo
    created: bool
    def __init__(self, version: VersionInfo | _Mapping | None = ..., created: bool | None = ...) -> None: ...

class ListVersionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListVersionsResponse(_message.Message):
    __slots__ = ("versions",)
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[VersionInfo]
    def __init__(self, versions: _Iterable[VersionInfo | _Mapping] | None = ...) -> None: ...

class GetVersionRequest(_message.Message):
    __slots__ = ("ref",)
    REF_FIELD_NUMBER: _ClassVar[int]
    ref: str
    def __init__(self, ref: str | None = ...) -> None: ...

class GetVersionResponse(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: VersionInfo
    def __init__(self, version: VersionInfo | _Mapping | None = ...) -> None: ...

class GetModuleRequest(_message.Message):
    __slots__ = ("digest",)
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    digest: str
    def __init__(self, digest: str | None = ...) -> None: ...

class GetModuleResponse(_message.Message):
    __slots__ = ("module",)
    MODULE_FIELD_NUMBER: _ClassVar[int]
    module: bytes
    def __init__(self, module: bytes | None = ...) -> None: ...

class PollTaskRequest(_message.Message):
    __slots__ = ("queue", "wait_ms", "worker_id")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    queue: str
    wait_ms: int
    def __init__(self, worker_id: str | None = ..., queue: str | None = ..., wait_ms: int | None = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("args", "attempt", "cmd", "digest", "fencing", "history", "idempotency_key", "input", "kind", "lease_expires_ms", "name", "run_id", "task_id", "tenant")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_MS_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    CMD_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    fencing: int
    kind: str
    run_id: str
    digest: str
    name: str
    attempt: int
    lease_expires_ms: int
    input: bytes
    history: _containers.RepeatedCompositeFieldContainer[Event]
    cmd: int
    args: bytes
    idempotency_key: str
    tenant: str
    def __init__(self, task_id: int | None = ..., fencing: int | None = ..., kind: str | None = ..., run_id: str | None = ..., digest: str | None = ..., name: str | None = ..., attempt: int | None = ..., lease_expires_ms: int | None = ..., input: bytes | None = ..., history: _Iterable[Event | _Mapping] | None = ..., cmd: int | None = ..., args: bytes | None = ..., idempotency_key: str | None = ..., tenant: str | None = ...) -> None: ...

class PollTaskResponse(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: Task
    def __init__(self, task: Task | _Mapping | None = ...) -> None: ...

class ActivationStats(_message.Message):
    __slots__ = ("duration_us", "fuel_used", "host_calls", "memory_bytes")
    FUEL_USED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    HOST_CALLS_FIELD_NUMBER: _ClassVar[int]
    DURATION_US_FIELD_NUMBER: _ClassVar[int]
    fuel_used: int
    memory_bytes: int
    host_calls: int
    duration_us: int
    def __init__(self, fuel_used: int | None = ..., memory_bytes: int | None = ..., host_calls: int | None = ..., duration_us: int | None = ...) -> None: ...

class Command(_message.Message):
    __slots__ = ("args", "cmd", "kind", "name", "value")
    CMD_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    cmd: int
    kind: str
    name: str
    args: bytes
    value: int
    def __init__(self, cmd: int | None = ..., kind: str | None = ..., name: str | None = ..., args: bytes | None = ..., value: int | None = ...) -> None: ...

class WorkflowCompletion(_message.Message):
    __slots__ = ("commands", "error", "expected_last_seq", "result", "status")
    EXPECTED_LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    expected_last_seq: int
    commands: _containers.RepeatedCompositeFieldContainer[Command]
    status: str
    result: bytes
    error: ErrorInfo
    def __init__(self, expected_last_seq: int | None = ..., commands: _Iterable[Command | _Mapping] | None = ..., status: str | None = ..., result: bytes | None = ..., error: ErrorInfo | _Mapping | None = ...) -> None: ...

class ActivityCompletion(_message.Message):
    __slots__ = ("error", "ok", "result")
    OK_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    result: bytes
    error: ErrorInfo
    def __init__(self, ok: bool | None = ..., result: bytes | None = ..., error: ErrorInfo | _Mapping | None = ...) -> None: ...

class CompleteTaskRequest(_message.Message):
    __slots__ = ("activity", "fencing", "stats", "task_id", "worker_id", "workflow")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    fencing: int
    worker_id: str
    workflow: WorkflowCompletion
    activity: ActivityCompletion
    stats: ActivationStats
    def __init__(self, task_id: int | None = ..., fencing: int | None = ..., worker_id: str | None = ..., workflow: WorkflowCompletion | _Mapping | None = ..., activity: ActivityCompletion | _Mapping | None = ..., stats: ActivationStats | _Mapping | None = ...) -> None: ...

class CompleteTaskResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Failure(_message.Message):
    __slots__ = ("fuel_used", "has_step", "memory_bytes", "message", "reason", "step", "trap_code")
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRAP_CODE_FIELD_NUMBER: _ClassVar[int]
    FUEL_USED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    HAS_STEP_FIELD_NUMBER: _ClassVar[int]
    reason: str
    message: str
    trap_code: str
    fuel_used: int
    memory_bytes: int
    step: int
    has_step: bool
    def __init__(self, reason: str | None = ..., message: str | None = ..., trap_code: str | None = ..., fuel_used: int | None = ..., memory_bytes: int | None = ..., step: int | None = ..., has_step: bool | None = ...) -> None: ...

class FailTaskRequest(_message.Message):
    __slots__ = ("failure", "fencing", "task_id", "worker_id")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    fencing: int
    worker_id: str
    failure: Failure
    def __init__(self, task_id: int | None = ..., fencing: int | None = ..., worker_id: str | None = ..., failure: Failure | _Mapping | None = ...) -> None: ...

class FailTaskResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("fencing", "task_id", "worker_id")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    fencing: int
    worker_id: str
    def __init__(self, task_id: int | None = ..., fencing: int | None = ..., worker_id: str | None = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("lease_expires_ms",)
    LEASE_EXPIRES_MS_FIELD_NUMBER: _ClassVar[int]
    lease_expires_ms: int
    def __init__(self, lease_expires_ms: int | None = ...) -> None: ...
