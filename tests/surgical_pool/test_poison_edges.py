"""The edges of poisoning and triage found in review: a suspended run's tasks stay held whatever
returns, triage cannot race a surgical lease, crashes spend no retry attempts, errors that are
not crashes neither advance nor forgive poisoning, bulk commands re-check each run, and a closed
run is no longer suspended."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import amber.runtime.services._triage as triage_module
from amber.abi import ActivityOutcome, ActivityStatus, ErrorInfo, InvalidInput
from amber.history import Database, EventType, Suspension, suspend_run_txn
from amber.runtime.model._clock import ManualClock
from amber.runtime.model._errors import PayloadTooLarge
from amber.runtime.model._settings import EngineSettings, PoisonPolicy, RetryPolicy
from amber.runtime.model._tasks import FailureReport, LeasedTask
from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.services._triage import TriageService
from amber.tools._output import attempts_text
from tests.conftest import InProcessServer
from tests.runtime._engine_helpers import run_one_task

TRAP = FailureReport(reason="trap", message="trap unreachable", trap_code="unreachable")
DECLINED = ActivityOutcome(
    status=ActivityStatus.FAILED, error=ErrorInfo(type="Declined", message="card declined")
)
POLICY = PoisonPolicy(
    crashes_to_poison=3,
    surgical_delays=(timedelta(seconds=1),),
    suspend_after=timedelta(hours=1),
    crash_backoff=timedelta(seconds=1),
)


@pytest.fixture
def engine(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes]
) -> Callable[..., tuple[InProcessServer, ManualClock]]:
    def make(**settings: Any) -> tuple[InProcessServer, ManualClock]:
        clock = ManualClock()
        srv = make_server(settings=EngineSettings(poison=POLICY, **settings), clock=clock)
        srv.client.upload_version(modules["hostile"], promote=True)
        return srv, clock

    return make


def _lease(srv: InProcessServer, clock: ManualClock, pool: str = "") -> LeasedTask:
    clock.advance(timedelta(minutes=2))  # past any backoff or surgical delay
    task = srv.client.poll_task(worker_id="w", wait_s=0.5, pool=pool)
    assert task is not None
    return task


def _activity_of(
    srv: InProcessServer, sandbox: Sandbox, workflow: str, args: dict[str, Any]
) -> str:
    """Start a run and run its first workflow activation: its activity task is pending."""
    run_id = srv.client.start_run(workflow, args).run.run_id
    run_one_task(srv.client, sandbox)
    return run_id


def _poison(srv: InProcessServer, clock: ManualClock, sandbox: Sandbox) -> str:
    """Crash a run's activity until it is poisoned: three times for the first run, once for
    the next ones (the fingerprint is known by then)."""
    run_id = _activity_of(srv, sandbox, "good", {"crash": True})
    for _ in range(3):
        srv.client.fail_task(_lease(srv, clock), TRAP, worker_id="w")
        if srv.client.describe(run_id).tasks[0].pool == "surgical":
            break
    (task,) = srv.client.describe(run_id).tasks
    assert task.pool == "surgical" and task.state.value == "pending"
    return run_id


def _suspend(db: Database, srv: InProcessServer, run_id: str) -> None:
    suspension = Suspension(since=srv.clock.now(), reason="test", fingerprint="f")
    assert db.run(lambda cur: suspend_run_txn(cur, run_id, suspension))


def test_a_task_that_was_running_when_its_run_was_suspended_comes_back_held(
    engine: Callable[..., tuple[InProcessServer, ManualClock]], sandbox: Sandbox, db: Database
) -> None:
    srv, clock = engine()
    run_id = _activity_of(srv, sandbox, "fanout", {"n": 2})
    running = _lease(srv, clock)
    _suspend(db, srv, run_id)  # a sibling's poison ran out of time meanwhile
    srv.client.fail_task(running, TRAP, worker_id="w")
    assert {t.pool for t in srv.client.describe(run_id).tasks} == {"held"}
    clock.advance(timedelta(minutes=5))
    assert srv.client.poll_task(worker_id="main", wait_s=0.2) is None
    assert srv.client.poll_task(worker_id="surgeon", wait_s=0.2, pool="surgical") is None


def test_triage_locks_the_run_s_tasks_so_a_surgical_claim_cannot_slip_in(
    engine: Callable[..., tuple[InProcessServer, ManualClock]],
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    srv, clock = engine()
    run_id = _poison(srv, clock, sandbox)
    clock.advance(timedelta(minutes=2))
    claimed: list[LeasedTask | None] = []
    real = triage_module.run_tasks_txn

    def racing(cur: Any, rid: str, **kwargs: Any) -> Any:
        tasks = real(cur, rid, **kwargs)
        # A surgical worker polls between the triage's read and its write.
        poll = threading.Thread(
            target=lambda: claimed.append(
                srv.client.poll_task(worker_id="surgeon", wait_s=0.3, pool="surgical")
            )
        )
        poll.start()
        poll.join()
        return tasks

    monkeypatch.setattr(triage_module, "run_tasks_txn", racing)
    (outcome,) = srv.client.triage(
        "skip", run_ids=[run_id], step=0, result=b"\x80", reason="by hand", operator="bob"
    )
    assert outcome.outcome == "skipped" and claimed == [None]
    monkeypatch.undo()
    assert srv.client.poll_task(worker_id="surgeon", wait_s=0.2, pool="surgical") is None
    events = [e.type for e in srv.client.history(run_id)]
    assert events.count(EventType.ACTIVITY_COMPLETED) == 1


def test_crashes_spend_no_retry_attempts_but_errors_do(
    engine: Callable[..., tuple[InProcessServer, ManualClock]], sandbox: Sandbox
) -> None:
    retry = RetryPolicy(initial=timedelta(seconds=1), max_attempts=2)
    srv, clock = engine(activity_retry=retry)
    run_id = _activity_of(srv, sandbox, "good", {"n": 1})
    attempts = []
    for _ in range(2):
        task = _lease(srv, clock)
        attempts.append(task.attempt)
        srv.client.fail_task(task, TRAP, worker_id="w")
    (pending,) = srv.client.describe(run_id).tasks
    # Shown against the budget, the next attempt is still the first (`run describe` used to
    # print ATTEMPT 3/2 here).
    assert (pending.attempt, pending.crashed_attempts, pending.counted_attempts) == (3, 2, 1)
    assert attempts_text(pending) == "1/2 +2 crashed"
    for _ in range(2):
        task = _lease(srv, clock)
        attempts.append(task.attempt)
        srv.client.complete_activity(task, DECLINED, worker_id="w")
    # Every execution is an attempt (the guest sees its number); only the two that did not
    # crash count against max_attempts=2.
    assert attempts == [1, 2, 3, 4]
    (failed,) = [e for e in srv.client.history(run_id) if e.type is EventType.ACTIVITY_FAILED]
    assert failed.payload["attempt"] == 4 and failed.payload["error_type"] == "Declined"
    assert srv.client.describe(run_id).recent_failures[-1].reason == "trap"


def test_an_error_that_is_not_a_crash_keeps_the_task_poisoned(
    engine: Callable[..., tuple[InProcessServer, ManualClock]], sandbox: Sandbox
) -> None:
    srv, clock = engine()
    run_id = _poison(srv, clock, sandbox)
    (before,) = srv.client.describe(run_id).tasks
    srv.client.complete_activity(_lease(srv, clock, "surgical"), DECLINED, worker_id="w")
    (after,) = srv.client.describe(run_id).tasks
    assert after.pool == "surgical" and after.poisoned_at == before.poisoned_at
    assert after.crash == before.crash
    assert srv.client.poll_task(worker_id="main", wait_s=0.2) is None


def test_a_bulk_command_re_checks_each_run_and_spares_one_that_recovered(
    engine: Callable[..., tuple[InProcessServer, ManualClock]],
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    srv, clock = engine()
    recovered, stuck = _poison(srv, clock, sandbox), _poison(srv, clock, sandbox)
    stale = srv.server.triage.troubled()
    srv.client.triage("retry", run_ids=[recovered], reason="transient", operator="bob")
    monkeypatch.setattr(TriageService, "troubled", lambda self, **kwargs: stale)
    (fingerprint,) = {t.fingerprint for t in stale}
    outcomes = srv.client.triage(
        "terminate", fingerprint=fingerprint or "", reason="give up", operator="bob"
    )
    by_run = {o.run_id: o for o in outcomes}
    assert by_run[stuck].outcome == "terminated"
    assert by_run[recovered].outcome == "refused" and "neither" in by_run[recovered].detail
    assert not srv.client.result(recovered).status.closed


def test_a_skip_result_must_be_msgpack_within_the_payload_limit_and_closing_ends_suspension(
    engine: Callable[..., tuple[InProcessServer, ManualClock]], sandbox: Sandbox, db: Database
) -> None:
    srv, clock = engine(max_payload_bytes=1024)
    run_id = _poison(srv, clock, sandbox)
    with pytest.raises(InvalidInput, match="not msgpack"):
        srv.client.triage(
            "skip", run_ids=[run_id], step=0, result=b"\xc1", reason="x", operator="bob"
        )
    with pytest.raises(PayloadTooLarge):
        big = b"\xc5\x08\x00" + b"x" * 2048
        srv.client.triage("skip", run_ids=[run_id], step=0, result=big, reason="x", operator="b")
    _suspend(db, srv, run_id)
    srv.client.terminate(run_id, reason="closing a suspended run")
    assert srv.client.describe(run_id).run.suspension is None


@pytest.mark.parametrize(
    ("reason", "fuel", "reproduced"),
    [
        ("deadline", 999, True),  # killed by the clock again: where it stood does not matter
        ("trap", 999, False),  # deterministic: another fuel count is another execution
        ("trap", 1234, True),
    ],
)
def test_a_deadline_reached_again_is_a_reproduction_whatever_the_fuel(
    reason: str, fuel: int, reproduced: bool
) -> None:
    from datetime import UTC, datetime

    from amber.history import FailureRecord
    from amber.surgical_pool import ReplayResult

    recorded = FailureRecord(
        task_id=1, run_id="r", kind="activity", cmd=0, attempt=1, digest="d" * 64,
        reason=reason, message="m", fuel_used=1234, created_at=datetime.now(UTC),
    )  # fmt: skip
    result = ReplayResult(
        recorded=recorded, reason=reason, trap_code=None, fuel_used=fuel, memory_bytes=1,
        message="m", input_matches=True,
    )  # fmt: skip
    assert result.reproduced is reproduced
