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

import msgpack

from abi import InvalidInput
from history import (
    TASKS_CHANNEL,
    AuditEntry,
    Cursor,
    Database,
    EventType,
    NewEvent,
    NewTask,
    Run,
    RunNotFound,
    TaskKind,
    VersionConflict,
    append_events_txn,
    drop_read_tasks_txn,
    enqueue_task_txn,
    get_run_txn,
    notify_txn,
    record_audit_txn,
    repin_run_txn,
    runs_of_type_txn,
    take_query_answers_txn,
)
from versions import Rollout, version_for_type_txn

from ._clock import Clock
from ._notify import Notifier

MAX_CHECKED_RUNS = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCheck:
    """One run's verdict on a candidate version (and, for a migration, what was done)."""

    run_id: str
    status: str
    verdict: str
    """compatible, incompatible, failed (the replay faulted otherwise), already_on, timeout."""
    position: int | None = None
    seq: int | None = None
    recorded: str = ""
    issued: str = ""
    detail: str = ""
    checked_seq: int = 0
    outcome: str = ""
    """migrate only: migrated, refused, moved_on (history grew since the check), skipped."""


def _verdict(run: Run, doc: dict[str, Any]) -> RunCheck:
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
    ) -> tuple[str, list[RunCheck]]:
        """Replay runs of `workflow_type` on `candidate`: the given runs, or every open run
        plus `closed_sample` recently closed ones. Returns the candidate's digest and a verdict
        per run. A full check of a type is remembered (it gates automatic upgrades)."""
        if closed_sample < 0 or closed_sample > 1000:
            raise InvalidInput("closed_sample must be between 0 and 1000")

        def select(cur: Cursor) -> tuple[str, list[Run]]:
            digest = version_for_type_txn(cur, candidate, workflow_type).digest
            if run_ids:
                runs = [_run_of_type(cur, r, workflow_type) for r in run_ids]
            else:
                runs = runs_of_type_txn(cur, workflow_type, running=True, limit=MAX_CHECKED_RUNS)
                runs += runs_of_type_txn(cur, workflow_type, running=False, limit=closed_sample)
            return digest, runs

        digest, runs = self._db.run(select)
        results = self._replay_all(digest, runs, timeout_s)
        if not run_ids:
            self._rollout.record_check(
                workflow_type,
                digest,
                now=self._clock.now(),
                runs=len(results),
                compatible=sum(r.verdict in ("compatible", "already_on") for r in results),
                incompatible=sum(r.verdict == "incompatible" for r in results),
                failed=sum(r.verdict in ("failed", "timeout") for r in results),
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
            if run is None or run.status.closed or run.digest == digest:
                return "skipped"
            now = self._clock.now()
            event = NewEvent(
                type=EventType.RUN_MIGRATED,
                payload={
                    "from": run.digest,
                    "to": digest,
                    "checked_seq": check.checked_seq,
                    "by": actor,
                    "reason": reason,
                },
                digest=digest,
            )
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

    def _replay_all(self, digest: str, runs: Sequence[Run], timeout_s: float) -> list[RunCheck]:
        def enqueue(cur: Cursor) -> dict[int, Run]:
            now = self._clock.now()
            pending: dict[int, Run] = {}
            queues = set()
            for run in runs:
                if run.digest == digest:
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
                    doc = msgpack.unpackb(answer.result, raw=False)
                elif answer.error_type is not None:
                    doc["detail"] = f"{answer.error_type}: {answer.message}"
                verdicts[run.run_id] = _verdict(run, doc)
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


def _run_of_type(cur: Cursor, run_id: str, workflow_type: str) -> Run:
    run = get_run_txn(cur, run_id) if _is_uuid(run_id) else None
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
