"""A worker running several tasks at once: every run completes, every step is recorded once,
and leases are renewed per task."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from amber.history import EventType, RunStatus
from amber.runtime.client._client import decode
from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.worker._worker import Worker, WorkerSettings
from tests.conftest import InProcessServer, wait_for
from tests.runtime._engine_helpers import serving

RUNS = 40


def test_a_worker_with_eight_slots_completes_every_run_once_per_step(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv = make_server()
    srv.client.upload_version(modules["chain"], promote=True)
    runs = [srv.client.start_run("chain", {"k": 3, "value": i}).run.run_id for i in range(RUNS)]
    worker = Worker(srv.client, sandbox, WorkerSettings(worker_id="w8", poll_wait_s=0.2, slots=8))
    with serving(worker):
        wait_for(lambda: all(srv.client.result(r).status.closed for r in runs), 60, "every run")
    for i, run_id in enumerate(runs):
        run = srv.client.result(run_id)
        assert run.status is RunStatus.COMPLETED and decode(run.result) == {"value": i + 3}
        done = Counter(
            e.payload["cmd"]
            for e in srv.client.history(run_id)
            if e.type is EventType.ACTIVITY_COMPLETED
        )
        assert done == {0: 1, 1: 1, 2: 1}, run_id
    assert worker.completed == RUNS * 7 and worker.failed == 0


def test_an_idle_worker_holds_one_poll_at_the_server_not_one_per_slot(
    make_server: Callable[..., InProcessServer],
    modules: dict[str, bytes],
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    srv = make_server()
    srv.client.upload_version(modules["chain"], promote=True)
    waiting, most = [0], [0]
    lock = threading.Lock()
    real = srv.server.notifier.wait_tasks

    def counted(*args: Any, **kwargs: Any) -> None:
        with lock:
            waiting[0] += 1
            most[0] = max(most[0], waiting[0])
        try:
            real(*args, **kwargs)
        finally:
            with lock:
                waiting[0] -= 1

    monkeypatch.setattr(srv.server.notifier, "wait_tasks", counted)
    settings = WorkerSettings(worker_id="idle", poll_wait_s=0.3, slots=8)
    with serving(Worker(srv.client, sandbox, settings)):
        wait_for(lambda: most[0] >= 1, 10, "the worker to poll")
        threading.Event().wait(1.5)  # several rounds of polls by the idle slots
        assert most[0] == 1
        run = srv.client.start_run("chain", {"k": 2, "value": 0}).run.run_id
        wait_for(lambda: srv.client.result(run).status.closed, 30, "the run to complete")
