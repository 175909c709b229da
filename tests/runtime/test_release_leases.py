"""A worker restarting under a stable id gives up its dead predecessor's leases at once.

The server's lease here is an hour long, so a task can only come back through the release: each
released lease becomes one "worker lost" attempt, as an expiry would, and the old lease's late
report is refused by its fencing token.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from amber.abi import ActivityOutcome, ActivityStatus, InvalidInput
from amber.history import EventType, LeaseLost, RunStatus
from amber.runtime.client._client import decode
from amber.runtime.model._settings import EngineSettings
from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.worker._worker import Worker, WorkerSettings
from tests.conftest import InProcessServer, wait_for

HOUR_LEASE = EngineSettings(lease=timedelta(hours=1))


def test_released_leases_are_failed_attempts_and_the_old_holder_is_fenced_off(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes]
) -> None:
    srv = make_server(settings=HOUR_LEASE)
    srv.client.upload_version(modules["chain"], promote=True)
    run_id = srv.client.start_run("chain", {"k": 1, "value": 1}).run.run_id
    dead = srv.client.poll_task(worker_id="w-stable", wait_s=5)
    assert dead is not None

    assert srv.client.release_leases("w-someone-else") == 0
    assert srv.client.release_leases("w-stable") == 1
    assert srv.client.release_leases("w-stable") == 0

    again = srv.client.poll_task(worker_id="w-stable", wait_s=5)
    assert again is not None and again.task_id == dead.task_id
    assert again.fencing > dead.fencing and again.attempt == dead.attempt + 1
    [lost] = srv.client.describe(run_id).recent_failures
    assert (lost.reason, lost.worker) == ("worker_lost", "w-stable")
    assert "restarted" in lost.message


def test_a_late_report_of_a_released_activity_lease_is_refused(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv = make_server(settings=HOUR_LEASE)
    srv.client.upload_version(modules["chain"], promote=True)
    run_id = srv.client.start_run("chain", {"k": 1, "value": 1}).run.run_id
    worker = Worker(srv.client, sandbox, WorkerSettings(worker_id="w-first", poll_wait_s=0.2))
    worker.stop()  # a stopping worker runs what it polls but takes no next task eagerly
    assert worker.run_once(wait_s=5)  # the workflow task: it schedules the activity
    dead = srv.client.poll_task(worker_id="w-stable", wait_s=5)
    assert dead is not None and dead.kind.value == "activity"

    assert srv.client.release_leases("w-stable") == 1

    outcome = ActivityOutcome(status=ActivityStatus.COMPLETED, result=b"\x81\xa5value\x02")
    with pytest.raises(LeaseLost):
        srv.client.complete_activity(dead, outcome, worker_id="w-stable")
    assert not any(e.type is EventType.ACTIVITY_COMPLETED for e in srv.client.history(run_id))


def test_a_worker_started_with_release_on_start_finishes_what_its_predecessor_held(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv = make_server(settings=HOUR_LEASE)
    srv.client.upload_version(modules["chain"], promote=True)
    run_id = srv.client.start_run("chain", {"k": 2, "value": 5}).run.run_id
    assert srv.client.poll_task(worker_id="w-stable", wait_s=5) is not None  # then it "dies"
    settings = WorkerSettings(worker_id="w-stable", release_on_start=True, poll_wait_s=0.2)
    worker = Worker(srv.client, sandbox, settings)
    serving = threading.Thread(target=worker.run, daemon=True)
    serving.start()
    try:
        wait_for(lambda: srv.client.result(run_id).status.closed, 60, "the run to complete")
    finally:
        worker.stop()
        serving.join(timeout=10)
    run = srv.client.result(run_id)
    assert run.status is RunStatus.COMPLETED and decode(run.result) == {"value": 7}
    assert [f.reason for f in srv.client.describe(run_id).recent_failures] == ["worker_lost"]


def test_releasing_needs_a_worker_id(make_server: Callable[..., InProcessServer]) -> None:
    srv = make_server()
    with pytest.raises(InvalidInput, match="worker_id"):
        srv.client.release_leases("")


def test_a_grant_that_never_reached_its_worker_is_freed_at_its_next_poll_without_a_crash(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes]
) -> None:
    # Eager dispatch commits a lease with the report it answers: a server that dies before
    # sending that answer leaves a task leased to a worker that never got it. The worker's next
    # poll says what it holds; the rest of its leases go back at once, counted as nothing.
    from amber.runtime.model._clock import ManualClock

    clock = ManualClock()
    srv = make_server(settings=HOUR_LEASE, clock=clock)
    srv.client.upload_version(modules["chain"], promote=True)
    lost_run = srv.client.start_run("chain", {"k": 1, "value": 1}).run.run_id
    lost = srv.client.poll_task(worker_id="w", wait_s=5)  # the answer that "never arrived"
    assert lost is not None and lost.run_id == lost_run
    held_run = srv.client.start_run("chain", {"k": 1, "value": 2}).run.run_id
    held = srv.client.poll_task(worker_id="w", wait_s=5, holding=[])
    assert held is not None and held.run_id == held_run  # the lost one is too young to free

    clock.advance(timedelta(seconds=10))
    again = srv.client.poll_task(worker_id="w", wait_s=5, holding=[held.task_id])
    assert again is not None and again.task_id == lost.task_id  # freed, and leased anew
    assert again.attempt == lost.attempt and again.fencing > lost.fencing
    assert srv.client.describe(lost_run).recent_failures == ()  # no worker_lost crash
    assert {t.lease_owner for t in srv.client.describe(held_run).tasks} == {"w"}  # kept
    with pytest.raises(LeaseLost):  # the grant that never arrived cannot report either
        srv.client.complete_workflow(lost, _done(), worker_id="w")


def _done() -> Any:
    from amber.abi import WorkflowStatus
    from amber.runtime.model import WorkflowCompletion

    return WorkflowCompletion(expected_last_seq=1, commands=(), status=WorkflowStatus.SUSPENDED)
