"""Durable semantics end to end through gRPC: timers, signals, queries, cancellation,
termination, signal-with-start, continue-as-new, children and reset.

Time moves only when a test moves the server's `ManualClock` and sweeps: nothing sleeps
through a multi-day timer.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from amber.abi import InvalidInput
from amber.history import (
    CancelRequested,
    Database,
    EventType,
    LeaseLost,
    ResetPoint,
    RunStatus,
    RunTerminated,
)
from amber.runtime.client._client import decode
from amber.runtime.model._clock import ManualClock
from amber.runtime.model._errors import QueryFailed, QueryTimedOut, RunClosed
from amber.runtime.sandbox._sandbox import Sandbox
from tests.conftest import InProcessServer

from ._engine_helpers import make_worker, query, settle

SHIPMENT = {"shipment_id": "S-1", "address": "1 Main St", "deadline_days": 3}


@pytest.fixture
def srv(make_server, modules: dict[str, bytes]) -> InProcessServer:
    server: InProcessServer = make_server(clock=ManualClock())
    for name in ("shipment", "hostile", "orders"):
        server.client.upload_version(modules[name], promote=True)
    return server


def _advance(srv: InProcessServer, delta: timedelta) -> None:
    assert isinstance(srv.clock, ManualClock)
    srv.clock.advance(delta)
    srv.server.sweep()


def _types(srv: InProcessServer, run: str) -> list[EventType]:
    return [e.type for e in srv.client.history(run)]


def test_a_shipment_delivered_before_its_deadline(srv: InProcessServer, sandbox: Sandbox) -> None:
    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    run = srv.client.start_run("shipment", SHIPMENT, workflow_id="ship-1").run.run_id
    settle(worker)
    assert srv.client.result(run).status is RunStatus.RUNNING
    status = query(worker, srv.client, run, "status")
    assert status["status"] == "in_transit" and status["booking"]
    (timer,) = srv.client.describe(run).timers
    assert timer.fire_at - srv.clock.now() == timedelta(days=3)

    assert srv.client.signal("ship-1", "delivered", {"signed_by": "Ann"})
    settle(worker)
    result = decode(srv.client.result(run).result)
    assert result["status"] == "delivered" and result["signed_by"] == "Ann"
    types = _types(srv, run)
    assert EventType.TIMER_CANCELLED in types and EventType.TIMER_FIRED not in types
    assert srv.client.describe(run).timers == ()
    assert (
        query(worker, srv.client, run, "status")["status"] == "delivered"
    )  # closed runs answer too


def test_a_shipment_whose_signal_never_comes_escalates_after_days(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    run = srv.client.start_run("shipment", SHIPMENT).run.run_id
    settle(worker)
    _advance(srv, timedelta(days=3) - timedelta(minutes=1))
    assert settle(worker) == 0  # not due yet
    _advance(srv, timedelta(minutes=2))
    settle(worker)
    assert decode(srv.client.result(run).result)["status"] == "late"
    names = [
        e.payload["name"] for e in srv.client.history(run) if e.type is EventType.ACTIVITY_SCHEDULED
    ]
    assert names == ["book_carrier", "escalate"]
    assert _types(srv, run).count(EventType.TIMER_FIRED) == 1


def test_cancelling_a_shipment_runs_its_compensation(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    run = srv.client.start_run("shipment", SHIPMENT).run.run_id
    settle(worker)
    assert srv.client.cancel(run, reason="customer changed their mind", operator="ops@x")
    assert not srv.client.cancel(run, reason="again")  # already requested: no second event
    settle(worker)
    closed = srv.client.result(run)
    assert closed.status is RunStatus.CANCELLED
    events = srv.client.history(run)
    (request,) = [e for e in events if e.type is EventType.CANCEL_REQUESTED]
    assert request.payload == CancelRequested(reason="customer changed their mind", by="ops@x")
    scheduled = [e.payload["name"] for e in events if e.type is EventType.ACTIVITY_SCHEDULED]
    assert scheduled == ["book_carrier", "cancel_booking"]
    assert events[-1].type is EventType.RUN_CANCELLED
    assert query(worker, srv.client, run, "status")["status"] == "cancelled"
    with pytest.raises(RunClosed):
        srv.client.signal(run, "delivered", {"signed_by": "late"})


def test_a_signal_sent_before_the_workflow_waits_is_buffered(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    run = srv.client.start_run("shipment", SHIPMENT).run.run_id
    srv.client.signal(run, "delivered", {"signed_by": "Early Bird"})
    settle(make_worker(srv.client, sandbox, clock=srv.clock))
    result = decode(srv.client.result(run).result)
    assert result == {**result, "status": "delivered", "signed_by": "Early Bird"}


def test_a_duplicate_signal_delivery_changes_nothing(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    run = srv.client.start_run("shipment", SHIPMENT).run.run_id
    first = srv.client.signal(run, "delivered", {"signed_by": "A"}, request_id="courier-42")
    second = srv.client.signal(run, "delivered", {"signed_by": "B"}, request_id="courier-42")
    assert first and not second
    assert _types(srv, run).count(EventType.SIGNAL_RECEIVED) == 1
    (discarded,) = srv.client.describe(run).discarded
    assert discarded.kind == "duplicate_signal" and "courier-42" in discarded.detail
    settle(make_worker(srv.client, sandbox, clock=srv.clock))
    assert decode(srv.client.result(run).result)["signed_by"] == "A"


def test_a_redelivered_signal_is_a_duplicate_after_the_run_it_ended_closed(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    # A webhook delivered twice: the first delivery ended the run before the second arrived.
    run = srv.client.start_run("shipment", SHIPMENT).run.run_id
    assert srv.client.signal(run, "delivered", {"signed_by": "A"}, request_id="hook-7")
    settle(make_worker(srv.client, sandbox, clock=srv.clock))
    assert srv.client.result(run).status is RunStatus.COMPLETED
    before = srv.client.history(run)
    assert not srv.client.signal(run, "delivered", {"signed_by": "A"}, request_id="hook-7")
    assert srv.client.history(run) == before  # nothing appended to a closed run
    (discarded,) = srv.client.describe(run).discarded
    assert discarded.kind == "duplicate_signal" and "hook-7" in discarded.detail
    with pytest.raises(RunClosed):  # a new delivery is refused, and leaves its id unclaimed
        srv.client.signal(run, "delivered", {"signed_by": "B"}, request_id="hook-8")
    with pytest.raises(RunClosed):
        srv.client.signal(run, "delivered", {"signed_by": "B"}, request_id="hook-8")
    with pytest.raises(RunClosed):
        srv.client.signal(run, "delivered", {"signed_by": "C"})


def test_a_duplicate_timer_fire_changes_nothing(srv: InProcessServer, sandbox: Sandbox) -> None:
    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    run = srv.client.start_run("sleeper", {"ms": 60_000}).run.run_id
    settle(worker)
    (timer,) = srv.client.describe(run).timers
    assert srv.server.timers.fire(run, timer.timer_id)
    assert not srv.server.timers.fire(run, timer.timer_id)
    _advance(srv, timedelta(minutes=5))  # the sweeper finds nothing left to fire either
    settle(worker)
    assert decode(srv.client.result(run).result) == {"slept": 60_000}
    assert _types(srv, run).count(EventType.TIMER_FIRED) == 1
    assert [d.kind for d in srv.client.describe(run).discarded] == ["duplicate_timer_fire"]


def test_terminating_closes_a_run_at_once_and_refuses_late_reports(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    from amber.abi import ActivityOutcome, ActivityStatus

    run = srv.client.start_run("shipment", SHIPMENT).run.run_id
    from ._engine_helpers import run_one_task

    run_one_task(srv.client, sandbox)  # schedules book_carrier
    activity = srv.client.poll_task(worker_id="slow", wait_s=1)
    assert activity is not None and activity.name == "book_carrier"
    srv.client.terminate(run, reason="fraud suspected", operator="ops@x")
    closed = srv.client.result(run)
    assert closed.status is RunStatus.TERMINATED and closed.error_message == "fraud suspected"
    last = srv.client.history(run)[-1]
    assert last.type is EventType.RUN_TERMINATED
    assert last.payload == RunTerminated(reason="fraud suspected", by="ops@x")
    assert srv.client.describe(run).timers == () and srv.client.describe(run).tasks == ()
    outcome = ActivityOutcome(status=ActivityStatus.COMPLETED, result=b"\x80")
    with pytest.raises(LeaseLost):
        srv.client.complete_activity(activity, outcome, worker_id="slow")
    assert [d.kind for d in srv.client.describe(run).discarded] == ["stale_report"]
    assert srv.client.history(run)[-1].type is EventType.RUN_TERMINATED


def test_a_query_answers_from_a_run_that_keeps_failing(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    run = srv.client.start_run("publish_then_trap", None).run.run_id
    worker.run_once(wait_s=1)
    assert srv.client.describe(run).recent_failures[0].reason == "trap"
    assert query(worker, srv.client, run, "status") == "about to fail"
    assert _types(srv, run) == [EventType.RUN_STARTED]  # nothing appended by the query
    with pytest.raises(QueryFailed, match="nothing under 'nope'"):
        query(worker, srv.client, run, "nope")


def test_a_query_with_no_worker_times_out_and_leaves_nothing_behind(
    srv: InProcessServer,
) -> None:
    run = srv.client.start_run("shipment", SHIPMENT).run.run_id
    with pytest.raises(QueryTimedOut):
        srv.client.query(run, "status", wait_s=0.3)
    kinds = [t.kind.value for t in srv.client.describe(run).tasks]
    assert kinds == ["workflow"]


def test_signal_with_start_starts_once_then_signals(srv: InProcessServer, sandbox: Sandbox) -> None:
    first = srv.client.start_run(
        "shipment", SHIPMENT, workflow_id="sws", signal="delivered",
        signal_payload={"signed_by": "Bo"},
    )  # fmt: skip
    assert not first.already_started and first.signalled
    again = srv.client.start_run(
        "shipment", SHIPMENT, workflow_id="sws", signal="delivered",
        signal_payload={"signed_by": "Cy"},
    )  # fmt: skip
    assert again.already_started and again.signalled and again.run.run_id == first.run.run_id
    assert _types(srv, "sws").count(EventType.SIGNAL_RECEIVED) == 2
    settle(make_worker(srv.client, sandbox, clock=srv.clock))
    assert decode(srv.client.result("sws").result)["signed_by"] == "Bo"
    with pytest.raises(RunClosed):  # the id is never reused, so nothing would get the signal
        srv.client.start_run(
            "shipment", SHIPMENT, workflow_id="sws", signal="delivered", signal_payload={}
        )


def test_signal_with_start_reports_a_redelivery_as_signal_does(srv: InProcessServer) -> None:
    # A webhook handler redelivering the same event must be able to tell it was one.
    first = srv.client.start_run(
        "shipment", SHIPMENT, workflow_id="hook", signal="delivered",
        signal_payload={"signed_by": "Bo"}, signal_request_id="evt-1",
    )  # fmt: skip
    assert first.signalled and not first.duplicate
    redelivered = srv.client.start_run(
        "shipment", SHIPMENT, workflow_id="hook", signal="delivered",
        signal_payload={"signed_by": "Bo"}, signal_request_id="evt-1",
    )  # fmt: skip
    assert redelivered.already_started and redelivered.duplicate and not redelivered.signalled
    assert _types(srv, "hook").count(EventType.SIGNAL_RECEIVED) == 1
    assert [d.kind for d in srv.client.describe("hook").discarded] == ["duplicate_signal"]
    nxt = srv.client.start_run(
        "shipment", SHIPMENT, workflow_id="hook", signal="delivered",
        signal_payload={}, signal_request_id="evt-2",
    )  # fmt: skip
    assert nxt.signalled and not nxt.duplicate
    assert _types(srv, "hook").count(EventType.SIGNAL_RECEIVED) == 2


def test_signal_with_start_redelivered_after_its_signal_closed_the_run_is_a_duplicate(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    # The first delivery completes the run; the webhook's retry must read as a redelivery, as
    # `run signal` reports it, not as an error it would retry again.
    first = srv.client.start_run(
        "shipment", SHIPMENT, workflow_id="hook-closed", signal="delivered",
        signal_payload={"signed_by": "Bo"}, signal_request_id="evt-1",
    )  # fmt: skip
    assert first.signalled
    settle(make_worker(srv.client, sandbox, clock=srv.clock))
    assert srv.client.result("hook-closed").status is RunStatus.COMPLETED
    events = _types(srv, "hook-closed")
    redelivered = srv.client.start_run(
        "shipment", SHIPMENT, workflow_id="hook-closed", signal="delivered",
        signal_payload={"signed_by": "Bo"}, signal_request_id="evt-1",
    )  # fmt: skip
    assert redelivered.already_started and redelivered.duplicate and not redelivered.signalled
    assert redelivered.run.run_id == first.run.run_id
    assert _types(srv, "hook-closed") == events  # nothing appended after the close
    assert srv.client.signal("hook-closed", "delivered", {}, request_id="evt-1") is False
    with pytest.raises(RunClosed):  # a new event still finds the run closed
        srv.client.start_run(
            "shipment", SHIPMENT, workflow_id="hook-closed", signal="delivered",
            signal_payload={}, signal_request_id="evt-2",
        )  # fmt: skip


def test_signal_with_start_racing_the_run_closing_never_appends_after_close(
    srv: InProcessServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from amber.runtime.services import _runs

    run_id = srv.client.start_run("shipment", SHIPMENT, workflow_id="race").run.run_id
    real = _runs.get_run_by_workflow_id_txn
    closed: list[bool] = []

    def read_then_close(cur: Any, tenant: str, workflow_id: str, **kwargs: Any) -> Any:
        found = real(cur, tenant, workflow_id, **kwargs)
        if workflow_id == "race" and not kwargs.get("first") and not closed:
            closed.append(True)  # the run closes between the start reading and signalling it
            closer = threading.Thread(
                target=srv.client.terminate,
                args=(run_id,),
                kwargs={"reason": "done", "operator": "ops"},
            )
            closer.start()
            closer.join(timeout=15)
        return found

    monkeypatch.setattr(_runs, "get_run_by_workflow_id_txn", read_then_close)
    with pytest.raises(RunClosed):
        srv.client.start_run(
            "shipment", SHIPMENT, workflow_id="race", signal="delivered", signal_payload={}
        )
    monkeypatch.undo()
    assert closed == [True]
    types = _types(srv, "race")
    assert types[-1] is EventType.RUN_TERMINATED
    assert EventType.SIGNAL_RECEIVED not in types


def test_continue_as_new_chains_runs_under_one_workflow_id(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    first = srv.client.start_run("countdown", {"n": 3}, workflow_id="cd").run.run_id
    settle(make_worker(srv.client, sandbox, clock=srv.clock))
    last = srv.client.result("cd")
    assert decode(last.result) == {"done": True} and last.run_id != first
    runs, _ = srv.client.list_runs(workflow_type="countdown")
    assert sorted(r.status.value for r in runs) == ["completed"] + ["continued_as_new"] * 3
    chain = [first]
    while True:
        events = srv.client.history(chain[-1])
        if events[-1].type is not EventType.RUN_CONTINUED_AS_NEW:
            break
        chain.append(events[-1].payload["next_run_id"])
        assert decode(events[-1].payload["input"]) == {"n": 3 - len(chain) + 1, "linger_ms": 0}
    assert chain[-1] == last.run_id and len(chain) == 4
    started = srv.client.history(last.run_id)[0]
    assert started.payload["continued_from"] == chain[-2]
    # The start stays idempotent on the chain's first request.
    again = srv.client.start_run("countdown", {"n": 3}, workflow_id="cd")
    assert again.already_started and again.run.run_id == last.run_id


def test_a_command_by_workflow_id_follows_a_chain_that_moved_on_while_it_locked(
    srv: InProcessServer, sandbox: Sandbox, db: Database
) -> None:
    # A command read the id's current run, which continued as new before the command had its
    # lock: it must reach the chain's current run, not fail on the one that moved on.
    from amber.runtime.services._runs import _lock_current

    first = srv.client.start_run("countdown", {"n": 2}, workflow_id="moving").run
    settle(make_worker(srv.client, sandbox, clock=srv.clock))
    last = srv.client.result("moving")
    assert last.run_id != first.run_id and last.status is RunStatus.COMPLETED
    locked = db.run(lambda cur: _lock_current(cur, first, first.tenant, "moving"))
    assert locked is not None and locked.run_id == last.run_id


@pytest.mark.parametrize(
    ("policy", "child_status"),
    [
        ("terminate", RunStatus.TERMINATED),
        ("cancel", RunStatus.CANCELLED),
        ("abandon", RunStatus.RUNNING),
    ],
)
def test_closing_a_parent_applies_its_children_s_policy(
    srv: InProcessServer, sandbox: Sandbox, policy: str, child_status: RunStatus
) -> None:
    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    child_id = f"child-{policy}"
    parent = srv.client.start_run(
        "family", {"policy": policy, "child_id": child_id, "child_input": SHIPMENT}
    ).run.run_id
    settle(worker)
    child = srv.client.result(child_id)
    assert child.status is RunStatus.RUNNING and child.parent_run_id == parent
    srv.client.terminate(parent, reason="test")
    settle(worker)
    assert srv.client.result(child_id).status is child_status


def test_a_parent_gets_its_child_s_result(srv: InProcessServer, sandbox: Sandbox) -> None:
    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    parent = srv.client.start_run(
        "family", {"policy": "terminate", "child_id": "kid", "child_input": SHIPMENT}
    ).run.run_id
    settle(worker)
    srv.client.signal("kid", "delivered", {"signed_by": "Di"})
    settle(worker)
    result = decode(srv.client.result(parent).result)
    assert result["status"] == "delivered" and result["signed_by"] == "Di"
    assert EventType.CHILD_COMPLETED in _types(srv, parent)


def test_a_child_that_cannot_start_is_a_failed_result(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    srv.client.start_run("shipment", SHIPMENT, workflow_id="taken")
    parent = srv.client.start_run(
        "family", {"policy": "abandon", "child_id": "taken", "child_input": SHIPMENT}
    ).run.run_id
    settle(worker)
    closed = srv.client.result(parent)
    assert closed.status is RunStatus.FAILED and closed.error_type == "ChildStartFailed"


def test_reset_replays_history_up_to_an_event_and_goes_on(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    order = {"order_id": "R-9", "sku": "S", "quantity": 1, "amount_cents": 10}
    old = srv.client.start_run("orders", order, workflow_id="order-R-9").run.run_id
    settle(worker)
    old_events = srv.client.history(old)
    assert old_events[3].type is EventType.ACTIVITY_COMPLETED  # reserve_inventory
    new = srv.client.reset(old, to_event=4, reason="charge was wrong", operator="ops@x")
    assert new.run_id != old and new.workflow_id == "order-R-9"
    settle(worker)
    assert srv.client.result("order-R-9").run_id == new.run_id
    assert decode(srv.client.result(new.run_id).result)["status"] == "shipped"
    new_events = srv.client.history(new.run_id)
    assert new_events[0].payload["reset_from"] == ResetPoint(run_id=old, seq=4)
    assert [(e.type, e.payload) for e in new_events[1:4]] == [
        (e.type, e.payload) for e in old_events[1:4]
    ]
    marker = srv.client.history(old)[-1]
    assert marker.type is EventType.RUN_RESET and marker.payload["new_run_id"] == new.run_id


def test_reset_never_revives_a_retired_version(
    srv: InProcessServer, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    order = {"order_id": "R-10", "sku": "S", "quantity": 1, "amount_cents": 10}
    old = srv.client.start_run("orders", order).run.run_id
    settle(worker)
    assert srv.client.result(old).status is RunStatus.COMPLETED
    v1 = srv.client.result(old).digest
    srv.client.upload_version(modules["orders_reordered"], promote=True)
    srv.client.retire_version(v1, reason="replaced", operator="ops")
    with pytest.raises(InvalidInput, match=f"{v1[:12]} is retired.*start a new run"):
        srv.client.reset(old, to_event=4, reason="charge was wrong", operator="ops@x")
    assert srv.client.history(old)[-1].type is EventType.RUN_COMPLETED  # nothing written


def test_reset_of_a_waiting_run_restores_its_timer_and_terminates_the_old_one(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    old = srv.client.start_run("sleeper", {"ms": 3_600_000}).run.run_id
    settle(worker)
    new = srv.client.reset(old, to_event=srv.client.result(old).last_seq, reason="move")
    assert srv.client.result(old).status is RunStatus.TERMINATED
    assert len(srv.client.describe(new.run_id).timers) == 1
    _advance(srv, timedelta(hours=2))
    settle(worker)
    assert decode(srv.client.result(new.run_id).result) == {"slept": 3_600_000}


def test_a_second_completion_of_the_same_attempt_changes_nothing(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    from amber.abi import ActivityOutcome, ActivityStatus

    from ._engine_helpers import run_one_task

    run = srv.client.start_run("shipment", SHIPMENT).run.run_id
    run_one_task(srv.client, sandbox)
    task = srv.client.poll_task(worker_id="w", wait_s=1)
    assert task is not None
    outcome = ActivityOutcome(status=ActivityStatus.COMPLETED, result=b"\x81\xa7booking\xa3B-1")
    srv.client.complete_activity(task, outcome, worker_id="w")
    with pytest.raises(LeaseLost):
        srv.client.complete_activity(task, outcome, worker_id="w")
    assert _types(srv, run).count(EventType.ACTIVITY_COMPLETED) == 1
    (resend,) = srv.client.describe(run).discarded
    assert resend.kind == "stale_report"
    # A resend after a lost answer ends here too: the record says the report was not lost.
    assert "the task is gone: done, most often by an earlier send of this same report" in (
        resend.detail
    )


def test_a_running_activity_learns_of_cancellation_through_its_heartbeat(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    from ._engine_helpers import run_one_task

    run = srv.client.start_run("shipment", SHIPMENT).run.run_id
    run_one_task(srv.client, sandbox)
    task = srv.client.poll_task(worker_id="w", wait_s=1)
    assert task is not None and not task.cancel_requested
    assert not srv.client.heartbeat(task, worker_id="w").cancel_requested
    srv.client.cancel(run, reason="stop")
    assert srv.client.heartbeat(task, worker_id="w").cancel_requested
    assert srv.client.heartbeat(task, worker_id="w", details=b"\xc0").cancel_requested


def test_an_activity_not_yet_started_is_not_started_after_cancellation(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    from ._engine_helpers import run_one_task

    run = srv.client.start_run("shipment", SHIPMENT).run.run_id
    run_one_task(srv.client, sandbox)  # book_carrier is scheduled, no worker has it yet
    srv.client.cancel(run, reason="too late")
    events = srv.client.history(run)
    (dropped,) = [e for e in events if e.type is EventType.ACTIVITY_CANCELLED]
    assert dropped.payload["cmd"] == 0
    assert [t.kind.value for t in srv.client.describe(run).tasks] == ["workflow"]
    settle(make_worker(srv.client, sandbox, clock=srv.clock))
    assert srv.client.result(run).status is RunStatus.CANCELLED
    scheduled = [
        e.payload["name"] for e in srv.client.history(run) if e.type is EventType.ACTIVITY_SCHEDULED
    ]
    assert scheduled == ["book_carrier"]  # nothing was booked, so nothing to compensate


def test_a_timer_whose_firing_fails_is_retried_later_and_does_not_block_others(
    srv: InProcessServer, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    from amber.runtime.services._timers import TimerService

    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    broken = srv.client.start_run("shipment", SHIPMENT).run.run_id
    healthy = srv.client.start_run("shipment", SHIPMENT).run.run_id
    settle(worker)
    real_fire = TimerService._fire_txn

    def fire(self: TimerService, cur, timer):  # type: ignore[no-untyped-def]
        if timer.run_id == broken:
            raise ValueError("a bug that hits one row")
        return real_fire(self, cur, timer)

    monkeypatch.setattr(TimerService, "_fire_txn", fire)
    _advance(srv, timedelta(days=3, seconds=1))
    assert EventType.TIMER_FIRED in _types(srv, healthy)
    assert EventType.TIMER_FIRED not in _types(srv, broken)
    (deferred,) = srv.client.describe(broken).timers  # kept, not lost with the failed firing
    assert deferred.fire_at == srv.clock.now() + timedelta(minutes=1)

    monkeypatch.setattr(TimerService, "_fire_txn", real_fire)
    _advance(srv, timedelta(minutes=1))
    settle(worker)
    assert decode(srv.client.result(broken).result)["status"] == "late"


def test_resetting_a_child_leaves_its_parent_waiting_for_the_new_run(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    parent = srv.client.start_run(
        "family", {"policy": "terminate", "child_id": "kid-r", "child_input": SHIPMENT}
    ).run.run_id
    settle(worker)
    old_child = srv.client.result("kid-r")
    srv.client.reset(old_child.run_id, to_event=old_child.last_seq, reason="redo")
    settle(worker)
    assert srv.client.result(old_child.run_id).status is RunStatus.TERMINATED
    assert srv.client.result(parent).status is RunStatus.RUNNING
    assert EventType.CHILD_FAILED not in _types(srv, parent)
    srv.client.signal("kid-r", "delivered", {"signed_by": "Eve"})
    settle(worker)
    assert decode(srv.client.result(parent).result)["signed_by"] == "Eve"


def _pay_input(options: dict[str, object]) -> dict[str, object]:
    return {
        "order_id": "T-1",
        "amount_cents": 100,
        "service": "http://127.0.0.1:9",
        "options": options,
    }


def test_reset_restores_an_open_activity_with_the_options_it_was_scheduled_with(
    srv: InProcessServer, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    from ._engine_helpers import run_one_task

    srv.client.upload_version(modules["payments"], promote=True)
    old = srv.client.start_run("pay", _pay_input({"start_to_close_ms": 1000})).run.run_id
    run_one_task(srv.client, sandbox)  # schedules the charge
    new = srv.client.reset(old, to_event=srv.client.result(old).last_seq, reason="again")
    polled = [srv.client.poll_task(worker_id="w", wait_s=1) for _ in range(2)]
    (task,) = [t for t in polled if t is not None and t.kind.value == "activity"]
    assert task.run_id == new.run_id
    assert task.deadline == srv.clock.now() + timedelta(seconds=1)


def test_reset_keeps_the_chain_s_execution_deadline(srv: InProcessServer, sandbox: Sandbox) -> None:
    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    old = srv.client.start_run("sleeper", {"ms": 3_600_000}, execution_timeout_s=600).run.run_id
    settle(worker)
    (deadline,) = [t.fire_at for t in srv.client.describe(old).timers if t.timer_id == "execution"]
    _advance(srv, timedelta(minutes=5))
    new = srv.client.reset(old, to_event=srv.client.result(old).last_seq, reason="move")
    timers = {t.timer_id: t.fire_at for t in srv.client.describe(new.run_id).timers}
    assert timers["execution"] == deadline  # not ten fresh minutes
    _advance(srv, timedelta(minutes=6))
    assert srv.client.result(new.run_id).status is RunStatus.TIMED_OUT


def test_continue_as_new_keeps_the_deadline_and_the_signal_ids(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    first = srv.client.start_run(
        "countdown", {"n": 2, "linger_ms": 3_600_000}, workflow_id="cd-l",
        execution_timeout_s=600, signal="poke", signal_request_id="sig-1",
    ).run.run_id  # fmt: skip
    (deadline,) = [
        t.fire_at for t in srv.client.describe(first).timers if t.timer_id == "execution"
    ]
    settle(make_worker(srv.client, sandbox, clock=srv.clock))
    last = srv.client.result("cd-l")
    assert last.run_id != first and last.status is RunStatus.RUNNING
    timers = {t.timer_id: t.fire_at for t in srv.client.describe(last.run_id).timers}
    assert timers["execution"] == deadline
    assert not srv.client.signal("cd-l", "poke", {}, request_id="sig-1")  # already delivered
    assert srv.client.signal("cd-l", "poke", {}, request_id="sig-2")


def test_reset_points_that_cannot_be_faithful_are_refused(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    from amber.abi import InvalidInput

    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    order = {"order_id": "R-1", "sku": "S", "quantity": 1, "amount_cents": 10}
    done = srv.client.start_run("orders", order).run.run_id
    settle(worker)
    with pytest.raises(InvalidInput, match="closed at event"):
        srv.client.reset(done, to_event=srv.client.result(done).last_seq, reason="x")

    parent = srv.client.start_run(
        "family", {"policy": "abandon", "child_id": "kid-x", "child_input": SHIPMENT}
    ).run.run_id
    settle(worker)
    with pytest.raises(InvalidInput, match="taken for good"):
        srv.client.reset(parent, to_event=1, reason="x")

    waiting = srv.client.start_run("sleeper", {"ms": 60_000}, workflow_id="zz").run.run_id
    settle(worker)
    srv.client.reset(waiting, to_event=srv.client.result(waiting).last_seq, reason="once")
    with pytest.raises(InvalidInput, match="not the current run"):
        srv.client.reset(waiting, to_event=2, reason="twice from the old run")


def test_reset_after_a_cancellation_request_does_not_restart_open_activities(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    from ._engine_helpers import run_one_task

    old = srv.client.start_run("shipment", SHIPMENT).run.run_id
    run_one_task(srv.client, sandbox)  # schedules book_carrier
    assert srv.client.poll_task(worker_id="busy", wait_s=1) is not None  # it is running
    srv.client.cancel(old, reason="stop")
    new = srv.client.reset(old, to_event=srv.client.result(old).last_seq, reason="replay")
    events = srv.client.history(new.run_id)
    assert events[-1].type is EventType.ACTIVITY_CANCELLED
    assert all(t.kind.value != "activity" for t in srv.client.describe(new.run_id).tasks)
    settle(make_worker(srv.client, sandbox, clock=srv.clock))
    assert srv.client.result(new.run_id).status is RunStatus.CANCELLED


def test_operator_notes_and_timeouts_are_bounded(srv: InProcessServer) -> None:
    from amber.abi import InvalidInput

    run = srv.client.start_run("sleeper", {"ms": 1000}).run.run_id
    with pytest.raises(InvalidInput, match="reason is 5000 characters"):
        srv.client.cancel(run, reason="x" * 5000)
    with pytest.raises(InvalidInput, match="operator is 300 characters"):
        srv.client.terminate(run, reason="r", operator="o" * 300)
    with pytest.raises(InvalidInput, match="execution timeout must be between"):
        srv.client.start_run("sleeper", {"ms": 1}, execution_timeout_s=1e12)
    assert srv.client.result(run).status is RunStatus.RUNNING  # the refusals changed nothing


def test_a_type_s_rollout_status_counts_only_that_type_s_open_runs(srv: InProcessServer) -> None:
    # `hostile` declares many workflow types: the open runs of `sleeper` are not `boom`'s.
    srv.client.start_run("sleeper", {"ms": 10**9})
    srv.client.start_run("sleeper", {"ms": 10**9})
    srv.client.start_run("boom", {})
    (sleeper,) = srv.client.rollout("sleeper").versions
    (boom,) = srv.client.rollout("boom").versions
    assert (sleeper.use.running, boom.use.running) == (2, 1)
