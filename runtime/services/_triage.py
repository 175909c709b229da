"""Operator triage of poison pills: list troubled runs, export them, and release them.

Every command names an operator and a reason, and is written where the next reader looks: a
`RunResumed` event in the run's history (action, operator, reason, both digests, the skipped
step) and an audit row, in the transaction that changes the run. None edits stored state
directly — they go through the same transitions the engine uses (migration, task requeue,
activity completion, termination).

- `resume RUN [--version D]`: a *suspended* run continues; with a version, only after its real
  history replayed on `D` without divergence (the migration gate), then the run is repinned to
  `D` and its poisoned activity tasks run on `D` too.
- `retry RUN`: a run with a poisoned (or held) task runs it again now in the main pool, on the
  same version — for failures whose cause was outside the code (an outage, a bad deploy of a
  dependency); the bulk form takes every run poisoned by one fingerprint.
- `skip RUN --step S --result R`: the poisoned activity at step S is completed with the
  operator's result (its `ActivityCompleted` names the operator), and the run continues.
- `terminate RUN`: the run is closed as terminated.

Releasing a run clears its crash counters: whatever is tried next starts a new series.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from amber.abi import AmberError, Conflict, InvalidInput, NotMsgpack, unpack
from amber.history import (
    ALL,
    TASKS_CHANNEL,
    ActivityCompleted,
    AuditEntry,
    Cursor,
    Database,
    Event,
    FailureRecord,
    NewEvent,
    Run,
    RunMigrated,
    RunResumed,
    Task,
    TaskKind,
    TaskState,
    Troubled,
    VersionConflict,
    append_events_txn,
    audit_for_txn,
    delete_pending_task_txn,
    get_run_txn,
    notify_txn,
    read_events_txn,
    record_audit_txn,
    release_run_txn,
    repin_run_txn,
    repoint_task_txn,
    run_failures_txn,
    run_tasks_txn,
    troubled_runs_txn,
)
from amber.runtime.model import (
    DEFAULT_TENANT,
    MAX_BUNDLE_FAILURES,
    MAX_BUNDLE_REPRO_BYTES,
    Bundle,
    NotTroubled,
    PayloadTooLarge,
    RunClosed,
    TriageAction,
    TriageCommand,
    TriageOutcome,
)
from amber.versions import VersionRegistry, version_for_type_txn

from ._lifecycle import Lifecycle, Wake
from ._migration import MigrationService
from ._notify import Notifier
from ._runs import MAX_ID_LENGTH, MAX_REASON_LENGTH, find_run_txn

MAX_BULK_RUNS = 1000
"""Runs one bulk triage command may touch."""


def _within_budget(failures: Sequence[FailureRecord]) -> list[FailureRecord]:
    """Keep repros, newest first, while they fit `MAX_BUNDLE_REPRO_BYTES`; older ones are left
    out (marked `b""`: recorded, not exported) so the bundle fits one response."""
    kept, used = [], 0
    for failure in failures:
        size = len(failure.repro or b"")
        if size and used + size > MAX_BUNDLE_REPRO_BYTES:
            failure = replace(failure, repro=b"")
        used += len(failure.repro or b"")
        kept.append(failure)
    return kept


def _troubled_tasks(tasks: Sequence[Task]) -> list[Task]:
    return [t for t in tasks if t.poisoned_at is not None or t.pool != "main"]


class TriageService:
    """Triage commands; public methods own their transactions."""

    def __init__(
        self,
        db: Database,
        life: Lifecycle,
        notifier: Notifier | None,
        *,
        migration: MigrationService,
        registry: VersionRegistry,
    ) -> None:
        self._db = db
        self._clock = life.clock
        self._settings = life.settings
        self._notifier = notifier
        self._migration = migration
        self._registry = registry
        self._life = life

    def troubled(
        self, *, tenant: str = DEFAULT_TENANT, fingerprint: str = "", limit: int = 100
    ) -> list[Troubled]:
        """Suspended runs and runs with a poisoned task, newest trouble first; `tenant` `*`:
        every tenant's (the one listing that crosses tenants, for operators granted `*`)."""
        if not 1 <= limit <= MAX_BULK_RUNS:
            raise InvalidInput(f"limit must be between 1 and {MAX_BULK_RUNS}")
        scope = None if tenant == ALL else tenant
        return self._db.run(
            lambda cur: troubled_runs_txn(
                cur, tenant=scope, fingerprint=fingerprint or None, limit=limit
            )
        )

    def export(self, ref: str, *, operator: str, tenant: str = DEFAULT_TENANT) -> Bundle:
        """A self-contained bundle of the run for offline replay (audited: it holds inputs)."""

        def txn(cur: Cursor) -> tuple[Run, list[Event], list[FailureRecord], list[str]]:
            run = find_run_txn(cur, ref, tenant)
            events: list[Event] = []
            while True:
                page = read_events_txn(cur, run.run_id, after_seq=len(events), limit=1000)
                events += page
                if len(page) < 1000:
                    break
            failures = _within_budget(
                run_failures_txn(cur, run.run_id, limit=MAX_BUNDLE_FAILURES, repros=True)
            )
            digests = {run.digest, *(e.digest for e in events), *(f.digest for f in failures)}
            record_audit_txn(
                cur,
                AuditEntry(
                    actor=operator,
                    action="run.export",
                    target=run.run_id,
                    reason="",
                    detail={"events": len(events), "failures": len(failures)},
                    at=self._clock.now(),
                ),
            )
            return run, events, failures, sorted(d for d in digests if d)

        run, events, failures, digests = self._db.run(txn)
        modules = {d: self._registry.module_bytes(d) for d in digests}
        return Bundle(
            run=run,
            events=tuple(events),
            modules=modules,
            failures=tuple(failures),
            exported_at=self._clock.now(),
            exported_by=operator,
        )

    def apply(self, command: TriageCommand) -> list[TriageOutcome]:
        """Carry out an operator command on each of its runs. A named single run's refusal
        raises; in bulk, each run's outcome is reported and the others go on."""
        _check_command(command)
        if command.tenant == ALL:
            raise InvalidInput(
                "a triage command acts in one tenant: name it (`*` lists every tenant's"
                " troubled runs, `amber triage list --tenant '*'`)"
            )
        if command.action is TriageAction.SKIP:
            self._check_result(command.result)
        if command.run_ids:
            runs = list(dict.fromkeys(command.run_ids))
        else:
            troubled = self.troubled(
                tenant=command.tenant, fingerprint=command.fingerprint, limit=MAX_BULK_RUNS
            )
            runs = list(dict.fromkeys(t.run.run_id for t in troubled))
        single = len(command.run_ids) == 1
        outcomes = []
        for ref in runs:
            try:
                outcomes.append(self._one(command, ref))
            except AmberError as exc:
                if single:
                    raise
                outcomes.append(TriageOutcome(run_id=ref, outcome="refused", detail=str(exc)))
        return outcomes

    def _check_result(self, result: bytes) -> None:
        """A skipped step's result is held to the same rules as an activity's own result."""
        limit = self._settings.max_payload_bytes
        if len(result) > limit:
            raise PayloadTooLarge(f"the result is {len(result)} bytes; the limit is {limit}")
        try:
            unpack(result, what="the result")
        except NotMsgpack as exc:
            raise InvalidInput(str(exc)) from None

    # -- one run -------------------------------------------------------------------------------

    def _latest_command_txn(self, cur: Cursor, run_id: str) -> str:
        """For a refusal: the last audited command on the run, which usually explains it (two
        operators at once: the other one's command won)."""
        entries = audit_for_txn(cur, run_id, limit=1)
        if not entries:
            return ""
        last = entries[0]
        ago = max(0.0, (self._clock.now() - last.at).total_seconds())
        return f" (last command on it: {last.action} by {last.actor}, {ago:.0f} s ago)"

    def _one(self, command: TriageCommand, ref: str) -> TriageOutcome:
        run = self._db.run(lambda cur: find_run_txn(cur, ref, command.tenant))
        target = ""
        checked_seq: int | None = None
        if command.version:  # resume or retry on a fixed version, gated by a replay check
            target, checked_seq = self._gate(run, command.version)

        def txn(cur: Cursor) -> tuple[TriageOutcome, list[Wake]]:
            current = get_run_txn(cur, run.run_id, for_update=True)
            assert current is not None
            if current.status.closed:
                raise RunClosed(
                    f"run {current.run_id} is already {current.status.value}"
                    + self._latest_command_txn(cur, current.run_id)
                )
            # Locked: a claim skips these rows, a report or sweep waits, until this commits.
            tasks = run_tasks_txn(cur, current.run_id, for_update=True)
            troubled = _troubled_tasks(tasks)
            try:
                _check_troubled(current, troubled, command)
            except NotTroubled as exc:
                raise NotTroubled(f"{exc}{self._latest_command_txn(cur, current.run_id)}") from None
            if command.action is TriageAction.TERMINATE:
                return self._terminate_txn(cur, current, command)
            if any(t.state is TaskState.LEASED for t in troubled):
                raise Conflict(
                    f"run {current.run_id}: its poisoned task is running in the surgical pool"
                    " right now; try again when that attempt ends"
                )
            if command.action is TriageAction.SKIP:
                return self._skip_txn(cur, current, troubled, command)
            if target and target != current.digest and checked_seq is None:
                raise Conflict(f"run {current.run_id} moved while it was checked; run it again")
            return self._release_txn(cur, current, troubled, command, target, checked_seq)

        try:
            outcome, wakes = self._db.run(txn)
        except VersionConflict:
            raise Conflict(
                f"run {run.run_id}: its history grew while it was checked on the new version;"
                " run the command again"
            ) from None
        if self._notifier is not None:
            self._notifier.poke(wakes)
        return outcome

    def _gate(self, run: Run, version: str) -> tuple[str, int | None]:
        """Replay the run on the fixed version; its digest and the checked history position,
        or a refusal naming the divergence. The run's own version is checked too: a run
        poisoned by its own code's divergence would only be poisoned again there."""
        digest = self._db.run(
            lambda cur: version_for_type_txn(cur, version, run.workflow_type).digest
        )
        _, checks = self._migration.check(digest, run.workflow_type, run_ids=[run.run_id], own=True)
        check = checks[0]
        if check.verdict != "compatible":
            where = f" at command {check.position}" if check.position is not None else ""
            raise Conflict(
                f"run {run.run_id} does not replay on {digest[:12]}: {check.verdict}{where}"
                f" {check.detail or ''}".rstrip()
            )
        return digest, check.checked_seq

    def _release_txn(
        self,
        cur: Cursor,
        run: Run,
        troubled: Sequence[Task],
        command: TriageCommand,
        target: str,
        checked_seq: int | None,
    ) -> tuple[TriageOutcome, list[Wake]]:
        now = self._clock.now()
        moved = bool(target) and target != run.digest
        if moved:
            version = version_for_type_txn(cur, target, run.workflow_type, lock=True)
            for task in troubled:
                if task.kind is TaskKind.ACTIVITY and task.name not in version.manifest.activities:
                    raise InvalidInput(
                        f"version {target[:12]} does not export activity {task.name!r}"
                    )
            move = RunMigrated(
                from_digest=run.digest,
                to=target,
                checked_seq=checked_seq,
                by=command.operator,
                reason=command.reason,
            )
            migrated = NewEvent(move, target)
            append_events_txn(cur, run.run_id, [migrated], expected_last_seq=checked_seq, now=now)
            repin_run_txn(cur, run.run_id, target)
            for task in troubled:
                if task.kind is TaskKind.ACTIVITY:
                    repoint_task_txn(cur, task.task_id, target)
        outcome = TriageOutcome(
            run_id=run.run_id,
            outcome="resumed" if command.action is TriageAction.RESUME else "retried",
            from_digest=run.digest,
            to_digest=target or run.digest,
        )
        self._resumed_txn(cur, run, command, outcome, step=None)
        release_run_txn(cur, run.run_id, now)
        notify_txn(cur, TASKS_CHANNEL, run.queue)
        return outcome, [(TASKS_CHANNEL, run.queue)]

    def _skip_txn(
        self, cur: Cursor, run: Run, troubled: Sequence[Task], command: TriageCommand
    ) -> tuple[TriageOutcome, list[Wake]]:
        task = next(
            (t for t in troubled if t.kind is TaskKind.ACTIVITY and t.cmd == command.step), None
        )
        if task is None:
            steps = [t.cmd for t in troubled if t.kind is TaskKind.ACTIVITY]
            raise InvalidInput(
                f"run {run.run_id} has no poisoned activity at step {command.step}"
                + (f" (poisoned steps: {steps})" if steps else " (no activity is poisoned)")
            )
        outcome = TriageOutcome(
            run_id=run.run_id, outcome="skipped", from_digest=run.digest, to_digest=run.digest
        )
        if not delete_pending_task_txn(cur, task.task_id):
            raise Conflict(f"run {run.run_id}: step {task.cmd} is running; try again later")
        self._resumed_txn(cur, run, command, outcome, step=task.cmd)
        release_run_txn(cur, run.run_id, self._clock.now())
        skipped = ActivityCompleted(
            cmd=task.activity_cmd,
            result=command.result,
            attempt=task.attempt,
            skipped_by=command.operator,
            reason=command.reason,
        )
        completed = NewEvent(skipped, task.digest)
        current = get_run_txn(cur, run.run_id)
        assert current is not None
        return outcome, self._life.deliver_txn(cur, current, completed)

    def _terminate_txn(
        self, cur: Cursor, run: Run, command: TriageCommand
    ) -> tuple[TriageOutcome, list[Wake]]:
        outcome = TriageOutcome(
            run_id=run.run_id, outcome="terminated", from_digest=run.digest, to_digest=run.digest
        )
        self._audit_txn(cur, run, command, outcome, step=None)
        release_run_txn(cur, run.run_id, self._clock.now())
        current = get_run_txn(cur, run.run_id)
        assert current is not None
        return outcome, self._life.terminate_txn(cur, current, command.reason, command.operator)

    def _resumed_txn(
        self,
        cur: Cursor,
        run: Run,
        command: TriageCommand,
        outcome: TriageOutcome,
        step: int | None,
    ) -> None:
        resumed = RunResumed(
            action=command.action.value,
            by=command.operator,
            reason=command.reason,
            from_digest=outcome.from_digest,
            to=outcome.to_digest,
            step=step,
            suspended=run.suspension is not None,
        )
        event = NewEvent(resumed, outcome.to_digest)
        append_events_txn(cur, run.run_id, [event], expected_last_seq=None, now=self._clock.now())
        self._audit_txn(cur, run, command, outcome, step)

    def _audit_txn(
        self,
        cur: Cursor,
        run: Run,
        command: TriageCommand,
        outcome: TriageOutcome,
        step: int | None,
    ) -> None:
        detail = {"from": outcome.from_digest, "to": outcome.to_digest, "step": step}
        if command.fingerprint:
            detail["fingerprint"] = command.fingerprint
        record_audit_txn(
            cur,
            AuditEntry(
                actor=command.operator,
                action=f"run.triage.{command.action.value}",
                target=run.run_id,
                reason=command.reason,
                detail=detail,
                at=self._clock.now(),
            ),
        )


