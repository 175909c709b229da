"""The root of Amber's error tree, grouped by what the caller should do next, and the registry
that lets an error cross a process boundary as the same class with the same fields.

It lives in `abi`, the bottom of the import graph, so that every package can derive from it.

Every subclass of `AmberError` records itself under its `wire_name` as it is defined, so the
list of errors a receiver can rebuild is the set of classes it has imported, never a list kept
by hand. An error's fields are the public attributes its constructor set on the instance
(`run_id`, `task_id`, `expected`, ...); a copy is made from its message and those fields
without calling the constructor, whose signature differs from class to class.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

E = TypeVar("E", bound="AmberError")


class AmberError(Exception):
    """Base of every error Amber raises on purpose."""

    wire_name: ClassVar[str] = "AmberError"
    """The stable name this class travels under: its class name, unless it sets its own (for
    two classes that share a name)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "wire_name" not in cls.__dict__:
            cls.wire_name = cls.__name__
        _register(cls)


_REGISTRY: dict[str, type[AmberError]] = {}


def _register(cls: type[AmberError]) -> None:
    known = _REGISTRY.get(cls.wire_name)
    if known is not None and _origin(known) != _origin(cls):
        raise TypeError(
            f"{_origin(cls)} and {_origin(known)} both travel as {cls.wire_name!r}:"
            " give one of them its own `wire_name`"
        )
    _REGISTRY[cls.wire_name] = cls  # a redefinition (a reloaded module) replaces the old class


def _origin(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


_register(AmberError)


def error_types() -> Mapping[str, type[AmberError]]:
    """Every `AmberError` class defined so far, by wire name: use it to turn a received name
    back into a class. It holds the classes of the modules this process has imported."""
    return MappingProxyType(_REGISTRY)


def error_fields(exc: AmberError) -> dict[str, Any]:
    """The fields `exc` carries besides its message (the public attributes set on the instance,
    not its class): what a copy of it in another process needs."""
    return {k: v for k, v in vars(exc).items() if _is_field(type(exc), k)}


def rebuild_error(cls: type[E], message: str, fields: Mapping[str, Any]) -> E:
    """An instance of `cls` whose `str()` is `message` and whose attributes are `fields`, made
    without calling its constructor: use it to raise again an error received from elsewhere.
    Names that are not fields of `cls` (private, or defined by the class) are ignored."""
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    for name, value in fields.items():
        if _is_field(cls, name):
            setattr(err, name, value)
    return err


def _is_field(cls: type[AmberError], name: str) -> bool:
    # Class attributes (methods, `args`, a fault's `reason`) are the class's, not the instance's:
    # an incoming field must not shadow them.
    return name.isidentifier() and not name.startswith("_") and not hasattr(cls, name)


class RetryableError(AmberError):
    """A transient condition (database or network outage): the same call may succeed later."""


class InvalidInput(AmberError):
    """The request itself is wrong (bad module, bad payload, unknown name): fix it, do not retry."""


class NotFound(AmberError):
    """The named run, version or task does not exist."""


class Conflict(AmberError):
    """The request collides with the current state (a stale write, an id in use): re-read first."""
