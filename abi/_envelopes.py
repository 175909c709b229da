"""Host-side codecs for the msgpack envelopes of ABI v1 (see abi/README.md, "Envelopes").

Inputs are encoded from typed values; outputs come from an untrusted guest and are decoded
strictly: anything that is not exactly a valid envelope raises `MalformedEnvelope`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._codec import NotMsgpack, pack, unpack
from ._commands import Command, MalformedEnvelope, parse_command
from ._manifest import ABI_VERSION

MAX_ENVELOPE_BYTES = 4 * 1024 * 1024
"""Default cap on any envelope crossing the sandbox boundary, in either direction."""
MAX_RANDOM_BYTES = 1024
STATUS_OK = 0
STATUS_ERROR = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorInfo:
    """An application error: a type name the code can branch on and a human message."""

    type: str
    message: str
    non_retryable: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedResult:
    """The result of command `cmd`, recorded at history position `seq`."""

    cmd: int
    seq: int
    value: bytes | int | str | None = None
    error: ErrorInfo | None = None

    def encode(self) -> list[Any]:
        if self.error is not None:
            return [self.cmd, self.seq, STATUS_ERROR, [self.error.type, self.error.message]]
        return [self.cmd, self.seq, STATUS_OK, self.value]


class WorkflowStatus(enum.StrEnum):
    SUSPENDED = "suspended"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CONTINUE_AS_NEW = "continue_as_new"


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowOutcome:
    """What one workflow activation produced."""

    status: WorkflowStatus
    commands: tuple[Command, ...]
    """Every command issued in the activation, from index 0."""
    result: bytes | None = None
    """The result when completed; the new run's input when continuing as new."""
    error: ErrorInfo | None = None


class ActivityStatus(enum.StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityOutcome:
    """What one activity attempt produced."""

    status: ActivityStatus
    result: bytes | None = None
    error: ErrorInfo | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelRequest:
    """Cancellation of the run was requested at history position `seq`."""

    seq: int
    reason: str


def encode_workflow_input(
    *,
    run_id: str,
    workflow: str,
    input: bytes,
    results: Sequence[RecordedResult],
    recorded: int = 0,
    cancel: CancelRequest | None = None,
    query: str | None = None,
    workflow_id: str = "",
) -> bytes:
    """The input envelope of a workflow activation (`workflow_id` left out when empty)."""
    doc: dict[str, Any] = {
        "abi": ABI_VERSION,
        "run_id": run_id,
        "workflow": workflow,
    }
    if workflow_id:
        doc["workflow_id"] = workflow_id
    doc |= {
        "input": input,
        "results": [r.encode() for r in results],
        "recorded": recorded,
    }
    if cancel is not None:
        doc["cancel"] = [cancel.seq, cancel.reason]
    if query is not None:
        doc["query"] = query
    return pack(doc)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityInput:
    """Everything one activity attempt is told."""

    run_id: str
    activity: str
    args: bytes
    attempt: int
    idempotency_key: str
    deadline_ms: int
    heartbeat_details: bytes | None = None
    """What an earlier attempt last reported through `heartbeat`."""


def encode_activity_input(request: ActivityInput) -> bytes:
    """The input envelope of an activity attempt."""
    doc: dict[str, Any] = {
        "abi": ABI_VERSION,
        "run_id": request.run_id,
        "activity": request.activity,
        "args": request.args,
        "attempt": request.attempt,
        "idempotency_key": request.idempotency_key,
        "deadline_ms": request.deadline_ms,
    }
    if request.heartbeat_details is not None:
        doc["heartbeat_details"] = request.heartbeat_details
    return pack(doc)


def _unpack(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_ENVELOPE_BYTES:
        raise MalformedEnvelope(f"envelope is {len(raw)} bytes; the cap is {MAX_ENVELOPE_BYTES}")
    try:
        doc = unpack(raw, what="envelope")
    except NotMsgpack as exc:
        raise MalformedEnvelope(f"envelope is not valid msgpack: {exc.detail}") from None
    if not isinstance(doc, dict):
        raise MalformedEnvelope(f"envelope must be a map, got {type(doc).__name__}")
    return doc


def _bin(doc: dict[str, Any], key: str) -> bytes:
    value = doc.get(key)
    if not isinstance(value, bytes):
        raise MalformedEnvelope(f"envelope field {key!r} must be bin, got {type(value).__name__}")
    return value


def _error(value: Any, *, with_retry_flag: bool) -> ErrorInfo:
    if not isinstance(value, list) or len(value) < 2:
        raise MalformedEnvelope("envelope field 'error' must be [type, message, ...]")
    kind, message = value[0], value[1]
    if not isinstance(kind, str) or not isinstance(message, str):
        raise MalformedEnvelope("error type and message must be strings")
    non_retryable = False
    if with_retry_flag and len(value) > 2:
        if not isinstance(value[2], bool):
            raise MalformedEnvelope("error non_retryable flag must be a bool")
        non_retryable = value[2]
    return ErrorInfo(type=kind[:256], message=message[:4096], non_retryable=non_retryable)


def decode_workflow_output(raw: bytes) -> WorkflowOutcome:
    """Decode and validate a workflow output envelope from a guest."""
    doc = _unpack(raw)
    status = workflow_status(doc)
    commands_doc = doc.get("commands", [])
    if not isinstance(commands_doc, list):
        raise MalformedEnvelope("envelope field 'commands' must be a list")
    commands = tuple(parse_command(i, c) for i, c in enumerate(commands_doc))
    return workflow_outcome(status, commands, doc)


def workflow_status(doc: dict[str, Any]) -> WorkflowStatus:
    """An output envelope's status (`MalformedEnvelope` if it names none)."""
    try:
        return WorkflowStatus(doc.get("status", ""))
    except ValueError:
        raise MalformedEnvelope(f"unknown workflow status {doc.get('status')!r}") from None


def workflow_outcome(
    status: WorkflowStatus, commands: tuple[Command, ...], doc: dict[str, Any]
) -> WorkflowOutcome:
    """The outcome of an output envelope `doc` whose status and commands are read already."""
    if status in (WorkflowStatus.COMPLETED, WorkflowStatus.CONTINUE_AS_NEW):
        return WorkflowOutcome(status=status, commands=commands, result=_bin(doc, "result"))
    if status is WorkflowStatus.FAILED:
        error = _error(doc.get("error"), with_retry_flag=False)
        return WorkflowOutcome(status=status, commands=commands, error=error)
    if status is WorkflowStatus.CANCELLED and doc.get("error") is not None:
        error = _error(doc.get("error"), with_retry_flag=False)
        return WorkflowOutcome(status=status, commands=commands, error=error)
    return WorkflowOutcome(status=status, commands=commands)


def decode_activity_output(raw: bytes) -> ActivityOutcome:
    """Decode and validate an activity output envelope from a guest."""
    doc = _unpack(raw)
    try:
        status = ActivityStatus(doc.get("status", ""))
    except ValueError:
        raise MalformedEnvelope(f"unknown activity status {doc.get('status')!r}") from None
    if status is ActivityStatus.COMPLETED:
        return ActivityOutcome(status=status, result=_bin(doc, "result"))
    return ActivityOutcome(status=status, error=_error(doc.get("error"), with_retry_flag=True))
