"""A task together with its run, in one statement: claiming it, and locking it for its outcome
(both are on every task's path: one round trip saved each time)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ._runs import _COLUMNS as _RUN_COLUMNS
from ._runs import Run, _run
from ._tasks import (
    CLAIM_RUN_UPDATE,
    CLAIM_UPDATE,
    TASK_COLUMNS,
    Task,
    _task,
    claim_params,
    lock_leased_task_txn,
)

if TYPE_CHECKING:
    from ._database import Cursor

_TASK_N = len(TASK_COLUMNS.split(","))
_SELECT = ", ".join(
    [f"c.{c.strip()}" for c in TASK_COLUMNS.split(",")]
    + [f"r.{c.strip()}" for c in _RUN_COLUMNS.split(",")]
)


def claim_task_with_run_txn(
    cur: Cursor,
    *,
    queue: str,
    worker: str,
    now: datetime,
    lease: timedelta,
    pool: str = "main",
    run_id: str | None = None,
) -> tuple[Task, Run | None] | None:
    """`claim_task_txn` (only among the tasks of run `run_id`, when given), and the claimed
    task's run as it stands (not locked; None if the run no longer exists)."""
    params = claim_params(queue=queue, worker=worker, now=now, lease=lease, pool=pool)
    params["run"] = run_id
    update = CLAIM_UPDATE if run_id is None else CLAIM_RUN_UPDATE
    cur.execute(
        f"WITH c AS ({update} RETURNING *) SELECT {_SELECT}"
        " FROM c LEFT JOIN amber_runs r ON r.run_id = c.run_id",
        params,
    )
    row = cur.fetchone()
    if row is None:
        return None
    task = _task(row[:_TASK_N])
    run_row = row[_TASK_N:]
    return task, (None if run_row[0] is None else _run(run_row))


def lock_leased_task_with_run_txn(
    cur: Cursor, task_id: int, fencing: int
) -> tuple[Task, Run | None]:
    """`lock_leased_task_txn`, and the task's run locked too (FOR UPDATE; None if the run no
    longer exists). Raises `LeaseLost` unless the caller holds the lease."""
    # The run is named first: its row is locked before the task's, the order closing a run
    # takes (run, then its tasks), so the two cannot deadlock.
    cur.execute(
        f"SELECT {_SELECT} FROM amber_runs r JOIN amber_tasks c ON c.run_id = r.run_id"
        " WHERE c.task_id = %s AND c.fencing = %s AND c.state = 'leased' FOR UPDATE",
        (task_id, fencing),
    )
    row = cur.fetchone()
    if row is None:  # the lease is lost, or the run is gone: tell which
        return lock_leased_task_txn(cur, task_id, fencing), None
    return _task(row[:_TASK_N]), _run(row[_TASK_N:])


def take_leased_task_with_run_txn(
    cur: Cursor, task_id: int, fencing: int
) -> tuple[Task, Run | None]:
    """Delete a task the caller holds (its outcome is final), returning it with its run locked
    (FOR UPDATE; None if the run no longer exists). Raises `LeaseLost` unless the caller holds
    the lease, and then deletes nothing."""
    taken = take_leased_task_txn(cur, task_id, fencing)
    return taken.task, taken.run


@dataclass(frozen=True, slots=True, kw_only=True)
class Taken:
    """A finished task, deleted, with its run locked."""

    task: Task
    run: Run | None
    """None if the run no longer exists."""
    others_due: bool
    """The run has a task other than an activity (a workflow, query or check task)."""


def take_leased_task_txn(cur: Cursor, task_id: int, fencing: int) -> Taken:
    """`take_leased_task_with_run_txn`, also telling whether the run has other work than
    activities queued (in the same statement)."""
    # The run row is locked (the materialised CTE the DELETE joins) before the task's, the
    # order closing a run takes (run, then its tasks), so the two cannot deadlock.
    cur.execute(
        "WITH r AS MATERIALIZED (SELECT * FROM amber_runs WHERE run_id ="
        "   (SELECT run_id FROM amber_tasks WHERE task_id = %(task)s) FOR UPDATE),"
        " c AS (DELETE FROM amber_tasks t USING r WHERE t.task_id = %(task)s"
        "   AND t.fencing = %(fencing)s AND t.state = 'leased' AND t.run_id = r.run_id"
        "   RETURNING t.*)"
        f" SELECT {_SELECT}, EXISTS (SELECT 1 FROM amber_tasks o WHERE o.run_id = r.run_id"
        "   AND o.kind <> 'activity') FROM c, r",
        {"task": task_id, "fencing": fencing},
    )
    row = cur.fetchone()
    if row is None:  # the lease is lost (raises), or the run is gone: the task goes alone
        task = lock_leased_task_txn(cur, task_id, fencing)
        cur.execute("DELETE FROM amber_tasks WHERE task_id = %s", (task_id,))
        return Taken(task=task, run=None, others_due=False)
    return Taken(task=_task(row[:_TASK_N]), run=_run(row[_TASK_N:-1]), others_due=bool(row[-1]))
