"""One typed payload per event type, and the one place payloads are encoded and decoded.

A payload is stored as a msgpack map whose keys are its class's fields (`encode_name` where a
key is not a Python name, as `from`). User data inside it (inputs, arguments, results, signal
payloads) stays opaque msgpack bytes. Reading is strict about types (a `cmd` that is not an
integer is a `MalformedPayload`) and lenient about keys: a key the class does not declare is
ignored, and a missing key with a default takes it, so histories written by earlier engines (an
`ActivityScheduled` with `max_attempts` rather than `options`) still read. A field left at its
default is not written.

The classes are msgspec Structs (frozen, keyword-only, like the dataclasses elsewhere) because
msgspec decodes and validates msgpack straight into them in C; the payload reference in
docs/events.md is generated from them (`payload_reference`), so docs and code cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Literal

import msgspec

from amber.abi import (
    ActivityOptions,
    AwaitSignal,
    CancelTimer,
    Command,
    Patched,
    RecordNow,
    RecordRandom,
    RequestApproval,
    ScheduleActivity,
    StartChild,
    StartTimer,
)

from ._errors import MalformedPayload
from ._event_types import EventType


class Record(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A typed map inside history: a payload, or a value nested in one.

    Code reads attributes. Scripts written against the map form of payloads keep working: a
    record reads by wire key (`payload["result"]`, `.get`) and compares equal to its map, given
    either as stored (defaults left out) or with every key (absent ones as None).
    """

    def __getitem__(self, key: str) -> Any:
        attr = _attributes(type(self)).get(key)
        if attr is None:
            raise KeyError(key)
        return getattr(self, attr)

    def get(self, key: str, default: Any = None) -> Any:
        """`record[key]`, or `default` where the type has no such key or it is unset."""
        try:
            value = self[key]
        except KeyError:
            return default
        return default if value is None else value

    def to_doc(self) -> dict[str, Any]:
        """The wire map, as stored (fields at their defaults left out)."""
        doc: dict[str, Any] = msgspec.msgpack.decode(_ENCODER.encode(self))
        return doc

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            theirs = _plain(other)
            return theirs in (_plain(self.to_doc()), _plain(self))
        return bool(msgspec.Struct.__eq__(self, other))

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = msgspec.Struct.__hash__


def _plain(value: Any) -> Any:
    """Maps and sequences as plain dicts and lists, every record field included, None dropped."""
    if isinstance(value, msgspec.Struct):
        return {
            f.encode_name: _plain(getattr(value, f.name))
            for f in msgspec.structs.fields(value)
            if getattr(value, f.name) is not None
        }
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@cache
def _attributes(cls: type[Record]) -> dict[str, str]:
    return {f.encode_name: f.name for f in msgspec.structs.fields(cls)}


class Payload(Record, frozen=True, kw_only=True):
    """The facts of one event; subclasses name their `TYPE`."""

    TYPE: ClassVar[EventType]


class CommandPayload(Payload, frozen=True, kw_only=True):
    """An event that records a command the workflow issued; replay matches against it."""

    cmd: int
    """The command's index in the order the workflow issued its commands."""

    def command(self) -> Command:
        """The command as the guest issued it (what replay compares the re-issued one to)."""
        raise NotImplementedError


class VersionChoice(Record, frozen=True, kw_only=True):
    """Which module version a new run was pinned to, and why."""

    digest: str
    via: str
    """`current`, `candidate` (a ramp), `pinned` (asked for by the starter), ..."""
    bucket: int | None = None
    """The run's stable ramp bucket (0-99), when a ramp was in force."""
    ramp: int | None = None
    """The ramp percentage then."""


class ParentLink(Record, frozen=True, kw_only=True):
    """The parent run and the command that started this child."""

    run_id: str
    cmd: int


class ResetPoint(Record, frozen=True, kw_only=True):
    """The run a reset replaced and the last event it kept."""

    run_id: str
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Lineage:
    """Where a run came from, beyond its workflow: the `RunStarted` fields a start, a child
    command, continue-as-new or a reset sets."""

    version: VersionChoice | None = None
    """How the module version was chosen (absent for continue-as-new: the chain's version)."""
    parent: ParentLink | None = None
    """The parent run and command, for a child run."""
    continued_from: str | None = None
    """The run this one continues (continue-as-new)."""
    reset_from: ResetPoint | None = None
    """The run and position this run was reset from."""


