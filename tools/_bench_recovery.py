"""`amber bench`'s recovery phases: SIGKILL the worker, or the server, with runs in flight,
restart it, drain.

Use it to put a number on a crash: `runs` `chain` runs of K activities are started; once a
fraction of their activities has completed the process is killed with SIGKILL (a worker with its
whole process group) and a new one is started at once. Every run must still complete with the
right result. After a server kill, no attempt may be recorded as lost with its worker: the tasks
the dead server had granted go back to their queue when the worker next polls, uncounted.

Checked from the histories, not from the activities themselves (a sandboxed guest cannot write a
count file as the peers' steps do): each run holds exactly one `ActivityCompleted` per activity
(none missing, no completion recorded twice), and an activity that ran again after the kill shows
as a completion with `attempt` > 1. The at-least-once bound is the activity attempts recorded as
lost with their worker (`worker_lost` failures: the leases the restarted worker gave up, or that
expired): only those may have run before the kill and run again.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, Literal

from amber.abi import AmberError, RetryableError
from amber.history import (
    ActivityCompleted,
    Database,
    Run,
    RunStatus,
    store_footprint_txn,
)
from amber.runtime.client import AmberClient, decode

_POLL_S: Final = 0.05
"""Between progress readings before the kill: each counts whole tables, so polling faster would
load the database being measured (the drain after the kill is timed with result long polls)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryOptions:
    runs: int = 100
    k: int = 5
    starters: int = 16
    kill_after: float = 0.3
    """Kill once this fraction of all the runs' activities has completed."""
    timeout_s: float = 300.0
    tag: str = "recovery"


@dataclass(frozen=True, slots=True, kw_only=True)
class CrashControl:
    """How the phase kills a running process and starts its replacement."""

    victim: Literal["worker", "server"]
    """What is killed."""
    kill: Callable[[], None]
    """SIGKILL it (a worker with its children)."""
    restart: Callable[[], None]
    """Start a new one like the killed one; return once it serves."""


def measure_recovery(
    client: AmberClient, store: Database, victim: CrashControl, options: RecoveryOptions
) -> dict[str, Any]:
    """Run the crash and return the phase's JSON (`errors` lists what went wrong)."""
    errors: list[str] = []
    base = store.run(store_footprint_txn).activities_completed
    total = options.runs * options.k
    threshold = max(1, int(total * options.kill_after))
    began = time.perf_counter()
    ids = [f"{options.tag}-{i}" for i in range(options.runs)]
    with ThreadPoolExecutor(options.starters, thread_name_prefix="bench-recovery") as pool:
        started = list(pool.map(lambda i: _start(client, ids[i], i, options.k, errors),
                                range(options.runs)))  # fmt: skip
    values = {run_id: value for value, run_id in enumerate(started) if run_id is not None}
    run_ids = list(values)
    while (done := store.run(store_footprint_txn).activities_completed - base) < threshold:
        if time.perf_counter() - began > options.timeout_s:
            errors.append(f"only {done} of {total} activities completed before the timeout")
            break
        time.sleep(_POLL_S)
    outage_began = time.time()
    victim.kill()
    killed, killed_wall = time.perf_counter(), time.time()
    at_kill = store.run(store_footprint_txn)
    victim.restart()
    restarted_wall = time.time()
    runs = [_wait(client, run_id, options.timeout_s, errors) for run_id in run_ids]
    drained = time.perf_counter()
    closed_before_kill = sum(
        1 for run in runs if run and run.closed_at and run.closed_at.timestamp() < killed_wall
    )
    audit = _audit(client, run_ids, options.k, errors)
    for run in runs:
        if run is not None:
            _check_result(run, values[run.run_id] + options.k, errors)
    bound = audit.pop("activity_attempts_lost")
    return {
        "killed": victim.victim,
        "runs": options.runs,
        "k": options.k,
        "killed_after_s": round(killed - began, 3),
        "activities_done_at_kill": at_kill.activities_completed - base,
        "runs_closed_before_kill": closed_before_kill,
        "runs_in_flight_at_kill": len(run_ids) - closed_before_kill,
        "tasks_leased_at_kill": at_kill.tasks_leased,
        "tasks_pending_at_kill": at_kill.tasks_pending,
        "time_kill_to_all_done_s": round(drained - killed, 2),
        "outage_unix": [round(outage_began, 3), round(restarted_wall, 3)],
        "all_completed": not errors and len(run_ids) == options.runs,
        **audit,
        "at_least_once_bound": bound,
        "within_bound": audit["activities_rerun"] <= bound and not audit["steps_missing"],
        "errors": errors[:20],
    }


def _start(
    client: AmberClient, workflow_id: str, value: int, k: int, errors: list[str]
) -> str | None:
    try:
        started = client.start_run("chain", {"k": k, "value": value}, workflow_id=workflow_id)
    except AmberError as exc:
        errors.append(f"{workflow_id}: start failed: {exc}")
        return None
    return started.run.run_id


def _wait(client: AmberClient, run_id: str, timeout_s: float, errors: list[str]) -> Run | None:
    """The run once closed (None: it did not close in time, or could not be read)."""
    deadline = time.perf_counter() + timeout_s
    while (remaining := deadline - time.perf_counter()) > 0:
        try:
            run = client.result(run_id, wait_s=min(5.0, remaining))
        except RetryableError:  # the server restarting (the server-kill phase): ask again
            time.sleep(0.1)
            continue
        except AmberError as exc:
            errors.append(f"{run_id}: result failed: {exc}")
            return None
        if run.status.closed:
            return run
    errors.append(f"{run_id}: not closed after {timeout_s} s")
    return None


def _check_result(run: Run, expected: int, errors: list[str]) -> None:
    if run.status is not RunStatus.COMPLETED:
        errors.append(f"{run.run_id}: {run.status.value}: {run.error_type}: {run.error_message}")
    elif decode(run.result) != {"value": expected}:
        errors.append(f"{run.run_id}: wrong result {decode(run.result)!r}")


def _audit(
    client: AmberClient, run_ids: Sequence[str], k: int, errors: list[str]
) -> dict[str, int]:
    """Completions per activity, from every run's history; and the activity attempts recorded
    as lost with their worker (each may have run before the kill: the at-least-once bound)."""
    missing = twice = rerun = lost = 0
    for run_id in run_ids:
        lost += sum(
            f.kind == "activity" and f.reason == "worker_lost"
            for f in client.describe(run_id).recent_failures
        )
        completions: Counter[int] = Counter()
        for event in client.history(run_id):
            completed = event.payload
            if isinstance(completed, ActivityCompleted):
                completions[completed.cmd] += 1
                rerun += completed.attempt > 1
        missing += max(0, k - len(completions))
        twice += sum(c - 1 for c in completions.values())
    if missing or twice:
        errors.append(f"{missing} activities without a completion, {twice} recorded twice")
    return {
        "steps_missing": missing,
        "completions_recorded_twice": twice,
        "activities_rerun": rerun,
        "activity_attempts_lost": lost,
    }
