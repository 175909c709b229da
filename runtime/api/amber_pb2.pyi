from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorInfo(_message.Message):
    __slots__ = ("type", "message", "non_retryable")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NON_RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    type: str
    message: str
    non_retryable: bool
    def __init__(self, type: _Optional[str] = ..., message: _Optional[str] = ..., non_retryable: _Optional[bool] = ...) -> None: ...

class RunInfo(_message.Message):
    __slots__ = ("run_id", "tenant", "workflow_id", "workflow_type", "digest", "status", "input", "result", "error", "last_seq", "created_ms", "updated_ms", "closed_ms", "queue", "parent_run_id", "cancel_requested", "cancel_reason", "suspended_ms", "suspended_reason", "suspended_fingerprint")
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
    PARENT_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REASON_FIELD_NUMBER: _ClassVar[int]
    SUSPENDED_MS_FIELD_NUMBER: _ClassVar[int]
    SUSPENDED_REASON_FIELD_NUMBER: _ClassVar[int]
    SUSPENDED_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
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
    parent_run_id: str
    cancel_requested: bool
    cancel_reason: str
    suspended_ms: int
    suspended_reason: str
    suspended_fingerprint: str
    def __init__(self, run_id: _Optional[str] = ..., tenant: _Optional[str] = ..., workflow_id: _Optional[str] = ..., workflow_type: _Optional[str] = ..., digest: _Optional[str] = ..., status: _Optional[str] = ..., input: _Optional[bytes] = ..., result: _Optional[bytes] = ..., error: _Optional[_Union[ErrorInfo, _Mapping]] = ..., last_seq: _Optional[int] = ..., created_ms: _Optional[int] = ..., updated_ms: _Optional[int] = ..., closed_ms: _Optional[int] = ..., queue: _Optional[str] = ..., parent_run_id: _Optional[str] = ..., cancel_requested: _Optional[bool] = ..., cancel_reason: _Optional[str] = ..., suspended_ms: _Optional[int] = ..., suspended_reason: _Optional[str] = ..., suspended_fingerprint: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("seq", "type", "payload", "digest", "time_ms")
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
    def __init__(self, seq: _Optional[int] = ..., type: _Optional[str] = ..., payload: _Optional[bytes] = ..., digest: _Optional[str] = ..., time_ms: _Optional[int] = ...) -> None: ...

class StartRunRequest(_message.Message):
    __slots__ = ("tenant", "workflow_type", "workflow_id", "input", "version", "queue", "execution_timeout_ms", "signal_name", "signal_payload", "signal_request_id")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_NAME_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    workflow_type: str
    workflow_id: str
    input: bytes
    version: str
    queue: str
    execution_timeout_ms: int
    signal_name: str
    signal_payload: bytes
    signal_request_id: str
    def __init__(self, tenant: _Optional[str] = ..., workflow_type: _Optional[str] = ..., workflow_id: _Optional[str] = ..., input: _Optional[bytes] = ..., version: _Optional[str] = ..., queue: _Optional[str] = ..., execution_timeout_ms: _Optional[int] = ..., signal_name: _Optional[str] = ..., signal_payload: _Optional[bytes] = ..., signal_request_id: _Optional[str] = ...) -> None: ...

class StartRunResponse(_message.Message):
    __slots__ = ("run", "already_started", "signalled", "duplicate")
    RUN_FIELD_NUMBER: _ClassVar[int]
    ALREADY_STARTED_FIELD_NUMBER: _ClassVar[int]
    SIGNALLED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    run: RunInfo
    already_started: bool
    signalled: bool
    duplicate: bool
    def __init__(self, run: _Optional[_Union[RunInfo, _Mapping]] = ..., already_started: _Optional[bool] = ..., signalled: _Optional[bool] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class SignalRunRequest(_message.Message):
    __slots__ = ("run_id", "tenant", "name", "payload", "request_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    tenant: str
    name: str
    payload: bytes
    request_id: str
    def __init__(self, run_id: _Optional[str] = ..., tenant: _Optional[str] = ..., name: _Optional[str] = ..., payload: _Optional[bytes] = ..., request_id: _Optional[str] = ...) -> None: ...

class SignalRunResponse(_message.Message):
    __slots__ = ("seq", "duplicate")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    seq: int
    duplicate: bool
    def __init__(self, seq: _Optional[int] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class QueryRunRequest(_message.Message):
    __slots__ = ("run_id", "tenant", "name", "wait_ms")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    tenant: str
    name: str
    wait_ms: int
    def __init__(self, run_id: _Optional[str] = ..., tenant: _Optional[str] = ..., name: _Optional[str] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class QueryRunResponse(_message.Message):
    __slots__ = ("result", "ended")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    result: bytes
    ended: str
    def __init__(self, result: _Optional[bytes] = ..., ended: _Optional[str] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("run_id", "tenant", "reason", "operator")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    tenant: str
    reason: str
    operator: str
    def __init__(self, run_id: _Optional[str] = ..., tenant: _Optional[str] = ..., reason: _Optional[str] = ..., operator: _Optional[str] = ...) -> None: ...

class CancelRunResponse(_message.Message):
    __slots__ = ("already_requested",)
    ALREADY_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    already_requested: bool
    def __init__(self, already_requested: _Optional[bool] = ...) -> None: ...

class TerminateRunRequest(_message.Message):
    __slots__ = ("run_id", "tenant", "reason", "operator")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    tenant: str
    reason: str
    operator: str
    def __init__(self, run_id: _Optional[str] = ..., tenant: _Optional[str] = ..., reason: _Optional[str] = ..., operator: _Optional[str] = ...) -> None: ...

class TerminateRunResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResetRunRequest(_message.Message):
    __slots__ = ("run_id", "tenant", "to_event", "reason", "operator")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TO_EVENT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    tenant: str
    to_event: int
    reason: str
    operator: str
    def __init__(self, run_id: _Optional[str] = ..., tenant: _Optional[str] = ..., to_event: _Optional[int] = ..., reason: _Optional[str] = ..., operator: _Optional[str] = ...) -> None: ...

class ResetRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: RunInfo
    def __init__(self, run: _Optional[_Union[RunInfo, _Mapping]] = ...) -> None: ...

class DescribeRunRequest(_message.Message):
    __slots__ = ("run_id", "tenant")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    tenant: str
    def __init__(self, run_id: _Optional[str] = ..., tenant: _Optional[str] = ...) -> None: ...

class TaskInfo(_message.Message):
    __slots__ = ("task_id", "kind", "name", "cmd", "state", "attempt", "max_attempts", "visible_ms", "lease_owner", "lease_expires_ms", "consecutive_failures", "last_failure", "has_cmd", "pool", "crash_count", "crash_fingerprint", "crash_step", "has_crash_step", "poisoned_ms", "poison_reason", "crashed_attempts", "queue")
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
    POOL_FIELD_NUMBER: _ClassVar[int]
    CRASH_COUNT_FIELD_NUMBER: _ClassVar[int]
    CRASH_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    CRASH_STEP_FIELD_NUMBER: _ClassVar[int]
    HAS_CRASH_STEP_FIELD_NUMBER: _ClassVar[int]
    POISONED_MS_FIELD_NUMBER: _ClassVar[int]
    POISON_REASON_FIELD_NUMBER: _ClassVar[int]
    CRASHED_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
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
    pool: str
    crash_count: int
    crash_fingerprint: str
    crash_step: int
    has_crash_step: bool
    poisoned_ms: int
    poison_reason: str
    crashed_attempts: int
    queue: str
    def __init__(self, task_id: _Optional[int] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., cmd: _Optional[int] = ..., state: _Optional[str] = ..., attempt: _Optional[int] = ..., max_attempts: _Optional[int] = ..., visible_ms: _Optional[int] = ..., lease_owner: _Optional[str] = ..., lease_expires_ms: _Optional[int] = ..., consecutive_failures: _Optional[int] = ..., last_failure: _Optional[str] = ..., has_cmd: _Optional[bool] = ..., pool: _Optional[str] = ..., crash_count: _Optional[int] = ..., crash_fingerprint: _Optional[str] = ..., crash_step: _Optional[int] = ..., has_crash_step: _Optional[bool] = ..., poisoned_ms: _Optional[int] = ..., poison_reason: _Optional[str] = ..., crashed_attempts: _Optional[int] = ..., queue: _Optional[str] = ...) -> None: ...

class FailureInfo(_message.Message):
    __slots__ = ("task_id", "kind", "cmd", "has_cmd", "attempt", "digest", "reason", "trap_code", "message", "fuel_used", "memory_bytes", "worker", "time_ms", "fingerprint", "pool", "trace_id", "host_calls", "has_repro")
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
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_CALLS_FIELD_NUMBER: _ClassVar[int]
    HAS_REPRO_FIELD_NUMBER: _ClassVar[int]
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
    fingerprint: str
    pool: str
    trace_id: str
    host_calls: _containers.RepeatedScalarFieldContainer[str]
    has_repro: bool
    def __init__(self, task_id: _Optional[int] = ..., kind: _Optional[str] = ..., cmd: _Optional[int] = ..., has_cmd: _Optional[bool] = ..., attempt: _Optional[int] = ..., digest: _Optional[str] = ..., reason: _Optional[str] = ..., trap_code: _Optional[str] = ..., message: _Optional[str] = ..., fuel_used: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., worker: _Optional[str] = ..., time_ms: _Optional[int] = ..., fingerprint: _Optional[str] = ..., pool: _Optional[str] = ..., trace_id: _Optional[str] = ..., host_calls: _Optional[_Iterable[str]] = ..., has_repro: _Optional[bool] = ...) -> None: ...

class TimerInfo(_message.Message):
    __slots__ = ("timer_id", "kind", "cmd", "fire_ms")
    TIMER_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CMD_FIELD_NUMBER: _ClassVar[int]
    FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    timer_id: str
    kind: str
    cmd: int
    fire_ms: int
    def __init__(self, timer_id: _Optional[str] = ..., kind: _Optional[str] = ..., cmd: _Optional[int] = ..., fire_ms: _Optional[int] = ...) -> None: ...

class DiscardedInfo(_message.Message):
    __slots__ = ("kind", "detail", "time_ms")
    KIND_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    kind: str
    detail: str
    time_ms: int
    def __init__(self, kind: _Optional[str] = ..., detail: _Optional[str] = ..., time_ms: _Optional[int] = ...) -> None: ...

class DescribeRunResponse(_message.Message):
    __slots__ = ("run", "tasks", "recent_failures", "timers", "discarded", "unserved")
    RUN_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    RECENT_FAILURES_FIELD_NUMBER: _ClassVar[int]
    TIMERS_FIELD_NUMBER: _ClassVar[int]
    DISCARDED_FIELD_NUMBER: _ClassVar[int]
    UNSERVED_FIELD_NUMBER: _ClassVar[int]
    run: RunInfo
    tasks: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    recent_failures: _containers.RepeatedCompositeFieldContainer[FailureInfo]
    timers: _containers.RepeatedCompositeFieldContainer[TimerInfo]
    discarded: _containers.RepeatedCompositeFieldContainer[DiscardedInfo]
    unserved: _containers.RepeatedCompositeFieldContainer[QueueRef]
    def __init__(self, run: _Optional[_Union[RunInfo, _Mapping]] = ..., tasks: _Optional[_Iterable[_Union[TaskInfo, _Mapping]]] = ..., recent_failures: _Optional[_Iterable[_Union[FailureInfo, _Mapping]]] = ..., timers: _Optional[_Iterable[_Union[TimerInfo, _Mapping]]] = ..., discarded: _Optional[_Iterable[_Union[DiscardedInfo, _Mapping]]] = ..., unserved: _Optional[_Iterable[_Union[QueueRef, _Mapping]]] = ...) -> None: ...

class QueueRef(_message.Message):
    __slots__ = ("queue", "pool")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    queue: str
    pool: str
    def __init__(self, queue: _Optional[str] = ..., pool: _Optional[str] = ...) -> None: ...

class GetHistoryRequest(_message.Message):
    __slots__ = ("run_id", "after_seq", "tenant")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    after_seq: int
    tenant: str
    def __init__(self, run_id: _Optional[str] = ..., after_seq: _Optional[int] = ..., tenant: _Optional[str] = ...) -> None: ...

class GetHistoryResponse(_message.Message):
    __slots__ = ("events", "run_id")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    run_id: str
    def __init__(self, events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., run_id: _Optional[str] = ...) -> None: ...

class GetResultRequest(_message.Message):
    __slots__ = ("run_id", "wait_ms", "tenant")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    wait_ms: int
    tenant: str
    def __init__(self, run_id: _Optional[str] = ..., wait_ms: _Optional[int] = ..., tenant: _Optional[str] = ...) -> None: ...

class GetResultResponse(_message.Message):
    __slots__ = ("run", "closed")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    run: RunInfo
    closed: bool
    def __init__(self, run: _Optional[_Union[RunInfo, _Mapping]] = ..., closed: _Optional[bool] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("tenant", "status", "workflow_type", "limit", "page_token")
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
    def __init__(self, tenant: _Optional[str] = ..., status: _Optional[str] = ..., workflow_type: _Optional[str] = ..., limit: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs", "next_page_token")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[RunInfo]
    next_page_token: str
    def __init__(self, runs: _Optional[_Iterable[_Union[RunInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class VersionInfo(_message.Message):
    __slots__ = ("digest", "size", "manifest_json", "uploaded_ms", "current_for", "candidate_for", "labels", "retired_ms", "has_use", "running_runs", "closed_runs", "tasks", "retire_blockers")
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_JSON_FIELD_NUMBER: _ClassVar[int]
    UPLOADED_MS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FOR_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FOR_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    RETIRED_MS_FIELD_NUMBER: _ClassVar[int]
    HAS_USE_FIELD_NUMBER: _ClassVar[int]
    RUNNING_RUNS_FIELD_NUMBER: _ClassVar[int]
    CLOSED_RUNS_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    RETIRE_BLOCKERS_FIELD_NUMBER: _ClassVar[int]
    digest: str
    size: int
    manifest_json: str
    uploaded_ms: int
    current_for: _containers.RepeatedScalarFieldContainer[str]
    candidate_for: _containers.RepeatedScalarFieldContainer[str]
    labels: _containers.RepeatedScalarFieldContainer[str]
    retired_ms: int
    has_use: bool
    running_runs: int
    closed_runs: int
    tasks: int
    retire_blockers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, digest: _Optional[str] = ..., size: _Optional[int] = ..., manifest_json: _Optional[str] = ..., uploaded_ms: _Optional[int] = ..., current_for: _Optional[_Iterable[str]] = ..., candidate_for: _Optional[_Iterable[str]] = ..., labels: _Optional[_Iterable[str]] = ..., retired_ms: _Optional[int] = ..., has_use: _Optional[bool] = ..., running_runs: _Optional[int] = ..., closed_runs: _Optional[int] = ..., tasks: _Optional[int] = ..., retire_blockers: _Optional[_Iterable[str]] = ...) -> None: ...

class UploadVersionRequest(_message.Message):
    __slots__ = ("module", "promote", "label", "operator", "reason")
    MODULE_FIELD_NUMBER: _ClassVar[int]
    PROMOTE_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    module: bytes
    promote: bool
    label: str
    operator: str
    reason: str
    def __init__(self, module: _Optional[bytes] = ..., promote: _Optional[bool] = ..., label: _Optional[str] = ..., operator: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class UploadVersionResponse(_message.Message):
    __slots__ = ("version", "created")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    version: VersionInfo
    created: bool
    def __init__(self, version: _Optional[_Union[VersionInfo, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class ListVersionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListVersionsResponse(_message.Message):
    __slots__ = ("versions",)
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[VersionInfo]
    def __init__(self, versions: _Optional[_Iterable[_Union[VersionInfo, _Mapping]]] = ...) -> None: ...

class GetVersionRequest(_message.Message):
    __slots__ = ("ref",)
    REF_FIELD_NUMBER: _ClassVar[int]
    ref: str
    def __init__(self, ref: _Optional[str] = ...) -> None: ...

class GetVersionResponse(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: VersionInfo
    def __init__(self, version: _Optional[_Union[VersionInfo, _Mapping]] = ...) -> None: ...

class LabelVersionRequest(_message.Message):
    __slots__ = ("ref", "label", "operator")
    REF_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    ref: str
    label: str
    operator: str
    def __init__(self, ref: _Optional[str] = ..., label: _Optional[str] = ..., operator: _Optional[str] = ...) -> None: ...

class ChangeRolloutRequest(_message.Message):
    __slots__ = ("workflow_type", "action", "ref", "percent", "operator", "reason")
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    PERCENT_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workflow_type: str
    action: str
    ref: str
    percent: int
    operator: str
    reason: str
    def __init__(self, workflow_type: _Optional[str] = ..., action: _Optional[str] = ..., ref: _Optional[str] = ..., percent: _Optional[int] = ..., operator: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class GetRolloutRequest(_message.Message):
    __slots__ = ("workflow_type",)
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    workflow_type: str
    def __init__(self, workflow_type: _Optional[str] = ...) -> None: ...

class VersionHealthInfo(_message.Message):
    __slots__ = ("digest", "role", "running_runs", "closed_runs", "activations", "succeeded", "fuel", "failures", "labels")
    class FailuresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    RUNNING_RUNS_FIELD_NUMBER: _ClassVar[int]
    CLOSED_RUNS_FIELD_NUMBER: _ClassVar[int]
    ACTIVATIONS_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FUEL_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    digest: str
    role: str
    running_runs: int
    closed_runs: int
    activations: int
    succeeded: int
    fuel: int
    failures: _containers.ScalarMap[str, int]
    labels: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, digest: _Optional[str] = ..., role: _Optional[str] = ..., running_runs: _Optional[int] = ..., closed_runs: _Optional[int] = ..., activations: _Optional[int] = ..., succeeded: _Optional[int] = ..., fuel: _Optional[int] = ..., failures: _Optional[_Mapping[str, int]] = ..., labels: _Optional[_Iterable[str]] = ...) -> None: ...

class RolloutStatus(_message.Message):
    __slots__ = ("workflow_type", "current", "candidate", "ramp_percent", "previous", "auto_upgrade_to", "versions")
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    RAMP_PERCENT_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    AUTO_UPGRADE_TO_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    workflow_type: str
    current: str
    candidate: str
    ramp_percent: int
    previous: str
    auto_upgrade_to: str
    versions: _containers.RepeatedCompositeFieldContainer[VersionHealthInfo]
    def __init__(self, workflow_type: _Optional[str] = ..., current: _Optional[str] = ..., candidate: _Optional[str] = ..., ramp_percent: _Optional[int] = ..., previous: _Optional[str] = ..., auto_upgrade_to: _Optional[str] = ..., versions: _Optional[_Iterable[_Union[VersionHealthInfo, _Mapping]]] = ...) -> None: ...

class RetireVersionRequest(_message.Message):
    __slots__ = ("ref", "operator", "reason")
    REF_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ref: str
    operator: str
    reason: str
    def __init__(self, ref: _Optional[str] = ..., operator: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RunCheck(_message.Message):
    __slots__ = ("run_id", "status", "verdict", "position", "seq", "recorded", "issued", "detail", "checked_seq", "outcome")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    ISSUED_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    CHECKED_SEQ_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    status: str
    verdict: str
    position: int
    seq: int
    recorded: str
    issued: str
    detail: str
    checked_seq: int
    outcome: str
    def __init__(self, run_id: _Optional[str] = ..., status: _Optional[str] = ..., verdict: _Optional[str] = ..., position: _Optional[int] = ..., seq: _Optional[int] = ..., recorded: _Optional[str] = ..., issued: _Optional[str] = ..., detail: _Optional[str] = ..., checked_seq: _Optional[int] = ..., outcome: _Optional[str] = ...) -> None: ...

class CheckVersionRequest(_message.Message):
    __slots__ = ("candidate", "workflow_type", "run_ids", "closed_sample", "wait_ms")
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    RUN_IDS_FIELD_NUMBER: _ClassVar[int]
    CLOSED_SAMPLE_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    candidate: str
    workflow_type: str
    run_ids: _containers.RepeatedScalarFieldContainer[str]
    closed_sample: int
    wait_ms: int
    def __init__(self, candidate: _Optional[str] = ..., workflow_type: _Optional[str] = ..., run_ids: _Optional[_Iterable[str]] = ..., closed_sample: _Optional[int] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class CheckVersionResponse(_message.Message):
    __slots__ = ("candidate", "runs")
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    candidate: str
    runs: _containers.RepeatedCompositeFieldContainer[RunCheck]
    def __init__(self, candidate: _Optional[str] = ..., runs: _Optional[_Iterable[_Union[RunCheck, _Mapping]]] = ...) -> None: ...

class MigrateRunsRequest(_message.Message):
    __slots__ = ("candidate", "workflow_type", "run_ids", "operator", "reason", "wait_ms")
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    RUN_IDS_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    candidate: str
    workflow_type: str
    run_ids: _containers.RepeatedScalarFieldContainer[str]
    operator: str
    reason: str
    wait_ms: int
    def __init__(self, candidate: _Optional[str] = ..., workflow_type: _Optional[str] = ..., run_ids: _Optional[_Iterable[str]] = ..., operator: _Optional[str] = ..., reason: _Optional[str] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class MigrateRunsResponse(_message.Message):
    __slots__ = ("candidate", "runs")
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    candidate: str
    runs: _containers.RepeatedCompositeFieldContainer[RunCheck]
    def __init__(self, candidate: _Optional[str] = ..., runs: _Optional[_Iterable[_Union[RunCheck, _Mapping]]] = ...) -> None: ...

class GetModuleRequest(_message.Message):
    __slots__ = ("digest",)
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    digest: str
    def __init__(self, digest: _Optional[str] = ...) -> None: ...

class GetModuleResponse(_message.Message):
    __slots__ = ("module",)
    MODULE_FIELD_NUMBER: _ClassVar[int]
    module: bytes
    def __init__(self, module: _Optional[bytes] = ...) -> None: ...

class PollTaskRequest(_message.Message):
    __slots__ = ("worker_id", "queue", "wait_ms", "pool", "reconcile", "holding")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    RECONCILE_FIELD_NUMBER: _ClassVar[int]
    HOLDING_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    queue: str
    wait_ms: int
    pool: str
    reconcile: bool
    holding: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, worker_id: _Optional[str] = ..., queue: _Optional[str] = ..., wait_ms: _Optional[int] = ..., pool: _Optional[str] = ..., reconcile: _Optional[bool] = ..., holding: _Optional[_Iterable[int]] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("task_id", "fencing", "kind", "run_id", "digest", "name", "attempt", "lease_expires_ms", "input", "history", "cmd", "args", "idempotency_key", "tenant", "heartbeat_details", "has_heartbeat_details", "deadline_ms", "cancel_requested", "upgrade_to", "pool", "crash_count", "traceparent", "crash_repro")
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
    HEARTBEAT_DETAILS_FIELD_NUMBER: _ClassVar[int]
    HAS_HEARTBEAT_DETAILS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    UPGRADE_TO_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    CRASH_COUNT_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    CRASH_REPRO_FIELD_NUMBER: _ClassVar[int]
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
    heartbeat_details: bytes
    has_heartbeat_details: bool
    deadline_ms: int
    cancel_requested: bool
    upgrade_to: str
    pool: str
    crash_count: int
    traceparent: str
    crash_repro: bytes
    def __init__(self, task_id: _Optional[int] = ..., fencing: _Optional[int] = ..., kind: _Optional[str] = ..., run_id: _Optional[str] = ..., digest: _Optional[str] = ..., name: _Optional[str] = ..., attempt: _Optional[int] = ..., lease_expires_ms: _Optional[int] = ..., input: _Optional[bytes] = ..., history: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., cmd: _Optional[int] = ..., args: _Optional[bytes] = ..., idempotency_key: _Optional[str] = ..., tenant: _Optional[str] = ..., heartbeat_details: _Optional[bytes] = ..., has_heartbeat_details: _Optional[bool] = ..., deadline_ms: _Optional[int] = ..., cancel_requested: _Optional[bool] = ..., upgrade_to: _Optional[str] = ..., pool: _Optional[str] = ..., crash_count: _Optional[int] = ..., traceparent: _Optional[str] = ..., crash_repro: _Optional[bytes] = ...) -> None: ...

class PollTaskResponse(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: Task
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ...) -> None: ...

class ActivationStats(_message.Message):
    __slots__ = ("fuel_used", "memory_bytes", "host_calls", "duration_us", "digest", "kind")
    FUEL_USED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    HOST_CALLS_FIELD_NUMBER: _ClassVar[int]
    DURATION_US_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    fuel_used: int
    memory_bytes: int
    host_calls: int
    duration_us: int
    digest: str
    kind: str
    def __init__(self, fuel_used: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., host_calls: _Optional[int] = ..., duration_us: _Optional[int] = ..., digest: _Optional[str] = ..., kind: _Optional[str] = ...) -> None: ...

class Command(_message.Message):
    __slots__ = ("cmd", "body")
    CMD_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    cmd: int
    body: bytes
    def __init__(self, cmd: _Optional[int] = ..., body: _Optional[bytes] = ...) -> None: ...

class WorkflowCompletion(_message.Message):
    __slots__ = ("expected_last_seq", "commands", "status", "result", "error", "reactivate", "migrate_to", "upgrade_failed")
    EXPECTED_LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REACTIVATE_FIELD_NUMBER: _ClassVar[int]
    MIGRATE_TO_FIELD_NUMBER: _ClassVar[int]
    UPGRADE_FAILED_FIELD_NUMBER: _ClassVar[int]
    expected_last_seq: int
    commands: _containers.RepeatedCompositeFieldContainer[Command]
    status: str
    result: bytes
    error: ErrorInfo
    reactivate: bool
    migrate_to: str
    upgrade_failed: bytes
    def __init__(self, expected_last_seq: _Optional[int] = ..., commands: _Optional[_Iterable[_Union[Command, _Mapping]]] = ..., status: _Optional[str] = ..., result: _Optional[bytes] = ..., error: _Optional[_Union[ErrorInfo, _Mapping]] = ..., reactivate: _Optional[bool] = ..., migrate_to: _Optional[str] = ..., upgrade_failed: _Optional[bytes] = ...) -> None: ...

class ActivityCompletion(_message.Message):
    __slots__ = ("ok", "result", "error")
    OK_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    result: bytes
    error: ErrorInfo
    def __init__(self, ok: _Optional[bool] = ..., result: _Optional[bytes] = ..., error: _Optional[_Union[ErrorInfo, _Mapping]] = ...) -> None: ...

class CompleteTaskRequest(_message.Message):
    __slots__ = ("task_id", "fencing", "worker_id", "workflow", "activity", "stats", "want_next", "next_queue", "run_id", "then_workflow", "then_digest")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    WANT_NEXT_FIELD_NUMBER: _ClassVar[int]
    NEXT_QUEUE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    THEN_WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    THEN_DIGEST_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    fencing: int
    worker_id: str
    workflow: WorkflowCompletion
    activity: ActivityCompletion
    stats: ActivationStats
    want_next: bool
    next_queue: str
    run_id: str
    then_workflow: WorkflowCompletion
    then_digest: str
    def __init__(self, task_id: _Optional[int] = ..., fencing: _Optional[int] = ..., worker_id: _Optional[str] = ..., workflow: _Optional[_Union[WorkflowCompletion, _Mapping]] = ..., activity: _Optional[_Union[ActivityCompletion, _Mapping]] = ..., stats: _Optional[_Union[ActivationStats, _Mapping]] = ..., want_next: _Optional[bool] = ..., next_queue: _Optional[str] = ..., run_id: _Optional[str] = ..., then_workflow: _Optional[_Union[WorkflowCompletion, _Mapping]] = ..., then_digest: _Optional[str] = ...) -> None: ...

class CompleteTaskResponse(_message.Message):
    __slots__ = ("next", "appended", "combined")
    NEXT_FIELD_NUMBER: _ClassVar[int]
    APPENDED_FIELD_NUMBER: _ClassVar[int]
    COMBINED_FIELD_NUMBER: _ClassVar[int]
    next: Task
    appended: _containers.RepeatedCompositeFieldContainer[Event]
    combined: bool
    def __init__(self, next: _Optional[_Union[Task, _Mapping]] = ..., appended: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., combined: _Optional[bool] = ...) -> None: ...

class Failure(_message.Message):
    __slots__ = ("reason", "message", "trap_code", "fuel_used", "memory_bytes", "step", "has_step", "trace_id", "host_calls", "repro")
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRAP_CODE_FIELD_NUMBER: _ClassVar[int]
    FUEL_USED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    HAS_STEP_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_CALLS_FIELD_NUMBER: _ClassVar[int]
    REPRO_FIELD_NUMBER: _ClassVar[int]
    reason: str
    message: str
    trap_code: str
    fuel_used: int
    memory_bytes: int
    step: int
    has_step: bool
    trace_id: str
    host_calls: _containers.RepeatedScalarFieldContainer[str]
    repro: bytes
    def __init__(self, reason: _Optional[str] = ..., message: _Optional[str] = ..., trap_code: _Optional[str] = ..., fuel_used: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., step: _Optional[int] = ..., has_step: _Optional[bool] = ..., trace_id: _Optional[str] = ..., host_calls: _Optional[_Iterable[str]] = ..., repro: _Optional[bytes] = ...) -> None: ...

class FailTaskRequest(_message.Message):
    __slots__ = ("task_id", "fencing", "worker_id", "failure", "want_next", "next_queue", "run_id", "stats")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    WANT_NEXT_FIELD_NUMBER: _ClassVar[int]
    NEXT_QUEUE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    fencing: int
    worker_id: str
    failure: Failure
    want_next: bool
    next_queue: str
    run_id: str
    stats: ActivationStats
    def __init__(self, task_id: _Optional[int] = ..., fencing: _Optional[int] = ..., worker_id: _Optional[str] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ..., want_next: _Optional[bool] = ..., next_queue: _Optional[str] = ..., run_id: _Optional[str] = ..., stats: _Optional[_Union[ActivationStats, _Mapping]] = ...) -> None: ...

class FailTaskResponse(_message.Message):
    __slots__ = ("next",)
    NEXT_FIELD_NUMBER: _ClassVar[int]
    next: Task
    def __init__(self, next: _Optional[_Union[Task, _Mapping]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("task_id", "fencing", "worker_id", "details", "has_details")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    HAS_DETAILS_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    fencing: int
    worker_id: str
    details: bytes
    has_details: bool
    def __init__(self, task_id: _Optional[int] = ..., fencing: _Optional[int] = ..., worker_id: _Optional[str] = ..., details: _Optional[bytes] = ..., has_details: _Optional[bool] = ...) -> None: ...

class ReleaseLeasesRequest(_message.Message):
    __slots__ = ("worker_id",)
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ...) -> None: ...

class ReleaseLeasesResponse(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: int
    def __init__(self, released: _Optional[int] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("lease_expires_ms", "cancel_requested")
    LEASE_EXPIRES_MS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    lease_expires_ms: int
    cancel_requested: bool
    def __init__(self, lease_expires_ms: _Optional[int] = ..., cancel_requested: _Optional[bool] = ...) -> None: ...

class CompleteQueryRequest(_message.Message):
    __slots__ = ("task_id", "fencing", "worker_id", "result", "error", "ended")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    fencing: int
    worker_id: str
    result: bytes
    error: ErrorInfo
    ended: str
    def __init__(self, task_id: _Optional[int] = ..., fencing: _Optional[int] = ..., worker_id: _Optional[str] = ..., result: _Optional[bytes] = ..., error: _Optional[_Union[ErrorInfo, _Mapping]] = ..., ended: _Optional[str] = ...) -> None: ...

class CompleteQueryResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTroubledRequest(_message.Message):
    __slots__ = ("tenant", "fingerprint", "limit")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    fingerprint: str
    limit: int
    def __init__(self, tenant: _Optional[str] = ..., fingerprint: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class TroubledRun(_message.Message):
    __slots__ = ("run", "task_id", "task_kind", "step", "has_step", "pool", "reason", "fingerprint", "crashes", "since_ms")
    RUN_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_KIND_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    HAS_STEP_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    CRASHES_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    run: RunInfo
    task_id: int
    task_kind: str
    step: int
    has_step: bool
    pool: str
    reason: str
    fingerprint: str
    crashes: int
    since_ms: int
    def __init__(self, run: _Optional[_Union[RunInfo, _Mapping]] = ..., task_id: _Optional[int] = ..., task_kind: _Optional[str] = ..., step: _Optional[int] = ..., has_step: _Optional[bool] = ..., pool: _Optional[str] = ..., reason: _Optional[str] = ..., fingerprint: _Optional[str] = ..., crashes: _Optional[int] = ..., since_ms: _Optional[int] = ...) -> None: ...

class ListTroubledResponse(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[TroubledRun]
    def __init__(self, runs: _Optional[_Iterable[_Union[TroubledRun, _Mapping]]] = ...) -> None: ...

class ExportRunRequest(_message.Message):
    __slots__ = ("run_id", "tenant", "operator")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    tenant: str
    operator: str
    def __init__(self, run_id: _Optional[str] = ..., tenant: _Optional[str] = ..., operator: _Optional[str] = ...) -> None: ...

class ExportRunResponse(_message.Message):
    __slots__ = ("bundle",)
    BUNDLE_FIELD_NUMBER: _ClassVar[int]
    bundle: bytes
    def __init__(self, bundle: _Optional[bytes] = ...) -> None: ...

class TriageRequest(_message.Message):
    __slots__ = ("action", "run_ids", "fingerprint", "tenant", "operator", "reason", "version", "step", "has_step", "result")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    RUN_IDS_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    HAS_STEP_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    action: str
    run_ids: _containers.RepeatedScalarFieldContainer[str]
    fingerprint: str
    tenant: str
    operator: str
    reason: str
    version: str
    step: int
    has_step: bool
    result: bytes
    def __init__(self, action: _Optional[str] = ..., run_ids: _Optional[_Iterable[str]] = ..., fingerprint: _Optional[str] = ..., tenant: _Optional[str] = ..., operator: _Optional[str] = ..., reason: _Optional[str] = ..., version: _Optional[str] = ..., step: _Optional[int] = ..., has_step: _Optional[bool] = ..., result: _Optional[bytes] = ...) -> None: ...

class TriageOutcome(_message.Message):
    __slots__ = ("run_id", "outcome", "detail", "from_digest", "to_digest")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    FROM_DIGEST_FIELD_NUMBER: _ClassVar[int]
    TO_DIGEST_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    outcome: str
    detail: str
    from_digest: str
    to_digest: str
    def __init__(self, run_id: _Optional[str] = ..., outcome: _Optional[str] = ..., detail: _Optional[str] = ..., from_digest: _Optional[str] = ..., to_digest: _Optional[str] = ...) -> None: ...

class TriageResponse(_message.Message):
    __slots__ = ("outcomes", "operator")
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[TriageOutcome]
    operator: str
    def __init__(self, outcomes: _Optional[_Iterable[_Union[TriageOutcome, _Mapping]]] = ..., operator: _Optional[str] = ...) -> None: ...

class ApprovalInfo(_message.Message):
    __slots__ = ("approval_id", "tenant", "run_id", "step", "action", "approvers", "roles", "required", "policy_version", "status", "created_ms", "expires_ms", "decided_ms", "delivered_ms")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    APPROVERS_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_MS_FIELD_NUMBER: _ClassVar[int]
    DECIDED_MS_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_MS_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    tenant: str
    run_id: str
    step: int
    action: str
    approvers: _containers.RepeatedScalarFieldContainer[str]
    roles: _containers.RepeatedScalarFieldContainer[str]
    required: int
    policy_version: str
    status: str
    created_ms: int
    expires_ms: int
    decided_ms: int
    delivered_ms: int
    def __init__(self, approval_id: _Optional[str] = ..., tenant: _Optional[str] = ..., run_id: _Optional[str] = ..., step: _Optional[int] = ..., action: _Optional[str] = ..., approvers: _Optional[_Iterable[str]] = ..., roles: _Optional[_Iterable[str]] = ..., required: _Optional[int] = ..., policy_version: _Optional[str] = ..., status: _Optional[str] = ..., created_ms: _Optional[int] = ..., expires_ms: _Optional[int] = ..., decided_ms: _Optional[int] = ..., delivered_ms: _Optional[int] = ...) -> None: ...

class ApprovalTokenInfo(_message.Message):
    __slots__ = ("hash_prefix", "approver", "status", "issued_ms", "expires_ms", "closed_ms")
    HASH_PREFIX_FIELD_NUMBER: _ClassVar[int]
    APPROVER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ISSUED_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_MS_FIELD_NUMBER: _ClassVar[int]
    CLOSED_MS_FIELD_NUMBER: _ClassVar[int]
    hash_prefix: str
    approver: str
    status: str
    issued_ms: int
    expires_ms: int
    closed_ms: int
    def __init__(self, hash_prefix: _Optional[str] = ..., approver: _Optional[str] = ..., status: _Optional[str] = ..., issued_ms: _Optional[int] = ..., expires_ms: _Optional[int] = ..., closed_ms: _Optional[int] = ...) -> None: ...

class ApprovalDecisionInfo(_message.Message):
    __slots__ = ("approver", "approve", "comment", "via", "decided_ms")
    APPROVER_FIELD_NUMBER: _ClassVar[int]
    APPROVE_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    VIA_FIELD_NUMBER: _ClassVar[int]
    DECIDED_MS_FIELD_NUMBER: _ClassVar[int]
    approver: str
    approve: bool
    comment: str
    via: str
    decided_ms: int
    def __init__(self, approver: _Optional[str] = ..., approve: _Optional[bool] = ..., comment: _Optional[str] = ..., via: _Optional[str] = ..., decided_ms: _Optional[int] = ...) -> None: ...

class ListApprovalsRequest(_message.Message):
    __slots__ = ("tenant", "status", "run_id", "limit")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    status: str
    run_id: str
    limit: int
    def __init__(self, tenant: _Optional[str] = ..., status: _Optional[str] = ..., run_id: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListApprovalsResponse(_message.Message):
    __slots__ = ("approvals",)
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    approvals: _containers.RepeatedCompositeFieldContainer[ApprovalInfo]
    def __init__(self, approvals: _Optional[_Iterable[_Union[ApprovalInfo, _Mapping]]] = ...) -> None: ...

class GetApprovalRequest(_message.Message):
    __slots__ = ("approval_id", "tenant")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    tenant: str
    def __init__(self, approval_id: _Optional[str] = ..., tenant: _Optional[str] = ...) -> None: ...

class ApprovalDetail(_message.Message):
    __slots__ = ("approval", "tokens", "decisions")
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    approval: ApprovalInfo
    tokens: _containers.RepeatedCompositeFieldContainer[ApprovalTokenInfo]
    decisions: _containers.RepeatedCompositeFieldContainer[ApprovalDecisionInfo]
    def __init__(self, approval: _Optional[_Union[ApprovalInfo, _Mapping]] = ..., tokens: _Optional[_Iterable[_Union[ApprovalTokenInfo, _Mapping]]] = ..., decisions: _Optional[_Iterable[_Union[ApprovalDecisionInfo, _Mapping]]] = ...) -> None: ...

class DecideApprovalRequest(_message.Message):
    __slots__ = ("token", "approve", "comment", "approver", "tenant", "run_id", "step", "has_step")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    APPROVE_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    APPROVER_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    HAS_STEP_FIELD_NUMBER: _ClassVar[int]
    token: str
    approve: bool
    comment: str
    approver: str
    tenant: str
    run_id: str
    step: int
    has_step: bool
    def __init__(self, token: _Optional[str] = ..., approve: _Optional[bool] = ..., comment: _Optional[str] = ..., approver: _Optional[str] = ..., tenant: _Optional[str] = ..., run_id: _Optional[str] = ..., step: _Optional[int] = ..., has_step: _Optional[bool] = ...) -> None: ...

class DecideApprovalResponse(_message.Message):
    __slots__ = ("approval_id", "status", "counted", "approvals", "required")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    COUNTED_FIELD_NUMBER: _ClassVar[int]
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    status: str
    counted: bool
    approvals: int
    required: int
    def __init__(self, approval_id: _Optional[str] = ..., status: _Optional[str] = ..., counted: _Optional[bool] = ..., approvals: _Optional[int] = ..., required: _Optional[int] = ...) -> None: ...

class IssueApprovalTokenRequest(_message.Message):
    __slots__ = ("approval_id", "approver", "tenant", "operator", "reason")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    APPROVER_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    approver: str
    tenant: str
    operator: str
    reason: str
    def __init__(self, approval_id: _Optional[str] = ..., approver: _Optional[str] = ..., tenant: _Optional[str] = ..., operator: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class IssueApprovalTokenResponse(_message.Message):
    __slots__ = ("token", "link", "expires_ms")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    LINK_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_MS_FIELD_NUMBER: _ClassVar[int]
    token: str
    link: str
    expires_ms: int
    def __init__(self, token: _Optional[str] = ..., link: _Optional[str] = ..., expires_ms: _Optional[int] = ...) -> None: ...

class RevokeApprovalTokensRequest(_message.Message):
    __slots__ = ("approval_id", "approver", "tenant", "operator", "reason")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    APPROVER_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    approver: str
    tenant: str
    operator: str
    reason: str
    def __init__(self, approval_id: _Optional[str] = ..., approver: _Optional[str] = ..., tenant: _Optional[str] = ..., operator: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RevokeApprovalTokensResponse(_message.Message):
    __slots__ = ("revoked",)
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    revoked: int
    def __init__(self, revoked: _Optional[int] = ...) -> None: ...

class ChangeApproverRoleRequest(_message.Message):
    __slots__ = ("grant", "tenant", "role", "approver", "operator", "reason")
    GRANT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    APPROVER_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    grant: bool
    tenant: str
    role: str
    approver: str
    operator: str
    reason: str
    def __init__(self, grant: _Optional[bool] = ..., tenant: _Optional[str] = ..., role: _Optional[str] = ..., approver: _Optional[str] = ..., operator: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ChangeApproverRoleResponse(_message.Message):
    __slots__ = ("changed",)
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    changed: bool
    def __init__(self, changed: _Optional[bool] = ...) -> None: ...

class ListApproverRolesRequest(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    def __init__(self, tenant: _Optional[str] = ...) -> None: ...

class RoleMember(_message.Message):
    __slots__ = ("role", "approver")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    APPROVER_FIELD_NUMBER: _ClassVar[int]
    role: str
    approver: str
    def __init__(self, role: _Optional[str] = ..., approver: _Optional[str] = ...) -> None: ...

class ListApproverRolesResponse(_message.Message):
    __slots__ = ("members",)
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[RoleMember]
    def __init__(self, members: _Optional[_Iterable[_Union[RoleMember, _Mapping]]] = ...) -> None: ...

class VerifyAuditRequest(_message.Message):
    __slots__ = ("expect_head", "head_only")
    EXPECT_HEAD_FIELD_NUMBER: _ClassVar[int]
    HEAD_ONLY_FIELD_NUMBER: _ClassVar[int]
    expect_head: bytes
    head_only: bool
    def __init__(self, expect_head: _Optional[bytes] = ..., head_only: _Optional[bool] = ...) -> None: ...

class VerifyAuditResponse(_message.Message):
    __slots__ = ("ok", "checked", "head_seq", "head_hash", "first_bad_seq", "first_bad_audit_id", "problem")
    OK_FIELD_NUMBER: _ClassVar[int]
    CHECKED_FIELD_NUMBER: _ClassVar[int]
    HEAD_SEQ_FIELD_NUMBER: _ClassVar[int]
    HEAD_HASH_FIELD_NUMBER: _ClassVar[int]
    FIRST_BAD_SEQ_FIELD_NUMBER: _ClassVar[int]
    FIRST_BAD_AUDIT_ID_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    checked: int
    head_seq: int
    head_hash: bytes
    first_bad_seq: int
    first_bad_audit_id: int
    problem: str
    def __init__(self, ok: _Optional[bool] = ..., checked: _Optional[int] = ..., head_seq: _Optional[int] = ..., head_hash: _Optional[bytes] = ..., first_bad_seq: _Optional[int] = ..., first_bad_audit_id: _Optional[int] = ..., problem: _Optional[str] = ...) -> None: ...

class ListAuditRequest(_message.Message):
    __slots__ = ("target", "limit", "after_seq")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    target: str
    limit: int
    after_seq: int
    def __init__(self, target: _Optional[str] = ..., limit: _Optional[int] = ..., after_seq: _Optional[int] = ...) -> None: ...

class AuditRecord(_message.Message):
    __slots__ = ("seq", "time_ms", "actor", "action", "target", "reason", "detail", "hash")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    seq: int
    time_ms: int
    actor: str
    action: str
    target: str
    reason: str
    detail: bytes
    hash: bytes
    def __init__(self, seq: _Optional[int] = ..., time_ms: _Optional[int] = ..., actor: _Optional[str] = ..., action: _Optional[str] = ..., target: _Optional[str] = ..., reason: _Optional[str] = ..., detail: _Optional[bytes] = ..., hash: _Optional[bytes] = ...) -> None: ...

class ListAuditResponse(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[AuditRecord]
    def __init__(self, records: _Optional[_Iterable[_Union[AuditRecord, _Mapping]]] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WorkerSeen(_message.Message):
    __slots__ = ("worker_id", "queue", "pool", "last_seen_ms")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_MS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    queue: str
    pool: str
    last_seen_ms: int
    def __init__(self, worker_id: _Optional[str] = ..., queue: _Optional[str] = ..., pool: _Optional[str] = ..., last_seen_ms: _Optional[int] = ...) -> None: ...

class QueueDepth(_message.Message):
    __slots__ = ("queue", "pool", "ready", "delayed", "leased", "oldest_ready_s")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    DELAYED_FIELD_NUMBER: _ClassVar[int]
    LEASED_FIELD_NUMBER: _ClassVar[int]
    OLDEST_READY_S_FIELD_NUMBER: _ClassVar[int]
    queue: str
    pool: str
    ready: int
    delayed: int
    leased: int
    oldest_ready_s: float
    def __init__(self, queue: _Optional[str] = ..., pool: _Optional[str] = ..., ready: _Optional[int] = ..., delayed: _Optional[int] = ..., leased: _Optional[int] = ..., oldest_ready_s: _Optional[float] = ...) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("version", "database_ok", "database_detail", "console_url", "metrics_url", "workers", "queues")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DATABASE_OK_FIELD_NUMBER: _ClassVar[int]
    DATABASE_DETAIL_FIELD_NUMBER: _ClassVar[int]
    CONSOLE_URL_FIELD_NUMBER: _ClassVar[int]
    METRICS_URL_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    version: str
    database_ok: bool
    database_detail: str
    console_url: str
    metrics_url: str
    workers: _containers.RepeatedCompositeFieldContainer[WorkerSeen]
    queues: _containers.RepeatedCompositeFieldContainer[QueueDepth]
    def __init__(self, version: _Optional[str] = ..., database_ok: _Optional[bool] = ..., database_detail: _Optional[str] = ..., console_url: _Optional[str] = ..., metrics_url: _Optional[str] = ..., workers: _Optional[_Iterable[_Union[WorkerSeen, _Mapping]]] = ..., queues: _Optional[_Iterable[_Union[QueueDepth, _Mapping]]] = ...) -> None: ...

class PrincipalInfo(_message.Message):
    __slots__ = ("name", "role", "tenants", "queues", "created_at_ms", "created_by", "rotated_at_ms", "revoked_at_ms", "pools")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    ROTATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    role: str
    tenants: _containers.RepeatedScalarFieldContainer[str]
    queues: _containers.RepeatedScalarFieldContainer[str]
    created_at_ms: int
    created_by: str
    rotated_at_ms: int
    revoked_at_ms: int
    pools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., role: _Optional[str] = ..., tenants: _Optional[_Iterable[str]] = ..., queues: _Optional[_Iterable[str]] = ..., created_at_ms: _Optional[int] = ..., created_by: _Optional[str] = ..., rotated_at_ms: _Optional[int] = ..., revoked_at_ms: _Optional[int] = ..., pools: _Optional[_Iterable[str]] = ...) -> None: ...

class ChangeCredentialRequest(_message.Message):
    __slots__ = ("action", "name", "role", "tenants", "queues", "operator", "reason", "pools")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    action: str
    name: str
    role: str
    tenants: _containers.RepeatedScalarFieldContainer[str]
    queues: _containers.RepeatedScalarFieldContainer[str]
    operator: str
    reason: str
    pools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, action: _Optional[str] = ..., name: _Optional[str] = ..., role: _Optional[str] = ..., tenants: _Optional[_Iterable[str]] = ..., queues: _Optional[_Iterable[str]] = ..., operator: _Optional[str] = ..., reason: _Optional[str] = ..., pools: _Optional[_Iterable[str]] = ...) -> None: ...

class ChangeCredentialResponse(_message.Message):
    __slots__ = ("principal", "token")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    principal: PrincipalInfo
    token: str
    def __init__(self, principal: _Optional[_Union[PrincipalInfo, _Mapping]] = ..., token: _Optional[str] = ...) -> None: ...

class ListCredentialsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListCredentialsResponse(_message.Message):
    __slots__ = ("principals",)
    PRINCIPALS_FIELD_NUMBER: _ClassVar[int]
    principals: _containers.RepeatedCompositeFieldContainer[PrincipalInfo]
    def __init__(self, principals: _Optional[_Iterable[_Union[PrincipalInfo, _Mapping]]] = ...) -> None: ...

class WorkItem(_message.Message):
    __slots__ = ("id", "complete", "fail", "heartbeat", "query", "traceparent")
    ID_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    FAIL_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    id: int
    complete: CompleteTaskRequest
    fail: FailTaskRequest
    heartbeat: HeartbeatRequest
    query: CompleteQueryRequest
    traceparent: str
    def __init__(self, id: _Optional[int] = ..., complete: _Optional[_Union[CompleteTaskRequest, _Mapping]] = ..., fail: _Optional[_Union[FailTaskRequest, _Mapping]] = ..., heartbeat: _Optional[_Union[HeartbeatRequest, _Mapping]] = ..., query: _Optional[_Union[CompleteQueryRequest, _Mapping]] = ..., traceparent: _Optional[str] = ...) -> None: ...

class WorkBatch(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[WorkItem]
    def __init__(self, items: _Optional[_Iterable[_Union[WorkItem, _Mapping]]] = ...) -> None: ...

class WorkError(_message.Message):
    __slots__ = ("type", "message", "fields", "code")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    type: str
    message: str
    fields: str
    code: str
    def __init__(self, type: _Optional[str] = ..., message: _Optional[str] = ..., fields: _Optional[str] = ..., code: _Optional[str] = ...) -> None: ...

class WorkAnswer(_message.Message):
    __slots__ = ("id", "complete", "fail", "heartbeat", "query", "error")
    ID_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    FAIL_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    id: int
    complete: CompleteTaskResponse
    fail: FailTaskResponse
    heartbeat: HeartbeatResponse
    query: CompleteQueryResponse
    error: WorkError
    def __init__(self, id: _Optional[int] = ..., complete: _Optional[_Union[CompleteTaskResponse, _Mapping]] = ..., fail: _Optional[_Union[FailTaskResponse, _Mapping]] = ..., heartbeat: _Optional[_Union[HeartbeatResponse, _Mapping]] = ..., query: _Optional[_Union[CompleteQueryResponse, _Mapping]] = ..., error: _Optional[_Union[WorkError, _Mapping]] = ...) -> None: ...

class WorkAnswers(_message.Message):
    __slots__ = ("answers", "more")
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    answers: _containers.RepeatedCompositeFieldContainer[WorkAnswer]
    more: bool
    def __init__(self, answers: _Optional[_Iterable[_Union[WorkAnswer, _Mapping]]] = ..., more: _Optional[bool] = ...) -> None: ...
