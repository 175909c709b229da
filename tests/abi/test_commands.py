"""The command array forms of ABI v1: every kind round-trips, and bad commands from a guest are
refused with an error that names the command and the field."""

from __future__ import annotations

from typing import Any

import pytest

from abi import (
    AwaitSignal,
    MalformedEnvelope,
    Patched,
    RecordNow,
    ScheduleActivity,
    StartChild,
    StartTimer,
    encode_command,
    parse_command,
)
from abi._commands import ActivityOptions, RetryOptions

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
]


@pytest.mark.parametrize("command", GOOD, ids=lambda c: type(c).__name__)
def test_every_kind_round_trips(command: Any) -> None:
    assert parse_command(0, encode_command(command)) == command


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
    ],
)
def test_bad_commands_are_refused_with_the_reason(value: Any, message: str) -> None:
    with pytest.raises(MalformedEnvelope, match=message):
        parse_command(3, value)
