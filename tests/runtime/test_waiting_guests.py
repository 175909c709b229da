"""Guests waiting in a host call give up their places: an activity asleep (or in an HTTP
exchange) uses no CPU, so the process's in-process guest, and a worker's `--guests`, serve
other activations meanwhile.

What it must keep: each activation's host calls after its wait go to that activation (the
routing the next activation took over comes back), and its outcome is what it would be alone.
What it must give: two activities waiting on a two-guest worker do not stall the others, in
process or in a child. The guest is `tests/guests/waits.c` (`wait_then_log` sleeps, then logs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from amber.history import RunStatus
from amber.runtime.client._client import decode
from amber.runtime.replay import ActivityAttempt, ActivityReport, run_activity
from amber.runtime.sandbox import (
    ActivityHost,
    ParallelSandbox,
    Sandbox,
    SandboxLimits,
    SandboxRunner,
)
from amber.runtime.worker._worker import Worker, WorkerSettings
from tests.conftest import (
    BUSY_N,
    InProcessServer,
    attempt_of,
    busy_attempt,
    parallel_runner,
    wait_for,
)
from tests.runtime._engine_helpers import serving

LONG_MS = 5000
"""A wait that outlasts everything the tests do meanwhile."""


@pytest.fixture
def parallel(tmp_path: Path, modules: dict[str, bytes]) -> Iterator[ParallelSandbox]:
    # slice_fuel=0: nothing moves to the background lane, only waiting frees a place
    with parallel_runner(tmp_path / "artifacts", modules, slice_fuel=0) as runner:
        yield runner


def _attempt(
    module: bytes, name: str, args: object, run_id: str, host: ActivityHost | None = None
) -> ActivityAttempt:
    limits = SandboxLimits(fuel=50_000_000_000, deadline_s=30.0)
    return attempt_of(module, name, args, run_id=run_id, limits=limits, host=host)


class _Background:
    """One activity run on a thread of its own, its report (or fault) kept."""

    def __init__(self, runner: SandboxRunner, attempt: ActivityAttempt) -> None:
        self.report: ActivityReport | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(runner, attempt), daemon=True)
        self._thread.start()

    def _run(self, runner: SandboxRunner, attempt: ActivityAttempt) -> None:
        try:
            self.report = run_activity(runner, attempt)
        except BaseException as exc:  # handed to the test through `result`
            self.error = exc

    def running(self) -> bool:
        return self._thread.is_alive()

    def result(self) -> ActivityReport:
        self._thread.join(60)
        assert not self._thread.is_alive(), "the activity did not end"
        if self.error is not None:
            raise self.error
        assert self.report is not None
        return self.report


def _waits(
    modules: dict[str, bytes], ms: int, run_id: str, asleep: threading.Event | None = None
) -> ActivityAttempt:
    """`wait_then_log` for `ms`; `asleep` is set once its sleep has gone on for a moment (the
    host's sleep asks whether the run still wants the activity every `SLEEP_CHECK_S`)."""
    host = None
    if asleep is not None:
        host = ActivityHost(
            idempotency_key=f"{run_id}/0",
            http=None,
            heartbeat=lambda _details: False,
            cancel_requested=lambda: asleep.set() or False,
        )
    return _attempt(modules["waits"], "wait_then_log", {"ms": ms}, run_id, host)


def _asleep(runner: SandboxRunner, modules: dict[str, bytes], run_id: str) -> _Background:
    """A long wait, returned once it is asleep."""
    asleep = threading.Event()
    one = _Background(runner, _waits(modules, LONG_MS, run_id, asleep))
    assert asleep.wait(10), "the wait did not begin"
    return one


def _logs(report: ActivityReport) -> list[str]:
    return [line for _level, line in report.stats.logs]


def test_activations_waiting_in_one_process_keep_their_own_host_calls(
    sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    long = _asleep(sandbox, modules, "run-long")
    assert sandbox.waiting_now() == 1
    # The process runs others meanwhile; each logs into its own output after its wait.
    for n in range(3):
        short = run_activity(sandbox, _waits(modules, 50, f"run-short-{n}"))
        assert decode(short.outcome.result) == {"ms": 50}
        assert _logs(short) == ["after the wait"]
    assert long.running()
    report = long.result()
    assert decode(report.outcome.result) == {"ms": LONG_MS}
    assert _logs(report) == ["after the wait"]


def test_two_waiting_activities_leave_a_two_guest_worker_serving(
    parallel: ParallelSandbox, modules: dict[str, bytes]
) -> None:
    def short(n: int) -> ActivityAttempt:
        return _attempt(modules["heavy"], "count_to", {"n": 1000}, f"r{n}")

    run_activity(parallel, short(-1))  # its module compiled first: not a race against the waits
    waiting = [_asleep(parallel, modules, f"run-wait-{n}") for n in range(2)]
    assert parallel.waiting_now() == 2  # what the worker's metrics show operators
    for n in range(5):
        done = run_activity(parallel, short(n))
        assert decode(done.outcome.result) == {"n": 1000}
    assert all(one.running() for one in waiting)  # served while both waited
    for one in waiting:
        assert _logs(one.result()) == ["after the wait"]
    assert parallel.waiting_now() == 0


def test_a_child_whose_guest_waits_gives_its_place_back(
    parallel: ParallelSandbox, modules: dict[str, bytes]
) -> None:
    # The in-process guest computes for seconds, so the wait goes to a child; while it waits,
    # the worker's second place is free for the next activation (another child).
    busy = _Background(parallel, busy_attempt(modules))
    wait_for(lambda: parallel._inline_free.locked(), 10, "the in-process guest to be busy")
    waiting = _asleep(parallel, modules, "run-wait")
    assert parallel.in_children == 1  # the in-process guest was busy
    assert parallel.waiting_now() == 1
    done = run_activity(parallel, _waits(modules, 0, "run-next"))
    assert _logs(done) == ["after the wait"]
    assert parallel.in_children == 2
    assert waiting.running()  # it was served while the wait went on
    assert _logs(waiting.result()) == ["after the wait"]
    assert decode(busy.result().outcome.result) == {"n": BUSY_N}


def test_a_worker_serves_runs_while_two_of_its_activities_sleep(
    make_server: Callable[..., InProcessServer],
    modules: dict[str, bytes],
    parallel: ParallelSandbox,
) -> None:
    # Through the real server and worker: two runs' activities asleep for 3 s on a two-guest
    # worker, and other runs go through meanwhile.
    srv = make_server()
    srv.client.upload_version(modules["hostile"], promote=True)
    worker = Worker(srv.client, parallel, WorkerSettings(worker_id="w", poll_wait_s=0.2, slots=4))
    napping = [
        srv.client.start_run("call", {"activity": "nap_briefly", "args": None}).run.run_id
        for _ in range(2)
    ]
    with serving(worker):
        for run_id in napping:
            wait_for(
                lambda run_id=run_id: srv.client.describe(run_id).tasks[0].kind.value == "activity",
                20,
                "the nap to start",
            )
        time.sleep(0.5)  # and to be asleep (a shorter pause could only let the test pass idly)
        for n in range(3):
            short = srv.client.start_run("call", {"activity": "crash_on", "args": {"n": n}})
            done = srv.client.result(short.run.run_id, wait_s=15)
            assert done.status is RunStatus.COMPLETED and decode(done.result) == {"n": n}
        assert all(srv.client.result(r).status is RunStatus.RUNNING for r in napping)
        for run_id in napping:
            assert srv.client.result(run_id, wait_s=20).status is RunStatus.COMPLETED
