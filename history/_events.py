"""The event types of a run's history and their msgpack payloads.

An event is immutable once appended. Its payload is a msgpack map whose keys are fixed per type
(listed on `EventType`); user payloads inside it (input, args, results) stay opaque msgpack bytes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgpack


class EventType(enum.StrEnum):
    """What happened. Payload keys in brackets."""

    RUN_STARTED = "RunStarted"
    """The run exists [workflow_type, workflow_id, tenant, input]."""
    ACTIVITY_SCHEDULED = "ActivityScheduled"
    """The workflow issued command `cmd` to run an activity [cmd, name, args, max_attempts]."""
    ACTIVITY_COMPLETED = "ActivityCompleted"
    """An attempt of command `cmd` succeeded [cmd, result, attempt], or an operator completed
    a poisoned one by hand [..., skipped_by, reason]."""
    ACTIVITY_FAILED = "ActivityFailed"
    """Command `cmd` failed for good [cmd, error_type, message, attempt]."""
    MARKER_RECORDED = "MarkerRecorded"
    """A value the workflow observed was recorded as command `cmd` [cmd, kind, value]."""
    RUN_COMPLETED = "RunCompleted"
    """The workflow returned a result [result]."""
    RUN_FAILED = "RunFailed"
    """The workflow returned an application error [error_type, message]."""
    TIMER_STARTED = "TimerStarted"
    """The workflow started a durable timer [cmd, duration_ms, fire_at_ms]."""
    TIMER_FIRED = "TimerFired"
    """Timer `cmd` fired [cmd]."""
    TIMER_CANCELLED = "TimerCancelled"
    """Command `cmd` cancelled the timer issued as command `timer` [cmd, timer]."""
    SIGNAL_AWAITED = "SignalAwaited"
    """The workflow waits for the next signal `name` as command `cmd` [cmd, name]."""
    SIGNAL_RECEIVED = "SignalReceived"
    """A signal arrived [name, payload, request_id]; it resolves the oldest unmatched wait."""
    CANCEL_REQUESTED = "CancelRequested"
    """Cancellation was requested [reason, by]."""
    ACTIVITY_CANCELLED = "ActivityCancelled"
    """Activity `cmd` was dropped before it started, because the run was cancelled [cmd]."""
    ACTIVITY_TIMED_OUT = "ActivityTimedOut"
    """Activity `cmd` timed out for good [cmd, timeout, attempt]."""
    CHILD_STARTED = "ChildStarted"
    """Command `cmd` started a child run [cmd, run_id, workflow_type, workflow_id, policy]."""
    CHILD_COMPLETED = "ChildCompleted"
    """The child of command `cmd` completed [cmd, result]."""
    CHILD_FAILED = "ChildFailed"
    """The child of command `cmd` ended without a result [cmd, error_type, message]."""
    RUN_CANCELLED = "RunCancelled"
    """The workflow closed as cancelled [error_type, message]."""
    RUN_TERMINATED = "RunTerminated"
    """An operator (or a parent's close policy) terminated the run [reason, by]."""
    RUN_TIMED_OUT = "RunTimedOut"
    """The workflow execution timeout passed [timeout_ms]."""
    RUN_CONTINUED_AS_NEW = "RunContinuedAsNew"
    """The workflow continued as a new run [next_run_id, input]."""
    RUN_RESET = "RunReset"
    """An operator reset the run: a new run replays history up to `to_seq`
    [new_run_id, to_seq, reason, by]."""
    RUN_MIGRATED = "RunMigrated"
    """The run moved to another module version after a replay check
    [from, to, checked_seq, by, reason]; later activations replay on `to`."""
    UPGRADE_FAILED = "UpgradeFailed"
    """An automatic upgrade could not replay the run on `to` [to, detail]; it stays put."""
    RUN_SUSPENDED = "RunSuspended"
    """A poisoned task kept failing: the run waits for an operator (it stays `running`; no
    worker time is spent on it) [reason, fingerprint, task_kind, step]."""
    RUN_RESUMED = "RunResumed"
    """An operator released a suspended or poisoned run [action, by, reason, from, to, step]:
    `retry` (same version), `resume` (optionally on a fixed version), `skip` (with a result)."""
    APPROVAL_REQUESTED = "ApprovalRequested"
    """The workflow asked people to approve `action` as command `cmd` [cmd, approval_id, action,
    approvers, roles, required, expires_ms, expires_at_ms]."""
    APPROVAL_RESOLVED = "ApprovalResolved"
    """Approval command `cmd` ended [cmd, approval_id, outcome (approved, rejected, expired),
    decisions, result (msgpack of {outcome, decisions}: what the workflow receives)]."""
    HISTORY_WARNING = "HistoryWarning"
    """The history passed the warning threshold of its limits [events, bytes]."""


CLOSING_EVENTS = frozenset(
    {
        EventType.RUN_COMPLETED,
        EventType.RUN_FAILED,
        EventType.RUN_CANCELLED,
        EventType.RUN_TERMINATED,
        EventType.RUN_TIMED_OUT,
        EventType.RUN_CONTINUED_AS_NEW,
    }
)


def encode_payload(payload: dict[str, Any]) -> bytes:
    packed: bytes = msgpack.packb(payload, use_bin_type=True)
    return packed


def decode_payload(raw: bytes) -> dict[str, Any]:
    doc = msgpack.unpackb(raw, raw=False)
    if not isinstance(doc, dict):
        raise ValueError("event payload is not a map")
    return doc


@dataclass(frozen=True, slots=True, kw_only=True)
class NewEvent:
    """An event about to be appended."""

    type: EventType
    payload: dict[str, Any]
    digest: str
    """The module version that produced it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """An event as stored."""

    run_id: str
    seq: int
    """1-based position in the run's history."""
    type: EventType
    payload: dict[str, Any]
    digest: str
    created_at: datetime
