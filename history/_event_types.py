"""The closed set of event types a run's history is made of."""

from __future__ import annotations

import enum


class EventType(enum.StrEnum):
    """What happened. Each type's payload is the class of the same name in `history._payloads`
    (reference: docs/events.md, generated from those classes)."""

    RUN_STARTED = "RunStarted"
    """The run exists."""
    ACTIVITY_SCHEDULED = "ActivityScheduled"
    """The workflow issued command `cmd` to run an activity."""
    ACTIVITY_COMPLETED = "ActivityCompleted"
    """An attempt of command `cmd` succeeded, or an operator completed
    a poisoned one by hand."""
    ACTIVITY_FAILED = "ActivityFailed"
    """Command `cmd` failed for good."""
    MARKER_RECORDED = "MarkerRecorded"
    """A value the workflow observed was recorded as command `cmd`."""
    RUN_COMPLETED = "RunCompleted"
    """The workflow returned a result."""
    RUN_FAILED = "RunFailed"
    """The workflow returned an application error."""
    TIMER_STARTED = "TimerStarted"
    """The workflow started a durable timer."""
    TIMER_FIRED = "TimerFired"
    """Timer `cmd` fired."""
    TIMER_CANCELLED = "TimerCancelled"
    """Command `cmd` cancelled the timer issued as command `timer`."""
    SIGNAL_AWAITED = "SignalAwaited"
    """The workflow waits for the next signal `name` as command `cmd`."""
    SIGNAL_RECEIVED = "SignalReceived"
    """A signal arrived; it resolves the oldest unmatched wait."""
    CANCEL_REQUESTED = "CancelRequested"
    """Cancellation was requested."""
    ACTIVITY_CANCELLED = "ActivityCancelled"
    """Activity `cmd` was dropped before it started, because the run was cancelled."""
    ACTIVITY_TIMED_OUT = "ActivityTimedOut"
    """Activity `cmd` timed out for good."""
    CHILD_STARTED = "ChildStarted"
    """Command `cmd` started a child run."""
    CHILD_COMPLETED = "ChildCompleted"
    """The child of command `cmd` completed."""
    CHILD_FAILED = "ChildFailed"
    """The child of command `cmd` ended without a result."""
    RUN_CANCELLED = "RunCancelled"
    """The workflow closed as cancelled."""
    RUN_TERMINATED = "RunTerminated"
    """An operator (or a parent's close policy) terminated the run."""
    RUN_TIMED_OUT = "RunTimedOut"
    """The workflow execution timeout passed."""
    RUN_CONTINUED_AS_NEW = "RunContinuedAsNew"
    """The workflow continued as a new run."""
    RUN_RESET = "RunReset"
    """An operator reset the run: a new run replays history up to `to_seq`."""
    RUN_MIGRATED = "RunMigrated"
    """The run moved to another module version after a replay check."""
    UPGRADE_FAILED = "UpgradeFailed"
    """An automatic upgrade could not replay the run on `to`; it stays put."""
    RUN_SUSPENDED = "RunSuspended"
    """A poisoned task kept failing: the run waits for an operator (it stays `running`; no
    worker time is spent on it)."""
    RUN_RESUMED = "RunResumed"
    """An operator released a suspended or poisoned run:
    `retry` (same version), `resume` (optionally on a fixed version), `skip` (with a result)."""
    APPROVAL_REQUESTED = "ApprovalRequested"
    """The workflow asked people to approve `action` as command `cmd`."""
    APPROVAL_RESOLVED = "ApprovalResolved"
    """Approval command `cmd` ended."""
    HISTORY_WARNING = "HistoryWarning"
    """The history passed the warning threshold of its limits."""


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
