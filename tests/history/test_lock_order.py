"""A task's outcome locks its run before the task itself: the order closing a run takes (the run,
then all its tasks), so a report of one task racing the close of its run cannot deadlock.

Raw connections, not `Database.run`: it would retry a deadlock and hide it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from amber.history import (
    Cursor,
    Database,
    LeaseLost,
    NewRun,
    NewTask,
    Run,
    Task,
    TaskKind,
    TaskState,
    claim_task_txn,
    delete_run_tasks_txn,
    enqueue_task_txn,
    insert_run_txn,
    lock_leased_task_with_run_txn,
    run_tasks_txn,
    take_leased_task_with_run_txn,
)

NOW = datetime(2025, 1, 1, tzinfo=UTC)
Report = Callable[[Cursor, int, int], tuple[Task, Run | None]]


def _new_run(db: Database) -> str:
    """A run whose tasks go to a queue of their own (named by the run id)."""
    run_id = str(uuid.uuid4())
    run = NewRun(
        run_id=run_id, tenant="t", workflow_id=run_id, workflow_type="w", digest="d" * 64,
        queue=run_id, input=b"\x80", created_at=NOW,
    )  # fmt: skip
    db.run(lambda cur: insert_run_txn(cur, run))
    return run_id


def _leased(db: Database, run_id: str, kind: TaskKind, cmd: int | None) -> Task:
    task = NewTask(
        run_id=run_id, kind=kind, queue=run_id, name="n", digest="d" * 64, visible_at=NOW,
        max_attempts=3, cmd=cmd, args=None if cmd is None else b"\x80",
    )  # fmt: skip
    db.run(lambda cur: enqueue_task_txn(cur, task, NOW))
    lease = timedelta(seconds=30)
    claimed = db.run(
        lambda cur: claim_task_txn(cur, queue=run_id, worker="w", now=NOW, lease=lease)
    )
    assert claimed is not None
    return claimed


@pytest.mark.parametrize("report", [lock_leased_task_with_run_txn, take_leased_task_with_run_txn])
def test_a_report_racing_the_close_of_its_run_gets_lease_lost_not_a_deadlock(
    db: Database, database_url: str, report: Report
) -> None:
    run_id = _new_run(db)
    closing = _leased(db, run_id, TaskKind.WORKFLOW, None)
    other = _leased(db, run_id, TaskKind.ACTIVITY, 0)
    outcome: list[object] = []
    with psycopg.connect(database_url) as a, psycopg.connect(database_url) as b:
        lock_leased_task_with_run_txn(a.cursor(), closing.task_id, closing.fencing)

        def report_other() -> None:
            try:
                report(b.cursor(), other.task_id, other.fencing)
                outcome.append("reported")
            except (LeaseLost, psycopg.Error) as exc:
                outcome.append(exc)
            b.rollback()

        racing = threading.Thread(target=report_other)
        racing.start()
        time.sleep(0.5)  # the report now waits for the run row a holds
        delete_run_tasks_txn(a.cursor(), run_id)  # a deadlock if the report held its task
        a.commit()
        racing.join(timeout=30)
    [result] = outcome
    assert isinstance(result, LeaseLost), result


def test_a_lease_sweep_skips_a_task_whose_run_is_busy_instead_of_waiting_for_it(
    db: Database, database_url: str
) -> None:
    from amber.runtime.model._clock import ManualClock
    from amber.runtime.model._settings import EngineSettings
    from amber.runtime.services._lifecycle import Lifecycle
    from amber.runtime.services._tasks import TaskService

    run_id = _new_run(db)
    lost = _leased(db, run_id, TaskKind.ACTIVITY, 0)
    clock = ManualClock(NOW)
    clock.advance(timedelta(minutes=5))  # the lease ran out long ago
    tasks = TaskService(db, Lifecycle(clock, EngineSettings()), notifier=None)
    swept: list[int] = []
    with psycopg.connect(database_url) as closing:
        closing.execute("SELECT 1 FROM amber_runs WHERE run_id = %s FOR UPDATE", (run_id,))
        sweeping = threading.Thread(target=lambda: swept.append(tasks.sweep_expired_leases()))
        sweeping.start()
        sweeping.join(timeout=30)  # waiting for the run here would be the first half of a deadlock
        assert not sweeping.is_alive() and swept == [0]
    assert tasks.sweep_expired_leases() == 1  # the run is free again
    [retry] = db.run(lambda cur: run_tasks_txn(cur, run_id))
    assert retry.task_id == lost.task_id and retry.state is TaskState.PENDING
