"""The task queue: work items a worker leases, runs and reports under a fencing token.

A task row lives from scheduling until its outcome is recorded, then it is deleted in the same
transaction as the events that record the outcome — so a task is never lost between "done" and
"recorded". Each lease bumps `fencing`; only the holder of the current token can report.
At most one *pending* workflow task exists per run (a partial unique index): "this run needs an
activation" is a fact, not a count.

Activity timeouts live on the row: `close_by` (schedule-to-close, fixed at scheduling),
`start_by` (schedule-to-start, while pending), `attempt_deadline` (start-to-close, while
leased), `heartbeat_by` (heartbeat timeout, while leased), and `timeout_at`, the earliest of
those that applies to the row's current state (PostgreSQL's LEAST ignores NULLs), which is what
the sweeper's index looks at.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ._errors import LeaseLost

if TYPE_CHECKING:
    from ._database import Cursor


class TaskKind(enum.StrEnum):
    WORKFLOW = "workflow"
    ACTIVITY = "activity"
    QUERY = "query"
    CHECK = "check"
    """Replay a run on a candidate version and report whether it is compatible."""


class TaskState(enum.StrEnum):
    PENDING = "pending"
    LEASED = "leased"


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """A task as stored."""

    task_id: int
    run_id: str
    kind: TaskKind
    queue: str
    cmd: int | None
    """For an activity: the index of the workflow command it serves."""
    name: str
    """Workflow type, activity name or query name."""
    digest: str
    """The module version to run it on."""
    args: bytes | None
    state: TaskState
    visible_at: datetime
    lease_owner: str | None
    lease_expires_at: datetime | None
    fencing: int
    attempt: int
    max_attempts: int
    consecutive_failures: int
    last_failure: str | None
    scheduled_at: datetime
    options: bytes | None = None
    """The activity's options as scheduled (msgpack), for its retry policy."""
    start_by: datetime | None = None
    close_by: datetime | None = None
    attempt_deadline: datetime | None = None
    heartbeat_by: datetime | None = None
    heartbeat_details: bytes | None = None
    cancel_requested: bool = False
    claimed_seq: int | None = None
    """The history position the current lease's activation was handed."""
    upgrade_offer: str | None = None
    """The automatic upgrade version the current lease was offered (workflow tasks)."""
    pool: str = "main"
    """main (healthy), surgical (poisoned: only the surgical pool leases it) or held (its run
    is suspended: nobody does)."""
    crash: Crash | None = None
    """The consecutive crashes of this task at one step with one fingerprint."""
    poisoned_at: datetime | None = None
    poison_reason: str | None = None
    crashed_attempts: int = 0
    """Attempts that ended in a crash: they do not count against `max_attempts`."""

    @property
    def counted_attempts(self) -> int:
        """The attempt's number as `max_attempts` counts it: `attempt` less the attempts that
        crashed. Show this beside the limit, not `attempt`: a task that crashed three times on
        its first try is at attempt 4, but at 1 of its retry budget's 1."""
        return self.attempt - self.crashed_attempts

    @property
    def activity_cmd(self) -> int:
        """The command that scheduled this activity task (only activity tasks have one)."""
        if self.cmd is None:
            raise ValueError(f"task {self.task_id} ({self.kind.value}) is not an activity task")
        return self.cmd


@dataclass(frozen=True, slots=True, kw_only=True)
class Crash:
    """Consecutive crashes of a task: the step and fingerprint they share, and how many."""

    step: int | None
    fingerprint: str
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTask:
    """A task about to be enqueued."""

    run_id: str
    kind: TaskKind
    queue: str
    name: str
    digest: str
    visible_at: datetime
    max_attempts: int
    cmd: int | None = None
    args: bytes | None = None
    options: bytes | None = None
    start_to_close_ms: int | None = None
    schedule_to_start_ms: int | None = None
    heartbeat_ms: int | None = None
    close_by: datetime | None = None


TASK_COLUMNS = (
    "task_id, run_id::text, kind, queue, cmd, name, digest, args, state, visible_at, lease_owner,"
    " lease_expires_at, fencing, attempt, max_attempts, consecutive_failures, last_failure,"
    " scheduled_at, options, start_by, close_by, attempt_deadline, heartbeat_by,"
    " heartbeat_details, cancel_requested, claimed_seq, upgrade_offer, pool, crash_step,"
    " crash_fingerprint, crash_count, poisoned_at, poison_reason, crashed_attempts"
)


