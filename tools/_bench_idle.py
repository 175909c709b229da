"""`amber bench`'s idle-cost phase: what runs that wait cost while they wait.

Use it to check the design's promise that a run parked on a timer or a signal costs database rows
only, never worker memory. It starts `runs` runs of `park` (`abi/samples/park.c`: a timer of
`days` days raced against the signal "go"), waits until every one of them has had its first
activation and no task is left, and reads the worker's resident memory and the store's size
before and after. Then it wakes a few with the signal and checks their results, so the phase
also proves the parked runs are alive.

Figures: worker (and server) VmRSS before and after, and their ratio; the growth of every
`amber_*` table (heap, indexes and TOAST, dead rows included) per parked run; the events and
timers each run holds; how fast the runs were started and parked.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from amber import abi
from amber.abi import AmberError
from amber.history import Database, RunStatus, StoreFootprint, store_footprint_txn
from amber.runtime.client import AmberClient, decode

PARK_SOURCE: Final = Path(abi.__file__).resolve().parent / "samples" / "park.c"
_POLL_S: Final = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class IdleOptions:
    """How many runs to park, and how."""

    runs: int = 10_000
    workflow: str = "park"
    """The workflow type parked: `park` (C), or `park_py` (Python, in `chain.py`)."""
    days: int = 30
    """The timer each run waits on (it never fires during the bench)."""
    starters: int = 16
    """Threads starting the runs."""
    wake: int = 20
    """Runs woken with the signal afterwards, whose results are checked."""
    timeout_s: float = 900.0
    tag: str = "idle"
    """Prefix of the workflow ids."""


def measure_idle_cost(
    client: AmberClient,
    store: Database,
    worker_pids: Sequence[int],
    server_pid: int | None,
    options: IdleOptions,
) -> dict[str, Any]:
    """Park `options.runs` runs and measure what they cost; the `park` module must already be
    uploaded and current. Returns the phase's JSON (its `errors` lists what went wrong)."""
    errors: list[str] = []
    _wake(client, [_start_one(client, f"{options.tag}-warm", options)], errors)
    _wait_drained(store, options.timeout_s, errors)  # the module loaded, earlier phases done
    before = store.run(store_footprint_txn)
    workers_before = [_rss_mb(pid) for pid in worker_pids]
    server_before = _rss_mb(server_pid)

    began = time.perf_counter()
    ids = [f"{options.tag}-{i}" for i in range(options.runs)]
    run_ids = _start_all(client, ids, options, errors)
    started_s = time.perf_counter() - began
    parked = _wait_parked(store, before, options, errors)
    parked_s = time.perf_counter() - began
    after = store.run(store_footprint_txn)
    workers_after = [_rss_mb(pid) for pid in worker_pids]
    server_after = _rss_mb(server_pid)

    woken = _wake(client, run_ids[: options.wake], errors)
    n = max(1, len(run_ids))
    grown = after.table_bytes - before.table_bytes
    worker_ratio = [
        None if b is None or a is None or b == 0 else round(a / b, 3)
        for b, a in zip(workers_before, workers_after, strict=True)
    ]
    return {
        "runs": options.runs,
        "workflow": options.workflow,
        "started": len(run_ids),
        "parked": parked,
        "timer_days": options.days,
        "start_s": round(started_s, 2),
        "starts_per_s": round(len(run_ids) / started_s, 1) if started_s else None,
        "park_all_s": round(parked_s, 2),
        "rss_mb_before": {"workers": workers_before, "server": server_before},
        "rss_mb_after": {"workers": workers_after, "server": server_after},
        "worker_rss_ratio": worker_ratio,
        "db_bytes_before": before.table_bytes,
        "db_bytes_after": after.table_bytes,
        "db_bytes_per_run": round(grown / n, 1),
        "events_per_run": round((after.events - before.events) / n, 2),
        "timers_per_run": round((after.timers - before.timers) / n, 2),
        "woken_by_signal": woken,
        "errors": errors[:20],
        "note": "db bytes: growth of every amber_* table (heap, indexes, TOAST; dead rows of the"
        " finished tasks included until vacuum reuses them) divided by the parked runs",
    }


def _start_one(client: AmberClient, workflow_id: str, options: IdleOptions) -> str:
    started = client.start_run(options.workflow, {"days": options.days}, workflow_id=workflow_id)
    return started.run.run_id


def _start_all(
    client: AmberClient, ids: Sequence[str], options: IdleOptions, errors: list[str]
) -> list[str]:
    def start(first: int) -> list[str]:
        mine: list[str] = []
        for workflow_id in ids[first :: options.starters]:
            try:
                mine.append(_start_one(client, workflow_id, options))
            except AmberError as exc:
                errors.append(f"{workflow_id}: start failed: {exc}")
        return mine

    with ThreadPoolExecutor(options.starters, thread_name_prefix="bench-park") as pool:
        return [run_id for part in pool.map(start, range(options.starters)) for run_id in part]


def _wait_parked(
    store: Database, before: StoreFootprint, options: IdleOptions, errors: list[str]
) -> int:
    """Wait until no task is left and each started run holds its timer; return how many do."""
    deadline = time.monotonic() + options.timeout_s
    while True:
        now = store.run(store_footprint_txn)
        parked = now.timers - before.timers
        if now.tasks_pending == now.tasks_leased == 0 and parked >= options.runs:
            return parked
        if time.monotonic() > deadline:
            errors.append(
                f"not all parked after {options.timeout_s} s: {parked} timers,"
                f" {now.tasks_pending} tasks pending, {now.tasks_leased} leased"
            )
            return parked
        time.sleep(_POLL_S)


def _wait_drained(store: Database, timeout_s: float, errors: list[str]) -> None:
    deadline = time.monotonic() + timeout_s
    while (now := store.run(store_footprint_txn)).tasks_pending + now.tasks_leased:
        if time.monotonic() > deadline:
            errors.append("earlier phases left tasks behind")
            return
        time.sleep(_POLL_S)


def _wake(client: AmberClient, run_ids: Sequence[str], errors: list[str]) -> int:
    """Signal "go" to these parked runs and check that each completes, woken by it."""
    woken = 0
    for run_id in run_ids:
        try:
            client.signal(run_id, "go", {})
            run = client.result(run_id, wait_s=30.0)
        except AmberError as exc:
            errors.append(f"{run_id}: waking failed: {exc}")
            continue
        if run.status is not RunStatus.COMPLETED or decode(run.result) != {"woke_by": "signal"}:
            errors.append(f"{run_id}: woken run ended {run.status.value}: {run.error_message}")
            continue
        woken += 1
    return woken


def _rss_mb(pid: int | None) -> float | None:
    """The process's resident memory now (VmRSS), in MiB."""
    if pid is None:
        return None
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None