class RunStarted(Payload, frozen=True, kw_only=True):
    """The run exists."""

    TYPE = EventType.RUN_STARTED
    workflow_type: str
    workflow_id: str
    """The id the starter chose (unique per tenant among open runs; a chain of continued or
    reset runs shares it)."""
    tenant: str
    input: bytes
    """The workflow's input (msgpack)."""
    version: VersionChoice | None = None
    """How the module version was chosen."""
    parent: ParentLink | None = None
    """The parent run and command, for a child run."""
    continued_from: str | None = None
    """The run this one continues (continue-as-new)."""
    reset_from: ResetPoint | None = None
    """The run and position this run was reset from."""
    execution_deadline_ms: int | None = None
    """When the workflow execution timeout passes (epoch ms); absent: no timeout."""
    execution_timeout_ms: int | None = None
    """Written by earlier engines instead of `execution_deadline_ms`: the timeout, counted from
    this event's time."""

    @property
    def lineage(self) -> Lineage:
        return Lineage(
            version=self.version,
            parent=self.parent,
            continued_from=self.continued_from,
            reset_from=self.reset_from,
        )


class ActivityScheduled(CommandPayload, frozen=True, kw_only=True):
    """The workflow issued command `cmd` to run an activity."""

    TYPE = EventType.ACTIVITY_SCHEDULED
    name: str
    """The activity's name in the module's manifest."""
    args: bytes
    """The activity's arguments (msgpack)."""
    options: ActivityOptions = ActivityOptions()
    """Timeouts and retry policy as the workflow gave them."""

    def command(self) -> Command:
        return ScheduleActivity(name=self.name, args=self.args, options=self.options)


class ActivityCompleted(Payload, frozen=True, kw_only=True):
    """An attempt of activity `cmd` succeeded, or an operator completed a poisoned one by hand
    (`skipped_by`)."""

    TYPE = EventType.ACTIVITY_COMPLETED
    cmd: int
    result: bytes
    """The activity's result (msgpack)."""
    attempt: int
    """The attempt that succeeded (1-based; crashed attempts count)."""
    skipped_by: str | None = None
    """The operator who skipped the step with this result."""
    reason: str | None = None
    """Why the operator skipped it."""


class ActivityFailed(Payload, frozen=True, kw_only=True):
    """Activity `cmd` failed for good (its retry policy gave up)."""

    TYPE = EventType.ACTIVITY_FAILED
    cmd: int
    error_type: str
    """The activity's own error type, or `amber.<reason>` for an engine-side failure."""
    message: str
    attempt: int
    """The last attempt."""


MarkerKind = Literal["now", "random", "patched"]


class MarkerRecorded(CommandPayload, frozen=True, kw_only=True):
    """A value the workflow observed was recorded as command `cmd`, so that replays observe
    the same: the clock, random bytes, or a patch taken."""

    TYPE = EventType.MARKER_RECORDED
    kind: MarkerKind
    value: Any
    """`now`: epoch ms (int); `random`: bytes; `patched`: the change id (str)."""

    def __post_init__(self) -> None:
        wanted = _MARKER_VALUES[self.kind]
        if not isinstance(self.value, wanted) or isinstance(self.value, bool):
            raise ValueError(f"a {self.kind} marker holds {wanted.__name__}")

    def command(self) -> Command:
        if self.kind == "now":
            return RecordNow(value=self.value)
        if self.kind == "random":
            return RecordRandom(value=self.value)
        return Patched(change_id=self.value)


_MARKER_VALUES: dict[str, type] = {"now": int, "random": bytes, "patched": str}


class RunCompleted(Payload, frozen=True, kw_only=True):
    """The workflow returned a result."""

    TYPE = EventType.RUN_COMPLETED
    result: bytes
    """The workflow's result (msgpack)."""


class RunFailed(Payload, frozen=True, kw_only=True):
    """The workflow returned an application error (or the engine failed it, as for a history
    past its limits)."""

    TYPE = EventType.RUN_FAILED
    error_type: str | None = None
    message: str | None = None


class TimerStarted(CommandPayload, frozen=True, kw_only=True):
    """The workflow started a durable timer as command `cmd`."""

    TYPE = EventType.TIMER_STARTED
    duration_ms: int
    fire_at_ms: int
    """When it fires (epoch ms)."""

    def command(self) -> Command:
        return StartTimer(duration_ms=self.duration_ms)


class TimerFired(Payload, frozen=True, kw_only=True):
    """Timer `cmd` fired."""

    TYPE = EventType.TIMER_FIRED
    cmd: int


class TimerCancelled(CommandPayload, frozen=True, kw_only=True):
    """Command `cmd` cancelled the timer issued as command `timer`."""

    TYPE = EventType.TIMER_CANCELLED
    timer: int
    cancelled: bool = False
    """The timer was still pending (otherwise it had fired: the cancel was a no-op)."""

    def command(self) -> Command:
        return CancelTimer(timer_cmd=self.timer)