def _task(row: tuple[Any, ...]) -> Task:
    (task_id, run_id, kind, queue, cmd, name, digest, args, state, visible_at, lease_owner,
     lease_expires_at, fencing, attempt, max_attempts, consecutive_failures, last_failure,
     scheduled_at, options, start_by, close_by, attempt_deadline, heartbeat_by,
     heartbeat_details, cancel_requested, claimed_seq, upgrade_offer, pool, crash_step,
     crash_fingerprint, crash_count, poisoned_at, poison_reason,
     crashed_attempts) = row  # fmt: skip
    return Task(
        task_id=task_id,
        run_id=run_id,
        kind=TaskKind(kind),
        queue=queue,
        cmd=cmd,
        name=name,
        digest=digest,
        args=None if args is None else bytes(args),
        state=TaskState(state),
        visible_at=visible_at,
        lease_owner=lease_owner,
        lease_expires_at=lease_expires_at,
        fencing=fencing,
        attempt=attempt,
        max_attempts=max_attempts,
        consecutive_failures=consecutive_failures,
        last_failure=last_failure,
        scheduled_at=scheduled_at,
        options=None if options is None else bytes(options),
        start_by=start_by,
        close_by=close_by,
        attempt_deadline=attempt_deadline,
        heartbeat_by=heartbeat_by,
        heartbeat_details=None if heartbeat_details is None else bytes(heartbeat_details),
        cancel_requested=cancel_requested,
        claimed_seq=claimed_seq,
        upgrade_offer=upgrade_offer,
        pool=pool,
        crash=None
        if crash_fingerprint is None
        else Crash(step=crash_step, fingerprint=crash_fingerprint, count=crash_count),
        poisoned_at=poisoned_at,
        poison_reason=poison_reason,
        crashed_attempts=crashed_attempts,
    )


_MS = "* interval '1 millisecond'"


def enqueue_task_txn(
    cur: Cursor, task: NewTask, now: datetime, *, notify: bool = False
) -> int | None:
    """Insert a pending task and return its id. For a workflow task that is already pending,
    does nothing and returns None.

    With `notify`, the same statement also wakes the queue's listeners on commit (as
    `notify_txn(cur, TASKS_CHANNEL, task.queue)`, one round trip fewer), pending task or not.
    """
    conflict = (
        " ON CONFLICT (run_id) WHERE kind = 'workflow' AND state = 'pending' DO NOTHING"
        if task.kind is TaskKind.WORKFLOW
        else ""
    )
    start_by = (
        None
        if task.schedule_to_start_ms is None
        else task.visible_at + timedelta(milliseconds=task.schedule_to_start_ms)
    )
    # A suspended run's workflow and activity tasks are held: they wait for an operator.
    held = task.kind in (TaskKind.WORKFLOW, TaskKind.ACTIVITY)
    pool = (
        "COALESCE((SELECT 'held' FROM amber_runs WHERE run_id = %s::uuid"
        " AND suspended_at IS NOT NULL), 'main')"
        if held
        else "'main'"
    )
    insert = (
        "INSERT INTO amber_tasks (run_id, kind, queue, cmd, name, digest, args, state, visible_at,"
        " max_attempts, scheduled_at, options, start_to_close_ms, schedule_to_start_ms,"
        " heartbeat_ms, start_by, close_by, timeout_at, pool)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, 'pending', %s, %s, %s, %s, %s, %s, %s, %s, %s,"
        f" LEAST(%s::timestamptz, %s::timestamptz), {pool})" + conflict + " RETURNING task_id"
    )
    if notify:  # a data-modifying CTE runs whether or not its row is used
        insert = f"WITH i AS ({insert}) SELECT (SELECT task_id FROM i), pg_notify(%s, %s)"
    cur.execute(
        insert,
        (
            task.run_id,
            task.kind.value,
            task.queue,
            task.cmd,
            task.name,
            task.digest,
            task.args,
            task.visible_at,
            task.max_attempts,
            now,
            task.options,
            task.start_to_close_ms,
            task.schedule_to_start_ms,
            task.heartbeat_ms,
            start_by,
            task.close_by,
            start_by,
            task.close_by,
            *((task.run_id,) if held else ()),
            *((TASKS_CHANNEL, task.queue) if notify else ()),
        ),
    )
    row = cur.fetchone()
    return None if row is None or row[0] is None else int(row[0])


