"""The SDK's durable commands, await_any, cancellation, outcomes, heartbeats and HTTP, through
the scripted probe (tests/abi/durable_probe.c) in the minimal test host."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
import wasmtime

from tests.abi._harness import Call, Guest, act_envelope, wf_envelope

pack = msgpack.packb
DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def probe(guests: dict[str, Guest]) -> Guest:
    return guests["durable_probe"]


def script(
    probe: Guest,
    steps: list[Any],
    results: list[list[Any]] | None = None,
    *,
    cancel: tuple[int, str] | None = None,
) -> Call:
    envelope = wf_envelope("script", {"steps": steps}, results, cancel=cancel)
    return probe.call("amber_workflow.script", envelope)


def ok(cmd: int, seq: int, value: Any = None) -> list[Any]:
    """A successful result; `value` is packed into a payload unless it is None (timers)."""
    return [cmd, seq, 0, None if value is None else pack(value)]


def error(cmd: int, seq: int, type_: str, message: str = "") -> list[Any]:
    return [cmd, seq, 1, [type_, message]]


def trace_entry(index: int, value: Any = None) -> list[Any]:
    """What the probe traces for an await that returned ok."""
    return [index, True, "", "", b"" if value is None else pack(value)]


def cancelled(index: int, reason: str = "stop") -> list[Any]:
    return [index, False, "Cancelled", reason, b""]


# --- command shapes --------------------------------------------------------------------------


def test_timer_signal_cancel_timer_and_child_commands(probe: Guest) -> None:
    steps = [
        ["timer", 3 * DAY_MS],
        ["signal", "delivered"],
        ["cancel_timer", 0],
        ["child", "shipment", "b-1", pack({"x": 1}), "cancel", None],
        ["child", "shipment", "b-2", b"\xc0", None, "sha256:abc"],
        ["child", "shipment", "b-3", b"\xc0", None, None],
    ]
    call = script(probe, steps)
    assert call.output == {
        "status": "completed",
        "commands": [
            ["timer", 3 * DAY_MS],
            ["signal", "delivered"],
            ["cancel_timer", 0],
            ["child", "shipment", "b-1", pack({"x": 1}), {"parent_close_policy": "cancel"}],
            ["child", "shipment", "b-2", b"\xc0", {"version": "sha256:abc"}],
            ["child", "shipment", "b-3", b"\xc0", {}],
        ],
        "result": pack([]),
    }


def test_activity_options_struct_encodes_the_abi_map_in_a_fixed_order(probe: Guest) -> None:
    options = {
        "start_to_close_ms": 60_000,
        "schedule_to_close_ms": 600_000,
        "schedule_to_start_ms": 5_000,
        "heartbeat_ms": 2_000,
        "retry": {
            "initial_ms": 500,
            "coefficient": 1.5,
            "max_interval_ms": 30_000,
            "max_attempts": 7,
            "non_retryable": ["InvalidAddress", "Fraud"],
        },
    }
    # The probe reads the map into the C structs; the SDK writes them back in ABI key order.
    shuffled = dict(reversed(options.items()))
    call = script(probe, [["activity_opts", "book", b"\x80", shuffled]])
    [command] = call.output["commands"]
    assert command[:3] == ["activity", "book", b"\x80"]
    assert command[3] == options
    assert pack(command[3]) == pack(options)  # byte-exact: same order, coefficient a float64
    assert list(command[3]) == list(options)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, None),  # nothing set: the 3-element command
        ({"heartbeat_ms": 100}, {"heartbeat_ms": 100}),
        ({"retry": {}}, {"retry": {}}),
        ({"retry": {"max_attempts": 1}}, {"retry": {"max_attempts": 1}}),
    ],
)
def test_activity_options_leave_out_unset_fields(
    probe: Guest, options: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    [command] = script(probe, [["activity_opts", "a", b"\xc0", options]]).output["commands"]
    assert command == ["activity", "a", b"\xc0"] + ([expected] if expected is not None else [])


def test_raw_options_pass_through_and_must_be_one_map(probe: Guest) -> None:
    call = script(probe, [["activity", "a", b"\xc0", {"heartbeat_ms": 9}], ["activity", "b", b""]])
    assert call.output["commands"] == [
        ["activity", "a", b"\xc0", {"heartbeat_ms": 9}],
        ["activity", "b", b""],
    ]
    with pytest.raises(wasmtime.Trap):
        script(probe, [["activity", "a", b"\xc0", [1]]])


@pytest.mark.parametrize(
    "steps",
    [
        [["timer", -1]],  # negative duration
        [["signal", "s"], ["cancel_timer", 0]],  # not a timer
        [["timer", 5], ["cancel_timer", 1]],  # no such command
        [["timer", 5], ["cancel_timer", 0], ["await", 1]],  # cancel_timer is not awaitable
        [["any", []]],  # nothing to wait for
    ],
)
def test_api_misuse_traps(probe: Guest, steps: list[list[Any]]) -> None:
    with pytest.raises(wasmtime.Trap) as trap:
        script(probe, steps)
    assert trap.value.trap_code == wasmtime.TrapCode.UNREACHABLE


# --- await and await_any ---------------------------------------------------------------------

RACE = [["timer", 1000], ["signal", "go"], ["activity", "a", b"\xc0"], ["any", [0, 1, 2]]]


def test_await_any_suspends_when_nothing_was_delivered(probe: Guest) -> None:
    call = script(probe, RACE)
    assert call.suspended
    assert call.output == {
        "status": "suspended",
        "commands": [["timer", 1000], ["signal", "go"], ["activity", "a", b"\xc0"]],
    }


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        ([ok(0, 7)], trace_entry(0)),
        ([ok(2, 9, "act")], trace_entry(2, "act")),
        ([ok(1, 8, "sig"), ok(0, 7)], trace_entry(0)),  # list order is irrelevant: seq decides
        ([ok(0, 9), ok(1, 8, "sig")], trace_entry(1, "sig")),
        ([ok(2, 5, "act"), ok(0, 6), ok(1, 4, "sig")], trace_entry(1, "sig")),
        ([error(0, 3, "TimerCancelled"), ok(1, 4, "sig")], [0, False, "TimerCancelled", "", b""]),
    ],
)
def test_await_any_returns_the_smallest_delivery_seq(
    probe: Guest, results: list[list[Any]], expected: list[Any]
) -> None:
    call = script(probe, RACE, results)
    assert call.output["status"] == "completed"
    assert call.result == [expected]
    # Same history, same answer: the choice depends on the history only.
    assert script(probe, RACE, list(reversed(results))).result == [expected]


def test_await_any_leaves_the_others_pending(probe: Guest) -> None:
    steps = [*RACE, ["await", 2], ["await", 1]]
    results = [ok(1, 4, "sig"), ok(2, 6, "act")]
    call = script(probe, steps, results)
    assert call.result == [trace_entry(1, "sig"), trace_entry(2, "act"), trace_entry(1, "sig")]
    # The timer is still pending: awaiting it suspends.
    assert script(probe, [*steps, ["await", 0]], results).suspended


def test_sleep_is_a_timer_awaited_at_once(probe: Guest) -> None:
    first = script(probe, [["sleep", 250]])
    assert first.suspended and first.output["commands"] == [["timer", 250]]
    assert script(probe, [["sleep", 250]], [ok(0, 1)]).result == [trace_entry(0)]


# --- cancellation ----------------------------------------------------------------------------

TWO = [["activity", "a", b"\xc0"], ["activity", "b", b"\xc0"], ["await", 0], ["await", 1]]


def test_cancellation_goes_to_the_first_await_without_a_result(probe: Guest) -> None:
    # Nothing recorded: the first await gets Cancelled, the second suspends normally.
    call = script(probe, TWO, cancel=(3, "stop"))
    assert call.suspended
    # With b's result recorded (before or after the cancel), a's await took the cancellation.
    for seq in (2, 4):
        done = script(probe, TWO, [ok(1, seq, "b")], cancel=(3, "stop"))
        assert done.result == [cancelled(0), trace_entry(1, "b")]


def test_results_recorded_before_the_cancel_are_delivered_normally(probe: Guest) -> None:
    call = script(probe, TWO, [ok(0, 2, "a")], cancel=(3, "stop"))
    assert call.result == [trace_entry(0, "a"), cancelled(1)]
    # Delivered once: awaiting b again behaves normally (suspends until b has a result).
    steps = [*TWO, ["await", 1]]
    assert script(probe, steps, [ok(0, 2, "a")], cancel=(3, "stop")).suspended
    done = script(probe, steps, [ok(0, 2, "a"), ok(1, 5, "b")], cancel=(3, "stop"))
    assert done.result == [trace_entry(0, "a"), cancelled(1), trace_entry(1, "b")]


def test_a_result_recorded_after_the_cancel_stays_available(probe: Guest) -> None:
    steps = [["activity", "a", b"\xc0"], ["await", 0], ["await", 0]]
    call = script(probe, steps, [ok(0, 9, "a")], cancel=(3, "why"))
    assert call.result == [cancelled(0, "why"), trace_entry(0, "a")]


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        ([], [cancelled(-1), trace_entry(1, "sig")]),
        ([ok(0, 12)], [cancelled(-1), trace_entry(1, "sig")]),
        ([ok(0, 4)], [trace_entry(0), cancelled(1)]),  # the timer came before the cancel
    ],
)
def test_await_any_and_cancellation(
    probe: Guest, results: list[list[Any]], expected: list[Any]
) -> None:
    steps = [["timer", 1000], ["signal", "go"], ["any", [0, 1]], ["await", 1]]
    call = script(probe, steps, [*results, ok(1, 11, "sig")], cancel=(10, "stop"))
    assert call.result == expected


def test_cancel_requested_is_true_once_the_cancellation_was_delivered(probe: Guest) -> None:
    steps = [["cancel_requested"], ["sleep", 5], ["cancel_requested"]]
    assert script(probe, steps).suspended
    assert script(probe, steps, cancel=(1, "bye")).result == [
        [False, ""],
        cancelled(0, "bye"),
        [True, "bye"],
    ]
    assert script(probe, steps, [ok(0, 1)]).result == [[False, ""], trace_entry(0), [False, ""]]


def test_cancel_requested_answers_the_same_on_a_replay_after_the_request(probe: Guest) -> None:
    steps = [["cancel_requested"], ["sleep", 5], ["cancel_requested"]]
    before = script(probe, steps, [ok(0, 1)]).result
    after = script(probe, steps, [ok(0, 1)], cancel=(10, "later")).result
    assert after == before == [[False, ""], trace_entry(0), [False, ""]]


def test_a_cancelled_sleep_lets_compensation_run(probe: Guest) -> None:
    steps = [["sleep", DAY_MS], ["activity", "undo", b"\xc0"], ["await", 1]]
    first = script(probe, steps, cancel=(2, "stop"))
    assert first.suspended
    assert first.output["commands"] == [["timer", DAY_MS], ["activity", "undo", b"\xc0"]]
    done = script(probe, steps, [ok(1, 3, "undone")], cancel=(2, "stop"))
    assert done.result == [cancelled(0), trace_entry(1, "undone")]


def test_replaying_ends_when_the_newest_entry_is_consumed(probe: Guest) -> None:
    steps = [
        ["activity", "a", b"\xc0"],
        ["await", 0],
        ["replaying"],
        ["timer", 5],
        ["await", 1],
        ["replaying"],
    ]
    # The cancel (seq 5) is newer than a's result: replaying until the cancel is delivered.
    call = script(probe, steps, [ok(0, 3, "a")], cancel=(5, "stop"))
    assert call.result == [trace_entry(0, "a"), [True], cancelled(1), [False]]
    # A result newer than the cancel: replaying until that result is consumed.
    call = script(probe, [*steps, ["await", 1]], [ok(0, 3, "a"), ok(1, 6)], cancel=(5, "stop"))
    assert call.result == [trace_entry(0, "a"), [True], cancelled(1), [True], trace_entry(1)]


def test_malformed_cancel_entries_trap(probe: Guest) -> None:
    for cancel in ([1], [-1, "x"], ["1", "x"], [1, 2]):
        envelope = msgpack.unpackb(wf_envelope("script", {"steps": []}))
        envelope["cancel"] = cancel
        with pytest.raises(wasmtime.Trap):
            probe.call("amber_workflow.script", pack(envelope))


# --- outcomes and publish --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "extra"),
    [
        (["cancelled", None, None], {}),
        (["cancelled", "Cancelled", "user asked"], {"error": ["Cancelled", "user asked"]}),
        (["cancelled", None, "just a message"], {"error": ["Cancelled", "just a message"]}),
        (["cancelled", "Superseded", None], {"error": ["Superseded", ""]}),
        (["continue_as_new", pack({"cursor": 7})], {"result": pack({"cursor": 7})}),
    ],
)
def test_closing_outcomes(probe: Guest, step: list[Any], extra: dict[str, Any]) -> None:
    call = script(probe, [["timer", 1], step])
    assert not call.suspended
    status = "continue_as_new" if step[0] == "continue_as_new" else "cancelled"
    assert call.output == {"status": status, "commands": [["timer", 1]], **extra}


def test_publish_last_value_wins_and_is_not_suppressed_on_replay(probe: Guest) -> None:
    steps = [
        ["publish", "status", pack("booking")],
        ["sleep", 5],
        ["publish", "status", pack({"status": "done"})],
        ["publish", "other", pack(1)],
    ]
    first = script(probe, steps)
    assert first.publishes == [("status", pack("booking"))]
    replay = script(probe, steps, [ok(0, 1)])
    assert replay.published == {"status": {"status": "done"}, "other": 1}
    assert len(replay.publishes) == 3


def test_publish_is_capped_at_64_kib(probe: Guest) -> None:
    limit = 65536
    big = pack(b"x" * (limit - 3))
    assert len(big) == limit
    assert script(probe, [["publish", "q", big]]).publishes == [("q", big)]
    with pytest.raises(wasmtime.Trap):
        script(probe, [["publish", "q", pack(b"x" * (limit - 2))]])


# --- activities: heartbeats ------------------------------------------------------------------


def beat(probe: Guest, args: dict[str, Any], **kwargs: Any) -> Call:
    details = kwargs.pop("details", None)
    return probe.call("amber_activity.beat", act_envelope("beat", args, details=details), **kwargs)


def test_heartbeats_carry_details_and_report_cancellation(probe: Guest) -> None:
    call = beat(probe, {"n": 3})
    assert call.heartbeats == [pack({"i": i}) for i in range(3)]
    assert call.result == {"details": b"", "stopped_at": -1, "cancel_requested": False}

    again = beat(probe, {"n": 1}, details=pack({"i": 2}))
    assert again.result["details"] == pack({"i": 2})

    stopped = beat(probe, {"n": 3}, cancel_requested=True)
    assert stopped.heartbeats == [pack({"i": 0})]
    assert stopped.result == {"details": b"", "stopped_at": 0, "cancel_requested": True}


def test_heartbeat_details_are_capped_at_64_kib(probe: Guest) -> None:
    assert beat(probe, {"size": 65536}).heartbeats == [b"\xc0" * 65536]
    assert beat(probe, {"size": 0}).heartbeats == [b""]
    with pytest.raises(wasmtime.Trap):
        beat(probe, {"size": 65537})


# --- activities: HTTP ------------------------------------------------------------------------

URL = "http://127.0.0.1:9/x"


def fetch(probe: Guest, args: dict[str, Any], response: Any) -> Call:
    return probe.call("amber_activity.fetch", act_envelope("fetch", args), http=response)


def test_http_request_encoding(probe: Guest) -> None:
    response = {"status": 204, "headers": {}, "body": b""}
    bare = fetch(probe, {"method": "GET", "url": URL}, response)
    assert bare.http_requests == [{"method": "GET", "url": URL}]
    args = {
        "method": "PUT",
        "url": URL,
        "headers": {"X-A": "1", "Idempotency-Key": "mine"},
        "body": b"\x00payload",
        "timeout_ms": 1500,
    }
    full = fetch(probe, args, response)
    assert full.http_requests == [args]
    assert list(full.http_requests[0]) == ["method", "url", "headers", "body", "timeout_ms"]


def test_http_response_parsing(probe: Guest) -> None:
    response = {
        "status": 201,
        "headers": {"Content-Type": "application/json", "X-Other": "y"},
        "body": b'{"a": 1}',
    }
    call = fetch(probe, {"method": "GET", "url": URL}, response)
    assert call.result == {
        "ok": True,
        "status": 201,
        "body": b'{"a": 1}',
        "content_type": "application/json",  # looked up as "content-type"
        "error": ["", ""],
    }


@pytest.mark.parametrize("kind", ["HostNotAllowed", "Timeout", "ConnectionError", "BadRequest"])
def test_http_error_envelopes(probe: Guest, kind: str) -> None:
    call = fetch(probe, {"method": "GET", "url": URL}, {"error": [kind, "details"]})
    assert call.result == {
        "ok": False,
        "status": 0,
        "body": b"",
        "content_type": "",
        "error": [kind, "details"],
    }


@pytest.mark.parametrize(
    "response",
    [
        {},
        {"status": 200, "error": ["Timeout", "x"]},
        {"status": "200"},
        {"status": 200, "headers": ["x"]},
        {"error": "Timeout"},
        [200],
    ],
)
def test_malformed_http_envelopes_trap(probe: Guest, response: Any) -> None:
    with pytest.raises(wasmtime.Trap):
        fetch(probe, {"method": "GET", "url": URL}, response)