class SignalAwaited(CommandPayload, frozen=True, kw_only=True):
    """The workflow waits for the next signal `name` as command `cmd`."""

    TYPE = EventType.SIGNAL_AWAITED
    name: str

    def command(self) -> Command:
        return AwaitSignal(name=self.name)


class SignalReceived(Payload, frozen=True, kw_only=True):
    """A signal arrived; it resolves the oldest wait for its name not yet resolved."""

    TYPE = EventType.SIGNAL_RECEIVED
    name: str
    payload: bytes
    """The signal's payload (msgpack)."""
    request_id: str = ""
    """The sender's idempotency key: a second delivery with it is refused."""


class CancelRequested(Payload, frozen=True, kw_only=True):
    """Cancellation was requested; the workflow sees it at its next await."""

    TYPE = EventType.CANCEL_REQUESTED
    reason: str = ""
    by: str = ""
    """Who asked: an operator or application, or `amber` for a parent's close policy."""


class ActivityCancelled(Payload, frozen=True, kw_only=True):
    """Activity `cmd` ended cancelled: dropped before it ran, or failed after the run asked to
    cancel."""

    TYPE = EventType.ACTIVITY_CANCELLED
    cmd: int
    message: str = ""


class ActivityTimedOut(Payload, frozen=True, kw_only=True):
    """Activity `cmd` timed out for good."""

    TYPE = EventType.ACTIVITY_TIMED_OUT
    cmd: int
    timeout: str
    """Which timeout: `schedule_to_close`, `schedule_to_start`, `start_to_close`, `heartbeat`."""
    attempt: int


class ChildStarted(CommandPayload, frozen=True, kw_only=True):
    """Command `cmd` started a child run (or tried to: then `run_id` is absent and a
    `ChildFailed` follows)."""

    TYPE = EventType.CHILD_STARTED
    run_id: str | None = None
    workflow_type: str
    workflow_id: str
    input: bytes
    """The child's input (msgpack)."""
    parent_close_policy: str = "terminate"
    """What happens to the child when this run closes: `terminate`, `cancel` or `abandon`."""

    def command(self) -> Command:
        return StartChild(
            workflow_type=self.workflow_type,
            workflow_id=self.workflow_id,
            input=self.input,
            parent_close_policy=self.parent_close_policy,
        )


class ChildCompleted(Payload, frozen=True, kw_only=True):
    """The child of command `cmd` completed."""

    TYPE = EventType.CHILD_COMPLETED
    cmd: int
    result: bytes
    """The child's result (msgpack)."""


class ChildFailed(Payload, frozen=True, kw_only=True):
    """The child of command `cmd` ended without a result, or could not start."""

    TYPE = EventType.CHILD_FAILED
    cmd: int
    error_type: str
    """`ChildFailed`, `ChildCancelled`, `ChildTerminated`, `ChildTimedOut`, `ChildStartFailed`."""
    message: str


class RunCancelled(Payload, frozen=True, kw_only=True):
    """The workflow closed as cancelled."""

    TYPE = EventType.RUN_CANCELLED
    error_type: str | None = None
    message: str | None = None


class RunTerminated(Payload, frozen=True, kw_only=True):
    """An operator (or a parent's close policy, or a reset) terminated the run; no workflow
    code ran."""

    TYPE = EventType.RUN_TERMINATED
    reason: str
    by: str
    """Who terminated it: an operator, or `amber` for a parent's close policy."""


class RunTimedOut(Payload, frozen=True, kw_only=True):
    """The workflow execution timeout passed (its deadline is `RunStarted`'s
    `execution_deadline_ms`)."""

    TYPE = EventType.RUN_TIMED_OUT


class RunContinuedAsNew(Payload, frozen=True, kw_only=True):
    """The workflow continued as a new run."""

    TYPE = EventType.RUN_CONTINUED_AS_NEW
    next_run_id: str
    input: bytes
    """The next run's input (msgpack)."""


class RunReset(Payload, frozen=True, kw_only=True):
    """An operator reset the run: run `new_run_id` replays this history up to `to_seq`."""

    TYPE = EventType.RUN_RESET
    new_run_id: str
    to_seq: int
    reason: str
    by: str


class RunMigrated(Payload, frozen=True, kw_only=True):
    """The run moved to another module version after a replay check of its history up to
    `checked_seq`; later activations replay on `to`."""

    TYPE = EventType.RUN_MIGRATED
    from_digest: str = msgspec.field(name="from")
    to: str
    checked_seq: int | None = None
    """The last event the replay check covered (the append expected history to end there)."""
    by: str
    reason: str


class UpgradeDetail(Record, frozen=True, kw_only=True):
    """Why a replay on an upgrade target failed."""

    reason: str
    """The failure reason (`non_determinism`, `trap`)."""
    message: str | None = None
    position: int | None = None
    """The command at which a non-determinism was found."""
    recorded: str | None = None
    issued: str | None = None