def claim_task_txn(
    cur: Cursor, *, queue: str, worker: str, now: datetime, lease: timedelta, pool: str = "main"
) -> Task | None:
    """Lease the oldest visible pending task of `queue` in `pool` (main or surgical), bumping
    its fencing token. Held tasks (suspended runs) are never leased.

    Starts the attempt's start-to-close and heartbeat clocks.
    """
    cur.execute(
        f"{CLAIM_UPDATE} RETURNING {TASK_COLUMNS}",
        claim_params(queue=queue, worker=worker, now=now, lease=lease, pool=pool),
    )
    row = cur.fetchone()
    return None if row is None else _task(row)


CLAIM_UPDATE = (
    "UPDATE amber_tasks SET state = 'leased', lease_owner = %(worker)s,"
    " lease_expires_at = %(until)s, fencing = fencing + 1, start_by = NULL,"
    f" attempt_deadline = %(now)s + start_to_close_ms {_MS},"
    f" heartbeat_by = %(now)s + heartbeat_ms {_MS},"
    f" timeout_at = LEAST(close_by, %(now)s + start_to_close_ms {_MS},"
    f"   %(now)s + heartbeat_ms {_MS}),"
    # A replaying task reads the history up to the run's head as of its claim (and never an
    # upgrade offer of an earlier claim): `note_claim_txn` only when it gets an offer.
    " claimed_seq = CASE WHEN kind = 'activity' THEN claimed_seq"
    "   ELSE (SELECT r.last_seq FROM amber_runs r WHERE r.run_id = amber_tasks.run_id) END,"
    " upgrade_offer = CASE WHEN kind = 'activity' THEN upgrade_offer END"
    " WHERE task_id = (SELECT task_id FROM amber_tasks"
    "   WHERE queue = %(queue)s AND pool = %(pool)s AND state = 'pending'"
    "   AND visible_at <= %(now)s ORDER BY visible_at LIMIT 1 FOR UPDATE SKIP LOCKED)"
)
"""Lease the oldest visible pending task of a queue and pool (parameters: `claim_params`)."""

CLAIM_RUN_UPDATE = CLAIM_UPDATE.replace(
    "AND state = 'pending'", "AND run_id = %(run)s AND state = 'pending'"
)
"""`CLAIM_UPDATE` among one run's tasks (parameter `run` as well)."""


def claim_params(
    *, queue: str, worker: str, now: datetime, lease: timedelta, pool: str
) -> dict[str, Any]:
    if pool not in ("main", "surgical"):
        raise ValueError(f"no such pool {pool!r}")
    return {"worker": worker, "until": now + lease, "now": now, "queue": queue, "pool": pool}


def note_claim_txn(
    cur: Cursor, task_id: int, *, claimed_seq: int, upgrade_offer: str | None
) -> None:
    """Record what a just-leased task's worker was handed (see `Task.claimed_seq`)."""
    cur.execute(
        "UPDATE amber_tasks SET claimed_seq = %s, upgrade_offer = %s WHERE task_id = %s",
        (claimed_seq, upgrade_offer, task_id),
    )


def lock_leased_task_txn(cur: Cursor, task_id: int, fencing: int) -> Task:
    """Lock a task the caller claims to hold. Raises `LeaseLost` unless it holds the lease."""
    cur.execute(
        f"SELECT {TASK_COLUMNS} FROM amber_tasks"
        " WHERE task_id = %s AND fencing = %s AND state = 'leased' FOR UPDATE",
        (task_id, fencing),
    )
    row = cur.fetchone()
    if row is None:
        raise LeaseLost(task_id, fencing)
    return _task(row)


