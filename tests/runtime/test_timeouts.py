"""Activity timeouts (Temporal's taxonomy), retry policies with exact backoff, heartbeat details
carried to the next attempt, the workflow execution timeout and history limits.

The server runs on a `ManualClock`: a test leases a task itself (so no worker races it), moves
the clock past a deadline and sweeps.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from amber.abi import ActivityOutcome, ActivityStatus, ErrorInfo
from amber.history import EventType, RunStatus
from amber.runtime.model._clock import ManualClock
from amber.runtime.model._settings import EngineSettings
from amber.runtime.model._tasks import FailureReport, LeasedTask
from amber.runtime.sandbox._sandbox import Sandbox
from tests.conftest import InProcessServer

from ._engine_helpers import make_worker, run_one_task, settle


@pytest.fixture
def srv(make_server, modules: dict[str, bytes]) -> InProcessServer:
    server: InProcessServer = make_server(clock=ManualClock())
    for name in ("payments", "hostile", "shipment"):
        server.client.upload_version(modules[name], promote=True)
    return server


def _pay(srv: InProcessServer, sandbox: Sandbox, options: dict[str, object]) -> str:
    run = srv.client.start_run(
        "pay",
        {
            "order_id": "T-1",
            "amount_cents": 100,
            "service": "http://127.0.0.1:9",
            "options": options,
        },
    ).run.run_id
    run_one_task(srv.client, sandbox)  # the workflow schedules the activity
    return run


def _advance(srv: InProcessServer, delta: timedelta) -> None:
    assert isinstance(srv.clock, ManualClock)
    srv.clock.advance(delta)
    srv.server.sweep()


def _timed_out(srv: InProcessServer, run: str) -> dict[str, object]:
    (event,) = [e for e in srv.client.history(run) if e.type is EventType.ACTIVITY_TIMED_OUT]
    return event.payload


def test_schedule_to_start_timeout(srv: InProcessServer, sandbox: Sandbox) -> None:
    run = _pay(srv, sandbox, {"schedule_to_start_ms": 1000})
    _advance(srv, timedelta(milliseconds=900))
    assert srv.client.describe(run).tasks[0].kind.value == "activity"  # still waiting
    _advance(srv, timedelta(milliseconds=200))
    assert _timed_out(srv, run)["timeout"] == "schedule_to_start"
    settle(make_worker(srv.client, sandbox, clock=srv.clock))
    closed = srv.client.result(run)
    assert closed.status is RunStatus.FAILED
    assert closed.error_type == "amber.timeout.schedule_to_start"


def test_start_to_close_timeout_fails_the_attempt_and_is_retried(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    options = {"start_to_close_ms": 1000, "retry": {"max_attempts": 2, "initial_ms": 500}}
    run = _pay(srv, sandbox, options)
    first = srv.client.poll_task(worker_id="stuck", wait_s=1)
    assert first is not None and first.deadline == srv.clock.now() + timedelta(seconds=1)
    _advance(srv, timedelta(milliseconds=1001))
    (task,) = srv.client.describe(run).tasks
    assert task.state.value == "pending" and task.attempt == 2
    assert task.visible_at == srv.clock.now() + timedelta(milliseconds=500)
    failures = srv.client.describe(run).recent_failures
    assert [f.reason for f in failures] == ["timeout_start_to_close"]
    _advance(srv, timedelta(milliseconds=500))
    second = srv.client.poll_task(worker_id="stuck", wait_s=1)
    assert second is not None and second.attempt == 2
    _advance(srv, timedelta(milliseconds=1001))
    assert _timed_out(srv, run) == {"cmd": 0, "timeout": "start_to_close", "attempt": 2}


def test_schedule_to_close_timeout_ends_the_activity_across_attempts(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    run = _pay(srv, sandbox, {"schedule_to_close_ms": 5000})
    leased = srv.client.poll_task(worker_id="stuck", wait_s=1)
    assert leased is not None and leased.deadline == srv.clock.now() + timedelta(seconds=5)
    _advance(srv, timedelta(seconds=5, milliseconds=1))
    assert _timed_out(srv, run)["timeout"] == "schedule_to_close"
    assert srv.client.describe(run).tasks[0].kind.value == "workflow"


def test_heartbeat_timeout_and_details_reaching_the_next_attempt(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    options = {"heartbeat_ms": 1000, "retry": {"max_attempts": 2, "initial_ms": 100}}
    run = _pay(srv, sandbox, options)
    first = srv.client.poll_task(worker_id="beating", wait_s=1)
    assert first is not None and first.heartbeat_details is None
    _advance(srv, timedelta(milliseconds=800))
    ack = srv.client.heartbeat(first, worker_id="beating", details=b"\x81\xa4poll\x07")
    assert not ack.cancel_requested
    _advance(srv, timedelta(milliseconds=800))  # 1.6 s after the start, 0.8 s after the beat
    assert srv.client.describe(run).tasks[0].state.value == "leased"
    _advance(srv, timedelta(milliseconds=300))  # 1.1 s after the beat: too long
    failures = srv.client.describe(run).recent_failures
    assert [f.reason for f in failures] == ["timeout_heartbeat"]
    _advance(srv, timedelta(milliseconds=100))
    second = srv.client.poll_task(worker_id="beating", wait_s=1)
    assert second is not None and second.attempt == 2
    assert second.heartbeat_details == b"\x81\xa4poll\x07"


def test_retry_delays_follow_the_policy_exactly(srv: InProcessServer, sandbox: Sandbox) -> None:
    options = {"retry": {"initial_ms": 1000, "coefficient": 3.0, "max_interval_ms": 5000,
                         "max_attempts": 4}}  # fmt: skip
    run = _pay(srv, sandbox, options)
    waits = []
    for attempt in range(1, 5):
        task = srv.client.poll_task(worker_id="failing", wait_s=1)
        assert task is not None and task.attempt == attempt
        _error(srv, task)
        pending = [t for t in srv.client.describe(run).tasks if t.kind.value == "activity"]
        if not pending:
            break
        wait = pending[0].visible_at - srv.clock.now()
        waits.append(wait)
        _advance(srv, wait)
    assert waits == [timedelta(seconds=1), timedelta(seconds=3), timedelta(seconds=5)]
    failed = [e for e in srv.client.history(run) if e.type is EventType.ACTIVITY_FAILED]
    assert failed[0].payload["error_type"] == "Declined" and failed[0].payload["attempt"] == 4


def test_an_error_type_the_policy_names_is_not_retried(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    from tests.payment_service import PaymentService

    with PaymentService() as pay:
        pay.fail_next(503, times=5)
        options = {"retry": {"non_retryable": ["PaymentServiceError"], "max_attempts": 5}}
        run = srv.client.start_run(
            "pay",
            {"order_id": "N-1", "amount_cents": 5, "service": pay.url(""), "options": options},
        ).run.run_id
        settle(make_worker(srv.client, sandbox, clock=srv.clock))
        closed = srv.client.result(run)
        assert closed.status is RunStatus.FAILED and closed.error_type == "PaymentServiceError"
        (failed,) = [e for e in srv.client.history(run) if e.type is EventType.ACTIVITY_FAILED]
        assert failed.payload["attempt"] == 1
        assert pay.hits("/charge") == 1 and pay.charges == 0


def test_the_workflow_execution_timeout_closes_the_run(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    shipment = {"shipment_id": "S", "address": "A", "deadline_days": 30}
    run = srv.client.start_run("shipment", shipment, execution_timeout_s=3600).run.run_id
    settle(make_worker(srv.client, sandbox, clock=srv.clock))
    _advance(srv, timedelta(minutes=59))
    assert srv.client.result(run).status is RunStatus.RUNNING
    _advance(srv, timedelta(minutes=2))
    closed = srv.client.result(run)
    assert closed.status is RunStatus.TIMED_OUT
    assert srv.client.history(run)[-1].type is EventType.RUN_TIMED_OUT
    assert srv.client.describe(run).timers == ()


def test_a_history_past_its_limits_warns_then_fails(make_server, modules, sandbox) -> None:
    settings = EngineSettings(history_warn_events=20, history_fail_events=40)
    srv: InProcessServer = make_server(settings=settings, clock=ManualClock())
    srv.client.upload_version(modules["hostile"], promote=True)
    worker = make_worker(srv.client, sandbox, clock=srv.clock)
    warned = srv.client.start_run("chatty", {"n": 25}).run.run_id
    settle(worker)
    types = [e.type for e in srv.client.history(warned)]
    assert types.count(EventType.HISTORY_WARNING) == 1
    assert srv.client.result(warned).status is RunStatus.RUNNING
    failed = srv.client.start_run("chatty", {"n": 45}).run.run_id
    settle(worker)
    closed = srv.client.result(failed)
    assert closed.status is RunStatus.FAILED
    assert closed.error_type == "amber.HistoryLimitExceeded"


def _error(srv: InProcessServer, task: LeasedTask) -> None:
    """The activity returned an error (its retry policy decides; a crash would not count)."""
    outcome = ActivityOutcome(
        status=ActivityStatus.FAILED, error=ErrorInfo(type="Declined", message="card declined")
    )
    srv.client.complete_activity(task, outcome, worker_id="failing")


def _fail(srv: InProcessServer) -> None:
    task = srv.client.poll_task(worker_id="failing", wait_s=1)
    assert task is not None and task.kind.value == "activity"
    _error(srv, task)


def test_an_activity_failing_after_cancellation_is_not_retried(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    run = _pay(srv, sandbox, {"retry": {"max_attempts": 5}})
    task = srv.client.poll_task(worker_id="failing", wait_s=1)
    assert task is not None
    srv.client.cancel(run, reason="stop")
    report = FailureReport(reason="trap", message="boom", trap_code="unreachable")
    srv.client.fail_task(task, report, worker_id="failing")
    assert all(t.kind.value != "activity" for t in srv.client.describe(run).tasks)
    (cancelled,) = [e for e in srv.client.history(run) if e.type is EventType.ACTIVITY_CANCELLED]
    assert (
        "attempt 1 failed after cancellation was requested (amber.trap"
        in (cancelled.payload["message"])
    )


def test_an_activity_waiting_to_retry_is_cancelled_with_its_attempts(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    run = _pay(srv, sandbox, {"retry": {"max_attempts": 5, "initial_ms": 60_000}})
    _fail(srv)
    waiting = [t for t in srv.client.describe(run).tasks if t.kind.value == "activity"]
    assert waiting and waiting[0].state.value == "pending"
    srv.client.cancel(run, reason="stop")
    (cancelled,) = [e for e in srv.client.history(run) if e.type is EventType.ACTIVITY_CANCELLED]
    assert cancelled.payload["message"].startswith(
        "cancelled while waiting to retry, after 1 failed attempt(s)"
    )
    settle(make_worker(srv.client, sandbox, clock=srv.clock))
    assert srv.client.result(run).status is RunStatus.CANCELLED


def test_timeouts_longer_than_a_32_bit_millisecond_count_are_kept(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    month = timedelta(days=30)
    _pay(srv, sandbox, {"start_to_close_ms": int(month.total_seconds() * 1000)})
    task = srv.client.poll_task(worker_id="w", wait_s=1)
    assert task is not None and task.deadline == srv.clock.now() + month


def test_a_sandbox_deadline_kill_under_the_task_s_own_deadline_is_its_timeout(
    srv: InProcessServer, sandbox: Sandbox
) -> None:
    run = _pay(srv, sandbox, {"start_to_close_ms": 1000, "retry": {"max_attempts": 1}})
    task = srv.client.poll_task(worker_id="w", wait_s=1)
    assert task is not None and task.deadline is not None
    report = FailureReport(reason="deadline", message="the activation ran past its deadline")
    srv.client.fail_task(task, report, worker_id="w")
    assert _timed_out(srv, run)["timeout"] == "start_to_close"
