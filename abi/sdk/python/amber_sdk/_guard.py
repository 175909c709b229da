"""The determinism guard: while workflow code runs, the usual ways to read a clock, draw
randomness or sleep raise `NondeterminismError` naming the workflow-safe replacement.

It patches module attributes (`time.time`, `random.random`, `os.urandom`, `uuid.uuid4`, ...) and
restores them when the workflow function returns or raises. `datetime.datetime` and
`datetime.date` are C types whose methods cannot be patched, so the `datetime` module's names
are pointed at subclasses whose `now`/`utcnow`/`today` raise; `isinstance` and `issubclass` with
them still accept the real classes' instances.

It is a safety net for the common spellings, not a sandbox: a name bound before the workflow ran
(`from time import time`, `from datetime import datetime`) is not the patched one, and a seeded
`random.Random(42)` is deterministic and allowed. Lines that the stdlib `logging` module
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


_MADE: dict[tuple[str, str], tuple[Callable[..., Any], Callable[..., Any]]] = {}
"""The replacement made for each (module, attribute), with the original it wraps: every
workflow activation installs the guard, and making 18 closures each time was a third of a
fresh activation's Python work."""


def _replacement(module: Any, attr: str, hint: str, original: Callable[..., Any]) -> Any:
    key = (module.__name__, attr)
    made = _MADE.get(key)
    if made is None or made[0] is not original:
        made = (original, _forbidden(f"{module.__name__}.{attr}()", hint, original))
        _MADE[key] = made
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
    (random, "randint", "workflow.random()"),
    (random, "choice", "workflow.random()"),
    (random, "choices", "workflow.random()"),
    (random, "sample", "workflow.random()"),
    (random, "shuffle", "workflow.random()"),
    (random, "uniform", "workflow.random()"),
    (random, "randrange", "workflow.random()"),
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


_CLASSES: tuple[tuple[str, type], ...] = (("date", _GuardedDate), ("datetime", _GuardedDatetime))

_depth = 0


@contextmanager
def installed() -> Iterator[None]:
    """Guard the block; restores every patched name afterwards, also when it raises. Nested use
    is a no-op inside the outer one."""
    global _depth
    if _depth:
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    saved: list[tuple[Any, str, Any]] = []
    try:
        for module, attr, hint in _FUNCTIONS:
            original = getattr(module, attr)
            saved.append((module, attr, original))
            setattr(module, attr, _replacement(module, attr, hint, original))
        for attr, stand_in in _CLASSES:
            saved.append((datetime, attr, getattr(datetime, attr)))
            setattr(datetime, attr, stand_in)
        _depth = 1
        yield
    finally:
        _depth = 0
        for module, attr, original in reversed(saved):
            setattr(module, attr, original)
