"""Helpers for driving an in-process server with an in-process worker, one task at a time."""

from __future__ import annotations

import time

from history import Run
from runtime import AmberClient, Sandbox, Worker, WorkerSettings


def make_worker(client: AmberClient, sandbox: Sandbox, worker_id: str = "test-worker") -> Worker:
    return Worker(client, sandbox, WorkerSettings(worker_id=worker_id, poll_wait_s=0.2))


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
