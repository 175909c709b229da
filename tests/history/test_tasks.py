"""The task queue's contract on a real PostgreSQL: leases with fencing tokens, SKIP LOCKED claims,
visibility times, one pending activation per run, requeueing and expired leases.

Time is always passed in explicitly; nothing here waits for the wall clock.
"""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from psycopg import errors as pgerrors

from amber.history import (
    Cursor,
    Database,
    DuplicateRow,
    LeaseLost,
    NewTask,
    Requeue,
    Task,
    TaskKind,
    TaskState,
    claim_task_txn,
    enqueue_task_txn,
    expired_leases_txn,
    extend_lease_txn,
    lock_leased_task_txn,
    next_visible_txn,
    requeue_task_txn,
    run_tasks_txn,
)

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)
QUEUE = "q"


def _task(
    run_id: str | None = None,
    *,
    kind: TaskKind = TaskKind.WORKFLOW,
    visible_at: datetime = NOW,
    cmd: int | None = None,
    queue: str = QUEUE,
) -> NewTask:
    return NewTask(
        run_id=run_id or str(uuid.uuid4()),
        kind=kind,
        queue=queue,
        name="orders" if kind is TaskKind.WORKFLOW else "charge_payment",
        digest="ab" * 32,
        visible_at=visible_at,
        max_attempts=3,
        cmd=cmd,
        args=None if kind is TaskKind.WORKFLOW else b"\x81\xa1x\x01",
    )


def _enqueue(db: Database, task: NewTask, now: datetime = NOW) -> bool:
    return db.run(lambda cur: enqueue_task_txn(cur, task, now))


def _claim(
    db: Database, worker: str = "w1", now: datetime = NOW, lease: timedelta = LEASE
) -> Task | None:
    return db.run(lambda cur: claim_task_txn(cur, queue=QUEUE, worker=worker, now=now, lease=lease))


def _claimed(db: Database, worker: str = "w1", now: datetime = NOW) -> Task:
    task = _claim(db, worker, now)
    assert task is not None
    return task


def _tasks(db: Database, run_id: str) -> list[Task]:
    return db.run(lambda cur: run_tasks_txn(cur, run_id))


def _requeue(db: Database, task: Task, requeue: Requeue) -> None:
    db.run(lambda cur: requeue_task_txn(cur, task, requeue))


def test_a_claim_leases_the_task_and_bumps_its_fencing_token(db: Database) -> None:
    new = _task(kind=TaskKind.ACTIVITY, cmd=4)
    assert _enqueue(db, new)

    task = _claimed(db, "w1")

    assert (task.run_id, task.kind, task.cmd, task.args) == (new.run_id, new.kind, 4, new.args)
    assert task.state is TaskState.LEASED
    assert task.lease_owner == "w1"
    assert task.lease_expires_at == NOW + LEASE
    assert task.fencing == 1
    assert (task.attempt, task.max_attempts, task.scheduled_at) == (1, 3, NOW)
    assert _tasks(db, new.run_id) == [task]

    _requeue(db, task, Requeue(visible_at=NOW, failure="worker lost"))
    again = _claimed(db, "w2", NOW + timedelta(minutes=1))
    assert again.task_id == task.task_id
    assert (again.fencing, again.lease_owner) == (2, "w2")
    assert again.lease_expires_at == NOW + timedelta(minutes=1) + LEASE


def test_a_claimed_task_is_invisible_to_another_claimer(db: Database) -> None:
    _enqueue(db, _task())
    first = _claimed(db, "w1")

    assert _claim(db, "w2") is None
    assert _claim(db, "w2", NOW + LEASE + timedelta(hours=1)) is None  # even past its lease
    assert _claim(db, "w1") is None
    assert _tasks(db, first.run_id)[0].lease_owner == "w1"


def test_claims_are_per_queue_and_oldest_visible_first(db: Database) -> None:
    later = _task(visible_at=NOW - timedelta(seconds=1))
    earlier = _task(visible_at=NOW - timedelta(seconds=5))
    elsewhere = _task(visible_at=NOW - timedelta(seconds=9), queue="other")
    for task in (later, earlier, elsewhere):
        assert _enqueue(db, task)

    assert _claimed(db).run_id == earlier.run_id
    assert _claimed(db).run_id == later.run_id
    assert _claim(db) is None