def extend_lease_txn(
    cur: Cursor,
    task_id: int,
    fencing: int,
    until: datetime,
    *,
    details: bytes | None = None,
    now: datetime | None = None,
    holder: str | None = None,
) -> bool:
    """Push a held lease's expiry to `until`; with `details`, also record an activity heartbeat
    (restarting its heartbeat timeout). Returns whether cancellation was requested.

    Raises `LeaseLost` unless the caller holds the lease (and, with `holder`, is its owner).
    """
    held = {"task": task_id, "fencing": fencing, "holder": holder}
    where = (
        " WHERE task_id = %(task)s AND fencing = %(fencing)s AND state = 'leased'"
        " AND (%(holder)s::text IS NULL OR lease_owner = %(holder)s)"
        " RETURNING cancel_requested"
    )
    if details is None:
        cur.execute(
            "UPDATE amber_tasks SET lease_expires_at = %(until)s" + where, {**held, "until": until}
        )
    else:
        cur.execute(
            "UPDATE amber_tasks SET lease_expires_at = %(until)s, heartbeat_details = %(details)s,"
            f" heartbeat_by = %(now)s + heartbeat_ms {_MS},"
            f" timeout_at = LEAST(close_by, attempt_deadline, %(now)s + heartbeat_ms {_MS})"
            + where,
            {**held, "until": until, "details": details, "now": now},
        )
    row = cur.fetchone()
    if row is None:
        raise LeaseLost(task_id, fencing)
    return bool(row[0])


def delete_pending_task_txn(cur: Cursor, task_id: int) -> bool:
    """Delete a task only if no worker holds it (compare-and-set); False if one does."""
    cur.execute("DELETE FROM amber_tasks WHERE task_id = %s AND state = 'pending'", (task_id,))
    return cur.rowcount == 1


def delete_task_txn(cur: Cursor, task_id: int) -> None:
    cur.execute("DELETE FROM amber_tasks WHERE task_id = %s", (task_id,))


def delete_run_tasks_txn(cur: Cursor, run_id: str) -> int:
    """Drop every task of a run (it closed); late reports then get `LeaseLost`."""
    cur.execute(
        "DELETE FROM amber_tasks WHERE run_id = %s AND kind IN ('workflow', 'activity')", (run_id,)
    )
    return cur.rowcount


@dataclass(frozen=True, slots=True, kw_only=True)
class Requeue:
    """Put a leased task back in its queue after a failed attempt."""

    visible_at: datetime
    failure: str
    """Short description of why, kept on the row for operators."""
    next_attempt: bool = True
    """Whether the failure consumed an attempt (an activity retry) or not."""
    pool: str = "main"
    """The pool the task returns to (surgical once poisoned, held when its run is suspended)."""
    crash: Crash | None = None
    """The task's crash counter after this failure (None: it was not a crash)."""
    poisoned_at: datetime | None = None
    poison_reason: str | None = None
    crashed: bool = False
    """The failed attempt was a crash (counted apart from the retry budget)."""


_HELD_IF_SUSPENDED = (
    "CASE WHEN EXISTS (SELECT 1 FROM amber_runs r WHERE r.run_id = amber_tasks.run_id"
    " AND r.suspended_at IS NOT NULL) THEN 'held' ELSE {pool} END"
)
"""A suspended run's tasks stay held whatever happens to them (a task that was leased when its
run was suspended is held as soon as it returns)."""

_CRASH_SET = (
    "pool = "
    + _HELD_IF_SUSPENDED.format(pool="%(pool)s")
    + ", crash_step = %(crash_step)s, crash_fingerprint = %(crash_fingerprint)s,"
    " crash_count = %(crash_count)s, poisoned_at = %(poisoned_at)s,"
    " poison_reason = %(poison_reason)s,"
    " crashed_attempts = crashed_attempts + %(crashed)s"
)


def _crash_params(requeue: Requeue) -> dict[str, Any]:
    crash = requeue.crash
    return {
        "pool": requeue.pool,
        "crash_step": None if crash is None else crash.step,
        "crash_fingerprint": None if crash is None else crash.fingerprint,
        "crash_count": 0 if crash is None else crash.count,
        "poisoned_at": requeue.poisoned_at,
        "poison_reason": requeue.poison_reason,
        "crashed": 1 if requeue.crashed else 0,
    }


