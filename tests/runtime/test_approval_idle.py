"""10,000 runs waiting on an approval hold no worker memory: they are rows, not workers."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from pathlib import Path

import pytest

from amber.history import Cursor, Database
from tests.conftest import InProcessServer, Process, wait_for

RUNS = 10_000
WARM_UP = 500


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _waiting(db: Database) -> int:
    def txn(cur: Cursor) -> int:
        cur.execute("SELECT count(*) FROM amber_approvals WHERE status = 'pending'")
        row = cur.fetchone()
        return int(row[0]) if row else 0

    return db.run(txn)


@pytest.mark.slow
def test_ten_thousand_runs_waiting_on_approvals_leave_the_worker_s_memory_where_it_was(
    make_server: Callable[..., InProcessServer],
    amber_process: Callable[..., Process],
    modules: dict[str, bytes],
    db: Database,
) -> None:
    srv = make_server()
    srv.client.upload_version(modules["expense"], promote=True)
    policy = {"approvers": ["alice"], "roles": [], "required": 1}

    def start(i: int) -> None:
        srv.client.start_run(
            "expense",
            {"expense_id": f"E-{i}", "policy": policy, "expires_ms": 30 * 24 * 3600 * 1000},
        )

    worker = amber_process("--server", srv.target, "worker", "--poll-wait", "1")
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(start, range(WARM_UP)))
        wait_for(lambda: _waiting(db) == WARM_UP, 120, "the warm-up runs to wait")
        before = _rss_kib(worker.popen.pid)
        list(pool.map(start, range(WARM_UP, RUNS)))
    wait_for(lambda: _waiting(db) == RUNS, 600, "every run to wait on its approval")
    after = _rss_kib(worker.popen.pid)
    print(f"worker RSS after {WARM_UP} waiting runs: {before} KiB; after {RUNS}: {after} KiB")
    assert after <= before * 1.10, f"RSS grew from {before} to {after} KiB"
    assert worker.popen.poll() is None
