"""The worker-facing side of the engine: lease tasks, record their outcomes, reclaim leases.

Every method is one transaction (through `Database.run`) composed of `history` helpers and the
`Lifecycle` steps, so an outcome and its consequences — events appended, the next task
enqueued, the finished task deleted, the failure counted — commit together or not at all.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Final

from amber.abi import (
    NAME,
    ActivityOutcome,
    ActivityStatus,
    AmberError,
    InvalidInput,
    ScheduleActivity,
    StartChild,
)
from amber.history import (
    QUERIES_CHANNEL,
    TASKS_CHANNEL,
    ActivityCompleted,
    Cursor,
    Database,
    Discarded,
    LeaseLost,
    NewEvent,
    QueryAnswer,
    Run,
    Task,
    TaskKind,
    TaskState,
    claim_task_with_run_txn,
    defer_task_txn,
    delete_task_txn,
    expired_leases_txn,
    extend_lease_txn,
    get_run_txn,
    get_task_txn,
    last_crash_repro_txn,
    leases_held_by_txn,
    lock_leased_task_txn,
    lock_leased_task_with_run_txn,
    next_visible_txn,
    note_claim_txn,
    notify_txn,
    put_query_answer_txn,
    read_events_txn,
    record_discarded_txn,
    release_task_txn,
    take_leased_task_txn,
    timed_out_tasks_txn,
    try_lock_run_txn,
    unheld_leases_txn,
)
from amber.runtime.model import (
    MAX_NEW_COMMANDS,
    ClaimedTask,
    FailureReason,
    FailureReport,
    HeartbeatAck,
    NewCommand,
    PayloadTooLarge,
    Recorded,
    ThenWorkflow,
    WorkflowCompletion,
)
from amber.versions import OK, UnknownWorkflowType, rollout_of_txn

from ._activation import ActivationWriter, Outcome
from ._attempts import Attempts, FailedAttempt, timeout_kind
from ._isolation import RETRY_FAILED_ROW_AFTER, each_isolated
from ._lifecycle import Lifecycle, Wake
from ._migration import UpgradeReport, checked_answer, upgrade_txn
from ._notify import Notifier, poke
from ._recorder import Claim, Recorder, Report
from ._stats import HealthCounter

_log = logging.getLogger(__name__)


_GONE: Final = (
    " (the task is gone: done, most often by an earlier send of this same report whose answer"
    " was lost, or its run closed)"
)
_UPGRADE_CACHE_S = 5.0
RECONCILE_GRACE = timedelta(seconds=5)
"""How old a lease must be before a worker not holding it releases it (reconciliation)."""
_READS = frozenset({TaskKind.QUERY, TaskKind.CHECK})
"""Tasks that only read a run (a replay that appends nothing); answered, never retried."""


class TaskService:
    """Lease, complete, fail and heartbeat tasks; reclaim expired leases; enforce timeouts."""

    def __init__(
        self,
        db: Database,
        life: Lifecycle,
        notifier: Notifier | None,
        health: HealthCounter | None = None,
    ) -> None:
        self._db = db
        self._clock = life.clock
        self._settings = life.settings
        self._notifier = notifier
        self._life = life
        self._attempts = Attempts(life.clock, life.settings, life)
        self._writer = ActivationWriter(life)
        self._health = health or HealthCounter()
        self._upgrades: dict[str, tuple[str | None, float]] = {}
        self._recorder = Recorder(db, notifier, self._health, self._claim_txn)

    # -- leasing -----------------------------------------------------------------------------

    def claim(
        self,
        *,
        queue: str,
        worker: str,
        pool: str = "main",
        holding: Sequence[int] | None = None,
    ) -> ClaimedTask | None:
        """Lease the next visible task of `queue` in `pool` (main, or surgical: poisoned
        tasks only), or None.

        With `holding` (the tasks the worker runs now), leases of this worker it does not hold
        go back to their queue first (`reconcile_txn`)."""
        claim = Claim(queue=queue, worker=worker, pool=pool)

        def txn(cur: Cursor) -> tuple[ClaimedTask | None, list[Wake]]:
            wakes = [] if holding is None else self.reconcile_txn(cur, worker, holding)
            return self._claim_txn(cur, claim), wakes

        claimed, wakes = self._db.run(txn)
        poke(self._notifier, wakes)
        return claimed

    def reconcile_txn(self, cur: Cursor, worker: str, holding: Sequence[int]) -> list[Wake]:
        """Return to their queues the tasks leased to `worker` that it says it does not hold.

        Such a grant never reached the worker: it went out in an answer its server did not live
        to send (eager dispatch commits the lease with the report). Counting nothing, neither
        an attempt nor a crash, it is free again at once instead of at its lease's expiry.
        Leases younger than `RECONCILE_GRACE` are left alone: they may be in flight to another
        of the worker's slots right now."""
        now = self._clock.now()
        unheld = unheld_leases_txn(
            cur,
            worker,
            holding,
            leased_before=now - RECONCILE_GRACE,
            lease=self._settings.lease,
        )
        wakes: list[Wake] = []
        for task in unheld:
            release_task_txn(cur, task, now)
            notify_txn(cur, TASKS_CHANNEL, task.queue)
            wakes.append((TASKS_CHANNEL, task.queue))
        if unheld:
            _log.info(
                "released %d lease(s) %s did not hold: %s (it holds %d: %s)",
                len(unheld),
                worker,
                ", ".join(str(t.task_id) for t in unheld),
                len(holding),
                ", ".join(map(str, sorted(holding)[:20])),
            )
        return wakes

    def _claim_txn(self, cur: Cursor, claim: Claim) -> ClaimedTask | None:
        now = self._clock.now()
        affine = claim.affine_run or None
        while True:
            claimed = claim_task_with_run_txn(
                cur,
                queue=claim.queue,
                worker=claim.worker,
                now=now,
                lease=self._settings.lease,
                pool=claim.pool,
                run_id=affine,
            )
            if claimed is None and affine is not None:  # none of that run's: the oldest one
                affine = None
                continue
            if claimed is None:
                return None
            task, run = claimed
            if run is None or (run.status.closed and task.kind not in _READS):
                delete_task_txn(cur, task.task_id)  # leftover of a closed run
                continue
            # A crashed task runs again under limits no tighter than its last crash's.
            repro = b""
            if task.crash is not None:
                repro = last_crash_repro_txn(cur, task.run_id, task.task_id) or b""
            if task.kind is TaskKind.ACTIVITY:
                return ClaimedTask(task=task, run=run, crash_repro=repro)
            # Positions are 1..n without gaps: the claim's head as a limit reads a consistent
            # prefix even if an append commits meanwhile (its report then conflicts).
            events = tuple(read_events_txn(cur, task.run_id, limit=task.claimed_seq))
            upgrade = ""
            if task.kind is TaskKind.WORKFLOW:
                target = self._upgrade_target(cur, run.workflow_type)
                if target and target not in (run.digest, run.upgrade_blocked):
                    upgrade = target
            if upgrade:
                seq = task.claimed_seq or 0
                note_claim_txn(cur, task.task_id, claimed_seq=seq, upgrade_offer=upgrade)
                task = replace(task, upgrade_offer=upgrade)
            return ClaimedTask(
                task=task, run=run, events=events, upgrade_to=upgrade, crash_repro=repro
            )

    def forget_upgrade_target(self, workflow_type: str) -> None:
        """Drop the cached automatic upgrade target of a type (its rollout just changed here;
        other servers see the change within `_UPGRADE_CACHE_S`)."""
        self._upgrades.pop(workflow_type, None)

    def _upgrade_target(self, cur: Cursor, workflow_type: str) -> str | None:
        """A type's automatic upgrade target, cached for a few seconds (read on every claim)."""
        now = time.monotonic()
        cached = self._upgrades.get(workflow_type)
        if cached is not None and now - cached[1] < _UPGRADE_CACHE_S:
            return cached[0]
        try:
            target = rollout_of_txn(cur, workflow_type).auto_upgrade_to
        except UnknownWorkflowType:
            target = None
        self._upgrades[workflow_type] = (target, now)
        return target

    def record(self, report: Report) -> Recorded:
        """Record one report built by `workflow_report`, `activity_report` or `failure_report`
        in its own transaction; raises what refused it."""
        return self._recorder.record(report)

    def record_group(self, reports: Sequence[Report]) -> list[Recorded | Exception]:
        """Record reports built by `workflow_report`, `activity_report` and `failure_report` in
        one transaction (group commit), each under its own checks: the result at each index is
        what that report recorded or the error that refused it (one report's refusal never
        fails the others). Each report's activations count for their versions' health by the
        digest on the server's own record, never a worker's."""
        return self._recorder.record_group(reports)

    def next_visible(self, queue: str, pool: str = "main") -> datetime | None:
        """When the queue's next pending task in `pool` becomes visible (None: none pending)."""
        return self._db.run(lambda cur: next_visible_txn(cur, queue, pool))

    def heartbeat(
        self, *, task_id: int, fencing: int, details: bytes | None = None, holder: str | None = None
    ) -> HeartbeatAck:
        """Extend a held lease (and, with `details`, record an activity heartbeat).

        Raises `LeaseLost`. The answer says whether the run asked the activity to stop.
        """
        if details is not None and len(details) > self._settings.max_payload_bytes:
            raise PayloadTooLarge(f"heartbeat details are {len(details)} bytes")
        now = self._clock.now()
        until = now + self._settings.lease
        cancel = self._db.run(
            lambda cur: extend_lease_txn(
                cur, task_id, fencing, until, details=details, now=now, holder=holder
            )
        )
        return HeartbeatAck(lease_expires_at=until, cancel_requested=cancel)

    @contextlib.contextmanager
    def refused_report(self, run_id: str, worker: str, what: str) -> Iterator[None]:
        """Record a report refused for a lost lease (stale or repeated) before re-raising it:
        it changes nothing in the run, but an operator can see that it came."""
        try:
            yield
        except LeaseLost as exc:
            self.note_refused(run_id, worker, what, exc)
            raise

    def note_refused(self, run_id: str, worker: str, what: str, exc: LeaseLost) -> None:
        """Record that a report was refused for a lost lease (see `refused_report`)."""
        try:
            uuid.UUID(run_id)
        except ValueError:
            return

        def txn(cur: Cursor) -> None:
            # A task that is gone was done: usually this very report, sent before, applied by
            # a server that died before it could answer (the resend then lands here). Saying
            # so keeps an operator from reading it as a second run of the activity.
            done = get_task_txn(cur, exc.task_id) is None
            note = _GONE if done else ""
            discarded = Discarded(
                run_id=run_id,
                kind="stale_report",
                detail=f"{what} from {worker or 'a worker'} refused: {exc}{note}",
                created_at=self._clock.now(),
            )
            record_discarded_txn(cur, discarded)

        self._db.run(txn)

    # -- workflow outcomes ---------------------------------------------------------------------

    def workflow_report(
        self,
        *,
        task_id: int,
        fencing: int,
        done: WorkflowCompletion,
        claim_next: Claim | None = None,
        fuel: int = 0,
        holder: str | None = None,
        run_id: str = "",
    ) -> Report:
        """A workflow activation's report: append its commands (and closing event) under its
        lease, for `record` or `record_group`. Raises what its checks refuse.

        Recorded, it holds the worker's next task when `claim_next` asks for one; it is refused
        with `LeaseLost` for a stale worker and `VersionConflict` if history moved on since the
        activation read it (the task is then dropped: a newer pending task covers the run).
        """
        self._check_commands(done.commands, done.result)
        return Report(
            body=lambda cur, out: self._complete_workflow_txn(
                cur, task_id, fencing, done, out, holder
            ),
            claim=claim_next,
            fuel=fuel,
            run_id=run_id,
            after_conflict=lambda cur: self._drop_stale_txn(cur, task_id, fencing),
        )

    def _check_commands(self, commands: Sequence[NewCommand], result: bytes | None) -> None:
        if len(commands) > MAX_NEW_COMMANDS:
            raise InvalidInput(f"{len(commands)} new commands; the cap is {MAX_NEW_COMMANDS}")
        if any(new.cmd != commands[0].cmd + i for i, new in enumerate(commands)):
            raise InvalidInput("new command indexes must be consecutive")
        limit = self._settings.max_payload_bytes
        for new in commands:
            command = new.command
            if isinstance(command, ScheduleActivity):
                if not NAME.fullmatch(command.name):
                    raise InvalidInput(f"{command.name[:140]!r} is not a valid activity name")
                if len(command.args) > limit:
                    raise PayloadTooLarge(
                        f"activity {command.name!r} arguments are {len(command.args)} bytes;"
                        f" the limit is {limit}"
                    )
            if isinstance(command, StartChild) and len(command.input) > limit:
                raise PayloadTooLarge(
                    f"child {command.workflow_id!r} input is {len(command.input)} bytes;"
                    f" the limit is {limit}"
                )
        if result is not None and len(result) > limit:
            raise PayloadTooLarge(f"workflow result is {len(result)} bytes; the limit is {limit}")

    def _complete_workflow_txn(
        self,
        cur: Cursor,
        task_id: int,
        fencing: int,
        done: WorkflowCompletion,
        out: Outcome,
        holder: str | None,
    ) -> list[Wake]:
        task, run = lock_leased_task_with_run_txn(cur, task_id, fencing)
        held_by(task, holder)
        if run is None or run.status.closed:
            delete_task_txn(cur, task_id)
            return []
        report = UpgradeReport(migrate_to=done.migrate_to, failed=done.upgrade_failed)
        upgrade = upgrade_txn(cur, task, run, report)
        if upgrade is None:  # the offer was withdrawn meanwhile: run the activation again
            release_task_txn(cur, task, self._clock.now())
            notify_txn(cur, TASKS_CHANNEL, run.queue)
            return [(TASKS_CHANNEL, run.queue)]
        out.counted.append((upgrade.digest, task.kind.value, OK))
        if upgrade.failed_on is not None:
            out.counted.append((upgrade.failed_on, task.kind.value, FailureReason.NON_DETERMINISM))
        applied = self._writer.apply_txn(
            cur,
            upgrade.run,
            upgrade.digest,
            done,
            after_seq=done.expected_last_seq,
            prefix=upgrade.events,
            task_id=task_id,
            out=out,
        )
        return applied.wakes

    def _drop_stale_txn(self, cur: Cursor, task_id: int, fencing: int) -> list[Wake]:
        try:
            task = lock_leased_task_txn(cur, task_id, fencing)
        except LeaseLost:
            return []
        delete_task_txn(cur, task.task_id)
        # Whoever moved the history on left a pending task; make sure of it regardless.
        run = get_run_txn(cur, task.run_id)
        if run is not None and not run.status.closed:
            return self._life.enqueue_workflow_txn(cur, run)
        return []

    # -- activity outcomes ---------------------------------------------------------------------

    def activity_report(
        self,
        *,
        task_id: int,
        fencing: int,
        outcome: ActivityOutcome,
        claim_next: Claim | None = None,
        fuel: int = 0,
        then: ThenWorkflow | None = None,
        holder: str | None = None,
        run_id: str = "",
    ) -> Report:
        """An activity attempt's report: its result, a retry, or its final failure, for
        `record` or `record_group`. Raises what its checks refuse.

        With `then` (a completed activity only), the run's next workflow activation, which the
        worker ran itself, is applied in the same transaction when the run's head is still where
        the worker saw it; otherwise the activity is recorded alone and the run's workflow task
        runs as usual (`Recorded.combined` says which). Recorded, it holds the worker's next
        task when `claim_next` asks for one; a stale worker's (a late duplicate result) is
        refused with `LeaseLost`.
        """
        if outcome.result is not None and len(outcome.result) > self._settings.max_payload_bytes:
            raise PayloadTooLarge(
                f"activity result is {len(outcome.result)} bytes;"
                f" the limit is {self._settings.max_payload_bytes}"
            )
        ok = outcome.status is ActivityStatus.COMPLETED
        if then is not None:
            try:
                if not ok:
                    raise InvalidInput("only a completed activity carries a workflow activation")
                self._check_commands(then.done.commands, then.done.result)
            except AmberError as exc:  # the workflow task will meet it, and report it, itself
                _log.info("task %d: activation not applied with the activity: %s", task_id, exc)
                then = None

        def txn(cur: Cursor, out: Outcome) -> list[Wake]:
            others_due = False
            if ok:  # the task ends here whatever the run's state: delete it as it is locked
                taken = take_leased_task_txn(cur, task_id, fencing)
                task, run, others_due = taken.task, taken.run, taken.others_due
            else:
                task, run = lock_leased_task_with_run_txn(cur, task_id, fencing)
            held_by(task, holder)  # before anything is written: a refusal rolls the take back
            if run is None or run.status.closed:
                if not ok:
                    delete_task_txn(cur, task_id)
                return []
            out.counted.append((task.digest, task.kind.value, OK if ok else "application_error"))
            if ok:
                assert outcome.result is not None
                completed = ActivityCompleted(
                    cmd=task.activity_cmd, result=outcome.result, attempt=task.attempt
                )
                event = NewEvent(completed, task.digest)
                if then is not None and not others_due:
                    combined = self._combined_txn(cur, run, event, then, out)
                    if combined is not None:
                        return combined
                return self._life.deliver_txn(cur, run, event)
            assert outcome.error is not None
            failure = FailureReport(
                reason=FailureReason.APPLICATION_ERROR,
                message=f"{outcome.error.type}: {outcome.error.message}",
            )
            return self._attempts.fail_txn(
                cur, FailedAttempt(task=task, run=run, failure=failure, error=outcome.error)
            )

        return Report(body=txn, claim=claim_next, fuel=fuel, run_id=run_id)

    def _combined_txn(
        self, cur: Cursor, run: Run, completed: NewEvent, then: ThenWorkflow, out: Outcome
    ) -> list[Wake] | None:
        """Append an activity's completion and the activation the worker ran after it, or None
        (nothing written) when the run is not where the worker saw it: history moved on, its
        commands are not the run's next ones, the run moved to another version or waits for
        one. (The caller also declines when a workflow task is already due.) The run is locked,
        so these checks hold until the append."""
        commands = then.done.commands
        if (
            then.done.expected_last_seq != run.last_seq + 1
            or (commands and commands[0].cmd != run.next_cmd)
            or then.digest != run.digest
            or run.suspension is not None
            or self._upgrade_target(cur, run.workflow_type) not in (None, run.digest)
        ):
            return None
        applied = self._writer.apply_txn(
            cur, run, run.digest, then.done, after_seq=run.last_seq, prefix=(completed,), out=out
        )
        out.combined = True
        out.counted.append((run.digest, TaskKind.WORKFLOW.value, OK))
        return applied.wakes

    def failure_report(
        self,
        *,
        task_id: int,
        fencing: int,
        failure: FailureReport,
        worker: str,
        claim_next: Claim | None = None,
        holder: str | None = None,
        run_id: str = "",
    ) -> Report:
        """A failed activation's report, which retries or resolves the task, for `record` or
        `record_group`. Recorded, it holds the worker's next task when `claim_next` asks for
        one; a report that does not hold the lease is refused with `LeaseLost`."""

        def txn(cur: Cursor, out: Outcome) -> list[Wake]:
            task, run = lock_leased_task_with_run_txn(cur, task_id, fencing)
            held_by(task, holder)
            if task.kind not in _READS:
                out.counted.append((task.digest, task.kind.value, failure.reason))
            if task.kind in _READS:
                answer = QueryAnswer(
                    result=None, error_type=failure.reason, message=failure.message
                )
                return self._answer_txn(cur, task, answer)
            if run is None or run.status.closed:
                delete_task_txn(cur, task_id)
                return []
            attempt = FailedAttempt(
                task=task,
                run=run,
                failure=failure,
                worker=worker,
                timeout=timeout_kind(task, failure),
            )
            return self._attempts.fail_txn(cur, attempt)

        return Report(body=txn, claim=claim_next, fuel=failure.fuel_used or 0, run_id=run_id)

    def complete_query(
        self, *, task_id: int, fencing: int, answer: QueryAnswer, holder: str | None = None
    ) -> None:
        """Hand a query's answer to the server waiting for it. Raises `LeaseLost`."""

        def txn(cur: Cursor) -> list[Wake]:
            task = lock_leased_task_txn(cur, task_id, fencing)
            held_by(task, holder)
            if task.kind not in _READS:
                raise InvalidInput(f"task {task_id} is not a query or a check")
            given = checked_answer(task, answer) if task.kind is TaskKind.CHECK else answer
            return self._answer_txn(cur, task, given)

        poke(self._notifier, self._db.run(txn))

    def _answer_txn(self, cur: Cursor, task: Task, answer: QueryAnswer) -> list[Wake]:
        put_query_answer_txn(cur, task.task_id, answer, self._clock.now())
        delete_task_txn(cur, task.task_id)
        notify_txn(cur, QUERIES_CHANNEL, str(task.task_id))
        return [(QUERIES_CHANNEL, str(task.task_id))]

    # -- sweeping ------------------------------------------------------------------------------

    def sweep_expired_leases(self) -> int:
        """Treat every task whose lease ran out as one failed attempt ("worker lost")."""
        _selected, handled = self._lose_leases(
            expired_leases_txn,
            lambda task: f"lease held by {task.lease_owner} expired at {task.lease_expires_at}",
        )
        return len(handled)

    def release_leases_of(self, worker: str) -> int:
        """Treat every task leased to `worker` as one failed attempt ("worker lost") now,
        without waiting for the leases to run out: a worker restarting under a stable id says
        that the process which held them is gone. Returns how many were released."""
        if not worker:
            raise InvalidInput("worker_id is required")
        released, after = 0, 0

        def page(cur: Cursor, _now: datetime) -> list[Task]:
            return leases_held_by_txn(cur, worker, after=after)

        while True:  # by task id: a row whose release failed (deferred, still leased) is passed
            batch, handled = self._lose_leases(
                page, lambda task: f"{worker} restarted: its predecessor's lease was released"
            )
            released += len(handled)  # a task whose run was busy keeps its lease: it expires
            if not batch:
                return released
            after = max(task.task_id for task in batch)

    def _lose_leases(
        self,
        select: Callable[[Cursor, datetime], list[Task]],
        message: Callable[[Task], str],
    ) -> tuple[list[Task], list[Task]]:
        """Fail the attempts of the (locked) tasks `select` returns, as lost by their worker;
        returns the tasks selected and those handled."""

        def lose(cur: Cursor, task: Task, run: Run, _now: datetime) -> list[Wake]:
            failure = FailureReport(reason=FailureReason.WORKER_LOST, message=message(task))
            attempt = FailedAttempt(task=task, run=run, failure=failure, worker=task.lease_owner)
            return self._attempts.fail_txn(cur, attempt)

        tasks, handled = self._sweep(
            select, lose, drop=lambda task: task.kind in _READS, what="lease expiry"
        )
        for task in handled:
            self._count(task, FailureReason.WORKER_LOST)
        return tasks, handled

    def _sweep(
        self,
        select: Callable[[Cursor, datetime], list[Task]],
        act: Callable[[Cursor, Task, Run, datetime], list[Wake]],
        *,
        drop: Callable[[Task], bool],
        what: str,
    ) -> tuple[list[Task], list[Task]]:
        """One sweep transaction: `act` on each (locked) task `select` returns, or delete it
        where its run has closed or `drop` says so. Returns the tasks selected and handled.

        A task whose run another transaction holds is left for a later sweep: waiting for the
        run while holding the task would invert the order closing a run takes (run, then its
        tasks) and deadlock. A row whose step fails is deferred (`each_isolated`)."""
        handled: list[Task] = []

        def txn(cur: Cursor) -> tuple[list[Task], list[Wake]]:
            handled.clear()  # a retried transaction starts over
            now = self._clock.now()
            tasks = select(cur, now)

            def step(task: Task) -> list[Wake]:
                busy, run = try_lock_run_txn(cur, task.run_id)
                if busy:  # being changed (closed, say): a later sweep takes it
                    return []
                handled.append(task)
                if run is None or run.status.closed or drop(task):
                    delete_task_txn(cur, task.task_id)
                    return []
                return act(cur, task, run, now)

            def defer(task: Task) -> None:
                defer_task_txn(cur, task.task_id, now + RETRY_FAILED_ROW_AFTER)

            return tasks, each_isolated(cur, tasks, step, defer=defer, what=what)

        tasks, wakes = self._db.run(txn)
        poke(self._notifier, wakes)
        return tasks, handled

    def _count(self, task: Task, reason: str) -> None:
        if task.kind not in _READS:
            self._health.record(task.digest, task.kind.value, reason)

    def sweep_timeouts(self) -> int:
        """Enforce activity timeouts: schedule-to-start and schedule-to-close end the activity;
        start-to-close and heartbeat timeouts fail the attempt (which may be retried)."""
        _tasks, handled = self._sweep(
            timed_out_tasks_txn,
            self._attempts.timeout_txn,
            drop=lambda _task: False,
            what="activity timeout",
        )
        for task in handled:
            if task.state is TaskState.LEASED:
                self._count(task, "timeout")
        return len(handled)


def held_by(task: Task, holder: str | None) -> None:
    """Refuse a report from anyone but the lease's holder, when the caller names one (a server
    that checks credentials: a lease is named by its task id and fencing token, which are not
    secrets). Raises `LeaseLost`, as for any report that does not hold the lease."""
    if holder is not None and task.lease_owner != holder:
        raise LeaseLost(task.task_id, task.fencing)
