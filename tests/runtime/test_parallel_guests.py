"""Several guests at once on one worker: one in process, the others in reused child processes.

A long guest must not hold up a short one; an activation must give the same answer (and burn
the same fuel) wherever it runs.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

import pytest

from amber.abi import ActivityInput
from amber.history import RunStatus
from amber.runtime.client._client import decode
from amber.runtime.model._clock import SystemClock
from amber.runtime.replay import ActivityAttempt, run_activity
from amber.runtime.sandbox import (
    IsolatedSandbox,
    ParallelSandbox,
    Sandbox,
    SandboxEngine,
    SandboxLimits,
    guest_runner,
)
from amber.runtime.worker._worker import Worker, WorkerSettings
from tests.conftest import BUSY_N, InProcessServer, wait_for


@pytest.fixture
def parallel(tmp_path: Path, modules: dict[str, bytes]) -> tuple[ParallelSandbox, SandboxEngine]:
    by_digest = {hashlib.sha256(m).hexdigest(): m for m in modules.values()}
    engine = SandboxEngine(tmp_path / "artifacts")
    runner = guest_runner(
        engine, SystemClock(), by_digest.__getitem__, artifact_dir=tmp_path / "artifacts", guests=2
    )
    assert isinstance(runner, ParallelSandbox)
    yield runner, engine
    runner.close()
    engine.close()


def _attempt(digest: str, name: str, args: bytes) -> ActivityAttempt:
    limits = SandboxLimits(deadline_s=10.0)
    return ActivityAttempt(
        digest=digest,
        cmd=0,
        input=ActivityInput(
            run_id="run-p",
            activity=name,
            args=args,
            attempt=1,
            idempotency_key="run-p/0",
            deadline_ms=0,
        ),
        limits=limits,
    )


def test_one_guest_at_a_time_runs_in_process(
    parallel: tuple[ParallelSandbox, SandboxEngine], modules: dict[str, bytes]
) -> None:
    runner, _ = parallel
    digest = hashlib.sha256(modules["chain"]).hexdigest()
    from amber.abi import pack

    for value in range(3):
        report = run_activity(runner, _attempt(digest, "add_one", pack({"value": value})))
        assert decode(report.outcome.result) == {"value": value + 1}
    assert runner.in_children == 0


def test_a_guest_gives_the_same_answer_and_fuel_in_a_child(
    parallel: tuple[ParallelSandbox, SandboxEngine],
    modules: dict[str, bytes],
    sandbox: Sandbox,
    tmp_path: Path,
) -> None:
    from amber.abi import pack

    digest = hashlib.sha256(modules["chain"]).hexdigest()
    attempt = _attempt(digest, "add_one", pack({"value": 41}))
    by_digest = {hashlib.sha256(m).hexdigest(): m for m in modules.values()}
    with IsolatedSandbox(
        by_digest.__getitem__, SystemClock(), artifact_dir=tmp_path / "a2", reuse=1
    ) as children:
        first = run_activity(children, attempt)
        second = run_activity(children, attempt)  # the same child, reused
    inline = run_activity(sandbox, attempt)
    assert first.outcome == second.outcome == inline.outcome
    assert first.stats.fuel_used == second.stats.fuel_used == inline.stats.fuel_used


def test_a_long_guest_does_not_hold_up_a_short_one(
    make_server, modules: dict[str, bytes], tmp_path: Path
) -> None:
    srv: InProcessServer = make_server()
    by_digest = {hashlib.sha256(m).hexdigest(): m for m in modules.values()}
    engine = SandboxEngine(tmp_path / "artifacts")
    runner = guest_runner(
        engine, SystemClock(), by_digest.__getitem__, artifact_dir=tmp_path / "artifacts",
        guests=2, slice_fuel=0,  # no background lane: the long guest computes in process
    )  # fmt: skip
    assert isinstance(runner, ParallelSandbox)
    srv.client.upload_version(modules["heavy"], promote=True)
    srv.client.upload_version(modules["hostile"], promote=True)
    settings = WorkerSettings(
        worker_id="parallel",
        poll_wait_s=0.2,
        slots=2,
        activity_limits=SandboxLimits(fuel=50 * BUSY_N, deadline_s=60.0),
    )
    worker = Worker(srv.client, runner, settings)
    long = srv.client.start_run("heavy_wf", {"n": BUSY_N}).run.run_id
    serving = threading.Thread(target=worker.run, daemon=True)
    serving.start()
    try:
        deadline = time.monotonic() + 20
        while srv.client.describe(long).tasks[0].kind.value != "activity":  # count_to started
            assert time.monotonic() < deadline
            time.sleep(0.02)
        wait_for(engine.activation_lock.locked, 20, "count_to to hold the in-process sandbox")
        short = srv.client.start_run("call", {"activity": "crash_on", "args": {"n": 1}})
        done = srv.client.result(short.run.run_id, wait_s=15)
        assert done.status is RunStatus.COMPLETED and decode(done.result) == {"n": 1}
        assert srv.client.result(long).status is RunStatus.RUNNING  # still counting
        assert runner.in_children >= 1
        finished = srv.client.result(long, wait_s=60)
        assert finished.status is RunStatus.COMPLETED
    finally:
        worker.stop()
        serving.join(timeout=10)
        runner.close()
        engine.close()
