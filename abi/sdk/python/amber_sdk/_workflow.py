"""The workflow side: `@workflow.defn` and what workflow code may call.

Workflow functions are plain synchronous functions, run from the top with every result
recorded so far (see `_replay`). `start_*` issues a command and returns a handle; `execute_*`,
`sleep`, `wait_signal` and `request_approval` issue and await at once. Awaiting a result
history lacks ends the activation ("suspended"): the call returns later with the result when
the host keeps the instance, else the SDK unwinds the function and the next activation runs it
from the top. The code sees the same either way.

Time and randomness go through `now`/`random`/`random_bytes`/`uuid4`, which record their values
as commands: every replay sees the same ones.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn, overload

from . import _approvals, _commands, _msgpack, _registry, _replay
from ._approvals import ApprovalResult
from ._handles import (
    ActivityHandle,
    ApprovalHandle,
    ChildWorkflowHandle,
    Handle,
    SignalHandle,
    TimerHandle,
    live_indices,
)
from ._log import Logger, LogLevel
from ._options import ActivityOptions, Duration, ParentClosePolicy, RetryPolicy, child_options
from ._options import to_ms as _to_ms
from ._registry import F
from ._replay import WorkflowInfo

__all__ = [
    "PUBLISH_MAX",
    "cancel_reason",
    "cancel_requested",
    "continue_as_new",
    "defn",
    "execute_activity",
    "execute_child_workflow",
    "info",
    "is_replaying",
    "logger",
    "now",
    "now_ms",
    "patched",
    "random",
    "random_bytes",
    "request_approval",
    "set_query",
    "sleep",
    "start_activity",
    "start_approval",
    "start_child_workflow",
    "start_timer",
    "start_wait_signal",
    "uuid4",
    "wait_all",
    "wait_any",
    "wait_signal",
]

PUBLISH_MAX = 64 * 1024
"""Largest value `set_query` publishes (bytes of msgpack)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_ID_CHARS = 128


# ---- definition and information ------------------------------------------------------------


@overload
def defn(fn: F, /) -> F: ...
@overload
def defn(*, name: str | None = None) -> Callable[[F], F]: ...
def defn(fn: F | None = None, /, *, name: str | None = None) -> F | Callable[[F], F]:
    """Register a workflow: `@workflow.defn` (named after the function) or
    `@workflow.defn(name="orders")`. The function takes the run's decoded input (or nothing)
    and returns a msgpack-able result; raise `ApplicationError` to fail the run."""

    def register(f: F) -> F:
        return _registry.register(_registry.Kind.WORKFLOW, f, name)

    return register if fn is None else register(fn)


def info() -> WorkflowInfo:
    """The run id, workflow id, workflow type, and the query this activation answers (if
    any)."""
    return _replay.current().info


def is_replaying() -> bool:
    """True while the code runs a stretch an earlier activation already ran. For logging and
    metrics only: never decide which commands to issue from it."""
    return _replay.current().is_replaying


def cancel_requested() -> bool:
    """Whether the run's cancellation has reached the code (an await raised `CancelledError`).
    A request that merely sits in history is not visible: a replay would see it where the
    original run did not."""
    return _replay.current().cancel_requested


def cancel_reason() -> str:
    """The cancellation's reason once `cancel_requested()` is true; "" before."""
    return _replay.current().cancel_reason


def _emit(level: LogLevel, line: Callable[[], str]) -> None:
    activation = _replay.current()
    activation.check_live()
    if not activation.is_replaying:
        activation.host.log(int(level), line())


logger = Logger(_emit)
"""The workflow's logger: writes through the host, and not while replaying."""


