"""What applications say about runs and hear back: start and signal requests, a start's result,
a run's description, and the limits on ids and operator notes."""

from __future__ import annotations

from dataclasses import dataclass

from amber.history import Discarded, FailureRecord, Run, Task, Timer

DEFAULT_TENANT = "default"


MAX_HISTORY_PAGE = 10_000
"""Events returned by one history read; page with `after_seq`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalRequest:
    """A signal to deliver: buffered in history until the workflow waits for it."""

    name: str
    payload: bytes
    request_id: str = ""
    """Deduplication key: a second delivery with the same id changes nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StartRequest:
    """Start a run of `workflow_type`; idempotent on (tenant, workflow_id)."""

    workflow_type: str
    input: bytes
    tenant: str = DEFAULT_TENANT
    workflow_id: str = ""
    """Caller-chosen id; a second start with the same id returns the first run."""
    version: str = ""
    """Digest or prefix to pin; default: the type's current version."""
    queue: str = ""
    execution_timeout_ms: int = 0
    """Close the run as timed out after this long (0: never)."""
    signal: SignalRequest | None = None
    """Signal-with-start: deliver this signal, starting the run first if needed."""
    traceparent: str = ""
    """The trace the run joins (the server sets it from the call's own span)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StartResult:
    """The run a start created, or the one its workflow id already named."""

    run: Run
    already_started: bool
    signalled: bool = False
    """The start's signal was appended to the run's history."""
    duplicate: bool = False
    """The start's signal carried a request id delivered before: refused, nothing appended."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunDescription:
    """What an operator needs to see why a run is where it is."""

    run: Run
    tasks: tuple[Task, ...]
    recent_failures: tuple[FailureRecord, ...]
    timers: tuple[Timer, ...] = ()
    discarded: tuple[Discarded, ...] = ()
    """Deliveries recorded for audit but not applied (duplicates, late reports)."""
    unserved: tuple[tuple[str, str], ...] = ()
    """(queue, pool) of pending tasks no worker polled on the answering server lately."""
