"""Durable timers firing: the server-side sweep that turns due timer rows into events.

A timer row is deleted in the transaction that records its firing (TimerFired, or RunTimedOut
for a workflow execution timeout), so no timer fires twice, even with several servers sweeping,
and a restart loses none: nothing waits in memory.
"""

from __future__ import annotations

import functools

from amber.history import (
    Cursor,
    Database,
    Discarded,
    NewEvent,
    RunClosing,
    RunStatus,
    Timer,
    TimerFired,
    TimerKind,
    claim_due_timers_txn,
    defer_timer_txn,
    delete_timer_txn,
    get_run_txn,
    record_discarded_txn,
    run_timers_txn,
)

from ._approvals import expire_approval_txn
from ._isolation import RETRY_FAILED_ROW_AFTER, each_isolated
from ._lifecycle import Lifecycle, Wake, closing_event
from ._notify import Notifier, poke


class TimerService:
    """Fires due timers. `fire_due` is what the sweeper calls; `fire` fires one by name."""

    def __init__(self, db: Database, life: Lifecycle, notifier: Notifier | None) -> None:
        self._db = db
        self._clock = life.clock
        self._notifier = notifier
        self._life = life

    def fire_due(self, *, limit: int = 500) -> int:
        """Fire every timer due now (up to `limit`); returns how many fired."""

        def txn(cur: Cursor) -> tuple[int, list[Wake]]:
            now = self._clock.now()
            timers = claim_due_timers_txn(cur, now, limit=limit)

            def defer(timer: Timer) -> None:
                defer_timer_txn(cur, timer, now + RETRY_FAILED_ROW_AFTER)

            fire = functools.partial(self._fire_txn, cur)
            return len(timers), each_isolated(cur, timers, fire, defer=defer, what="timer firing")

        count, wakes = self._db.run(txn)
        poke(self._notifier, wakes)
        return count

    def fire(self, run_id: str, timer_id: str) -> bool:
        """Fire one timer now, whatever its due time (operators, tests). A timer that already
        fired or was cancelled is not fired again: the attempt is recorded as discarded.

        Returns whether it fired.
        """

        def txn(cur: Cursor) -> tuple[bool, list[Wake]]:
            pending = {t.timer_id: t for t in run_timers_txn(cur, run_id)}
            timer = pending.get(timer_id)
            if timer is None or not delete_timer_txn(cur, run_id, timer_id):
                record_discarded_txn(
                    cur,
                    Discarded(
                        run_id=run_id,
                        kind="duplicate_timer_fire",
                        detail=f"timer {timer_id} fired again after it fired or was cancelled",
                        created_at=self._clock.now(),
                    ),
                )
                return False, []
            return True, self._fire_txn(cur, timer)

        fired, wakes = self._db.run(txn)
        poke(self._notifier, wakes)
        return fired

    def _fire_txn(self, cur: Cursor, timer: Timer) -> list[Wake]:
        run = get_run_txn(cur, timer.run_id, for_update=True)
        if run is None or run.status.closed:
            return []
        if timer.kind is TimerKind.EXECUTION_TIMEOUT:
            closing = RunClosing(
                status=RunStatus.TIMED_OUT,
                error_type="amber.timeout.execution",
                error_message="the workflow execution timeout passed",
            )
            return self._life.close_txn(cur, run, closing, closing_event(closing, run.digest))
        if timer.kind is TimerKind.APPROVAL:
            assert timer.cmd is not None
            return expire_approval_txn(cur, self._life, run, timer.cmd)
        assert timer.cmd is not None
        event = NewEvent(TimerFired(cmd=timer.cmd), run.digest)
        return self._life.deliver_txn(cur, run, event)
