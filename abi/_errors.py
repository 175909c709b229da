"""The root of Amber's error tree, grouped by what the caller should do next.

It lives in `abi`, the bottom of the import graph, so that every package can derive from it.
"""

from __future__ import annotations


class AmberError(Exception):
    """Base of every error Amber raises on purpose."""


class RetryableError(AmberError):
    """A transient condition (database or network outage): the same call may succeed later."""


class InvalidInput(AmberError):
    """The request itself is wrong (bad module, bad payload, unknown name): fix it, do not retry."""


class NotFound(AmberError):
    """The named run, version or task does not exist."""


class Conflict(AmberError):
    """The request collides with the current state (a stale write, an id in use): re-read first."""
