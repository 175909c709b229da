"""The ABI's envelopes: reading the host's input, writing the guest's output.

The checks mirror the C SDK's (`amber__wf_begin`, `amber__act_begin`): a malformed envelope
from the host is the host's bug, so it raises `ValueError` and the activation traps. Unknown
keys are skipped. Output maps are written with their keys in the C SDK's order ("status",
"commands", then "result" and/or "error").

A *delta* is the answer a host may give to `await_next` of a module whose manifest says
`"await_next": ["delta"]` (every module built with this SDK): only the results added since the
input the guest read last (`"from"` is how many that one held), with the current `recorded` and
cancel request. The guest then reads a few new items instead of the whole history again; it
checks `"from"` against its own count, so a host that lost track fails loudly instead of
skipping a result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from . import _msgpack
from ._commands import Command

__all__ = [
    "ABI_VERSION",
    "ActivityInput",
    "CancelRequest",
    "Recorded",
    "WorkflowDelta",
    "WorkflowInput",
    "WorkflowStatus",
    "activity_completed",
    "activity_failed",
    "parse_activity_input",
    "parse_next_input",
    "parse_workflow_input",
    "workflow_output",
]

ABI_VERSION = 1
_MAX_INDEX = 1 << 24  # the C SDK's bound on command indices and `recorded`
_ABSENT = object()  # `_get`: a key the envelope lacks


class WorkflowStatus(StrEnum):
    """How a workflow activation ended (the output envelope's "status")."""

    SUSPENDED = "suspended"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CONTINUE_AS_NEW = "continue_as_new"


@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    """A command's result as history recorded it."""

    seq: int
    """Delivery seq: the history position the host recorded it at."""
    ok: bool
    """Status 0; False for status 1, an error `[type, message]`."""
    value: Any
    """The decoded value: bin for payloads and random, int for now, str for patched, nil."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelRequest:
    """The input's "cancel": the run was asked to stop at history position `seq`."""

    seq: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowInput:
    """A workflow activation's input envelope."""

    run_id: str
    workflow: str
    input: bytes
    """The run's input payload (msgpack)."""
    workflow_id: str = ""
    """The run's workflow id ("" from a host that does not send it)."""
    results: Mapping[int, Recorded]
    """Recorded results by command index."""
    recorded: int | None
    """How many commands history holds; None from a host that predates patch markers."""
    cancel: CancelRequest | None
    query: str | None
    """The query this activation answers, if it only answers one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowDelta:
    """An `await_next` answer that carries only what history added (see the module docstring)."""

    start: int
    """How many results the input the guest read last held (the answer's "from")."""
    more: tuple[tuple[int, Recorded], ...]
    """The results added since, by command index, in history's order."""
    recorded: int | None
    cancel: CancelRequest | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityInput:
    """An activity attempt's input envelope."""

    run_id: str
    activity: str
    args: bytes
    attempt: int
    idempotency_key: str
    deadline_ms: int
    heartbeat_details: bytes | None
    """What an earlier attempt last heartbeated (msgpack); None when nothing."""


# ---- reading -------------------------------------------------------------------------------


def _envelope(data: bytes, what: str, memo: _msgpack.ItemMemo | None = None) -> dict[str, Any]:
    doc = _msgpack.decode(data) if memo is None else _msgpack.decode_reusing(data, memo)
    if type(doc) is not dict:
        raise ValueError(f"{what}: the envelope must be a map with string keys")
    for key in doc:
        if type(key) is not str:
            raise ValueError(f"{what}: the envelope must be a map with string keys")
    abi = doc.get("abi", ABI_VERSION)
    if not _is_int(abi) or abi != ABI_VERSION:
        raise ValueError(f"{what}: abi {abi!r} is not {ABI_VERSION}")
    return doc


def _is_int(value: object) -> bool:
    # Decoded ints are exactly int (the first test); bool is the subclass to refuse.
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


def _get(doc: Mapping[str, Any], key: str, kind: type, default: Any, what: str) -> Any:
    value = doc.get(key, _ABSENT)
    if type(value) is kind:
        return value
    if value is _ABSENT:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{what}: {key!r} must be {kind.__name__}, not {type(value).__name__}")
    return value


def _result(item: object, what: str) -> tuple[int, Recorded]:
    if type(item) is not list or len(item) != 4:
        raise ValueError(f"{what}: a result must be [cmd, seq, status, value]")
    cmd, seq, status, value = item
    if not _is_int(cmd) or not 0 <= cmd < _MAX_INDEX:
        raise ValueError(f"{what}: result cmd {cmd!r} out of range")
    if not _is_int(seq) or seq < 0:
        raise ValueError(f"{what}: result seq {seq!r} must be an int >= 0")
    if type(status) is not int or status not in (0, 1):
        raise ValueError(f"{what}: result status {status!r} must be 0 or 1")
    return cmd, Recorded(seq=seq, ok=status == 0, value=value)


def _results(items: object, what: str) -> dict[int, Recorded]:
    """The results, each already checked by `_result` (`results_memo`'s conversion)."""
    if not isinstance(items, list):
        raise ValueError(f"{what}: 'results' must be an array")
    out: dict[int, Recorded] = {}
    for cmd, recorded in items:
        if cmd in out:
            raise ValueError(f"{what}: two results for command {cmd}")
        out[cmd] = recorded
    return out


def _cancel(value: object, what: str) -> CancelRequest:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not _is_int(value[0])
        or value[0] < 0
        or not isinstance(value[1], str)
    ):
        raise ValueError(f"{what}: 'cancel' must be [seq, reason]")
    return CancelRequest(seq=value[0], reason=value[1])


_WORKFLOW_INPUT = "workflow input"


def results_memo() -> _msgpack.ItemMemo:
    """What `parse_workflow_input` keeps of one envelope's results to read the same run's next
    envelope faster (one per live instance: each of its inputs repeats the results before)."""
    return _msgpack.ItemMemo("results", lambda item: _result(item, _WORKFLOW_INPUT))


def parse_workflow_input(data: bytes, memo: _msgpack.ItemMemo | None = None) -> WorkflowInput:
    """Read a workflow activation's input envelope; with `memo` (`results_memo`), the results
    the last envelope read with it began with are taken from it."""
    return _workflow_input(_envelope(data, _WORKFLOW_INPUT, memo or results_memo()))


def parse_next_input(data: bytes, memo: _msgpack.ItemMemo) -> WorkflowInput | WorkflowDelta:
    """Read `await_next`'s answer: the run's whole next input envelope, or a delta."""
    doc = _host_delta(data)
    if doc is None:
        doc = _envelope(data, _WORKFLOW_INPUT, memo)
        if doc.get("delta") is not True:
            return _workflow_input(doc)
    what = "await_next delta"
    start = _get(doc, "from", int, None, what)
    more = _get(doc, "more", list, None, what)
    if start is None or more is None or not 0 <= start <= _MAX_INDEX:
        raise ValueError(f"{what}: 'from' (an index) and 'more' are required")
    return WorkflowDelta(
        start=start,
        more=tuple(_result(item, what) for item in more),
        recorded=_recorded(doc, None, what),
        cancel=_cancel(doc["cancel"], what) if "cancel" in doc else None,
    )


_DELTA_KEYS = (b"\xa3abi\x01\xa5delta\xc3\xa4from", b"\xa4more", b"\xa8recorded", b"\xa6cancel")
"""A delta's keys as the host writes them, in its order ("abi" and "delta" with their values)."""


def _host_delta(data: bytes) -> dict[str, Any] | None:
    """A delta's fields, where `data` is laid out as the host writes one (`{"abi": 1, "delta":
    true, "from", "more", "recorded"}` and maybe "cancel", in that order): the values are read
    with the codec, the keys only compared, which is most of a live step's decoding saved.
    None for any other layout or a value the codec refuses: the whole-document path then reads
    it, or says what is wrong with it."""
    head, more, recorded, cancel = _DELTA_KEYS
    fields = data[0] - 0x80 if data else 0
    if not 5 <= fields <= 6 or not data.startswith(head, 1):
        return None
    try:
        start, at = _msgpack.decode_at(data, 1 + len(head), 1)
        if not data.startswith(more, at):
            return None
        items, at = _msgpack.decode_at(data, at + len(more), 1)
        if not data.startswith(recorded, at):
            return None
        count, at = _msgpack.decode_at(data, at + len(recorded), 1)
        doc = {"from": start, "more": items, "recorded": count}
        if fields == 6:
            if not data.startswith(cancel, at):
                return None
            doc["cancel"], at = _msgpack.decode_at(data, at + len(cancel), 1)
    except ValueError:
        return None
    return doc if at == len(data) else None


def _workflow_input(doc: dict[str, Any]) -> WorkflowInput:
    what = _WORKFLOW_INPUT
    if "input" not in doc or "results" not in doc:
        raise ValueError(f"{what}: 'input' and 'results' are required")
    results = _results(doc["results"], what)
    cancel = _cancel(doc["cancel"], what) if "cancel" in doc else None
    return WorkflowInput(
        run_id=_get(doc, "run_id", str, "", what),
        workflow=_get(doc, "workflow", str, "", what),
        workflow_id=_get(doc, "workflow_id", str, "", what),
        input=_get(doc, "input", bytes, b"", what),
        results=results,
        recorded=_recorded(doc, results, what),
        cancel=cancel,
        query=_get(doc, "query", str, None, what),
    )


def _recorded(doc: dict[str, Any], results: Mapping[int, Recorded] | None, what: str) -> int | None:
    """The envelope's `recorded` count (None when absent); with `results`, none beyond it."""
    recorded: int | None = _get(doc, "recorded", int, None, what)
    if recorded is None:
        return None
    if not 0 <= recorded <= _MAX_INDEX:
        raise ValueError(f"{what}: 'recorded' {recorded} out of range")
    if results is not None and any(cmd >= recorded for cmd in results):
        raise ValueError(f"{what}: a result for a command beyond 'recorded' ({recorded})")
    return recorded


def parse_activity_input(data: bytes) -> ActivityInput:
    """Read an activity attempt's input envelope."""
    what = "activity input"
    doc = _envelope(data, what)
    if "args" not in doc:
        raise ValueError(f"{what}: 'args' is required")
    return ActivityInput(
        run_id=_get(doc, "run_id", str, "", what),
        activity=_get(doc, "activity", str, "", what),
        args=_get(doc, "args", bytes, b"", what),
        attempt=_get(doc, "attempt", int, 0, what),
        idempotency_key=_get(doc, "idempotency_key", str, "", what),
        deadline_ms=_get(doc, "deadline_ms", int, 0, what),
        heartbeat_details=_get(doc, "heartbeat_details", bytes, None, what),
    )


# ---- writing -------------------------------------------------------------------------------


def workflow_output(
    status: WorkflowStatus,
    commands: Sequence[Command],
    *,
    result: bytes | None = None,
    error: tuple[str, str] | None = None,
    packed: _msgpack.PackedArray | None = None,
) -> bytes:
    """A workflow activation's output envelope: every command issued, from index 0.

    `packed`: the commands encoded for earlier outputs of the same activation, extended here
    (a live instance's outputs repeat every command; the bytes are the same either way)."""
    if packed is None or packed.count > len(commands):
        packed = _msgpack.PackedArray()
    for command in commands[packed.count :]:
        packed.append(command.wire())
    if result is None and error is None:  # every wait: the same two fields, then the array
        return _TWO_FIELDS[status] + packed.packed().data
    doc: dict[str, object] = {"status": str(status), "commands": packed.packed()}
    if result is not None:
        doc["result"] = result
    if error is not None:
        doc["error"] = list(error)
    return _msgpack.encode(doc)


_TWO_FIELDS = {
    status: _msgpack.encode({"status": str(status), "commands": _msgpack.Packed(b"")})
    for status in WorkflowStatus
}
"""An output's bytes up to its commands array, by status, where the output has no other field
(what `encode` writes for those two fields, written once: a live step's output is one)."""


def activity_completed(result: bytes) -> bytes:
    """An activity attempt's output: `{"status": "completed", "result": bin}`."""
    return _msgpack.encode({"status": "completed", "result": result})


def activity_failed(type: str, message: str, non_retryable: bool) -> bytes:
    """An activity attempt's output: `{"status": "failed", "error": [type, message, bool]}`."""
    return _msgpack.encode({"status": "failed", "error": [type, message, non_retryable]})
