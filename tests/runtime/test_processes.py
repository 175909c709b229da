"""Server and worker as separate OS processes on loopback; the worker is SIGKILLed mid-way."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from history import EventType, RunStatus
from runtime import AmberClient, decode
from tests.conftest import Process, wait_for

RUNS = 50


@pytest.mark.slow
def test_fifty_runs_survive_a_worker_killed_mid_way(
    server_process: Callable[..., tuple[Process, str]],
    amber_process: Callable[..., Process],
    modules: dict[str, bytes],
) -> None:
    server, target = server_process("--lease-seconds", "2")
    client = AmberClient(target, timeout_s=30)
    client.upload_version(modules["orders"], promote=True)
    worker_args = ("--server", target, "worker", "--poll-wait", "1")

    first = amber_process(*worker_args)
    run_ids = [
        client.start_run(
            "orders",
            {"order_id": f"K-{i}", "sku": "SKU", "quantity": 1 + i % 3, "amount_cents": 100 + i},
            workflow_id=f"kill-test-{i}",
        ).run.run_id
        for i in range(RUNS)
    ]

    def closed() -> int:
        return sum(client.result(r).status.closed for r in run_ids)

    wait_for(lambda: closed() >= 5, 60, "the first runs to complete")
    first.kill()
    done_at_kill = closed()
    assert done_at_kill < RUNS, "the worker finished everything before it could be killed"

    amber_process(*worker_args)
    wait_for(lambda: closed() == RUNS, 120, "all runs to complete after the restart")

    for i, run_id in enumerate(run_ids):
        run = client.result(run_id)
        assert run.status is RunStatus.COMPLETED, client.describe(run_id)
        result = decode(run.result)
        assert result["order_id"] == f"K-{i}" and result["status"] == "shipped"
        events = client.history(run_id)
        per_step = Counter(
            e.payload["cmd"] for e in events if e.type is EventType.ACTIVITY_COMPLETED
        )
        assert per_step == {1: 1, 2: 1, 3: 1, 4: 1}, f"run {run_id}: {per_step}"
        scheduled = Counter(
            e.payload["cmd"] for e in events if e.type is EventType.ACTIVITY_SCHEDULED
        )
        assert scheduled == {1: 1, 2: 1, 3: 1, 4: 1}
    lost = [
        f for r in run_ids for f in client.describe(r).recent_failures if f.reason == "worker_lost"
    ]
    print(f"runs closed at kill: {done_at_kill}/{RUNS}; leases reclaimed: {len(lost)}")
    assert len(lost) <= 1  # one worker, one activation at a time: at most one lease was live
    assert server.popen.poll() is None
    client.close()
