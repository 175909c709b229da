"""Server and worker as separate OS processes on loopback; the worker is SIGKILLed mid-way."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable

import pytest

from amber.history import EventType, RunStatus
from amber.runtime.client._client import AmberClient, decode
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
    worker_args = ("--server", target, "worker", "--poll-wait", "1", "--slots", "1")

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

    # One cheap RPC per check (summing all 50 results per check let the worker finish first).
    wait_for(lambda: client.result(run_ids[4]).status.closed, 60, "the first runs to complete")
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
    # With 50 runs queued, the one-slot worker always holds a lease (eager dispatch hands it the
    # next task as it reports the last), so the kill strands exactly one task until its lease
    # expires. (A worker with n slots strands up to n: test_worker_slots covers many slots.)
    assert len(lost) == 1
    # ... and that loss is one crash of that task: fingerprinted, counted, not poisoned.
    assert lost[0].fingerprint and lost[0].pool == "main"
    assert server.popen.poll() is None
    client.close()


@pytest.mark.slow
def test_a_stalled_worker_s_late_result_is_refused_by_the_fencing_token(
    server_process: Callable[..., tuple[Process, str]],
    amber_process: Callable[..., Process],
    modules: dict[str, bytes],
) -> None:
    """SIGSTOP a worker mid-activity until its lease is taken over, then SIGCONT it: its result
    arrives late and is refused; the run's history records each step once."""
    server, target = server_process("--lease-seconds", "1")
    client = AmberClient(target, timeout_s=30)
    client.upload_version(modules["hostile"], promote=True)
    worker_args = ("--server", target, "worker", "--poll-wait", "1", "--slots", "1")
    stalled = amber_process(*worker_args)
    run_id = client.start_run("call", {"activity": "nap_briefly", "args": None}).run.run_id
    wait_for(lambda: _leased_activity(client, run_id), 30, "the activity to be leased")
    stalled.popen.send_signal(signal.SIGSTOP)
    try:
        wait_for(
            lambda: any(f.reason == "worker_lost" for f in client.describe(run_id).recent_failures),
            30,
            "the sweeper to take the lease back",
        )
        amber_process(*worker_args)
        wait_for(lambda: client.result(run_id).status.closed, 60, "the run to finish")
    finally:
        stalled.popen.send_signal(signal.SIGCONT)
    # Its connection died while it was stopped: the report waits for the stream's client timeout
    # (30 s) before it goes out on a new line, longer on a loaded machine.
    wait_for(lambda: "result discarded" in stalled.output(), 90, "the stalled worker to report")
    assert client.result(run_id).status is RunStatus.COMPLETED
    events = client.history(run_id)
    assert sum(e.type is EventType.ACTIVITY_COMPLETED for e in events) == 1
    assert server.popen.poll() is None
    client.close()


def _leased_activity(client: AmberClient, run_id: str) -> bool:
    tasks = client.describe(run_id).tasks
    return any(t.kind.value == "activity" and t.state.value == "leased" for t in tasks)
