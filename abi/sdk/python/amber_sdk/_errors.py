"""The SDK's errors, grouped by what the code that sees them should do.

- `ApplicationError` and its subclasses are answers: raised by user code to fail a workflow or an
  activity attempt, and raised by the SDK when a command's recorded result is an error. Letting
  one propagate out of a workflow fails the run with its `[type, message]`, exactly as the C SDK's
  `return amber_wf_fail(wf, r.error_type, r.error_message)` does.
- `CancelledError` is the run's cancellation, delivered once (see `workflow`). It derives from
  `BaseException`, so an `except Exception` around an await cannot swallow it by accident.
- `NondeterminismError` is a bug in workflow code (a clock read, a random draw); it is not meant
  to be caught, and the activation traps.
- `_Unwind` and its subclasses are how the SDK ends an activation early (suspension,
  continue-as-new, a host that broke the contract while the workflow waited). They derive from
  `BaseException` and are caught only at the entry point.
"""

from __future__ import annotations

__all__ = [
    "ActivityError",
    "ApplicationError",
    "CancelledError",
    "ChildWorkflowError",
    "HttpError",
    "NondeterminismError",
    "TimerCancelledError",
]


class ApplicationError(Exception):
    """An error that is the answer of a workflow or an activity attempt.

    Raise it to fail with a chosen `type` (default: the class name) and `message`. In an
    activity, `non_retryable=True` tells the host not to retry the attempt; any other exception
    an activity raises is retried (type: its class name).
    """

    def __init__(self, message: str = "", *, type: str | None = None, non_retryable: bool = False):
        super().__init__(message)
        self.message = message
        """What went wrong, for people."""
        self.type: str = type if type is not None else self.__class__.__name__
        """What went wrong, for code: the error type recorded in history."""
        self.non_retryable = non_retryable
        """For activities: whether the host must not retry this attempt."""

    def __str__(self) -> str:
        return self.message


class ActivityError(ApplicationError):
    """An activity's recorded error (its retries exhausted, a timeout `amber.timeout.*`, a
    sandbox fault `amber.*`, or `Cancelled` for an activity the host cancelled before it ran)."""

    def __init__(self, message: str, *, type: str) -> None:
        super().__init__(message, type=type)


class ChildWorkflowError(ApplicationError):
    """A child workflow's recorded error: `type` is how the child ended (`ChildFailed`,
    `ChildCancelled`, `ChildTerminated`, `ChildTimedOut`, `ChildStartFailed`); for a child
    that failed with an error of its own, `cause_type` and `cause_message` are that error's
    (as Temporal's `ChildWorkflowError.cause`), else "" and the whole message."""

    def __init__(self, message: str, *, type: str) -> None:
        super().__init__(message, type=type)
        cause_type, sep, cause_message = message.partition(": ")
        named = type == "ChildFailed" and sep and cause_type and " " not in cause_type
        self.cause_type: str = cause_type if named else ""
        """The error type the child failed with (the host records it as `type: message`)."""
        self.cause_message: str = cause_message if named else message
        """The child's own error message."""


class TimerCancelledError(ApplicationError):
    """Awaiting a timer that `TimerHandle.cancel` cancelled before it fired."""

    def __init__(self, message: str = "the timer was cancelled") -> None:
        super().__init__(message, type="TimerCancelled")


class HttpError(ApplicationError):
    """An activity's HTTP request got no response: `HostNotAllowed`, `Timeout`,
    `ConnectionError` or `BadRequest`. Left uncaught, it fails the attempt; non-retryably for
    `HostNotAllowed` and `BadRequest`, which no retry can fix."""

    def __init__(self, message: str, *, type: str) -> None:
        super().__init__(message, type=type, non_retryable=type in ("HostNotAllowed", "BadRequest"))


class CancelledError(BaseException):
    """The run's cancellation, raised by the one await it is delivered to.

    Catch it to compensate; re-raise it (or raise a new one) to close the run as cancelled with
    the error `["Cancelled", message]`. In an activity, raising it fails the attempt with a
    non-retryable `Cancelled`: the usual answer when `activity.heartbeat` returned True.
    """

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message
        """The reason given with the cancellation request."""

    def __str__(self) -> str:
        return self.message


class NondeterminismError(Exception):
    """Workflow code did something a replay cannot repeat (read a clock, drew randomness, slept
    for real); the message names the workflow-safe replacement."""


class _Unwind(BaseException):
    """Ends the activation early; caught only by the entry point."""


class _Suspend(_Unwind):
    """An await needs a result history does not hold yet (or history does not match the code):
    the activation's output is `output`, status "suspended" with every command issued."""

    def __init__(self, output: bytes) -> None:
        super().__init__()
        self.output = output


class _HostError(_Unwind):
    """The host answered `await_next` with something that is not the run's next input envelope
    (another run, a history that shrank, a malformed envelope): a host bug. The activation
    raises `error` at the entry point (the host sees a trap), whatever the workflow code does
    after this unwind, so an `except Exception` around an await cannot turn it into a result."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class _ContinueAsNew(_Unwind):
    """`workflow.continue_as_new`: close the run and start a new one with `payload`."""

    def __init__(self, payload: bytes) -> None:
        super().__init__()
        self.payload = payload
