"""Handles: what `workflow.start_*` returns for a command the workflow awaits later.

A handle is the command's index. `result()` is an await (`amber_await`): it returns the recorded
result, raises the recorded error, raises the run's cancellation once if it is due there, or
waits (suspends the activation) when history does not hold the result yet. Awaiting the same handle
again is allowed and reads the same result (a result an await skipped for the cancellation is
still there). `workflow.wait_any` awaits whichever of several was delivered first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _approvals, _commands, _msgpack, _replay
from ._approvals import ApprovalResult
from ._errors import ActivityError, ApplicationError, ChildWorkflowError, TimerCancelledError
from ._replay import Activation, Outcome

__all__ = [
    "ActivityHandle",
    "ApprovalHandle",
    "ChildWorkflowHandle",
    "Handle",
    "SignalHandle",
    "TimerHandle",
    "live_indices",
]


class Handle:
    """A command the workflow can await."""

    __slots__ = ("_activation", "index")

    def __init__(self, activation: Activation, index: int) -> None:
        self._activation = activation
        self.index = index
        """The command's index in this activation (0, 1, 2, ... in issue order)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(index={self.index})"

    def _live(self) -> Activation:
        """The activation the handle was issued in, which must be the running one."""
        if _replay.current() is not self._activation:
            raise RuntimeError("this handle belongs to another workflow activation")
        return self._activation

    def _outcome(self) -> Outcome:
        return self._live().await_one(self.index)

    def result(self) -> Any:
        """Await the command's result (see the module docstring)."""
        raise NotImplementedError


class ActivityHandle(Handle):
    """A scheduled activity."""

    __slots__ = ()

    def result(self) -> Any:
        """The activity's result; raises `ActivityError` with its recorded error."""
        outcome = self._outcome()
        if not outcome.ok:
            raise ActivityError(outcome.error_message, type=outcome.error_type)
        return _msgpack.decode(outcome.value)


class TimerHandle(Handle):
    """A durable timer."""

    __slots__ = ()

    def result(self) -> None:
        """Returns when the timer fires; raises `TimerCancelledError` once it was cancelled."""
        outcome = self._outcome()
        if outcome.ok:
            return
        if outcome.error_type == "TimerCancelled":
            raise TimerCancelledError(outcome.error_message)
        raise ApplicationError(outcome.error_message, type=outcome.error_type)

    def cancel(self) -> None:
        """Issue a `cancel_timer` for this timer: its result becomes `TimerCancelled` unless it
        had fired already. Every call issues the command: always cancel where the code says so,
        never depending on whether the timer has a result (a replay that sees a later result
        would issue different commands)."""
        self._live().issue(_commands.cancel_timer(self.index))


class SignalHandle(Handle):
    """A wait for the next signal of one name."""

    __slots__ = ()

    def result(self) -> Any:
        """The signal's payload."""
        outcome = self._outcome()
        if not outcome.ok:
            raise ApplicationError(outcome.error_message, type=outcome.error_type)
        return _msgpack.decode(outcome.value)


class ChildWorkflowHandle(Handle):
    """A started child workflow."""

    __slots__ = ()

    def result(self) -> Any:
        """The child's result; raises `ChildWorkflowError` (`ChildFailed`, `ChildCancelled`,
        `ChildTerminated`, `ChildTimedOut`) when it ended without one."""
        outcome = self._outcome()
        if not outcome.ok:
            raise ChildWorkflowError(outcome.error_message, type=outcome.error_type)
        return _msgpack.decode(outcome.value)


class ApprovalHandle(Handle):
    """A requested approval."""

    __slots__ = ()

    def result(self) -> ApprovalResult:
        """How the approval ended (approved, rejected or expired) and who decided what."""
        outcome = self._outcome()
        if not outcome.ok:
            raise ApplicationError(outcome.error_message, type=outcome.error_type)
        return _approvals.parse_result(outcome.value)


def live_indices(handles: Sequence[Handle]) -> tuple[Activation, list[int]]:
    """The running activation and the handles' indices, checking each belongs to it."""
    if isinstance(handles, Handle) or not all(isinstance(h, Handle) for h in handles):
        raise TypeError("expected a sequence of handles from workflow.start_*")
    for handle in handles:
        handle._live()
    return _replay.current(), [handle.index for handle in handles]
