"""Helpers for driving an in-process server with an in-process worker, one task at a time."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import msgpack

from amber.abi import ActivityInput
from amber.history import Run
from amber.runtime.client._client import AmberClient
from amber.runtime.model._clock import Clock
from amber.runtime.replay._activity import ActivityAttempt
from amber.runtime.sandbox._sandbox import Sandbox, SandboxLimits
from amber.runtime.worker._worker import Worker, WorkerSettings
from tests.conftest import attempt_of


def run_attempt(module: bytes, name: str, run_id: str, limits: SandboxLimits) -> ActivityAttempt:
    """Attempt 1 of activity `name` of `module` for `run_id`, with args `{"run": run_id}`."""
    return attempt_of(module, name, {"run": run_id}, run_id=run_id, limits=limits)


def make_worker(
    client: AmberClient,
    sandbox: Sandbox,
    worker_id: str = "test-worker",
    clock: Clock | None = None,
) -> Worker:
    return Worker(client, sandbox, WorkerSettings(worker_id=worker_id, poll_wait_s=0.2), clock)


@contextlib.contextmanager
def serving(worker: Worker) -> Iterator[Worker]:
    """Run `worker` with all its slots in a thread for the block; then stop it, end its
    streams, and check that it ended."""
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.close()
        thread.join(timeout=10)
    assert not thread.is_alive(), "the worker did not stop"


def drive(
    worker: Worker, client: AmberClient, run_id: str, timeout_s: float = 30.0, tenant: str = ""
) -> Run:
    """Run tasks on `worker` until the run closes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = client.result(run_id, tenant=tenant)
        if run.status.closed:
            return run
        worker.run_once(wait_s=0.2)
    raise AssertionError(f"run {run_id} did not close within {timeout_s} s")


def run_one_task(client: AmberClient, sandbox: Sandbox) -> None:
    """Poll one task and run it, without taking the next one eagerly."""
    worker = make_worker(client, sandbox, worker_id="one-shot")
    worker.stop()  # a stopping worker reports without asking for more work
    assert worker.run_once(wait_s=2)


def settle(worker: Worker, rounds: int = 200) -> int:
    """Run tasks until none is visible (the runs are waiting on timers, signals or nothing)."""
    for done in range(rounds):
        if not worker.run_once(wait_s=0.05):
            return done
    raise AssertionError(f"still busy after {rounds} polls")


def query(worker: Worker, client: AmberClient, run: str, name: str, **kwargs: Any) -> Any:
    """Ask a query and let `worker` answer it (queries are tasks for workers)."""
    answer: list[Any] = []
    failure: list[BaseException] = []

    def ask() -> None:
        try:
            answer.append(client.query(run, name, **kwargs))
        except BaseException as exc:
            failure.append(exc)

    asking = threading.Thread(target=ask)
    asking.start()
    while asking.is_alive():
        worker.run_once(wait_s=0.1)
    asking.join()
    if failure:
        raise failure[0]
    return answer[0]


def activity_attempt(
    digest: str, name: str, args: object, limits: SandboxLimits
) -> ActivityAttempt:
    """First attempt of activity `name` (msgpack-encoded `args`) as command 7 of run "run-1"."""
    return ActivityAttempt(
        digest=digest,
        cmd=7,
        input=ActivityInput(
            run_id="run-1",
            activity=name,
            args=msgpack.packb(args),
            attempt=1,
            idempotency_key="run-1/7",
            deadline_ms=0,
        ),
        limits=limits,
    )
