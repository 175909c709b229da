"""The command array forms of ABI v1: every kind round-trips, and bad commands from a guest are
refused with an error that names the command and the field."""

from __future__ import annotations

from typing import Any

import pytest

from amber.abi import (
    AwaitSignal,
    MalformedEnvelope,
    Patched,
    RecordNow,
    RequestApproval,
    ScheduleActivity,
    StartChild,
    StartTimer,
    encode_command,
    parse_command,
)
from amber.abi._commands import ActivityOptions, RetryOptions

GOOD = [
    ScheduleActivity(name="charge", args=b"\x90", options=ActivityOptions()),
    ScheduleActivity(
        name="charge",
        args=b"\xc0",
        options=ActivityOptions(start_to_close_ms=1000, retry=RetryOptions(max_attempts=3)),
    ),
    RecordNow(value=1_700_000_000_000),
    StartTimer(duration_ms=60_000),
    AwaitSignal(name="approved"),
    StartChild(
        workflow_type="shipment",
        workflow_id="order-1/ship",
        input=b"\x80",
        parent_close_policy="abandon",
        version="",
    ),
    Patched(change_id="add-audit"),
    RequestApproval(
        action="refund 120.00 EUR",
        approvers=("ann", "bea"),
        roles=("finance",),
        required=2,
        expires_ms=86_400_000,
    ),
]


@pytest.mark.parametrize("command", GOOD, ids=lambda c: type(c).__name__)
def test_every_kind_round_trips(command: Any) -> None:
    parsed = parse_command(0, encode_command(command))
    assert parsed == command
    # Equality leaves out what replay does not match on (options, close policy): compare those too.
    assert encode_command(parsed) == encode_command(command)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("activity", r"command 3 must be \[kind, \.\.\.\]"),
        (["launch"], "unknown kind 'launch'"),
        (["child", "bad type!", "id", b"\x80"], "workflow type 'bad type!' is not a valid name"),
        (["child", "shipment", "", b"\x80"], "workflow id must be 1-256 printable"),
        (["child", "shipment", "a\x00b", b"\x80"], "workflow id must be 1-256 printable"),
        (["child", "shipment", "x" * 257, b"\x80"], "workflow id must be 1-256 printable"),
        (["child", "shipment", "id", b"\x80", {"parent_close_policy": "orphan"}], "policy"),
        (["signal", ""], "signal name must be 1-256 printable"),
        (["signal", 7], "signal name must be a string"),
        (["patched", ""], "change id must be 1-256 printable"),
        (["timer", -1], "duration_ms must be an integer"),
        (["activity", "charge", b"", {"heartbeat_ms": True}], "heartbeat_ms must be an integer"),
        (["approval", "pay", 1000, {}], "name at least one approver or role"),
        (["approval", "pay", 1000, {"approvers": ["a"], "required": 2}], "2 approvals required"),
        (["approval", "pay", 0, {"approvers": ["a"]}], "expires_ms must be a positive"),
        (["approval", "", 1000, {"approvers": ["a"]}], "an action has 1 to 1000"),
        (["approval", "pay", 1000, {"approvers": ["a"], "quorum": 1}], "unknown policy keys"),
        (["approval", "pay", 1000, {"approvers": ["a"] * 65}], "at most 64"),
        (["approval", "pay", 1000, {"approvers": ["a"], "required": True}], "integer in"),
        (["approval", "pay", 1000, {"roles": ["r"], "required": 2**40}], "integer in"),
        (["approval", "pay", 1000, ["a"]], "expected"),
    ],
)
def test_bad_commands_are_refused_with_the_reason(value: Any, message: str) -> None:
    with pytest.raises(MalformedEnvelope, match=message):
        parse_command(3, value)


@pytest.mark.parametrize(
    "key", ["start_to_close_ms", "schedule_to_close_ms", "schedule_to_start_ms", "heartbeat_ms"]
)
def test_a_timeout_of_zero_is_no_timeout(key: str) -> None:
    # As in Temporal. It meant "time out at once": an explicit `"heartbeat_ms": 0` failed every
    # attempt within a second (found by an audit).
    command = parse_command(3, ["activity", "charge", b"\x90", {key: 0}])
    assert isinstance(command, ScheduleActivity)
    assert command.options == ActivityOptions()


def test_payloads_as_json_are_valid_json_whatever_floats_they_hold() -> None:
    # `amber --json run result` printed NaN, which no JSON reader takes.
    import json
    import math

    from amber.abi import pack, payload_json

    shown = payload_json(pack({"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": b"\x00"}))
    text = json.dumps(shown, allow_nan=False)
    assert json.loads(text) == {
        "a": "NaN",
        "b": ["Infinity", "-Infinity", 1.5],
        "c": {"$bytes": "AA=="},
    }
