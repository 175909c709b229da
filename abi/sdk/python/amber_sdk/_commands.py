"""The commands a workflow issues, in the array form the ABI's output envelope carries.

A command is its kind plus the fields that follow the kind's tag, in the order the ABI lists
them ("Workflow output"). The SDK builds each with one of the constructors below and never
re-encodes it, so a command's bytes are decided in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "AWAITABLE",
    "Command",
    "CommandKind",
    "activity",
    "approval",
    "cancel_timer",
    "child",
    "now",
    "patched",
    "random",
    "signal",
    "timer",
]


class CommandKind(StrEnum):
    """A command's tag: the first element of its array."""

    ACTIVITY = "activity"
    NOW = "now"
    RANDOM = "random"
    TIMER = "timer"
    CANCEL_TIMER = "cancel_timer"
    SIGNAL = "signal"
    CHILD = "child"
    PATCHED = "patched"
    APPROVAL = "approval"


AWAITABLE = frozenset(
    {
        CommandKind.ACTIVITY,
        CommandKind.TIMER,
        CommandKind.SIGNAL,
        CommandKind.CHILD,
        CommandKind.APPROVAL,
    }
)
"""The kinds whose result is something the workflow waits for (the ones that have handles)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """One issued command."""

    kind: CommandKind
    fields: tuple[object, ...]
    """What follows the tag, in ABI order."""

    def wire(self) -> list[object]:
        """The command as the output envelope's array."""
        return [str(self.kind), *self.fields]  # str(): the tag without the enum's property


def activity(name: str, args: bytes, options: dict[str, object] | None) -> Command:
    """`["activity", name, args]`, or with a 4th element when there are options."""
    fields: tuple[object, ...] = (name, args) if options is None else (name, args, options)
    return Command(kind=CommandKind.ACTIVITY, fields=fields)


def now(value: int) -> Command:
    return Command(kind=CommandKind.NOW, fields=(value,))


def random(value: bytes) -> Command:
    return Command(kind=CommandKind.RANDOM, fields=(value,))


def timer(duration_ms: int) -> Command:
    return Command(kind=CommandKind.TIMER, fields=(duration_ms,))


def cancel_timer(timer_cmd: int) -> Command:
    return Command(kind=CommandKind.CANCEL_TIMER, fields=(timer_cmd,))


def signal(name: str) -> Command:
    return Command(kind=CommandKind.SIGNAL, fields=(name,))


def child(
    workflow_type: str, workflow_id: str, input: bytes, options: dict[str, object]
) -> Command:
    return Command(kind=CommandKind.CHILD, fields=(workflow_type, workflow_id, input, options))


def patched(change_id: str) -> Command:
    return Command(kind=CommandKind.PATCHED, fields=(change_id,))


def approval(action: str, expires_ms: int, policy: dict[str, object]) -> Command:
    return Command(kind=CommandKind.APPROVAL, fields=(action, expires_ms, policy))
