"""What the module exports: the workflows and activities the decorators registered, and the
capabilities and limits it declares. `manifest()` is read from here.

There is one registry per process, as there is one module per component. Tests that need an
empty one use `isolated()`, which swaps in a fresh registry for the duration of a block.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

__all__ = [
    "NAME",
    "Definition",
    "Kind",
    "Registry",
    "current",
    "declare",
    "isolated",
    "register",
    "validate_name",
]

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}")
"""What workflow and activity names look like (the ABI's export names)."""

ABI_VERSION = 1
AWAIT_NEXT_DELTA = "delta"
"""The manifest's `"await_next"` entry saying the module reads delta answers (`_envelopes`)."""


def validate_name(name: object, what: str) -> str:
    """`name` if it is a valid workflow or activity name; ValueError otherwise."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(
            f"{what} name {name!r} is invalid: names match [A-Za-z_][A-Za-z0-9_.-]{{0,127}}"
        )
    return name


class Kind(StrEnum):
    """What a definition is; a module exports both kinds under separate names."""

    WORKFLOW = "workflow"
    ACTIVITY = "activity"


_POSITIONAL = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.VAR_POSITIONAL,
)
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True, kw_only=True)
class Definition:
    """A registered workflow or activity function."""

    name: str
    fn: Callable[..., Any]
    takes_input: bool
    """Whether `fn` takes the payload (one positional parameter) or nothing."""

    @classmethod
    def of(cls, fn: Callable[..., Any], name: str, what: str) -> Definition:
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            raise TypeError(
                f"{what} {name!r} is an async function: Amber workflows and activities are"
                " plain functions (write `def`, not `async def`; the SDK's calls wait durably"
                " on their own)"
            )
        params = list(inspect.signature(fn).parameters.values())
        positional = [p for p in params if p.kind in _POSITIONAL]
        required = [p for p in params if p.default is p.empty and p.kind not in _VARIADIC]
        if len(required) > 1 or any(p.kind is p.KEYWORD_ONLY for p in required):
            raise TypeError(f"{what} {name!r} must take at most one argument (its input)")
        return cls(name=name, fn=fn, takes_input=bool(positional))

    def call(self, payload: Any) -> Any:
        return self.fn(payload) if self.takes_input else self.fn()

    @property
    def scope(self) -> dict[str, Any] | None:
        """The namespace of the module that defines `fn` (None for a callable without one)."""
        space = getattr(self.fn, "__globals__", None)
        return space if isinstance(space, dict) else None


class Registry:
    """The workflows, activities, capabilities and limits of one module."""

    def __init__(self) -> None:
        self.workflows: dict[str, Definition] = {}
        self.activities: dict[str, Definition] = {}
        self.capabilities: dict[str, Any] | None = None
        self.limits: dict[str, Any] | None = None

    def add(self, kind: Kind, definition: Definition) -> None:
        table = self.workflows if kind is Kind.WORKFLOW else self.activities
        if definition.name in table:
            raise ValueError(f"{kind} {definition.name!r} is already defined")
        table[definition.name] = definition

    def activity_name_of(self, fn: Callable[..., Any]) -> str | None:
        return next((d.name for d in self.activities.values() if d.fn is fn), None)

    def workflow_name_of(self, fn: Callable[..., Any]) -> str | None:
        return next((d.name for d in self.workflows.values() if d.fn is fn), None)

    def manifest(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "abi": ABI_VERSION,
            "workflows": sorted(self.workflows),
            "activities": sorted(self.activities),
            "await_next": [AWAIT_NEXT_DELTA],  # this SDK reads delta answers (_envelopes)
        }
        if self.capabilities is not None:
            doc["capabilities"] = copy.deepcopy(self.capabilities)
        if self.limits is not None:
            doc["limits"] = copy.deepcopy(self.limits)
        return doc


_current = Registry()


def current() -> Registry:
    """The registry decorators write to and the entry points read from."""
    return _current


def register(kind: Kind, fn: F, name: str | None) -> F:
    """What `@workflow.defn` and `@activity.defn` do: validate, register, return `fn`."""
    if not callable(fn):
        raise TypeError(f"@{kind}.defn decorates a function, not {fn!r}")
    checked = validate_name(getattr(fn, "__name__", None) if name is None else name, kind)
    current().add(kind, Definition.of(fn, checked, kind))
    return fn


@contextmanager
def isolated() -> Iterator[Registry]:
    """For tests only: an empty registry while the block runs; the previous one afterwards."""
    global _current
    previous, _current = _current, Registry()
    try:
        yield _current
    finally:
        _current = previous


def _json_object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"{what} must be a dict with str keys, not {value!r}")
    try:
        doc: dict[str, Any] = json.loads(json.dumps(dict(value)))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must hold JSON values only: {exc}") from None
    return doc


def declare(
    *,
    capabilities: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
) -> None:
    """Declare what the module's manifest says beyond its names; call it at import time.

    `capabilities={"http": {"allow": ["api.example.com", "127.0.0.1:8080", "*.example.com"]}}`
    lets activities call those hosts (a host without a port allows any port). `limits` is
    written verbatim. Each argument given replaces what an earlier call declared.
    """
    registry = current()
    if capabilities is not None:
        doc = _json_object(capabilities, "capabilities")
        http = doc.get("http")
        if http is not None:
            allow = http.get("allow") if isinstance(http, dict) else None
            if not isinstance(allow, list) or not all(isinstance(h, str) and h for h in allow):
                raise ValueError('capabilities["http"] must be {"allow": [host, ...]}')
        registry.capabilities = doc
    if limits is not None:
        registry.limits = _json_object(limits, "limits")
