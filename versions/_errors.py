"""Errors of the version registry."""

from __future__ import annotations

from amber.abi import InvalidInput, NotFound


class InvalidModule(InvalidInput):
    """The uploaded bytes are not an acceptable Amber module; nothing was stored."""


class ModuleTooLarge(InvalidModule):
    """The module is over the registry's size cap."""


class VersionNotFound(NotFound):
    """No stored module matches the digest or prefix."""


class AmbiguousVersion(InvalidInput):
    """A digest prefix matches more than one stored module."""


class UnknownWorkflowType(NotFound):
    """No uploaded module declares this workflow type."""
