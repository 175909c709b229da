"""The commands a workflow issues (ABI v1, "Workflow output"), decoded strictly from the guest.

Each command kind is one frozen dataclass; `parse_command` turns one msgpack array from an
output envelope into one of them or raises `MalformedEnvelope`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from ._errors import InvalidInput
from ._manifest import NAME

MAX_TIMER_MS = 100 * 365 * 24 * 3600 * 1000
"""A century: longer timers are refused as malformed."""
MAX_ID_LENGTH = 256
"""Workflow ids, signal names and patch change ids: the same bound the API applies."""


class MalformedEnvelope(InvalidInput):
    """A guest produced bytes that are not a valid ABI v1 envelope."""


class RetryOptions(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An activity's retry policy (`None` fields take the server's defaults).

    The options are msgspec Structs, not dataclasses, because they travel inside event payloads
    (`history.ActivityScheduled`), which encode only the fields that are set."""

    initial_ms: int | None = None
    coefficient: float | None = None
    max_interval_ms: int | None = None
    max_attempts: int | None = None
    """0 means unlimited."""
    non_retryable: tuple[str, ...] = ()
    """Error types that are never retried."""


class ActivityOptions(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Timeouts (milliseconds; `None` = none) and retry policy of one scheduled activity."""

    start_to_close_ms: int | None = None
    schedule_to_close_ms: int | None = None
    schedule_to_start_ms: int | None = None
    heartbeat_ms: int | None = None
    retry: RetryOptions = RetryOptions()


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleActivity:
    """The workflow asks for an activity to run.

    Equality is replay's notion of "the same command": name and arguments. Options are left out,
    so a new version may change an activity's timeouts or retries without breaking replay."""

    name: str
    args: bytes
    options: ActivityOptions = field(default=ActivityOptions(), compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordNow:
    """The workflow read the clock; the value is recorded so replay sees the same time."""

    value: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordRandom:
    """The workflow drew random bytes; recorded so replay sees the same bytes."""

    value: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class StartTimer:
    """A durable timer: fires `duration_ms` after the server records it."""

    duration_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelTimer:
    """Cancel the timer issued as command `timer_cmd` (a no-op if it already fired)."""

    timer_cmd: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitSignal:
    """Wait for the next signal called `name` (signals that arrived earlier are buffered)."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Patched:
    """The workflow took the new path of a patch (recorded so replays take it too)."""

    change_id: str


MAX_APPROVERS = 64
"""Approvers and roles one approval may name (each)."""
MAX_ACTION_CHARS = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestApproval:
    """Wait for people to approve `action`: any `required` of the named approvers or members
    of the named roles. The result is {"outcome": "approved" | "rejected" | "expired",
    "decisions": [{"approver", "approve", "comment", "at_ms"}]}; an expiry is a result too
    (the workflow's timeout path), never a failure."""

    action: str
    approvers: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    required: int = 1
    expires_ms: int


PARENT_CLOSE_POLICIES = ("terminate", "cancel", "abandon")


@dataclass(frozen=True, slots=True, kw_only=True)
class StartChild:
    """Start a child workflow; its result becomes this command's result.

    Equality is replay's notion of "the same command": type, workflow id and input; the close
    policy and the version asked for are left out (a new version may change them)."""

    workflow_type: str
    workflow_id: str
    input: bytes
    parent_close_policy: str = field(default="terminate", compare=False)
    version: str = field(default="", compare=False)


Command = (
    ScheduleActivity
    | RecordNow
    | RecordRandom
    | StartTimer
    | CancelTimer
    | AwaitSignal
    | StartChild
    | Patched
    | RequestApproval
)

_KIND_OF: dict[type, str] = {
    ScheduleActivity: "activity",
    RecordNow: "now",
    RecordRandom: "random",
    StartTimer: "timer",
    CancelTimer: "cancel_timer",
    AwaitSignal: "signal",
    StartChild: "child",
    Patched: "patched",
    RequestApproval: "approval",
}


def command_kind(command: Command) -> str:
    """The ABI name of a command's kind (`activity`, `now`, `timer`, ...)."""
    return _KIND_OF[type(command)]


def _opt_int(
    doc: dict[str, Any], key: str, where: str, *, maximum: int = MAX_TIMER_MS
) -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= maximum:
        raise MalformedEnvelope(f"{where}: {key} must be an integer in [0, {maximum}]")
    return value


def _opt_timeout(doc: dict[str, Any], key: str, where: str) -> int | None:
    """A timeout option; 0 is no timeout, as in Temporal (it used to mean "time out at once":
    an explicit `"heartbeat_ms": 0` failed every attempt within a second)."""
    return _opt_int(doc, key, where) or None


def _options_map(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise MalformedEnvelope(f"{where}: options must be a map with string keys")
    return value


def parse_retry(value: Any, where: str) -> RetryOptions:
    doc = _options_map(value, where + " retry")
    coefficient = doc.get("coefficient")
    if coefficient is not None and (
        not isinstance(coefficient, int | float)
        or isinstance(coefficient, bool)
        or not 1.0 <= coefficient <= 100.0
    ):
        raise MalformedEnvelope(f"{where}: retry coefficient must be a number in [1, 100]")
    non_retryable = doc.get("non_retryable", [])
    if not isinstance(non_retryable, list) or not all(
        isinstance(t, str) and len(t) <= 256 for t in non_retryable
    ):
        raise MalformedEnvelope(f"{where}: retry non_retryable must be a list of error types")
    return RetryOptions(
        initial_ms=_opt_int(doc, "initial_ms", where),
        coefficient=None if coefficient is None else float(coefficient),
        max_interval_ms=_opt_int(doc, "max_interval_ms", where),
        max_attempts=_opt_int(doc, "max_attempts", where, maximum=1_000_000),
        non_retryable=tuple(non_retryable[:64]),
    )


def parse_activity_options(value: Any, where: str) -> ActivityOptions:
    doc = _options_map(value, where)
    return ActivityOptions(
        start_to_close_ms=_opt_timeout(doc, "start_to_close_ms", where),
        schedule_to_close_ms=_opt_timeout(doc, "schedule_to_close_ms", where),
        schedule_to_start_ms=_opt_timeout(doc, "schedule_to_start_ms", where),
        heartbeat_ms=_opt_timeout(doc, "heartbeat_ms", where),
        retry=parse_retry(doc.get("retry"), where),
    )


def _str(value: Any, where: str, what: str) -> str:
    if not isinstance(value, str):
        raise MalformedEnvelope(f"{where}: {what} must be a string")
    return value


def _id(value: Any, where: str, what: str) -> str:
    """An identifier a person will read and type: a workflow id, signal name or change id."""
    text = _str(value, where, what)
    if not text or len(text) > MAX_ID_LENGTH or not text.isprintable():
        raise MalformedEnvelope(f"{where}: {what} must be 1-{MAX_ID_LENGTH} printable characters")
    return text


def _name(value: Any, where: str, what: str) -> str:
    """A name declared in a manifest (workflow type, activity)."""
    text = _str(value, where, what)
    if not NAME.fullmatch(text):
        raise MalformedEnvelope(f"{where}: {what} {text[:140]!r} is not a valid name")
    return text


def _activity(value: list[Any], where: str) -> Command:
    if len(value) not in (3, 4) or not isinstance(value[2], bytes):
        raise MalformedEnvelope(f"{where}: expected ['activity', name, args(, options)]")
    options = parse_activity_options(value[3], where) if len(value) == 4 else ActivityOptions()
    return ScheduleActivity(name=_str(value[1], where, "name"), args=value[2], options=options)


def _now(value: list[Any], where: str) -> Command:
    if len(value) != 2 or not isinstance(value[1], int) or isinstance(value[1], bool):
        raise MalformedEnvelope(f"{where}: expected ['now', int]")
    return RecordNow(value=value[1])


def _random(value: list[Any], where: str) -> Command:
    if len(value) != 2 or not isinstance(value[1], bytes):
        raise MalformedEnvelope(f"{where}: expected ['random', bin]")
    return RecordRandom(value=value[1])


def _timer(value: list[Any], where: str) -> Command:
    if len(value) != 2:
        raise MalformedEnvelope(f"{where}: expected ['timer', duration_ms]")
    duration = _opt_int({"duration_ms": value[1]}, "duration_ms", where)
    if duration is None:
        raise MalformedEnvelope(f"{where}: expected ['timer', duration_ms]")
    return StartTimer(duration_ms=duration)


def _cancel_timer(value: list[Any], where: str) -> Command:
    if len(value) != 2 or not isinstance(value[1], int) or isinstance(value[1], bool):
        raise MalformedEnvelope(f"{where}: expected ['cancel_timer', timer_cmd]")
    return CancelTimer(timer_cmd=value[1])


def _signal(value: list[Any], where: str) -> Command:
    if len(value) != 2:
        raise MalformedEnvelope(f"{where}: expected ['signal', name]")
    return AwaitSignal(name=_id(value[1], where, "signal name"))


def _child(value: list[Any], where: str) -> Command:
    if len(value) not in (4, 5) or not isinstance(value[3], bytes):
        raise MalformedEnvelope(f"{where}: expected ['child', type, workflow_id, input(, options)]")
    options = _options_map(value[4], where) if len(value) == 5 else {}
    policy = options.get("parent_close_policy", "terminate")
    if policy not in PARENT_CLOSE_POLICIES:
        raise MalformedEnvelope(
            f"{where}: parent_close_policy must be one of {PARENT_CLOSE_POLICIES}"
        )
    version = options.get("version", "")
    return StartChild(
        workflow_type=_name(value[1], where, "workflow type"),
        workflow_id=_id(value[2], where, "workflow id"),
        input=value[3],
        parent_close_policy=policy,
        version=_str(version, where, "version"),
    )


def _patched(value: list[Any], where: str) -> Command:
    if len(value) != 2:
        raise MalformedEnvelope(f"{where}: expected ['patched', change_id]")
    change_id = _id(value[1], where, "change id")
    if not 1 <= len(change_id) <= 128:
        raise MalformedEnvelope(f"{where}: a change id has 1 to 128 characters")
    return Patched(change_id=change_id)


def _approval(value: list[Any], where: str) -> Command:
    shape = "['approval', action, expires_ms, {approvers: [str], roles: [str], required: int}]"
    if len(value) != 4 or not isinstance(value[3], dict):
        raise MalformedEnvelope(f"{where}: expected {shape}")
    action = _str(value[1], where, "action")
    if not 1 <= len(action) <= MAX_ACTION_CHARS or not action.isprintable():
        raise MalformedEnvelope(f"{where}: an action has 1 to {MAX_ACTION_CHARS} printable chars")
    policy = value[3]
    unknown = set(policy) - {"approvers", "roles", "required"}
    if unknown:
        raise MalformedEnvelope(f"{where}: unknown policy keys {sorted(map(str, unknown))}")
    names: dict[str, tuple[str, ...]] = {}
    for key in ("approvers", "roles"):
        items = policy.get(key, [])
        if not isinstance(items, list) or len(items) > MAX_APPROVERS:
            raise MalformedEnvelope(f"{where}: {key} must be a list of at most {MAX_APPROVERS}")
        names[key] = tuple(dict.fromkeys(_id(i, where, key[:-1]) for i in items))
    required = policy.get("required", 1)
    if not isinstance(required, int) or isinstance(required, bool) or not 1 <= required <= 10_000:
        raise MalformedEnvelope(f"{where}: required must be an integer in [1, 10000]")
    if not names["approvers"] and not names["roles"]:
        raise MalformedEnvelope(f"{where}: name at least one approver or role")
    if not names["roles"] and required > len(names["approvers"]):
        raise MalformedEnvelope(
            f"{where}: {required} approvals required of {len(names['approvers'])} approvers"
        )
    expires = _opt_int({"expires_ms": value[2]}, "expires_ms", where)
    if expires is None or expires <= 0:
        raise MalformedEnvelope(f"{where}: expires_ms must be a positive integer")
    return RequestApproval(
        action=action,
        approvers=names["approvers"],
        roles=names["roles"],
        required=required,
        expires_ms=expires,
    )


_PARSERS = {
    "activity": _activity,
    "now": _now,
    "random": _random,
    "timer": _timer,
    "cancel_timer": _cancel_timer,
    "signal": _signal,
    "child": _child,
    "patched": _patched,
    "approval": _approval,
}


def parse_command(index: int, value: Any) -> Command:
    """One command from an output envelope, validated."""
    if not isinstance(value, list) or not value or not isinstance(value[0], str):
        raise MalformedEnvelope(f"command {index} must be [kind, ...]")
    parser = _PARSERS.get(value[0])
    if parser is None:
        raise MalformedEnvelope(f"command {index} has unknown kind {value[0][:64]!r}")
    return parser(value, f"command {index} ({value[0]})")


def options_to_doc(options: ActivityOptions) -> dict[str, Any]:
    """Activity options in their ABI map form, unset fields left out (what
    `parse_activity_options` reads back)."""
    doc: dict[str, Any] = msgspec.msgpack.decode(msgspec.msgpack.encode(options))
    return doc


def encode_command(command: Command) -> list[Any]:
    """A command in its ABI array form (what `parse_command` reads back)."""
    match command:
        case ScheduleActivity(name=name, args=args, options=options):
            doc = options_to_doc(options)
            return ["activity", name, args, doc] if doc else ["activity", name, args]
        case RecordNow(value=value):
            return ["now", value]
        case RecordRandom(value=value):
            return ["random", value]
        case StartTimer(duration_ms=ms):
            return ["timer", ms]
        case CancelTimer(timer_cmd=target):
            return ["cancel_timer", target]
        case AwaitSignal(name=name):
            return ["signal", name]
        case Patched(change_id=change_id):
            return ["patched", change_id]
        case RequestApproval() as approval:
            policy = {
                "approvers": list(approval.approvers),
                "roles": list(approval.roles),
                "required": approval.required,
            }
            return ["approval", approval.action, approval.expires_ms, policy]
        case StartChild() as child:
            child_options: dict[str, Any] = {"parent_close_policy": child.parent_close_policy}
            if child.version:
                child_options["version"] = child.version
            return ["child", child.workflow_type, child.workflow_id, child.input, child_options]
    raise AssertionError(command)