def test_concurrent_claimers_skip_each_others_locked_rows(db: Database) -> None:
    enqueued = {str(uuid.uuid4()), str(uuid.uuid4())}
    for run_id in enqueued:
        _enqueue(db, _task(run_id))
    barrier = threading.Barrier(2, timeout=10)
    claimed: list[Task | None] = [None, None]

    def claimer(index: int) -> None:
        def txn(cur: Cursor) -> Task | None:
            task = claim_task_txn(cur, queue=QUEUE, worker=f"w{index}", now=NOW, lease=LEASE)
            # Both claims hold their row locks here at once: a claimer that blocked on the
            # other's row instead of skipping it would never reach the barrier.
            barrier.wait()
            return task

        claimed[index] = db.run(txn)

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)

    assert not any(t.is_alive() for t in threads)
    assert all(task is not None for task in claimed), claimed
    assert {task.run_id for task in claimed if task} == enqueued
    assert {task.lease_owner for task in claimed if task} == {"w0", "w1"}


def test_a_task_becomes_claimable_at_its_visible_time(db: Database) -> None:
    at = NOW + timedelta(minutes=1)
    new = _task(visible_at=at)
    _enqueue(db, new)

    assert db.run(lambda cur: next_visible_txn(cur, QUEUE)) == at
    assert _claim(db, now=NOW) is None
    assert _claim(db, now=at - timedelta(milliseconds=1)) is None
    task = _claimed(db, now=at)
    assert task.run_id == new.run_id
    assert db.run(lambda cur: next_visible_txn(cur, QUEUE)) is None


def test_locking_with_a_stale_fencing_token_is_lease_lost(db: Database) -> None:
    _enqueue(db, _task())
    first = _claimed(db, "w1")
    assert db.run(lambda cur: lock_leased_task_txn(cur, first.task_id, 1)) == first

    _requeue(db, first, Requeue(visible_at=NOW, failure="lease expired"))
    with pytest.raises(LeaseLost) as pending:  # back in the queue: nobody holds it
        db.run(lambda cur: lock_leased_task_txn(cur, first.task_id, 1))
    assert (pending.value.task_id, pending.value.fencing) == (first.task_id, 1)

    second = _claimed(db, "w2")
    with pytest.raises(LeaseLost):
        db.run(lambda cur: lock_leased_task_txn(cur, first.task_id, first.fencing))
    assert db.run(lambda cur: lock_leased_task_txn(cur, second.task_id, 2)).lease_owner == "w2"


def test_locking_a_finished_task_is_lease_lost(db: Database) -> None:
    _enqueue(db, _task())
    task = _claimed(db)
    db.run(lambda cur: cur.execute("DELETE FROM amber_tasks WHERE task_id = %s", (task.task_id,)))

    with pytest.raises(LeaseLost):
        db.run(lambda cur: lock_leased_task_txn(cur, task.task_id, task.fencing))


def test_extending_a_lease_needs_the_current_fencing_token(db: Database) -> None:
    _enqueue(db, _task())
    first = _claimed(db, "w1")
    until = NOW + timedelta(minutes=5)

    db.run(lambda cur: extend_lease_txn(cur, first.task_id, first.fencing, until))
    assert _tasks(db, first.run_id)[0].lease_expires_at == until

    _requeue(db, first, Requeue(visible_at=NOW, failure="lease expired"))
    with pytest.raises(LeaseLost):  # pending: no lease to extend
        db.run(lambda cur: extend_lease_txn(cur, first.task_id, first.fencing, until))
    second = _claimed(db, "w2")
    with pytest.raises(LeaseLost) as stale:
        db.run(lambda cur: extend_lease_txn(cur, first.task_id, first.fencing, NOW + LEASE * 9))
    assert (stale.value.task_id, stale.value.fencing) == (first.task_id, 1)
    assert _tasks(db, first.run_id)[0].lease_expires_at == second.lease_expires_at


def test_only_one_workflow_task_is_pending_per_run(db: Database) -> None:
    run_id = str(uuid.uuid4())

    assert _enqueue(db, _task(run_id))
    assert not _enqueue(db, _task(run_id, visible_at=NOW + timedelta(hours=1)))
    assert [t.visible_at for t in _tasks(db, run_id)] == [NOW]
    assert _enqueue(db, _task())  # another run is independent

    _claimed(db)  # the run's activation is now running: a new one may wait behind it
    assert _enqueue(db, _task(run_id))
    assert not _enqueue(db, _task(run_id))
    assert sorted(t.state for t in _tasks(db, run_id)) == [TaskState.LEASED, TaskState.PENDING]


def test_activity_tasks_are_unique_per_command(db: Database) -> None:
    run_id = str(uuid.uuid4())
    assert _enqueue(db, _task(run_id, kind=TaskKind.ACTIVITY, cmd=0))
    assert _enqueue(db, _task(run_id, kind=TaskKind.ACTIVITY, cmd=1))

    with pytest.raises(DuplicateRow) as raised:
        _enqueue(db, _task(run_id, kind=TaskKind.ACTIVITY, cmd=1))
    assert isinstance(raised.value.__cause__, pgerrors.UniqueViolation)
    assert [t.cmd for t in _tasks(db, run_id)] == [0, 1]