class UpgradeFailed(Payload, frozen=True, kw_only=True):
    """An automatic upgrade could not replay the run on `to`; the run stays on its version and
    is not offered `to` again."""

    TYPE = EventType.UPGRADE_FAILED
    to: str
    detail: UpgradeDetail


class RunSuspended(Payload, frozen=True, kw_only=True):
    """A poisoned task kept failing: the run waits for an operator (it stays `running`; no
    worker time is spent on it)."""

    TYPE = EventType.RUN_SUSPENDED
    reason: str
    fingerprint: str
    """The failure's fingerprint (what `triage` groups by)."""
    task_kind: str
    """`workflow` or `activity`."""
    step: int | None = None
    """The activity's command, for an activity task."""


class RunResumed(Payload, frozen=True, kw_only=True):
    """An operator released a suspended or poisoned run: `retry` (same version), `resume`
    (optionally on a fixed version), `skip` (the step completes with a given result)."""

    TYPE = EventType.RUN_RESUMED
    action: str
    by: str
    reason: str
    from_digest: str = msgspec.field(name="from")
    to: str
    step: int | None = None
    """The skipped step."""
    suspended: bool = False
    """The run was suspended (rather than only poisoned)."""


class ApprovalRequested(CommandPayload, frozen=True, kw_only=True):
    """The workflow asked people to approve `action` as command `cmd`: any `required` of the
    named approvers or members of the named roles, before `expires_at_ms`."""

    TYPE = EventType.APPROVAL_REQUESTED
    approval_id: str
    action: str
    approvers: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    required: int = 1
    expires_ms: int
    expires_at_ms: int

    def command(self) -> Command:
        return RequestApproval(
            action=self.action,
            approvers=self.approvers,
            roles=self.roles,
            required=self.required,
            expires_ms=self.expires_ms,
        )


class DecisionRecord(Record, frozen=True, kw_only=True, omit_defaults=False):
    """One approver's decision, as the workflow receives it (every key, always)."""

    approver: str
    approve: bool
    comment: str = ""
    at_ms: int


class ApprovalResolved(Payload, frozen=True, kw_only=True):
    """Approval command `cmd` ended: `approved`, `rejected` or `expired`."""

    TYPE = EventType.APPROVAL_RESOLVED
    cmd: int
    approval_id: str
    outcome: Literal["approved", "rejected", "expired"]
    decisions: tuple[DecisionRecord, ...] = ()
    result: bytes
    """What the workflow receives: msgpack of {outcome, decisions}."""


def approval_result(outcome: str, decisions: tuple[DecisionRecord, ...]) -> bytes:
    """What an approval's workflow receives: msgpack of {outcome, decisions}."""
    return _ENCODER.encode({"outcome": outcome, "decisions": decisions})


class HistoryWarning(Payload, frozen=True, kw_only=True):
    """The history passed the warning threshold of its limits."""

    TYPE = EventType.HISTORY_WARNING
    events: int
    history_bytes: int = msgspec.field(name="bytes")


PAYLOAD_TYPES: dict[EventType, type[Payload]] = {
    cls.TYPE: cls
    for cls in (
        RunStarted,
        ActivityScheduled,
        ActivityCompleted,
        ActivityFailed,
        MarkerRecorded,
        RunCompleted,
        RunFailed,
        TimerStarted,
        TimerFired,
        TimerCancelled,
        SignalAwaited,
        SignalReceived,
        CancelRequested,
        ActivityCancelled,
        ActivityTimedOut,
        ChildStarted,
        ChildCompleted,
        ChildFailed,
        RunCancelled,
        RunTerminated,
        RunTimedOut,
        RunContinuedAsNew,
        RunReset,
        RunMigrated,
        UpgradeFailed,
        RunSuspended,
        RunResumed,
        ApprovalRequested,
        ApprovalResolved,
        HistoryWarning,
    )
}
"""The payload class of every event type."""

_ENCODER = msgspec.msgpack.Encoder()
_DECODERS = {t: msgspec.msgpack.Decoder(cls) for t, cls in PAYLOAD_TYPES.items()}


def encode_payload(payload: Payload) -> bytes:
    """A payload as stored."""
    return _ENCODER.encode(payload)


def decode_payload(event_type: EventType, raw: bytes) -> Payload:
    """A stored payload as its type's class; `MalformedPayload` if it does not fit."""
    try:
        return _DECODERS[event_type].decode(raw)
    except msgspec.DecodeError as exc:  # ValidationError included
        raise MalformedPayload(f"{event_type.value} payload: {exc}") from None
