"""The determinism guard: while workflow code runs, the usual ways to read a clock, draw
randomness or sleep raise `NondeterminismError` naming the workflow-safe replacement.

It patches module attributes (`time.time`, `random.random`, `os.urandom`, `uuid.uuid4`, ...) and
restores them when the workflow function returns or raises. `datetime.datetime` and
`datetime.date` are C types whose methods cannot be patched, so the `datetime` module's names
are pointed at subclasses whose `now`/`utcnow`/`today` raise; `isinstance` and `issubclass` with
them still accept the real classes' instances.

The names the workflow's own module bound to the same functions and classes (`from time import
time`, `from datetime import datetime` at its top) are pointed at the stand-ins too, for the
activation. It is a safety net for the common spellings, not a sandbox: such a name in another
module (a helper the workflow imports) is not the patched one, and a seeded `random.Random(42)`
is deterministic and allowed. Lines that the stdlib `logging` module
timestamps are let through (a timestamp is not a workflow decision); `workflow.logger` is the
replay-aware logger. Activities are not guarded.
"""

from __future__ import annotations

import datetime
import os
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from ._errors import NondeterminismError

__all__ = ["installed"]

_PASS_THROUGH_CALLERS = frozenset({"logging"})
"""Modules whose calls to the patched functions go to the originals."""


def _refuse(spelling: str, hint: str) -> NoReturn:
    raise NondeterminismError(f"{spelling} in workflow code: use {hint}")


def _forbidden(spelling: str, hint: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def replacement(*args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1).f_globals.get("__name__")
        if caller in _PASS_THROUGH_CALLERS:
            return original(*args, **kwargs)
        _refuse(spelling, hint)

    replacement.__name__ = getattr(original, "__name__", spelling)
    replacement.__doc__ = f"Not in workflow code: use {hint}."
    return replacement


_MADE: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
"""By module name: the originals of its patched names, and the replacements made for them.
Every workflow activation installs the guard; they are made again only when an original
changed."""


def _replacements(module: Any, hints: dict[str, str], originals: dict[str, Any]) -> dict[str, Any]:
    made = _MADE.get(module.__name__)
    if made is None or made[0] != originals:  # `==` on functions is identity
        made = (
            originals,
            {
                attr: _forbidden(f"{module.__name__}.{attr}()", hint, originals[attr])
                for attr, hint in hints.items()
            },
        )
        _MADE[module.__name__] = made
    return made[1]


# (module, attribute, hint) for every plain function the guard replaces.
_FUNCTIONS: tuple[tuple[Any, str, str], ...] = (
    (time, "time", "workflow.now()"),
    (time, "time_ns", "workflow.now_ms()"),
    (time, "monotonic", "workflow.now()"),
    (time, "monotonic_ns", "workflow.now_ms()"),
    (time, "perf_counter", "workflow.now()"),
    (time, "perf_counter_ns", "workflow.now_ms()"),
    (time, "sleep", "workflow.sleep()"),
    (random, "random", "workflow.random()"),
    (random, "randint", "workflow.new_random().randint()"),
    (random, "choice", "workflow.new_random().choice()"),
    (random, "choices", "workflow.new_random().choices()"),
    (random, "sample", "workflow.new_random().sample()"),
    (random, "shuffle", "workflow.new_random().shuffle()"),
    (random, "uniform", "workflow.new_random().uniform()"),
    (random, "randrange", "workflow.new_random().randrange()"),
    (random, "getrandbits", "workflow.random_bytes()"),
    (os, "urandom", "workflow.random_bytes()"),
    (uuid, "uuid4", "workflow.uuid4()"),
)


class _DelegatingMeta(type):
    """Lets the guard's stand-in classes answer `isinstance`/`issubclass` like the real ones."""

    _real: type

    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, cls._real)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, cls._real)


_RealDate = datetime.date
_RealDatetime = datetime.datetime


class _GuardedDate(_RealDate, metaclass=_DelegatingMeta):
    _real = _RealDate

    @classmethod
    def today(cls) -> NoReturn:
        _refuse("datetime.date.today()", "workflow.now().date()")


class _GuardedDatetime(_RealDatetime, metaclass=_DelegatingMeta):
    _real = _RealDatetime

    @classmethod
    def now(cls, tz: Any = None) -> NoReturn:
        _refuse("datetime.datetime.now()", "workflow.now()")

    @classmethod
    def utcnow(cls) -> NoReturn:
        _refuse("datetime.datetime.utcnow()", "workflow.now()")

    @classmethod
    def today(cls) -> NoReturn:
        _refuse("datetime.datetime.today()", "workflow.now()")


_CLASSES: dict[str, type] = {"date": _GuardedDate, "datetime": _GuardedDatetime}
"""The `datetime` module's names the guard points at its stand-ins."""

_BY_MODULE: tuple[tuple[Any, dict[str, str]], ...] = tuple(
    (module, {attr: hint for m, attr, hint in _FUNCTIONS if m is module})
    for module in dict.fromkeys(m for m, _, _ in _FUNCTIONS)
)
"""`_FUNCTIONS` by module, in order: the guard swaps each module's names in one update of its
namespace (an attribute at a time was most of a fresh activation's guard cost)."""

_depth = 0

_BOUND: dict[int, tuple[int, tuple[str, ...]]] = {}
"""By id of a module namespace: its size when it was read, and its names bound to what the guard
replaces (read again when its size changes: module-level names are bound at import)."""


def _bound_names(space: dict[str, Any], stand_ins: dict[int, Any]) -> tuple[str, ...]:
    size = len(space)
    known = _BOUND.get(id(space))
    if known is not None and known[0] == size:
        return known[1]
    names = tuple(name for name, value in space.items() if id(value) in stand_ins)
    _BOUND[id(space)] = (size, names)
    return names


@contextmanager
def installed(scope: dict[str, Any] | None = None) -> Iterator[None]:
    """Guard the block; restores every patched name afterwards, also when it raises. Nested use
    is a no-op inside the outer one. `scope`: the workflow's module namespace, whose names bound
    to a guarded function or class are guarded too."""
    global _depth
    if _depth:
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    saved: list[tuple[dict[str, Any], dict[str, Any]]] = []
    stand_ins: dict[int, Any] = {}
    try:
        for module, hints in _BY_MODULE:
            space = vars(module)
            originals = {attr: space[attr] for attr in hints}
            saved.append((space, originals))
            replacements = _replacements(module, hints, originals)
            space.update(replacements)
            if scope is not None:
                stand_ins.update({id(originals[a]): r for a, r in replacements.items()})
        space = vars(datetime)
        saved.append((space, {attr: space[attr] for attr in _CLASSES}))
        space.update(_CLASSES)
        if scope is not None:
            stand_ins[id(_RealDate)] = _GuardedDate
            stand_ins[id(_RealDatetime)] = _GuardedDatetime
            bound = {
                name: stand_ins[id(scope[name])]
                for name in _bound_names(scope, stand_ins)
                if id(scope.get(name)) in stand_ins
            }
            if bound:
                saved.append((scope, {name: scope[name] for name in bound}))
                scope.update(bound)
        _depth = 1
        yield
    finally:
        _depth = 0
        for space, originals in reversed(saved):
            space.update(originals)
