"""The payments sample (abi/samples/payments.c): the `pay` workflow's command, and the HTTP
requests `charge` and `slow_charge` make against canned response envelopes."""

from __future__ import annotations

import json
from typing import Any

import msgpack
import pytest
import wasmtime

from tests.abi._harness import Call, Guest, act_envelope, wf_envelope

pack = msgpack.packb
SERVICE = "http://127.0.0.1:8123"
PAYMENT = {"order_id": "o-1", "amount_cents": 1250, "service": SERVICE}
CHARGED = {"status": 200, "headers": {"content-type": "application/json"},
           "body": b'{"charge_id": "ch_1", "order_id": "o-1", "replayed": false}'}  # fmt: skip


@pytest.fixture(scope="module")
def payments(guests: dict[str, Guest]) -> Guest:
    return guests["payments"]


def pay(guest: Guest, payload: Any, results: list[list[Any]] | None = None) -> Call:
    return guest.call("amber_workflow.pay", wf_envelope("pay", payload, results))


def charge(guest: Guest, http: Any, args: Any = None, **kwargs: Any) -> Call:
    name = kwargs.pop("activity", "charge")
    details = kwargs.pop("details", None)
    envelope = act_envelope(name, PAYMENT if args is None else args, details=details)
    return guest.call(f"amber_activity.{name}", envelope, http=http, **kwargs)


# --- the pay workflow ------------------------------------------------------------------------


def test_pay_calls_charge_once_and_completes_with_its_result(payments: Guest) -> None:
    first = pay(payments, PAYMENT)
    assert first.output == {
        "status": "suspended",
        "commands": [["activity", "charge", pack(PAYMENT)]],
    }
    result = pack({"charge_id": "ch_1", "status": 200})
    done = pay(payments, PAYMENT, [[0, 1, 0, result]])
    assert done.output == {
        "status": "completed",
        "commands": first.output["commands"],
        "result": result,
    }


def test_pay_hooks_choose_slow_charge_and_pass_options_through(payments: Guest) -> None:
    options = {"heartbeat_ms": 500, "retry": {"max_attempts": 2, "coefficient": 2.0}}
    payload = {**PAYMENT, "activity": "slow_charge", "polls": 3, "poll_ms": 50, "options": options}
    [command] = pay(payments, payload).output["commands"]
    args = {**PAYMENT, "polls": 3, "poll_ms": 50}
    assert command == ["activity", "slow_charge", pack(args), options]
    assert pay(payments, {**PAYMENT, "options": None}).output["commands"][0][3:] == []


@pytest.mark.parametrize(
    ("results", "cancel", "expected"),
    [
        ([[0, 1, 1, ["PaymentRejected", "HTTP 422"]]], None,
         {"status": "failed", "error": ["PaymentRejected", "HTTP 422"]}),
        ([], (1, "withdrawn"), {"status": "cancelled", "error": ["Cancelled", "withdrawn"]}),
    ],
)  # fmt: skip
def test_pay_fails_or_closes_as_cancelled(
    payments: Guest, results: Any, cancel: Any, expected: dict[str, Any]
) -> None:
    envelope = wf_envelope("pay", PAYMENT, results, cancel=cancel)
    out = payments.call("amber_workflow.pay", envelope).output
    assert out == {"commands": [["activity", "charge", pack(PAYMENT)]], **expected}


@pytest.mark.parametrize(
    "payload",
    [{"order_id": "o"}, {**PAYMENT, "activity": "refund"}, {**PAYMENT, "options": [1]}],
)
def test_pay_rejects_bad_input(payments: Guest, payload: Any) -> None:
    out = pay(payments, payload).output
    assert (out["status"], out["error"][0], out["commands"]) == ("failed", "BadInput", [])


# --- charge: the request ---------------------------------------------------------------------


@pytest.mark.parametrize("order_id", ["o-1", 'quote " and \\ back', "line\nbreak\x01", "ünï"])
def test_charge_posts_json_and_leaves_the_idempotency_key_to_the_host(
    payments: Guest, order_id: str
) -> None:
    call = charge(payments, CHARGED, {**PAYMENT, "order_id": order_id, "amount_cents": -7})
    [request] = call.http_requests
    assert request.keys() == {"method", "url", "headers", "body"}
    assert (request["method"], request["url"]) == ("POST", f"{SERVICE}/charge")
    assert request["headers"] == {"Content-Type": "application/json"}
    assert json.loads(request["body"]) == {"order_id": order_id, "amount_cents": -7}


def test_charge_joins_the_url_without_doubling_the_slash(payments: Guest) -> None:
    call = charge(payments, CHARGED, {**PAYMENT, "service": SERVICE + "/"})
    assert call.http_requests[0]["url"] == f"{SERVICE}/charge"


# --- charge: the response --------------------------------------------------------------------


def test_charge_returns_the_charge_id_and_status(payments: Guest) -> None:
    call = charge(payments, {**CHARGED, "status": 201})
    assert call.output["status"] == "completed"
    assert call.result == {"charge_id": "ch_1", "status": 201}