def test_requeueing_a_workflow_task_merges_into_the_pending_one(db: Database) -> None:
    run_id = str(uuid.uuid4())
    _enqueue(db, _task(run_id))
    leased = _claimed(db)
    pending_at = NOW + timedelta(seconds=2)
    assert _enqueue(db, _task(run_id, visible_at=pending_at))

    _requeue(db, leased, Requeue(visible_at=NOW + timedelta(seconds=10), failure="trap"))

    [merged] = _tasks(db, run_id)
    assert merged.task_id != leased.task_id
    assert merged.state is TaskState.PENDING
    assert merged.attempt == 2
    assert merged.consecutive_failures == 1
    assert merged.last_failure == "trap"
    assert merged.visible_at == NOW + timedelta(seconds=10)  # the later of the two


def test_requeueing_a_workflow_task_keeps_a_later_pending_visibility(db: Database) -> None:
    run_id = str(uuid.uuid4())
    _enqueue(db, _task(run_id))
    leased = _claimed(db)
    pending_at = NOW + timedelta(minutes=5)
    _enqueue(db, _task(run_id, visible_at=pending_at))

    _requeue(db, leased, Requeue(visible_at=NOW, failure="trap", next_attempt=False))

    [merged] = _tasks(db, run_id)
    assert (merged.visible_at, merged.attempt) == (pending_at, 1)


def test_requeueing_without_a_pending_task_returns_it_to_the_queue(db: Database) -> None:
    new = _task(kind=TaskKind.ACTIVITY, cmd=0)
    _enqueue(db, new)
    leased = _claimed(db)
    retry_at = NOW + timedelta(seconds=4)

    _requeue(db, leased, Requeue(visible_at=retry_at, failure="GatewayTimeout"))

    [task] = _tasks(db, new.run_id)
    assert task.task_id == leased.task_id
    assert task.state is TaskState.PENDING
    assert (task.lease_owner, task.lease_expires_at) == (None, None)
    assert (task.attempt, task.consecutive_failures) == (2, 1)
    assert (task.visible_at, task.last_failure) == (retry_at, "GatewayTimeout")
    assert task.fencing == leased.fencing  # the next claim bumps it
    assert _claim(db, now=NOW) is None
    assert _claimed(db, now=retry_at).fencing == leased.fencing + 1

    current = _tasks(db, new.run_id)[0]
    _requeue(db, current, Requeue(visible_at=NOW, failure="evicted", next_attempt=False))
    assert _tasks(db, new.run_id)[0].attempt == 2


def test_expired_leases_are_only_those_past_their_expiry(db: Database) -> None:
    for _ in range(4):
        _enqueue(db, _task())
    short = _claim(db, "w", NOW, timedelta(seconds=10))
    shorter = _claim(db, "w", NOW, timedelta(seconds=5))
    exact = _claim(db, "w", NOW, timedelta(seconds=30))
    assert short and shorter and exact  # the fourth task stays pending

    def expired(now: datetime, limit: int = 100) -> list[int]:
        return [t.task_id for t in db.run(lambda cur: expired_leases_txn(cur, now, limit=limit))]

    assert expired(NOW) == []
    assert expired(NOW + timedelta(seconds=7)) == [shorter.task_id]
    assert expired(NOW + timedelta(seconds=30)) == [shorter.task_id, short.task_id]
    everything = [shorter.task_id, short.task_id, exact.task_id]
    assert expired(NOW + timedelta(seconds=31)) == everything
    assert expired(NOW + timedelta(hours=1), limit=1) == everything[:1]


def test_expired_leases_skip_a_task_whose_worker_is_reporting(db: Database) -> None:
    _enqueue(db, _task())
    task = _claimed(db)
    locked = threading.Event()
    release = threading.Event()

    def reporting_worker() -> None:
        def txn(cur: Cursor) -> None:
            lock_leased_task_txn(cur, task.task_id, task.fencing)
            locked.set()
            release.wait(timeout=10)

        db.run(txn)

    worker = threading.Thread(target=reporting_worker)
    worker.start()
    try:
        assert locked.wait(timeout=10)
        late = NOW + LEASE * 2
        assert db.run(lambda cur: expired_leases_txn(cur, late)) == []  # skipped, not waited on
    finally:
        release.set()
        worker.join(timeout=10)
    assert [t.task_id for t in db.run(lambda cur: expired_leases_txn(cur, late))] == [task.task_id]
