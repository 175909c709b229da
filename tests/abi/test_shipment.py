"""The shipment sample (abi/samples/shipment.c): timer against signal, queries, cancellation with
compensation, and child workflows, driven activation by activation in the minimal test host."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from tests.abi._harness import Guest, Run, act_envelope, wf_envelope

pack = msgpack.packb
DAY_MS = 86_400_000
SHIPMENT = {"shipment_id": "s-1", "address": "1 Main St", "deadline_days": 3}
BOOKING_OPTIONS = {
    "start_to_close_ms": 60_000,
    "retry": {"initial_ms": 2000, "max_attempts": 10, "non_retryable": ["InvalidAddress"]},
}
BOOKED = {"status": "in_transit", "booking": "bk-s-1"}


def activity(name: str, **args: Any) -> list[Any]:
    return ["activity", name, pack(args)]


def in_transit(guests: dict[str, Guest]) -> Run:
    """A shipment that is booked and waiting for delivery or its deadline."""
    run = Run(guests["shipment"], "shipment", SHIPMENT)
    run.activate()
    run.run_activities()
    assert run.activate().suspended
    return run


# --- the happy paths -----------------------------------------------------------------------------


def test_books_then_waits_for_the_signal_or_the_deadline(guests: dict[str, Guest]) -> None:
    run = Run(guests["shipment"], "shipment", SHIPMENT)
    first = run.activate()
    assert first.suspended
    booking = activity("book_carrier", shipment_id="s-1", address="1 Main St")
    assert first.output["commands"] == [[*booking, BOOKING_OPTIONS]]
    assert first.published == {"status": {"status": "booking"}}

    run.run_activities()
    second = run.activate()
    assert second.suspended
    assert run.commands[1:] == [["timer", 3 * DAY_MS], ["signal", "delivered"]]
    assert second.published == {"status": BOOKED}
    assert second.publishes[0] == ("status", pack({"status": "booking"}))  # published again


def test_delivered_first_cancels_the_timer_and_notifies(guests: dict[str, Guest]) -> None:
    run = in_transit(guests)
    run.send_signal("delivered", {"signed_by": "Ann"})
    assert run.activate().suspended
    notify = activity("notify_customer", shipment_id="s-1", booking="bk-s-1", signed_by="Ann")
    assert run.commands[3:] == [["cancel_timer", 1], notify]

    run.run_activities()
    final = run.activate()
    assert final.output["status"] == "completed"
    assert final.result == {
        "shipment_id": "s-1",
        "status": "delivered",
        "booking": "bk-s-1",
        "signed_by": "Ann",
    }
    assert final.published == {"status": {"status": "delivered", "booking": "bk-s-1"}}
    assert len(run.commands) == 5


def test_deadline_first_escalates(guests: dict[str, Guest]) -> None:
    run = in_transit(guests)
    run.fire_timer()
    assert run.activate().suspended
    assert run.commands[3:] == [activity("escalate", shipment_id="s-1", booking="bk-s-1")]
    run.run_activities()
    final = run.activate()
    assert final.result == {
        "shipment_id": "s-1",
        "status": "late",
        "booking": "bk-s-1",
        "ticket": "esc-s-1",
    }
    assert final.published == {"status": {"status": "late", "booking": "bk-s-1"}}
    assert run.pending("signal") == [2]  # the signal was never needed


@pytest.mark.parametrize("timer_first", [True, False])
def test_history_order_decides_when_both_are_recorded(
    guests: dict[str, Guest], timer_first: bool
) -> None:
    run = in_transit(guests)
    if timer_first:
        run.fire_timer()
        run.send_signal("delivered", {"signed_by": "Ann"})
    else:
        run.send_signal("delivered", {"signed_by": "Ann"})
        run.fire_timer()
    run.activate()
    escalate = activity("escalate", shipment_id="s-1", booking="bk-s-1")
    assert run.commands[3] == (escalate if timer_first else ["cancel_timer", 1])
    # The results' order in the envelope does not matter, only their seq.
    run.results.reverse()
    run.activate()  # asserts that the replay issues the same commands


def test_a_query_answers_from_the_replayed_state(guests: dict[str, Guest]) -> None:
    run = in_transit(guests)
    commands = list(run.commands)
    answer = run.activate(query="status")
    assert answer.published == {"status": BOOKED}
    assert run.commands == commands


# --- cancellation and compensation ---------------------------------------------------------------


@pytest.mark.parametrize("booked", [False, True])
def test_cancelled_while_booking_waits_for_the_booking_outcome(
    guests: dict[str, Guest], booked: bool
) -> None:
    run = Run(guests["shipment"], "shipment", SHIPMENT)
    run.activate()
    run.request_cancel("customer called")
    # The cancellation went to the booking's await; the next await of the same handle waits
    # for the activity's own outcome.
    assert run.activate().suspended
    assert len(run.commands) == 1
    if booked:  # it was running and booked anyway
        run.run_activities()
        assert run.activate().suspended
        cancel_booking = activity("cancel_booking", shipment_id="s-1", booking="bk-s-1")
        assert run.commands[1:] == [cancel_booking]
        run.run_activities()
    else:  # the host never started it
        run.record(0, ["Cancelled", "run cancelled"], status=1)
    call = run.activate()
    assert call.output == {
        "status": "cancelled",
        "commands": run.commands,
        "error": ["Cancelled", "customer called"],
    }
    status = {"status": "cancelled", "booking": "bk-s-1"} if booked else {"status": "cancelled"}
    assert call.published == {"status": status}


def test_booking_recorded_before_the_cancel_is_used(guests: dict[str, Guest]) -> None:
    run = Run(guests["shipment"], "shipment", SHIPMENT)
    run.activate()
    run.run_activities()
    run.request_cancel("customer called")
    call = run.activate()
    # book_carrier's result predates the cancel; the await_any gets the cancellation.
    assert call.suspended
    cancel_booking = activity("cancel_booking", shipment_id="s-1", booking="bk-s-1")
    wait = [["timer", 3 * DAY_MS], ["signal", "delivered"]]
    assert run.commands[1:] == [*wait, ["cancel_timer", 1], cancel_booking]
    assert call.published == {"status": BOOKED}


@pytest.mark.parametrize("late_signal", [False, True])
def test_cancelled_while_in_transit_cancels_the_booking(
    guests: dict[str, Guest], late_signal: bool
) -> None:
    run = in_transit(guests)
    run.request_cancel("customer called")
    if late_signal:  # recorded after the cancel: the cancellation still comes first
        run.send_signal("delivered", {"signed_by": "Ann"})
    call = run.activate()
    assert call.suspended
    cancel_booking = activity("cancel_booking", shipment_id="s-1", booking="bk-s-1")
    assert run.commands[3:] == [["cancel_timer", 1], cancel_booking]
    assert call.published == {"status": BOOKED}

    run.run_activities()
    final = run.activate()  # the compensation's await got its result: delivered once
    assert final.output == {
        "status": "cancelled",
        "commands": run.commands,
        "error": ["Cancelled", "customer called"],
    }
    assert final.published == {"status": {"status": "cancelled", "booking": "bk-s-1"}}


def test_a_signal_before_the_cancel_is_delivered_and_the_next_await_cancels(
    guests: dict[str, Guest],
) -> None:
    run = in_transit(guests)
    run.send_signal("delivered", {"signed_by": "Ann"})
    run.request_cancel("too late")
    assert run.activate().suspended
    notify = activity("notify_customer", shipment_id="s-1", booking="bk-s-1", signed_by="Ann")
    cancel_booking = activity("cancel_booking", shipment_id="s-1", booking="bk-s-1")
    assert run.commands[3:] == [["cancel_timer", 1], notify, cancel_booking]
    run.run_activities()
    final = run.activate()
    assert final.output["status"] == "cancelled"
    assert final.output["error"] == ["Cancelled", "too late"]


def test_a_failed_compensation_fails_the_run(guests: dict[str, Guest]) -> None:
    run = in_transit(guests)
    run.request_cancel("stop")
    run.activate()
    [index] = run.pending("activity")
    run.record(index, ["CarrierDown", "try later"], status=1)
    final = run.activate()
    assert final.output["status"] == "failed"
    assert final.output["error"] == ["CarrierDown", "try later"]


# --- bad input and activities --------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [{"shipment_id": "s"}, {**SHIPMENT, "deadline_days": -1}, {**SHIPMENT, "deadline_days": 4000}],
)
def test_bad_input_fails(guests: dict[str, Guest], payload: dict[str, Any]) -> None:
    call = guests["shipment"].call("amber_workflow.shipment", wf_envelope("shipment", payload))
    assert call.output["status"] == "failed"
    assert call.output["error"][0] == "BadInput"


def test_a_malformed_signal_fails_the_run(guests: dict[str, Guest]) -> None:
    run = in_transit(guests)
    run.send_signal("delivered", {"name": "Ann"})
    call = run.activate()
    assert call.output["status"] == "failed"
    assert call.output["error"][0] == "BadSignal"


ACTIVITY_CASES = [
    ("book_carrier", {"shipment_id": "s", "address": "a"}, ("completed", {"booking": "bk-s"})),
    ("book_carrier", {"shipment_id": "s", "address": ""},
     ("failed", ["InvalidAddress", "address is empty", True])),
    ("notify_customer", {"shipment_id": "s", "booking": "b", "signed_by": "x"},
     ("completed", {"notified": True})),
    ("escalate", {"shipment_id": "s", "booking": "b"}, ("completed", {"ticket": "esc-s"})),
    ("cancel_booking", {"shipment_id": "s", "booking": "bk-s"},
     ("completed", {"cancelled": "bk-s"})),
    ("escalate", [1], ("failed", ["BadArgs", "expected {shipment_id, booking}", True])),
]  # fmt: skip


@pytest.mark.parametrize(("name", "args", "expected"), ACTIVITY_CASES)
def test_activities(guests: dict[str, Guest], name: str, args: Any, expected: Any) -> None:
    out = guests["shipment"].call(f"amber_activity.{name}", act_envelope(name, args)).output
    status, value = expected
    assert out["status"] == status
    assert (msgpack.unpackb(out["result"]) if status == "completed" else out["error"]) == value


# --- shipment_batch: child workflows -------------------------------------------------------------

BATCH = {"batch_id": "b7", "address": "2 Side St", "deadline_days": 2}


def child(workflow_id: str) -> list[Any]:
    payload = {"shipment_id": workflow_id, "address": "2 Side St", "deadline_days": 2}
    return ["child", "shipment", workflow_id, pack(payload), {"parent_close_policy": "cancel"}]


def test_batch_starts_two_children_and_collects_their_results(guests: dict[str, Guest]) -> None:
    run = Run(guests["shipment"], "shipment_batch", BATCH)
    assert run.activate().suspended
    assert run.commands == [child("b7-1"), child("b7-2")]
    run.record(1, pack({"shipment_id": "b7-2", "status": "late"}))
    assert run.activate().suspended  # waits for b7-1 first
    run.record(0, pack({"shipment_id": "b7-1", "status": "delivered"}))
    final = run.activate()
    assert final.result == {
        "batch_id": "b7",
        "shipments": [
            {"shipment_id": "b7-1", "status": "delivered"},
            {"shipment_id": "b7-2", "status": "late"},
        ],
    }


def test_batch_fails_with_a_failed_child_and_closes_when_cancelled(
    guests: dict[str, Guest],
) -> None:
    run = Run(guests["shipment"], "shipment_batch", BATCH)
    run.activate()
    run.record(0, ["ChildFailed", "BadInput: no"], status=1)
    assert run.activate().output["error"] == ["ChildFailed", "BadInput: no"]

    run = Run(guests["shipment"], "shipment_batch", BATCH)
    run.activate()
    run.request_cancel("abort")
    call = run.activate()
    assert call.output == {
        "status": "cancelled",
        "commands": [child("b7-1"), child("b7-2")],
        "error": ["Cancelled", "abort"],
    }
