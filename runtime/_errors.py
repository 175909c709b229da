"""Engine errors that are not guest faults (those live in `_faults`)."""

from __future__ import annotations

from abi import AmberError, InvalidInput


class PayloadTooLarge(InvalidInput):
    """A payload is over the server's limit; nothing was written."""


class CorruptHistory(AmberError):
    """A stored history breaks an invariant the engine itself maintains (a bug, not a guest)."""


class NotAuthorised(AmberError):
    """The caller may not run this command (an operator command without a valid token)."""