def set_query(name: str, value: object) -> None:
    """Set what queries named `name` answer with (the last call before the activation ends
    wins). Nothing is recorded, so call it on every activation, replaying or not, where the
    state changes. At most 64 KiB of msgpack."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a query name is a non-empty str, not {name!r}")
    data = _msgpack.encode(value)
    if len(data) > PUBLISH_MAX:
        raise ValueError(f"query {name!r}: the value is {len(data)} bytes; limit {PUBLISH_MAX}")
    activation = _replay.current()
    activation.check_live()
    activation.host.publish(name, data)


# ---- activities ----------------------------------------------------------------------------


def _activity_name(activity: str | Callable[..., Any]) -> str:
    if isinstance(activity, str):
        return _registry.validate_name(activity, "activity")
    name = _registry.current().activity_name_of(activity)
    if name is None:
        raise ValueError(f"{activity!r} is not an @activity.defn function")
    return name


_NO_OPTIONS: tuple[None, ...] = (None,) * 5


def start_activity(
    activity: str | Callable[..., Any],
    args: object = None,
    *,
    start_to_close_timeout: Duration | None = None,
    schedule_to_close_timeout: Duration | None = None,
    schedule_to_start_timeout: Duration | None = None,
    heartbeat_timeout: Duration | None = None,
    retry_policy: RetryPolicy | None = None,
) -> ActivityHandle:
    """Schedule an activity (by name or by its `@activity.defn` function) with `args`; returns
    its handle. Timeouts are seconds or timedeltas; only the options given are written (none:
    the host's defaults)."""
    given = (
        start_to_close_timeout,
        schedule_to_close_timeout,
        schedule_to_start_timeout,
        heartbeat_timeout,
        retry_policy,
    )
    options = None  # none given, the common case: no options element (what to_map gives)
    if given != _NO_OPTIONS:
        options = ActivityOptions(
            start_to_close_timeout=start_to_close_timeout,
            schedule_to_close_timeout=schedule_to_close_timeout,
            schedule_to_start_timeout=schedule_to_start_timeout,
            heartbeat_timeout=heartbeat_timeout,
            retry_policy=retry_policy,
        ).to_map()
    command = _commands.activity(_activity_name(activity), _msgpack.encode(args), options)
    activation = _replay.current()
    return ActivityHandle(activation, activation.issue(command))


def execute_activity(
    activity: str | Callable[..., Any],
    args: object = None,
    *,
    start_to_close_timeout: Duration | None = None,
    schedule_to_close_timeout: Duration | None = None,
    schedule_to_start_timeout: Duration | None = None,
    heartbeat_timeout: Duration | None = None,
    retry_policy: RetryPolicy | None = None,
) -> Any:
    """`start_activity(...).result()`: the activity's result; raises `ActivityError` with its
    recorded error, or `CancelledError` when the run's cancellation is delivered here."""
    return start_activity(
        activity,
        args,
        start_to_close_timeout=start_to_close_timeout,
        schedule_to_close_timeout=schedule_to_close_timeout,
        schedule_to_start_timeout=schedule_to_start_timeout,
        heartbeat_timeout=heartbeat_timeout,
        retry_policy=retry_policy,
    ).result()


# ---- timers and signals --------------------------------------------------------------------


def start_timer(duration: Duration) -> TimerHandle:
    """Start a durable timer of `duration` (seconds or a timedelta, >= 0); returns its handle."""
    activation = _replay.current()
    ms = _to_ms(duration, "timer duration")
    return TimerHandle(activation, activation.issue(_commands.timer(ms)))


def sleep(duration: Duration) -> None:
    """Wait `duration` on a durable timer (no worker holds the run meanwhile)."""
    start_timer(duration).result()


def _check_id(value: object, what: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= _MAX_ID_CHARS:
        raise ValueError(f"{what} must be a str of 1 to {_MAX_ID_CHARS} characters: {value!r}")
    if not value.isprintable():
        raise ValueError(f"{what} must be printable: {value!r}")
    return value


def start_wait_signal(name: str) -> SignalHandle:
    """Wait for the next signal named `name`; returns its handle. Signals are buffered (one
    sent before this call counts) and each wait consumes one, in the order they arrived."""
    activation = _replay.current()
    command = _commands.signal(_check_id(name, "a signal name"))
    return SignalHandle(activation, activation.issue(command))


def wait_signal(name: str) -> Any:
    """The payload of the next signal named `name`."""
    return start_wait_signal(name).result()


# ---- awaiting several ----------------------------------------------------------------------


def wait_any(handles: Sequence[Handle]) -> int:
    """The position in `handles` of the one history delivered first (whose result has the
    smallest delivery seq), so every replay takes the same branch; read its value with
    `handles[i].result()`. Suspends when none has a result; raises `CancelledError` when the
    run's cancellation is due here. The others stay pending: await them later or cancel them."""
    activation, indices = live_indices(handles)
    return activation.await_first(indices)


def wait_all(handles: Sequence[Handle]) -> list[Any]:
    """`[h.result() for h in handles]`: every result, in the order given."""
    live_indices(handles)
    return [handle.result() for handle in handles]


# ---- child workflows -----------------------------------------------------------------------


def _workflow_type(workflow: str | Callable[..., Any]) -> str:
    if isinstance(workflow, str):
        return _registry.validate_name(workflow, "workflow")
    name = _registry.current().workflow_name_of(workflow)
    if name is None:
        raise ValueError(f"{workflow!r} is not a @workflow.defn function")
    return name


def start_child_workflow(
    workflow: str | Callable[..., Any],
    input: object = None,
    *,
    id: str,
    parent_close_policy: ParentClosePolicy | str | None = None,
    version: str | None = None,
) -> ChildWorkflowHandle:
    """Start a child workflow of type `workflow` with workflow id `id` (new, and derived from
    the input or results only); returns its handle. `parent_close_policy` is "terminate" (the
    host's default), "cancel" or "abandon"; `version` pins a module digest."""
    command = _commands.child(
        _workflow_type(workflow),
        _check_id(id, "a child workflow id"),
        _msgpack.encode(input),
        child_options(parent_close_policy, version),
    )
    activation = _replay.current()
    return ChildWorkflowHandle(activation, activation.issue(command))


def execute_child_workflow(
    workflow: str | Callable[..., Any],
    input: object = None,
    *,
    id: str,
    parent_close_policy: ParentClosePolicy | str | None = None,
    version: str | None = None,
) -> Any:
    """`start_child_workflow(...).result()`: the child's result; raises `ChildWorkflowError`."""
    return start_child_workflow(
        workflow, input, id=id, parent_close_policy=parent_close_policy, version=version
    ).result()


# ---- approvals -----------------------------------------------------------------------------


def start_approval(
    action: str,
    *,
    expires: Duration,
    approvers: Sequence[str] = (),
    roles: Sequence[str] = (),
    required: int = 1,
) -> ApprovalHandle:
    """Ask people to approve `action` (shown to them verbatim); returns the handle. Any
    `required` of the named approvers or of the members of `roles` approve it; one rejection
    rejects it; after `expires` it expires. Decisions that arrive before the await are kept."""
    expires_ms = _to_ms(expires, "expires")
    if expires_ms <= 0:
        raise ValueError(f"an approval must expire after at least 1 ms, not {expires!r}")
    command = _commands.approval(
        _approvals.check_action(action),
        expires_ms,
        _approvals.policy_map(approvers, roles, required),
    )
    activation = _replay.current()
    return ApprovalHandle(activation, activation.issue(command))


def request_approval(
    action: str,
    *,
    expires: Duration,
    approvers: Sequence[str] = (),
    roles: Sequence[str] = (),
    required: int = 1,
) -> ApprovalResult:
    """`start_approval(...).result()`: waits durably for the outcome (approved, rejected or
    expired — an expiry is a result, not an error)."""
    return start_approval(
        action, expires=expires, approvers=approvers, roles=roles, required=required
    ).result()


# ---- recorded values -----------------------------------------------------------------------


def now_ms() -> int:
    """Milliseconds since the Unix epoch, recorded in history: replays see the same value."""
    return _replay.current().now_ms()


def now() -> datetime:
    """The recorded time as an aware UTC datetime (see `now_ms`)."""
    return _EPOCH + timedelta(milliseconds=now_ms())


def random_bytes(n: int) -> bytes:
    """`n` (<= 1024) random bytes, recorded in history."""
    return _replay.current().random_bytes(n)


def random() -> float:
    """A float in [0, 1) from 8 recorded random bytes."""
    return (int.from_bytes(random_bytes(8), "big") >> 11) / (1 << 53)


def new_random() -> _random.Random:
    """A `random.Random` seeded from 16 recorded random bytes (one `random` command), for
    `randint`, `choice`, `shuffle`, ... without a command per draw: Temporal's
    `workflow.random()`. Each call is a new generator and a new command."""
    return _random.Random(int.from_bytes(random_bytes(16), "big"))


def uuid4() -> str:
    """A random (version 4) UUID from 16 recorded random bytes, as its canonical string."""
    raw = bytearray(random_bytes(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def patched(change_id: str) -> bool:
    """Whether this run takes the new path of code change `change_id`. At the next command
    index i: a `patched` marker recorded at i with this id → True (consumed); else, when history
    holds another command at i (the run passed this point on old code) → False, issuing
    nothing; else (new ground) → issues the marker, True. Call it once per change id and keep
    the answer; keep the call while runs that recorded its marker are open."""
    return _replay.current().patched(_check_id(change_id, "a change id"))


# ---- ending the run ------------------------------------------------------------------------


def continue_as_new(input: object = None) -> NoReturn:
    """Close this run and start a new run of the same type and workflow id, on the same module
    version, with `input` and a fresh history. Does not return."""
    _replay.current().continue_as_new(_msgpack.encode(input))
