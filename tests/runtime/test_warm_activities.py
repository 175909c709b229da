"""Kept Python activity instances (`WarmActivities`): a run's next activity goes on in the
instance its last clean one left; never another run's, never after a fault, whose activity runs
again in a fresh instance so that what is recorded is what a fresh instance gives.

The guest is `tests/guests/py_guest.py`: `tallies` reports the runs its instance served,
`spins_when_warm` completes in a fresh instance and runs out of fuel in one that served before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from amber.history import RunStatus
from amber.runtime.client._client import decode
from amber.runtime.model import SliceUsed
from amber.runtime.model._clock import SystemClock
from amber.runtime.replay import (
    ActivityAttempt,
    ActivityReport,
    activity_request,
    run_activity,
    run_activity_request,
)
from amber.runtime.sandbox import (
    ActivationKind,
    ActivationRequest,
    SandboxEngine,
    SandboxLimits,
    guest_runner,
)
from amber.runtime.sandbox._sandbox import Sandbox, Slice
from amber.runtime.sandbox._warm import WarmActivities, WarmInstance, WarmKey
from amber.runtime.worker._worker import Worker, WorkerSettings
from tests.conftest import ARTIFACTS, InProcessServer

from ._engine_helpers import run_attempt, serving

LIMITS = SandboxLimits(fuel=100_000_000, memory_bytes=48 * 2**20, deadline_s=10.0)


@pytest.fixture
def guest(python_modules: Mapping[str, bytes]) -> bytes:
    return python_modules["py_guest"]


def _sandbox(engine: SandboxEngine, module: bytes, warm: WarmActivities | None) -> Sandbox:
    return Sandbox(engine, SystemClock(), lambda _digest: module, warm=warm)


def _attempt(module: bytes, name: str, run_id: str) -> ActivityAttempt:
    return run_attempt(module, name, run_id, LIMITS)


def _result(report: ActivityReport) -> Any:
    assert report.outcome.result is not None, report.outcome
    return decode(report.outcome.result)


def test_a_runs_activities_go_on_in_its_instance_and_never_in_another_runs(
    sandbox_engine: SandboxEngine, guest: bytes
) -> None:
    warm = WarmActivities()
    sandbox = _sandbox(sandbox_engine, guest, warm)
    served = [
        _result(run_activity(sandbox, _attempt(guest, "tallies", run)))
        for run in ("run-a", "run-a", "run-b", "run-a", "run-b")
    ]
    assert served == [
        {"calls": 1, "runs": ["run-a"]},
        {"calls": 2, "runs": ["run-a"]},
        {"calls": 1, "runs": ["run-b"]},  # its own fresh instance: run-a's is not visible
        {"calls": 3, "runs": ["run-a"]},
        {"calls": 2, "runs": ["run-b"]},
    ]
    assert warm.hits == 3 and len(warm) == 2
    # Without a keeper every activity starts afresh (the surgical pool's and triage's path).
    plain = _sandbox(sandbox_engine, guest, None)
    for _ in range(2):
        assert _result(run_activity(plain, _attempt(guest, "tallies", "run-a")))["calls"] == 1


def test_a_fault_in_a_kept_instance_runs_again_in_a_fresh_one_which_is_not_kept(
    sandbox_engine: SandboxEngine, guest: bytes
) -> None:
    warm = WarmActivities()
    sandbox = _sandbox(sandbox_engine, guest, warm)
    _result(run_activity(sandbox, _attempt(guest, "tallies", "run-a")))
    # In the kept instance it spins out of its fuel; the fresh re-run completes, as a fresh
    # instance (the reference path) does from the start.
    again = run_activity(sandbox, _attempt(guest, "spins_when_warm", "run-a"))
    plain = _sandbox(sandbox_engine, guest, None)
    fresh = run_activity(plain, _attempt(guest, "spins_when_warm", "run-a"))
    assert _result(again) == _result(fresh) == {"fresh": True}
    assert again.stats.fuel_used == fresh.stats.fuel_used < LIMITS.fuel  # the fresh run's
    assert warm.hits == 1
    assert len(warm) == 0  # neither the faulted instance nor the re-run's was kept
    assert _result(run_activity(sandbox, _attempt(guest, "tallies", "run-a")))["calls"] == 1


def test_a_sliced_activity_out_of_its_slice_in_a_kept_instance_is_left_to_its_caller(
    sandbox_engine: SandboxEngine, guest: bytes
) -> None:
    """On a fuel slice (`ParallelSandbox`), running out is not the outcome: the caller runs the
    activity again afresh on its whole budget, so the sandbox does not spend a second slice."""
    warm = WarmActivities()
    sandbox = _sandbox(sandbox_engine, guest, warm)
    _result(run_activity(sandbox, _attempt(guest, "tallies", "run-a")))
    attempt = _attempt(guest, "spins_when_warm", "run-a")
    whole = replace(LIMITS, fuel=2 * LIMITS.fuel)  # a slice is less than the budget
    sliced = replace(activity_request(attempt), limits=whole, slice=Slice(fuel=LIMITS.fuel))
    with pytest.raises(SliceUsed) as spent:
        run_activity_request(sandbox, sliced)
    assert spent.value.fuel_used == LIMITS.fuel
    assert warm.hits == 1 and len(warm) == 0


def test_an_instance_is_dropped_after_its_share_of_activities_or_when_idle(
    sandbox_engine: SandboxEngine, guest: bytes
) -> None:
    warm = WarmActivities(max_uses=3)
    sandbox = _sandbox(sandbox_engine, guest, warm)
    calls = [
        _result(run_activity(sandbox, _attempt(guest, "tallies", "run-a")))["calls"]
        for _ in range(5)
    ]
    assert calls == [1, 2, 3, 1, 2]
    idle = WarmActivities(idle_s=0.0)
    sandbox = _sandbox(sandbox_engine, guest, idle)
    for run in ("run-a", "run-b"):
        assert _result(run_activity(sandbox, _attempt(guest, "tallies", run)))["calls"] == 1
    assert len(idle) == 1  # run-a's was freed by run-b's activity, not only when asked for
    assert idle.hits == 0


def test_at_most_runs_instances_are_kept_least_recently_used_first(
    sandbox_engine: SandboxEngine, guest: bytes
) -> None:
    warm = WarmActivities(runs=2)
    sandbox = _sandbox(sandbox_engine, guest, warm)
    for run in ("run-a", "run-b", "run-c"):
        run_activity(sandbox, _attempt(guest, "tallies", run))
    assert len(warm) == 2
    assert _result(run_activity(sandbox, _attempt(guest, "tallies", "run-a")))["calls"] == 1
    assert _result(run_activity(sandbox, _attempt(guest, "tallies", "run-c")))["calls"] == 2


class _Store:
    """A store stand-in that records being released."""

    closed = False

    def close(self) -> None:
        self.closed = True


def test_kept_instances_fit_in_a_memory_budget_by_their_stores_limits() -> None:
    warm = WarmActivities(runs=16, max_bytes=3 * LIMITS.memory_bytes)
    stores = {run: _Store() for run in ("a", "b", "c", "d")}
    for run, store in stores.items():
        key = WarmKey(run_id=run, digest="d", memory_bytes=LIMITS.memory_bytes, table_elements=1)
        warm.give(key, WarmInstance(store=store, instance=object()))  # type: ignore[arg-type]
    assert len(warm) == 3
    gone = WarmKey(run_id="a", digest="d", memory_bytes=LIMITS.memory_bytes, table_elements=1)
    assert warm.take(gone) is None  # the least recently kept went first
    # and its store was released at once (its pool slot with it), the others not
    assert [s.closed for s in stores.values()] == [True, False, False, False]
    warm.clear()
    assert all(s.closed for s in stores.values())


def test_workflows_and_modules_that_may_send_http_requests_are_never_kept(
    sandbox_engine: SandboxEngine, guest: bytes, modules: dict[str, bytes]
) -> None:
    payments = modules["payments"]  # declares the HTTP capability
    sandbox = Sandbox(
        sandbox_engine,
        SystemClock(),
        {hashlib.sha256(m).hexdigest(): m for m in (guest, payments)}.__getitem__,
        warm=WarmActivities(),
    )

    def request(module: bytes, kind: ActivationKind) -> ActivationRequest:
        return ActivationRequest(
            kind=kind,
            digest=hashlib.sha256(module).hexdigest(),
            export="x",
            input=b"",
            run_id="run-a",
            step=0,
            limits=LIMITS,
        )

    assert sandbox._warm_key(request(payments, ActivationKind.ACTIVITY)) is None
    assert sandbox._warm_key(request(guest, ActivationKind.WORKFLOW)) is None
    assert sandbox._warm_key(request(guest, ActivationKind.ACTIVITY)) == WarmKey(
        run_id="run-a",
        digest=hashlib.sha256(guest).hexdigest(),
        memory_bytes=LIMITS.memory_bytes,
        table_elements=LIMITS.table_elements,
    )


def test_the_keeper_gives_an_instance_to_one_caller_at_a_time() -> None:
    warm = WarmActivities()
    key = WarmKey(run_id="r", digest="d", memory_bytes=1, table_elements=1)
    kept = WarmInstance(store=_Store(), instance=object())  # type: ignore[arg-type]
    warm.give(key, kept)
    assert warm.take(key) is kept
    assert warm.take(key) is None  # out of the keeper while in use
    assert kept.uses == 1


def test_a_runs_later_instance_replaces_its_kept_one_which_is_released() -> None:
    # Two activities of one run in process at once (one waited in a host call meanwhile): the
    # run keeps the one that ended last, and the other's store is freed, not just forgotten.
    warm = WarmActivities()
    key = WarmKey(run_id="r", digest="d", memory_bytes=1, table_elements=1)
    first, second = _Store(), _Store()
    warm.give(key, WarmInstance(store=first, instance=object()))  # type: ignore[arg-type]
    warm.give(key, WarmInstance(store=second, instance=object()))  # type: ignore[arg-type]
    assert len(warm) == 1
    assert (first.closed, second.closed) == (True, False)


def test_a_workers_python_run_goes_on_in_its_kept_activity_instance(
    make_server: Any, python_modules: Mapping[str, bytes]
) -> None:
    """Through the real server and worker (one guest, in process): the run's three activities
    share one instance, and the worker's /metrics count the instance kept for it."""
    srv: InProcessServer = make_server()
    srv.client.upload_version(python_modules["py_guest"], promote=True)
    engine = SandboxEngine(ARTIFACTS)  # the session's: the component is compiled there once
    runner = guest_runner(
        engine, SystemClock(), srv.client.get_module, artifact_dir=ARTIFACTS, guests=1
    )
    assert isinstance(runner, Sandbox) and runner.warm is not None
    worker = Worker(srv.client, runner, WorkerSettings(worker_id="warm", poll_wait_s=0.2))
    worker.metrics.watch_warm(runner.warm_instances)
    try:
        with serving(worker):
            run_id = srv.client.start_run("tallying", {"times": 3}).run.run_id
            run = srv.client.result(run_id, wait_s=60)
    finally:
        engine.close()
    assert run.status is RunStatus.COMPLETED, srv.client.describe(run_id)
    assert decode(run.result) == [{"calls": n, "runs": [run_id]} for n in (1, 2, 3)]
    assert runner.warm.hits == 2
    metrics = worker.metrics.registry
    assert metrics.get_sample_value("amber_worker_warm_activity_instances") == 1