def requeue_task_txn(cur: Cursor, task: Task, requeue: Requeue) -> None:
    """Return a leased task to pending. A workflow task merges into a pending one if present.

    The caller must hold the run row's lock (as every engine transaction does), or a concurrent
    enqueue of the run's workflow task could collide with the one made pending here.
    """
    bump = 1 if requeue.next_attempt else 0
    if task.kind is TaskKind.WORKFLOW:
        cur.execute(
            "UPDATE amber_tasks SET attempt = GREATEST(attempt, %(attempt)s),"
            " consecutive_failures = %(failures)s, last_failure = %(failure)s,"
            " visible_at = GREATEST(visible_at, %(visible)s), "
            + _CRASH_SET
            + " WHERE run_id = %(run)s AND kind = 'workflow' AND state = 'pending'",
            {
                "attempt": task.attempt + bump,
                "failures": task.consecutive_failures + 1,
                "failure": requeue.failure,
                "visible": requeue.visible_at,
                "run": task.run_id,
                **_crash_params(requeue),
            },
        )
        if cur.rowcount == 1:
            delete_task_txn(cur, task.task_id)
            return
    cur.execute(
        "UPDATE amber_tasks SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL,"
        " attempt = attempt + %(bump)s, consecutive_failures = consecutive_failures + 1,"
        " last_failure = %(failure)s, visible_at = %(visible)s,"
        f" start_by = %(visible)s + schedule_to_start_ms {_MS},"
        " attempt_deadline = NULL, heartbeat_by = NULL,"
        f" timeout_at = LEAST(close_by, %(visible)s + schedule_to_start_ms {_MS}), "
        + _CRASH_SET
        + " WHERE task_id = %(task)s",
        {
            **_crash_params(requeue),
            "bump": bump,
            "failure": requeue.failure,
            "visible": requeue.visible_at,
            "task": task.task_id,
        },
    )


def release_task_txn(cur: Cursor, task: Task, now: datetime) -> None:
    """Return a leased task to pending at once, counting nothing: its activation was sound but
    its report cannot be applied as it stands (an upgrade offer withdrawn meanwhile). A workflow
    task merges into a pending one if present."""
    cur.execute(
        "SELECT 1 FROM amber_tasks WHERE run_id = %s AND kind = %s AND state = 'pending'",
        (task.run_id, task.kind.value),
    )
    if task.kind is TaskKind.WORKFLOW and cur.fetchone() is not None:
        delete_task_txn(cur, task.task_id)
        return
    cur.execute(
        "UPDATE amber_tasks SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL,"
        " visible_at = %s, attempt_deadline = NULL, heartbeat_by = NULL, timeout_at = close_by,"
        " upgrade_offer = NULL, pool = "
        + _HELD_IF_SUSPENDED.format(pool="pool")
        + " WHERE task_id = %s",
        (now, task.task_id),
    )


def expired_leases_txn(cur: Cursor, now: datetime, *, limit: int = 100) -> list[Task]:
    """Lock leased tasks whose lease ran out (their worker is presumed lost)."""
    cur.execute(
        f"SELECT {TASK_COLUMNS} FROM amber_tasks WHERE state = 'leased' AND lease_expires_at < %s"
        " ORDER BY lease_expires_at LIMIT %s FOR UPDATE SKIP LOCKED",
        (now, limit),
    )
    return [_task(row) for row in cur.fetchall()]


def unheld_leases_txn(
    cur: Cursor, worker: str, holding: Sequence[int], *, leased_before: datetime, lease: timedelta
) -> list[Task]:
    """Lock the tasks leased to `worker` before `leased_before` (their lease has not been
    extended since) that it says it does not hold."""
    cur.execute(
        f"SELECT {TASK_COLUMNS} FROM amber_tasks WHERE state = 'leased' AND lease_owner = %s"
        " AND task_id <> ALL(%s) AND lease_expires_at < %s ORDER BY task_id LIMIT 100"
        " FOR UPDATE SKIP LOCKED",
        (worker, list(holding), leased_before + lease),
    )
    return [_task(row) for row in cur.fetchall()]


