"""Tasks as they travel between server and worker: a leased task, a claim with its history, a
workflow's completion with its new commands, a failure report, a heartbeat's answer, and what
an activation cost."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from amber.abi import Command, ErrorInfo, WorkflowStatus
from amber.history import Event, Run, Task, TaskKind


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedTask:
    """A leased task with what its worker needs to run it."""

    task: Task
    run: Run
    events: tuple[Event, ...] = ()
    """The run's full history (workflow, query and check tasks)."""
    upgrade_to: str = ""
    """Workflow tasks: an automatic upgrade target the worker should try to replay on first."""
    crash_repro: bytes = b""
    """A crashed task: the repro of its last crash (the limits it ran under; empty: none)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowCompletion:
    """A workflow activation's result, as a worker reports it."""

    expected_last_seq: int
    commands: tuple[NewCommand, ...]
    status: WorkflowStatus
    result: bytes | None = None
    """The result when completed; the new run's input when continuing as new."""
    error: ErrorInfo | None = None
    reactivate: bool = False
    """Activate the workflow again at once (a buffered signal can be delivered)."""
    migrate_to: str = ""
    """The activation replayed on this version (an automatic upgrade): move the run to it."""
    upgrade_failed: dict[str, Any] | None = None
    """Why the automatic upgrade target could not replay the run (it stays where it is)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatAck:
    lease_expires_at: datetime
    cancel_requested: bool


def idempotency_key(run_id: str, cmd: int) -> str:
    """The same for every attempt of one activity of one run."""
    return f"{run_id}/{cmd}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LeasedTask:
    """A task as a worker receives it over the API."""

    task_id: int
    fencing: int
    kind: TaskKind
    run_id: str
    tenant: str
    digest: str
    name: str
    attempt: int
    lease_expires_at: datetime
    input: bytes = b""
    events: tuple[Event, ...] = ()
    cmd: int = 0
    args: bytes = b""
    idempotency_key: str = ""
    heartbeat_details: bytes | None = None
    deadline: datetime | None = None
    """The attempt's own deadline (start-to-close or schedule-to-close), if it has one."""
    cancel_requested: bool = False
    upgrade_to: str = ""
    """Workflow tasks: an automatic upgrade version to try replaying on first."""
    pool: str = "main"
    """main, or surgical for a poisoned task."""
    crash_count: int = 0
    """Consecutive crashes of this task at its current step."""
    traceparent: str = ""
    """The run's trace: the worker's span for this task is a child of it."""
    crash_repro: bytes = b""
    """A crashed task: the repro of its last crash, whose limits this attempt runs under at
    least (its diagnosis must not depend on the pool or worker that runs it; empty: none)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureReport:
    """A failed activation, as a worker reports it."""

    reason: str
    message: str
    trap_code: str | None = None
    fuel_used: int | None = None
    memory_bytes: int | None = None
    step: int | None = None
    trace_id: str = ""
    """The activation's trace (the surgical pool traces every host call and replayed event)."""
    host_calls: tuple[str, ...] = ()
    """The last host calls before the failure, oldest first (for triage)."""
    repro: bytes = b""
    """msgpack: what replaying this activation offline needs (see `runtime.Repro`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NewCommand:
    """A command a workflow issued beyond what history records, with its index."""

    cmd: int
    command: Command


MAX_NEW_COMMANDS = 1000
"""New commands one workflow activation may issue (Temporal caps pending activities at 2,000)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivationStats:
    """What one activation cost (fuel is deterministic for a given module and input)."""

    fuel_used: int
    memory_bytes: int
    host_calls: int
    duration_s: float
    logs: tuple[tuple[int, str], ...] = ()
    continued: bool = False
    """A workflow's live instance went on from its last wait (sticky): nothing was replayed,
    and fuel and memory are that stretch's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ThenWorkflow:
    """The run's next workflow activation, which a worker ran itself right after an activity of
    the run completed: on its copy of the history with that activity's `ActivityCompleted` at
    the end. Reported with the activity; the server applies both in one transaction when the
    run's head is still where the worker saw it, and otherwise records the activity alone."""

    done: WorkflowCompletion
    digest: str
    """The version the activation replayed on (it must be the run's pinned one)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    """What recording a task's outcome did (server side)."""

    next: ClaimedTask | None = None
    """The worker's next task, when it asked for one (eager dispatch)."""
    appended: tuple[Event, ...] = ()
    """The events appended at the head the worker saw (workflow activations, combined
    reports); empty when they went elsewhere or not at all."""
    combined: bool = False
    """A `ThenWorkflow` was applied with its activity."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reported:
    """What reporting a task's outcome did (client side): `Recorded` as the worker sees it."""

    next: LeasedTask | None = None
    appended: tuple[Event, ...] = ()
    combined: bool = False
