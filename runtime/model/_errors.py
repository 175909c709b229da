"""Engine errors that are not guest faults (those live in `_faults`)."""

from __future__ import annotations

from amber.abi import AmberError, Conflict, InvalidInput, NotFound, RetryableError


class PayloadTooLarge(InvalidInput):
    """A payload is over the server's limit; nothing was written."""


class SandboxBusy(RetryableError):
    """This process has no room for another guest instance now (its instance pool is full);
    nothing ran, so the task is the guest's no more than before: try it again later."""


class CorruptHistory(AmberError):
    """A stored history breaks an invariant the engine itself maintains (a bug, not a guest)."""


class NotAuthorised(AmberError):
    """The caller may not run this command (an operator command without a valid token)."""


class NotAuthenticated(NotAuthorised):
    """The server checks credentials and the call carried none it knows (missing, unknown,
    rotated away or revoked)."""


class PrincipalNotFound(NotFound):
    """No live principal (API credential holder) has that name."""


class RunClosed(Conflict):
    """The run has closed: it takes no more signals or cancellations."""


class QueryFailed(Conflict):
    """The query could not be answered (see its type: the replay's failure or no value)."""


class QueryTimedOut(RetryableError):
    """No worker answered the query in time (none running, or all busy)."""


class NotTroubled(Conflict):
    """The run is neither suspended nor holding a poisoned task: there is nothing to triage."""


class InvalidToken(AmberError):
    """The token is unknown, expired, already used, revoked, or not for this approval. Nothing
    changed in the run; the attempt is in the audit log."""


class ApprovalClosed(Conflict):
    """The approval was already decided (approved, rejected or expired)."""


class RemoteError(AmberError):
    """A server error whose type this client does not know."""

    def __init__(self, message: str, *, error_type: str = "") -> None:
        super().__init__(message)
        self.error_type = error_type
        """The name the server sent the error under ("" when it sent none)."""


class RunFailed(Conflict):
    """The run closed without a result: failed, cancelled, terminated or timed out (what
    `get_result` raises instead of handing back nothing)."""

    def __init__(
        self,
        message: str,
        *,
        run_id: str,
        status: str,
        error_type: str = "",
        error_message: str = "",
    ) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.status = status
        """failed, cancelled, terminated or timed_out."""
        self.error_type = error_type
        self.error_message = error_message


class RunStillOpen(RetryableError):
    """The run had not closed when the wait ran out; asking again later is safe."""

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id