@pytest.mark.parametrize(
    ("response", "error"),
    [
        ({"status": 503, "headers": {}, "body": b"busy"},
         ["PaymentServiceError", "the payment service answered HTTP 503", False]),
        ({"status": 422, "headers": {}, "body": b"{}"},
         ["PaymentRejected", "the payment service answered HTTP 422", True]),
        ({"status": 400, "headers": {}, "body": b""},
         ["PaymentRejected", "the payment service answered HTTP 400", True]),
        ({"status": 200, "headers": {}, "body": b'{"charge": "x"}'},
         ["BadResponse", "no charge_id in the response", True]),
        ({"error": ["ConnectionError", "refused"]}, ["ConnectionError", "refused", False]),
        ({"error": ["Timeout", "after 5000 ms"]}, ["Timeout", "after 5000 ms", False]),
        ({"error": ["HostNotAllowed", "evil.example"]}, ["HostNotAllowed", "evil.example", True]),
        ({"error": ["BadRequest", "no url"]}, ["BadRequest", "no url", True]),
    ],
)  # fmt: skip
def test_charge_failures_are_retryable_only_when_transient(
    payments: Guest, response: dict[str, Any], error: list[Any]
) -> None:
    assert charge(payments, response).output == {"status": "failed", "error": error}


@pytest.mark.parametrize(
    "body",
    [b'{"charge_id":"ch_9"}', b'{ "charge_id" : "ch_9" }', b'{"x": 1, "charge_id":   "ch_9"}'],
)
def test_charge_finds_the_charge_id_by_text(payments: Guest, body: bytes) -> None:
    call = charge(payments, {"status": 200, "headers": {}, "body": body})
    assert call.result == {"charge_id": "ch_9", "status": 200}


def test_charge_traps_on_a_malformed_envelope(payments: Guest) -> None:
    with pytest.raises(wasmtime.Trap):
        charge(payments, {"status": 200, "error": ["Timeout", "both"]})


def test_charge_rejects_bad_args(payments: Guest) -> None:
    out = charge(payments, CHARGED, {"order_id": "o"}).output
    assert out["error"] == ["BadArgs", "expected {order_id, amount_cents, service}", True]
    assert charge(payments, CHARGED, {"order_id": "o"}).http_requests == []


# --- slow_charge: heartbeats -----------------------------------------------------------------


def status_then_charge(request: dict[str, Any]) -> dict[str, Any]:
    if request["url"].endswith("/status"):
        return {"status": 200, "headers": {}, "body": b'{"ok": true}'}
    return CHARGED


def test_slow_charge_polls_heartbeats_sleeps_then_charges(payments: Guest) -> None:
    args = {**PAYMENT, "polls": 3, "poll_ms": 40}
    call = charge(payments, status_then_charge, args, activity="slow_charge")
    assert [(r["method"], r["url"]) for r in call.http_requests] == [
        *[("GET", f"{SERVICE}/status")] * 3,
        ("POST", f"{SERVICE}/charge"),
    ]
    assert call.heartbeats == [pack({"poll": n}) for n in (1, 2, 3)]
    assert call.sleeps == [40, 40, 40]
    assert call.result == {"charge_id": "ch_1", "status": 200}


def test_slow_charge_defaults_to_ten_polls_of_100_ms(payments: Guest) -> None:
    call = charge(payments, status_then_charge, activity="slow_charge")
    assert (len(call.heartbeats), call.sleeps) == (10, [100] * 10)


def test_slow_charge_resumes_from_the_last_attempts_details(payments: Guest) -> None:
    args = {**PAYMENT, "polls": 3, "poll_ms": 40}
    call = charge(
        payments, status_then_charge, args, activity="slow_charge", details=pack({"poll": 2})
    )
    assert call.heartbeats == [pack({"poll": 3})]
    assert len(call.http_requests) == 2


def test_slow_charge_stops_when_the_run_asks(payments: Guest) -> None:
    args = {**PAYMENT, "polls": 3}
    call = charge(payments, status_then_charge, args, activity="slow_charge", cancel_requested=True)
    assert call.output == {
        "status": "failed",
        "error": ["Cancelled", "the run asked the charge to stop", True],
    }
    assert len(call.heartbeats) == 1
    assert all(not r["url"].endswith("/charge") for r in call.http_requests)


def test_slow_charge_checks_cancellation_before_charging_without_polls(payments: Guest) -> None:
    args = {**PAYMENT, "polls": 0}
    call = charge(payments, status_then_charge, args, activity="slow_charge", cancel_requested=True)
    assert call.output["error"][0] == "Cancelled"
    assert (call.heartbeats, call.http_requests) == ([], [])


def test_slow_charge_fails_when_the_service_is_unreachable(payments: Guest) -> None:
    response = {"error": ["ConnectionError", "refused"]}
    call = charge(payments, response, {**PAYMENT, "polls": 2}, activity="slow_charge")
    assert call.output["error"] == ["ConnectionError", "refused", False]
    assert call.heartbeats == []