def leases_held_by_txn(cur: Cursor, worker: str, *, after: int = 0, limit: int = 100) -> list[Task]:
    """Lock the tasks leased to `worker` whose id is above `after` (page by page), whatever
    their lease's expiry."""
    cur.execute(
        f"SELECT {TASK_COLUMNS} FROM amber_tasks WHERE state = 'leased' AND lease_owner = %s"
        " AND task_id > %s ORDER BY task_id LIMIT %s FOR UPDATE SKIP LOCKED",
        (worker, after, limit),
    )
    return [_task(row) for row in cur.fetchall()]


def timed_out_tasks_txn(cur: Cursor, now: datetime, *, limit: int = 100) -> list[Task]:
    """Lock tasks one of whose activity timeouts has passed. A suspended run's held tasks are
    left alone: its time is frozen until an operator releases it (deadlines that passed
    meanwhile are enforced then)."""
    cur.execute(
        f"SELECT {TASK_COLUMNS} FROM amber_tasks WHERE timeout_at < %s AND pool <> 'held'"
        " ORDER BY timeout_at LIMIT %s FOR UPDATE SKIP LOCKED",
        (now, limit),
    )
    return [_task(row) for row in cur.fetchall()]


def defer_task_txn(cur: Cursor, task_id: int, until: datetime) -> None:
    """Push a task's lease expiry and timeouts to `until`: a sweep that failed on this row
    retries it later instead of failing on it every pass and starving the rows behind it."""
    cur.execute(
        "UPDATE amber_tasks SET"
        " lease_expires_at = CASE WHEN lease_expires_at IS NULL THEN NULL ELSE %(u)s END,"
        " timeout_at = CASE WHEN timeout_at IS NULL THEN NULL ELSE %(u)s END"
        " WHERE task_id = %(t)s",
        {"u": until, "t": task_id},
    )


def run_tasks_txn(cur: Cursor, run_id: str, *, for_update: bool = False) -> list[Task]:
    """The tasks of one run (for describing it; `for_update` locks them, so that no claim,
    report or sweep changes them until the transaction ends)."""
    lock = " FOR UPDATE" if for_update else ""
    cur.execute(
        f"SELECT {TASK_COLUMNS} FROM amber_tasks WHERE run_id = %s ORDER BY task_id{lock}",
        (run_id,),
    )
    return [_task(row) for row in cur.fetchall()]


def pending_activity_tasks_txn(cur: Cursor, run_id: str) -> list[Task]:
    """Activities of a run that no worker has started (cancellation drops them)."""
    cur.execute(
        f"SELECT {TASK_COLUMNS} FROM amber_tasks WHERE run_id = %s AND kind = 'activity'"
        " AND state = 'pending' ORDER BY cmd FOR UPDATE",
        (run_id,),
    )
    return [_task(row) for row in cur.fetchall()]


def request_activity_cancel_txn(cur: Cursor, run_id: str) -> int:
    """Flag a run's running activities; their workers learn of it through heartbeats."""
    cur.execute(
        "UPDATE amber_tasks SET cancel_requested = true"
        " WHERE run_id = %s AND kind = 'activity' AND state = 'leased'",
        (run_id,),
    )
    return cur.rowcount


def get_task_txn(cur: Cursor, task_id: int) -> Task | None:
    cur.execute(f"SELECT {TASK_COLUMNS} FROM amber_tasks WHERE task_id = %s", (task_id,))
    row = cur.fetchone()
    return None if row is None else _task(row)


def next_visible_txn(cur: Cursor, queue: str, pool: str = "main") -> datetime | None:
    """When the next pending task of `queue` in `pool` becomes visible (for sleeping pollers)."""
    cur.execute(
        "SELECT min(visible_at) FROM amber_tasks"
        " WHERE queue = %s AND pool = %s AND state = 'pending'",
        (queue, pool),
    )
    row = cur.fetchone()
    return None if row is None else row[0]


TASKS_CHANNEL = "amber_tasks"
RUNS_CHANNEL = "amber_runs"
QUERIES_CHANNEL = "amber_queries"


def notify_txn(cur: Cursor, channel: str, payload: str) -> None:
    """Wake listeners when the transaction commits (PostgreSQL LISTEN/NOTIFY)."""
    cur.execute("SELECT pg_notify(%s, %s)", (channel, payload))
