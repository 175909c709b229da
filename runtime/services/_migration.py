"""Moving runs between module versions, gated by replaying their real histories.

`check` replays each selected run's history on a candidate version — on workers, as `check`
tasks, since guest code only ever runs there — and reports per run: compatible, or the first
divergence (command position, history position, recorded vs issued). `migrate` moves only the
runs whose check passed, each in a transaction that verifies its history has not grown since it
was checked, appending a `RunMigrated` event with both digests; later activations replay on the
new version. Activity tasks already scheduled keep the version that scheduled them.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from amber.abi import AmberError, InvalidInput, NotMsgpack, pack, unpack
from amber.history import (
    TASKS_CHANNEL,
    AuditEntry,
    Cursor,
    Database,
    NewEvent,
    NewTask,
    QueryAnswer,
    Run,
    RunMigrated,
    RunNotFound,
    RunStatus,
    Task,
    TaskKind,
    UpgradeDetail,
    UpgradeFailed,
    VersionConflict,
    append_events_txn,
    block_upgrade_txn,
    drop_read_tasks_txn,
    enqueue_task_txn,
    get_run_by_workflow_id_txn,
    get_run_txn,
    notify_txn,
    record_audit_txn,
    repin_run_txn,
    runs_of_type_txn,
    take_query_answers_txn,
)
from amber.runtime.model import (
    DEFAULT_TENANT,
    Clock,
    RunCheck,
)
from amber.versions import Rollout, rollout_of_txn, version_for_type_txn

from ._notify import Notifier
from ._runs import MAX_ID_LENGTH

MAX_CHECKED_RUNS = 10_000
"""Open runs one check replays; a type with more is checked partly and not remembered."""


MAX_NAMED_RUNS = 1_000
"""Run ids one check or migration may name."""


def _run_check(run: Run, doc: dict[str, Any]) -> RunCheck:
    return RunCheck(
        run_id=run.run_id,
        status=run.status.value,
        verdict=str(doc.get("verdict", "failed")),
        position=doc.get("position"),
        seq=doc.get("seq"),
        recorded=str(doc.get("recorded", "")),
        issued=str(doc.get("issued", "")),
        detail=str(doc.get("detail", ""))[:2000],
        checked_seq=int(doc.get("checked_seq", 0)),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class UpgradeReport:
    """What a worker says about the automatic upgrade it was offered."""

    migrate_to: str = ""
    """It replayed the run on this version: move the run there."""
    failed: dict[str, Any] | None = None
    """It could not replay the run there, and why ({to, reason, message, ...})."""


class MigrationService:
    """Replay checks of candidate versions, and migrations of the runs that pass them."""

    def __init__(
        self, db: Database, clock: Clock, notifier: Notifier | None, rollout: Rollout
    ) -> None:
        self._db = db
        self._clock = clock
        self._notifier = notifier
        self._rollout = rollout

    def check(
        self,
        candidate: str,
        workflow_type: str,
        *,
        run_ids: Sequence[str] = (),
        closed_sample: int = 0,
        timeout_s: float = 60.0,
        own: bool = False,
    ) -> tuple[str, list[RunCheck]]:
        """Replay runs of `workflow_type` on `candidate`: the given runs, or every open run
        plus `closed_sample` recently closed ones. Returns the candidate's digest and a verdict
        per run. A full check of a type is remembered (it gates automatic upgrades). A run
        already on `candidate` is `already_on` without a replay, unless `own` (a triage gate:
        a run poisoned by its own code's divergence diverges there too)."""
        if closed_sample < 0 or closed_sample > 1000:
            raise InvalidInput("closed_sample must be between 0 and 1000")
        wanted = list(dict.fromkeys(run_ids))
        if len(wanted) > MAX_NAMED_RUNS:
            raise InvalidInput(f"{len(wanted)} run ids; name at most {MAX_NAMED_RUNS} at once")

        def select(cur: Cursor) -> tuple[str, list[Run], bool]:
            digest = version_for_type_txn(cur, candidate, workflow_type).digest
            if wanted:
                return digest, [_run_of_type(cur, r, workflow_type) for r in wanted], False
            runs = runs_of_type_txn(cur, workflow_type, running=True, limit=MAX_CHECKED_RUNS + 1)
            truncated = len(runs) > MAX_CHECKED_RUNS
            runs = runs[:MAX_CHECKED_RUNS]
            runs += runs_of_type_txn(cur, workflow_type, running=False, limit=closed_sample)
            return digest, runs, truncated

        digest, runs, truncated = self._db.run(select)
        results = self._replay_all(digest, runs, timeout_s, own=own)
        # Only a check of every open run is remembered: a partial one must not gate upgrades.
        # Closed runs sampled with it are reported but gate nothing: they never move.
        if not wanted and not truncated:
            gating = [r for r in results if r.status == RunStatus.RUNNING.value]
            self._rollout.record_check(
                workflow_type,
                digest,
                now=self._clock.now(),
                runs=len(gating),
                compatible=sum(r.verdict in ("compatible", "already_on") for r in gating),
                incompatible=sum(r.verdict == "incompatible" for r in gating),
                failed=sum(r.verdict in ("failed", "timeout") for r in gating),
            )
        return digest, results

    def migrate(
        self,
        candidate: str,
        workflow_type: str,
        *,
        run_ids: Sequence[str] = (),
        actor: str,
        reason: str,
        timeout_s: float = 60.0,
    ) -> tuple[str, list[RunCheck]]:
        """Move the open runs (given, or all of the type) that replay on `candidate` without
        divergence; refuse the others. Each move is audited and recorded in the run's history."""
        digest, checked = self.check(candidate, workflow_type, run_ids=run_ids, timeout_s=timeout_s)
        results = []
        for check in checked:
            if check.status != "running" or check.verdict == "already_on":
                results.append(replace(check, outcome="skipped"))
            elif check.verdict != "compatible":
                results.append(replace(check, outcome="refused"))
            else:
                outcome = self._move(check, digest, actor, reason)
                results.append(replace(check, outcome=outcome))
        return digest, results

    def _move(self, check: RunCheck, digest: str, actor: str, reason: str) -> str:
        def txn(cur: Cursor) -> str:
            run = get_run_txn(cur, check.run_id, for_update=True)
            if run is None or run.status.closed:
                return "closed"  # since the check: it did not move, and says why
            if run.digest == digest:
                return "skipped"
            try:  # it may have been retired since the check
                version_for_type_txn(cur, digest, run.workflow_type, lock=True)
            except AmberError:
                return "refused"
            now = self._clock.now()
            migrated = RunMigrated(
                from_digest=run.digest,
                to=digest,
                checked_seq=check.checked_seq,
                by=actor,
                reason=reason,
            )
            event = NewEvent(migrated, digest)
            append_events_txn(
                cur, run.run_id, [event], expected_last_seq=check.checked_seq, now=now
            )
            repin_run_txn(cur, run.run_id, digest)
            record_audit_txn(
                cur,
                AuditEntry(
                    actor=actor,
                    action="run.migrate",
                    target=run.run_id,
                    reason=reason,
                    detail={"from": run.digest, "to": digest},
                    at=now,
                ),
            )
            return "migrated"

        try:
            return self._db.run(txn)
        except VersionConflict:
            return "moved_on"  # history grew after the check: check again

    def _replay_all(
        self, digest: str, runs: Sequence[Run], timeout_s: float, *, own: bool = False
    ) -> list[RunCheck]:
        def enqueue(cur: Cursor) -> dict[int, Run]:
            now = self._clock.now()
            pending: dict[int, Run] = {}
            queues = set()
            for run in runs:
                if run.digest == digest and not own:
                    continue
                task_id = enqueue_task_txn(
                    cur,
                    NewTask(
                        run_id=run.run_id,
                        kind=TaskKind.CHECK,
                        queue=run.queue,
                        name="check",
                        digest=digest,
                        visible_at=now,
                        max_attempts=1,
                    ),
                    now,
                )
                assert task_id is not None
                pending[task_id] = run
                queues.add(run.queue)
            for queue in queues:
                notify_txn(cur, TASKS_CHANNEL, queue)
            return pending

        pending = self._db.run(enqueue)
        if self._notifier is not None:
            for queue in {r.queue for r in pending.values()}:
                self._notifier.poke_tasks(queue)
        verdicts: dict[str, RunCheck] = {
            r.run_id: RunCheck(run_id=r.run_id, status=r.status.value, verdict="already_on")
            for r in runs
            if r.run_id not in {p.run_id for p in pending.values()}
        }
        deadline = time.monotonic() + timeout_s
        while pending:
            answers = self._db.run(
                functools.partial(take_query_answers_txn, task_ids=list(pending))
            )
            for task_id, answer in answers.items():
                run = pending.pop(task_id)
                doc: dict[str, Any] = {"verdict": "failed", "detail": answer.message or ""}
                if answer.error_type is None and answer.result is not None:
                    doc = unpack(answer.result, what="a check verdict")
                elif answer.error_type is not None:
                    doc["detail"] = f"{answer.error_type}: {answer.message}"
                verdicts[run.run_id] = _run_check(run, doc)
            if pending and time.monotonic() >= deadline:
                self._db.run(functools.partial(drop_read_tasks_txn, task_ids=list(pending)))
                for run in pending.values():
                    verdicts[run.run_id] = RunCheck(
                        run_id=run.run_id,
                        status=run.status.value,
                        verdict="timeout",
                        detail="no worker replayed it in time",
                    )
                pending.clear()
            elif pending:
                time.sleep(0.05)
        return [verdicts[r.run_id] for r in runs]


Counted = tuple[str, str, str]
"""(digest, task kind, reason) of one judged activation, for the versions' health."""

_BLOCKING_REASONS = ("non_determinism", "trap")
"""Replay faults on an upgrade target that will recur on every try: the run stays put for good.
Others (out of fuel on a cold compile, a deadline) just fall back to the pinned version."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Upgrade:
    """How a workflow completion applies: on which version, with which upgrade events."""

    run: Run
    digest: str
    """The version the activation's new events were produced by."""
    events: tuple[NewEvent, ...] = ()
    failed_on: str | None = None
    """The upgrade target a replay failed on (charged to its health)."""


def upgrade_txn(cur: Cursor, task: Task, run: Run, report: UpgradeReport) -> Upgrade | None:
    """Judge a completion's upgrade report against what the server offered at claim.

    A move is applied only to the version this lease was offered, if it is still the type's
    automatic upgrade target, not blocked for the run, and not retired; otherwise None: the
    offer was withdrawn meanwhile and the activation must run again (nothing is counted against
    it). A failure report is kept only for the offered version, trimmed, and blocks the run from
    that version only when the fault will recur (divergence, trap).
    """
    if report.migrate_to and report.migrate_to != run.digest:
        target = report.migrate_to
        if (
            target != task.upgrade_offer
            or target == run.upgrade_blocked
            or rollout_of_txn(cur, run.workflow_type).auto_upgrade_to != target
        ):
            return None
        try:
            version_for_type_txn(cur, target, run.workflow_type, lock=True)
        except AmberError:
            return None
        migrated = RunMigrated(
            from_digest=run.digest,
            to=target,
            checked_seq=task.claimed_seq or 0,  # set with the offer, at claim
            by="auto-upgrade",
            reason="replayed on the upgrade version",
        )
        event = NewEvent(migrated, target)
        repin_run_txn(cur, run.run_id, target)
        return Upgrade(run=replace(run, digest=target), digest=target, events=(event,))
    failed = report.failed
    if failed is None or failed.get("to") != task.upgrade_offer or task.upgrade_offer is None:
        return Upgrade(run=run, digest=task.digest)
    reason = failed.get("reason")
    if reason not in _BLOCKING_REASONS:
        return Upgrade(run=run, digest=task.digest)
    detail = UpgradeDetail(
        reason=reason,
        message=_text(failed.get("message")),
        position=_int(failed.get("position")),
        recorded=_text(failed.get("recorded")),
        issued=_text(failed.get("issued")),
    )
    event = NewEvent(UpgradeFailed(to=task.upgrade_offer, detail=detail), task.digest)
    block_upgrade_txn(cur, run.run_id, task.upgrade_offer)
    return Upgrade(run=run, digest=task.digest, events=(event,), failed_on=task.upgrade_offer)


def _text(value: object) -> str | None:
    """A worker-reported string, cut to a size fit for an event."""
    return value[:1000] if isinstance(value, str) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def checked_answer(task: Task, answer: QueryAnswer) -> QueryAnswer:
    """A check task's verdict, with the history position it holds for taken from the server's
    record of what the worker was handed (not from the worker)."""
    if answer.result is None:
        return answer
    try:
        doc = unpack(answer.result, what="a check verdict")
    except NotMsgpack:
        return replace(answer, result=None, error_type="malformed", message="verdict not msgpack")
    if not isinstance(doc, dict):
        return replace(answer, result=None, error_type="malformed", message="verdict not a map")
    doc["checked_seq"] = task.claimed_seq or 0
    return replace(answer, result=pack(doc))


def _run_of_type(cur: Cursor, run_id: str, workflow_type: str) -> Run:
    """A run by id, or by workflow id (its current run, in the default tenant: a version
    belongs to no tenant, so another tenant's runs are named by run id)."""
    run = get_run_txn(cur, run_id) if _is_uuid(run_id) else None
    if run is None and run_id and len(run_id) <= MAX_ID_LENGTH:
        run = get_run_by_workflow_id_txn(cur, DEFAULT_TENANT, run_id)
    if run is None:
        raise RunNotFound(run_id)
    if run.workflow_type != workflow_type:
        raise InvalidInput(f"run {run_id} is a {run.workflow_type!r} run, not {workflow_type!r}")
    return run


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
