"""Recording workers' reports: each alone in its own transaction, or several in one (group
commit), every report under its own checks.

A group shares one BEGIN…COMMIT, and the check that learns whether a lost COMMIT committed.
It is first tried as it comes, every report in the one transaction. If a report is refused for
its own reason (a lost lease, a run whose history moved on, a command the server will not take),
that try is rolled back whole and the group runs again with each report inside a savepoint, so
the refused one rolls back alone and the others commit. Refusals are rare, and a savepoint costs
two more statements per report, which would take back most of what sharing the commit saves.
Reports are applied in order of run id, so that two groups touching the same runs take their
locks in the same order. A transient database failure (a lost connection, a deadlock) retries
the whole group, each report from a clean slate.

Rejected: one set-based statement for a whole group (`unnest`). What a report writes is decided
in Python between its reads and its writes — the command matcher, the lifecycle's effects, the
next task's claim — so it is not one statement without moving that logic into SQL.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from amber.history import (
    TASKS_CHANNEL,
    Cursor,
    Database,
    VersionConflict,
    savepoint,
    step_failure,
)
from amber.runtime.model import ClaimedTask, Recorded

from ._activation import Outcome
from ._lifecycle import Wake
from ._notify import Notifier, poke
from ._stats import HealthCounter

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """Eager dispatch: lease the worker's next task in the transaction that records its last."""

    queue: str
    worker: str
    pool: str = "main"
    affine_run: str = ""
    """Prefer a task of this run (one its report just scheduled: run-affine dispatch)."""


ClaimStep = Callable[[Cursor, Claim], ClaimedTask | None]
"""Leases a worker's next task inside a transaction (`TaskService`'s claim)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """A worker's report, checked and ready to record, alone or in a group."""

    body: Callable[[Cursor, Outcome], list[Wake]]
    """Writes the report's outcome; raises to refuse it (nothing it wrote stays)."""
    claim: Claim | None = None
    """Lease the worker's next task with it (one of the activities it scheduled, if any)."""
    fuel: int = 0
    """Fuel the activation used, for its version's health."""
    run_id: str = ""
    """The run it concerns, as the worker names it: only the order of a group's locks."""
    after_conflict: Callable[[Cursor], list[Wake]] | None = None
    """Run in a transaction of its own when the report failed with `VersionConflict`."""


class _Refused(Exception):
    """A report of a group tried as one was refused: the try is rolled back whole."""


class Recorder:
    """Runs reports' transactions and what follows their commit: the wake-ups, the versions'
    health counts."""

    def __init__(
        self, db: Database, notifier: Notifier | None, health: HealthCounter, claim: ClaimStep
    ) -> None:
        self._db = db
        self._notifier = notifier
        self._health = health
        self._claim = claim

    def record(self, report: Report) -> Recorded:
        """Record one report in its own transaction; raises what refused it."""
        (result,) = self._record([report], grouped=False)
        if isinstance(result, Exception):
            raise result
        return result

    def record_group(self, reports: Sequence[Report]) -> list[Recorded | Exception]:
        """Record reports in one transaction, each kept or refused on its own: the result at
        each report's index is what it recorded or the error that refused it."""
        return self._record(reports, grouped=len(reports) > 1)

    def _record(self, reports: Sequence[Report], *, grouped: bool) -> list[Recorded | Exception]:
        outs = [Outcome() for _ in reports]
        order = sorted(range(len(reports)), key=lambda i: reports[i].run_id)

        def one(cur: Cursor, report: Report, out: Outcome) -> tuple[list[Wake], ClaimedTask | None]:
            out.clear()  # a retried transaction starts over
            wakes = report.body(cur, out)
            if report.claim is None:
                return wakes, None
            return wakes, self._claim(cur, replace(report.claim, affine_run=out.affine_run))

        def txn(
            cur: Cursor, *, each_alone: bool
        ) -> list[tuple[list[Wake], ClaimedTask | None] | Exception]:
            done: list[tuple[list[Wake], ClaimedTask | None] | Exception] = [
                AssertionError("not recorded")
            ] * len(reports)
            for i in order:
                if not each_alone:
                    try:
                        done[i] = one(cur, reports[i], outs[i])
                    except Exception as exc:
                        if grouped and step_failure(exc, cur) is not None:
                            raise _Refused from exc  # try again, each report on its own
                        raise
                    continue
                try:
                    with savepoint(cur, "amber_report"):
                        done[i] = one(cur, reports[i], outs[i])
                except Exception as exc:
                    failure = step_failure(exc, cur)
                    if failure is None:
                        raise  # the transaction is gone: the whole group runs again
                    done[i] = failure
            return done

        if not reports:
            return []
        try:
            done = self._db.run(lambda cur: txn(cur, each_alone=False))
        except _Refused:
            done = self._db.run(lambda cur: txn(cur, each_alone=True))
        except Exception as exc:  # a single report's refusal; a group's only when all failed
            if grouped:
                raise
            done = [exc]
        results: list[Recorded | Exception] = []
        wakes: list[Wake] = []
        for report, out, outcome in zip(reports, outs, done, strict=True):
            if isinstance(outcome, Exception):
                if isinstance(outcome, VersionConflict) and report.after_conflict is not None:
                    try:  # the group committed: its other answers stand whatever happens here
                        wakes += self._db.run(report.after_conflict)
                    except Exception:  # the sweeper or the next report covers the stale task
                        _log.exception("a stale workflow task could not be dropped")
                results.append(outcome)
                continue
            own, claimed = outcome
            if claimed is not None and report.claim is not None:  # that task needs no poller
                with contextlib.suppress(ValueError):
                    own.remove((TASKS_CHANNEL, report.claim.queue))
            wakes += own
            for digest, kind, reason in out.counted:
                self._health.record(digest, kind, reason, report.fuel)
            results.append(
                Recorded(next=claimed, appended=tuple(out.appended), combined=out.combined)
            )
        poke(self._notifier, wakes)
        return results
