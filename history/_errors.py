"""Errors of the history layer, each placed in the tree by what the caller should do next."""

from __future__ import annotations

from amber.abi import AmberError, Conflict, InvalidInput, NotFound, RetryableError


class StoreUnavailable(RetryableError):
    """The database could not be reached or the transaction kept failing transiently."""


class UnstorableText(InvalidInput):
    """A text value holds a NUL character, which PostgreSQL text cannot store: the caller's
    input, refused before anything was written."""


class DuplicateRow(Conflict):
    """A concurrent transaction inserted the same unique key first (two starts of one workflow
    id, say). The transaction is gone: re-read and decide again."""


class VersionConflict(Conflict):
    """An append expected the run's history to end at one position; it ends at another.

    The writer computed its events from a stale view of the run: re-read and recompute. It is
    never retried blindly.
    """

    def __init__(self, run_id: str, expected: int, actual: int | None) -> None:
        where = f"it ends at {actual}" if actual is not None else "its commands moved on"
        super().__init__(f"run {run_id}: expected history to end at seq {expected}, but {where}")
        self.run_id = run_id
        self.expected = expected
        self.actual = actual


class RunNotFound(NotFound):
    """No run with this id exists (for this tenant)."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id} not found")
        self.run_id = run_id


class WorkflowIdInUse(Conflict):
    """A run with this workflow id exists and the new request does not match it."""


class LeaseLost(Conflict):
    """The task is no longer leased under this fencing token (expired, re-leased or finished).

    A late worker gets this; whatever it computed is discarded.
    """

    def __init__(self, task_id: int, fencing: int) -> None:
        super().__init__(f"task {task_id} is not leased under fencing token {fencing}")
        self.task_id = task_id
        self.fencing = fencing


class MalformedPayload(AmberError):
    """A stored (or exported) event payload does not fit its type's payload class: the store or
    the bundle was changed outside Amber. Nothing is retried; the event is left as it is."""