def _check_troubled(run: Run, troubled: Sequence[Task], command: TriageCommand) -> None:
    """Refuse a command on a run that is not (or no longer) in the trouble it names."""
    if run.suspension is None and not troubled:
        raise NotTroubled(f"run {run.run_id} is neither suspended nor poisoned")
    if command.fingerprint:  # bulk: the run was listed outside this transaction
        marks = {t.crash.fingerprint for t in troubled if t.crash is not None}
        if run.suspension is not None and run.suspension.fingerprint:
            marks.add(run.suspension.fingerprint)
        if command.fingerprint not in marks:
            raise NotTroubled(f"run {run.run_id} is no longer troubled by {command.fingerprint}")


def _check_command(command: TriageCommand) -> None:
    if not command.reason.strip():
        raise InvalidInput("a triage command needs a reason (it goes into the run's history)")
    if len(command.reason) > MAX_REASON_LENGTH:
        raise InvalidInput(f"reason is longer than {MAX_REASON_LENGTH} characters")
    if not command.operator or len(command.operator) > MAX_ID_LENGTH:
        raise InvalidInput("a triage command needs an operator")
    if bool(command.run_ids) == bool(command.fingerprint):
        raise InvalidInput("name either runs or a fingerprint (bulk), not both or neither")
    if len(command.run_ids) > MAX_BULK_RUNS:
        raise InvalidInput(f"name at most {MAX_BULK_RUNS} runs at once")
    if command.version and command.action not in (TriageAction.RESUME, TriageAction.RETRY):
        raise InvalidInput("only resume and retry take a version")
    if command.action is TriageAction.SKIP:
        if command.step is None or command.step < 0:
            raise InvalidInput("skip needs the step (activity command index) to complete")
        if not command.result:
            raise InvalidInput("skip needs the result the step completes with")
    elif command.step is not None or command.result:
        raise InvalidInput("only skip takes a step and a result")
