"""The application-facing side of the engine: start runs, talk to them, and look at them."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Final

from amber.abi import MAX_TIMER_MS, InvalidInput, unpack
from amber.history import (
    ALL,
    TASKS_CHANNEL,
    AuditEntry,
    Cursor,
    Database,
    Discarded,
    DuplicateRow,
    Event,
    Lineage,
    NewEvent,
    NewTask,
    Run,
    RunNotFound,
    RunQuery,
    RunStatus,
    SignalReceived,
    TaskKind,
    WorkflowIdInUse,
    claim_signal_id_txn,
    delete_task_txn,
    enqueue_task_txn,
    get_run_by_workflow_id_txn,
    get_run_txn,
    get_task_txn,
    list_runs_txn,
    notify_txn,
    read_events_txn,
    record_audit_txn,
    record_discarded_txn,
    run_discarded_txn,
    run_failures_txn,
    run_tasks_txn,
    run_timers_txn,
    take_query_answer_txn,
)
from amber.runtime.model import (
    DEFAULT_TENANT,
    MAX_HISTORY_PAGE,
    PayloadTooLarge,
    QueryFailed,
    QueryTimedOut,
    RunClosed,
    RunDescription,
    SignalRequest,
    StartRequest,
    StartResult,
)
from amber.versions import select_version_txn

from ._lifecycle import Lifecycle, RunSpec, Wake
from ._notify import Notifier, poke
from ._reset import ResetRequest, Resetter

MAX_ID_LENGTH = 256


MAX_REASON_LENGTH = 4096


_RUN_RECHECK_S = 5.0
"""A waiter re-reads its run this often even without a notification."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalResult:
    seq: int
    duplicate: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryAnswerValue:
    value: bytes
    ended: str


def _check_note(reason: str, by: str) -> None:
    """Operator notes (reason, operator) go into history and the audit log: bounded."""
    if len(reason) > MAX_REASON_LENGTH:
        raise InvalidInput(f"reason is {len(reason)} characters; the limit is {MAX_REASON_LENGTH}")
    if len(by) > MAX_ID_LENGTH:
        raise InvalidInput(f"operator is {len(by)} characters; the limit is {MAX_ID_LENGTH}")


def _check_name(label: str, value: str) -> None:
    if not value or len(value) > MAX_ID_LENGTH or not value.isprintable():
        raise InvalidInput(f"{label} must be 1–{MAX_ID_LENGTH} printable characters")


def _not_another_runs_id(cur: Cursor, workflow_id: str) -> None:
    """Refuse a new workflow id that is another run's run id: every command takes either, run
    ids first, so the new run could never be reached by its workflow id."""
    try:
        as_run_id = str(uuid.UUID(workflow_id))
    except ValueError:
        return
    if get_run_txn(cur, as_run_id) is not None:
        raise InvalidInput(
            f"workflow id {workflow_id!r} is another run's run id: commands naming it would"
            " reach that run; choose another id"
        )


def check_queue(queue: str) -> None:
    """A queue is named as a workflow id is: it becomes a NOTIFY payload, a metrics label and a
    line of `amber status`, whoever names it (a run's start, a worker's poll)."""
    _check_name("queue", queue)


def _check_tenant(tenant: str) -> None:
    _check_name("tenant", tenant)
    if tenant == ALL:
        raise InvalidInput(f"{ALL!r} is not a tenant: it means every tenant in a grant")


class RunService:
    """Start, signal, query, cancel, terminate, reset, describe, list and wait for runs.

    Public methods own their transactions.
    """

    def __init__(self, db: Database, life: Lifecycle, notifier: Notifier | None) -> None:
        self._db = db
        self._clock = life.clock
        self._settings = life.settings
        self._notifier = notifier
        self._life = life
        self._resetter = Resetter(life.clock, life)

    # -- starting -----------------------------------------------------------------------------

    def start(self, request: StartRequest) -> StartResult:
        """Create the run, its first event and its first workflow task, in one transaction."""
        _check_name("workflow type", request.workflow_type)
        _check_tenant(request.tenant)
        if request.workflow_id:
            _check_name("workflow id", request.workflow_id)
        if request.queue:
            check_queue(request.queue)
        self._check_payload("input", request.input)
        if request.signal is not None:
            self._check_signal(request.signal)
        if not 0 <= request.execution_timeout_ms <= MAX_TIMER_MS:
            raise InvalidInput(f"execution timeout must be between 0 and {MAX_TIMER_MS} ms")
        spec = RunSpec(
            tenant=request.tenant,
            workflow_id="",
            workflow_type=request.workflow_type,
            digest="",
            queue=request.queue or self._settings.default_queue,
            input=request.input,
            execution_timeout_ms=request.execution_timeout_ms or None,
        )
        workflow_id = request.workflow_id or spec.run_id

        def txn(cur: Cursor) -> tuple[StartResult | WorkflowIdInUse, list[Wake]]:
            existing = get_run_by_workflow_id_txn(cur, request.tenant, workflow_id)
            if existing is not None:
                first = get_run_by_workflow_id_txn(cur, request.tenant, workflow_id, first=True)
                if request.signal is not None:
                    # Locked as `signal` locks it: a run closing meanwhile must not get the
                    # signal appended after its closing event.
                    locked = get_run_txn(cur, existing.run_id, for_update=True)
                    assert locked is not None
                    # A closed run is not started again (ids are never reused), but a
                    # redelivery of the signal that closed it is a duplicate, as for `signal`.
                    sent, wakes = self._deliver_txn(
                        cur,
                        locked,
                        request.signal,
                        closed=f"workflow id {workflow_id!r}: run {locked.run_id} is"
                        f" {locked.status.value}; it takes no signals",
                    )
                    result = StartResult(
                        run=locked,
                        already_started=True,
                        signalled=not sent.duplicate,
                        duplicate=sent.duplicate,
                    )
                    return result, wakes
                taken = self._same_start(first or existing, request)
                if taken is not None:  # an answer, not a race to retry
                    return taken, []
                return StartResult(run=existing, already_started=True), []
            _not_another_runs_id(cur, workflow_id)
            selection = select_version_txn(
                cur, request.workflow_type, workflow_id, request.version or None
            )
            run, wakes = self._life.create_run_txn(
                cur,
                RunSpec(
                    run_id=spec.run_id,
                    tenant=request.tenant,
                    workflow_id=workflow_id,
                    workflow_type=request.workflow_type,
                    digest=selection.digest,
                    queue=spec.queue,
                    input=request.input,
                    execution_timeout_ms=spec.execution_timeout_ms,
                    lineage=Lineage(version=selection),
                    traceparent=request.traceparent,
                ),
            )
            signalled = False
            if request.signal is not None:
                wakes += self._signal_txn(cur, run, request.signal)[1]
                signalled = True
            return StartResult(run=run, already_started=False, signalled=signalled), wakes

        for _ in range(3):
            try:
                result, wakes = self._db.run(txn)
                break
            except (DuplicateRow, WorkflowIdInUse):
                continue  # a concurrent start took the workflow id; the retry returns its run
        else:
            raise WorkflowIdInUse(f"workflow id {workflow_id!r} is being started concurrently")
        if isinstance(result, WorkflowIdInUse):
            raise result
        poke(self._notifier, wakes)
        return result

    @staticmethod
    def _same_start(existing: Run, request: StartRequest) -> WorkflowIdInUse | None:
        """Why `request` is not a repeat of the start that made `existing` (None: it is)."""
        if existing.workflow_type != request.workflow_type or existing.input != request.input:
            return WorkflowIdInUse(
                f"workflow id {existing.workflow_id!r} is already used by run {existing.run_id}"
                f" ({existing.workflow_type}) with a different type or input"
            )
        return None

    def _check_payload(self, what: str, payload: bytes) -> None:
        """Within the size limit, and one msgpack value (or nothing): a guest would read only
        a valid prefix of anything else, and history would keep it as opaque bytes."""
        if len(payload) > self._settings.max_payload_bytes:
            raise PayloadTooLarge(
                f"{what} is {len(payload)} bytes; the limit is {self._settings.max_payload_bytes}"
            )
        if payload:
            unpack(payload, what=what, any_keys=True)

    def _check_signal(self, signal: SignalRequest) -> None:
        _check_name("signal name", signal.name)
        if signal.request_id:
            _check_name("signal request id", signal.request_id)
        self._check_payload("signal payload", signal.payload)

    # -- talking to runs ----------------------------------------------------------------------

    def signal(
        self, ref: str, signal: SignalRequest, *, tenant: str = DEFAULT_TENANT
    ) -> SignalResult:
        """Deliver a signal (appended to history, buffered until the workflow waits for it).

        A repeated `request_id` changes nothing and is recorded as a discarded delivery, also
        once the run has closed (a redelivery after the first delivery ended the run is still a
        duplicate, not an error the sender would retry). Raises `RunClosed` for a new signal to
        a closed run.
        """
        self._check_signal(signal)

        def txn(cur: Cursor) -> tuple[SignalResult, list[Wake]]:
            run = find_run_txn(cur, ref, tenant, for_update=True)
            closed = f"run {run.run_id} is {run.status.value}; it takes no signals"
            return self._deliver_txn(cur, run, signal, closed=closed)

        result, wakes = self._db.run(txn)
        poke(self._notifier, wakes)
        return result

    def _deliver_txn(
        self, cur: Cursor, run: Run, signal: SignalRequest, *, closed: str
    ) -> tuple[SignalResult, list[Wake]]:
        """Signal `run` (locked): a duplicate if its request id was delivered before, even
        once the run has closed; else `RunClosed(closed)` for a closed run."""
        if run.status.closed:
            # A new id claimed here is undone with the refusal's rollback.
            if signal.request_id and not claim_signal_id_txn(
                cur, run.run_id, signal.request_id, run.last_seq + 1
            ):
                return self._duplicate_txn(cur, run, signal), []
            raise RunClosed(closed)
        return self._signal_txn(cur, run, signal)

    def _signal_txn(
        self, cur: Cursor, run: Run, signal: SignalRequest
    ) -> tuple[SignalResult, list[Wake]]:
        if signal.request_id and not claim_signal_id_txn(
            cur, run.run_id, signal.request_id, run.last_seq + 1
        ):
            return self._duplicate_txn(cur, run, signal), []
        received = SignalReceived(
            name=signal.name, payload=signal.payload, request_id=signal.request_id
        )
        event = NewEvent(received, run.digest)
        wakes = self._life.deliver_txn(cur, run, event)
        refreshed = get_run_txn(cur, run.run_id)
        assert refreshed is not None
        return SignalResult(seq=refreshed.last_seq, duplicate=False), wakes

    def _duplicate_txn(self, cur: Cursor, run: Run, signal: SignalRequest) -> SignalResult:
        """Record a delivery whose request id the run already has; nothing else changes."""
        detail = f"signal {signal.name!r} request id {signal.request_id!r} delivered again"
        record_discarded_txn(
            cur,
            Discarded(
                run_id=run.run_id,
                kind="duplicate_signal",
                detail=detail,
                created_at=self._clock.now(),
            ),
        )
        return SignalResult(seq=0, duplicate=True)

    def cancel(self, ref: str, *, reason: str, by: str, tenant: str = DEFAULT_TENANT) -> bool:
        """Request cancellation; returns whether it had already been requested.

        The workflow sees it at its next await and may compensate before it closes.
        """

        _check_note(reason, by)

        def txn(cur: Cursor) -> tuple[bool, list[Wake]]:
            run = find_run_txn(cur, ref, tenant, for_update=True)
            if run.status.closed:
                raise RunClosed(f"run {run.run_id} is already {run.status.value}")
            wakes, already = self._life.request_cancel_txn(cur, run, reason, by)
            detail = {"already_requested": already}
            self._audit_txn(cur, "run.cancel", run, reason=reason, by=by, detail=detail)
            return already, wakes

        already, wakes = self._db.run(txn)
        poke(self._notifier, wakes)
        return already

    def terminate(self, ref: str, *, reason: str, by: str, tenant: str = DEFAULT_TENANT) -> Run:
        """Close a run at once, recording who and why (no workflow code runs)."""

        _check_note(reason, by)

        def txn(cur: Cursor) -> tuple[Run, list[Wake]]:
            run = find_run_txn(cur, ref, tenant, for_update=True)
            if run.status.closed:
                raise RunClosed(f"run {run.run_id} is already {run.status.value}")
            wakes = self._life.terminate_txn(cur, run, reason, by)
            closed = get_run_txn(cur, run.run_id)
            assert closed is not None
            detail = {"was": run.status.value}
            self._audit_txn(cur, "run.terminate", run, reason=reason, by=by, detail=detail)
            return closed, wakes

        run, wakes = self._db.run(txn)
        poke(self._notifier, wakes)
        return run

    def reset(
        self, ref: str, *, to_event: int, reason: str, by: str, tenant: str = DEFAULT_TENANT
    ) -> Run:
        """Start a new run that replays this run's history up to event `to_event` and goes on
        from there. The old run is terminated if still open; both are linked by events."""

        _check_note(reason, by)

        def txn(cur: Cursor) -> tuple[Run, list[Wake]]:
            old = find_run_txn(cur, ref, tenant, for_update=True)
            request = ResetRequest(to_event=to_event, reason=reason, by=by)
            new_run_id, wakes = self._resetter.reset_txn(cur, old, request)
            fresh = get_run_txn(cur, new_run_id)
            assert fresh is not None
            detail = {
                "new_run_id": new_run_id,
                "to_event": to_event,
                "was": old.status.value,
                "workflow_id": old.workflow_id,
            }
            self._audit_txn(cur, "run.reset", old, reason=reason, by=by, detail=detail)
            return fresh, wakes

        run, wakes = self._db.run(txn)
        poke(self._notifier, wakes)
        return run

    def _audit_txn(
        self, cur: Cursor, action: str, run: Run, *, reason: str, by: str, detail: dict[str, Any]
    ) -> None:
        """Record an operator command on `run` in its transaction (last: it locks the audit
        chain's head until the commit)."""
        entry = AuditEntry(
            actor=by,
            action=action,
            target=run.run_id,
            reason=reason,
            detail={"tenant": run.tenant, **detail},
            at=self._clock.now(),
        )
        record_audit_txn(cur, entry)

    def query(
        self, ref: str, name: str, *, timeout_s: float, tenant: str = DEFAULT_TENANT
    ) -> QueryAnswerValue:
        """Ask a worker to replay the run and answer with what it published under `name`.

        Nothing is appended to the run. Raises `QueryTimedOut` if no worker answers in time and
        `QueryFailed` if the run published nothing under that name.
        """
        _check_name("query name", name)

        def enqueue(cur: Cursor) -> tuple[int, str]:
            run = find_run_txn(cur, ref, tenant)
            now = self._clock.now()
            task_id = enqueue_task_txn(
                cur,
                NewTask(
                    run_id=run.run_id,
                    kind=TaskKind.QUERY,
                    queue=run.queue,
                    name=name,
                    digest=run.digest,
                    visible_at=now,
                    max_attempts=1,
                ),
                now,
            )
            assert task_id is not None
            notify_txn(cur, TASKS_CHANNEL, run.queue)
            return task_id, run.queue

        task_id, queue = self._db.run(enqueue)
        poke(self._notifier, [(TASKS_CHANNEL, queue)])
        deadline = time.monotonic() + timeout_s
        while True:
            answer = self._db.run(lambda cur: take_query_answer_txn(cur, task_id))
            if answer is not None:
                if answer.error_type is not None:
                    raise QueryFailed(f"{answer.error_type}: {answer.message}")
                assert answer.result is not None
                return QueryAnswerValue(value=answer.result, ended=answer.message or "")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._db.run(lambda cur: _drop_query_txn(cur, task_id))
                raise QueryTimedOut(f"no worker answered the query within {timeout_s:g} s")
            self._wait_query(task_id, min(remaining, 0.5))

    def _wait_query(self, task_id: int, timeout: float) -> None:
        if self._notifier is None:
            time.sleep(min(timeout, 0.02))
            return
        with self._notifier.watch_query(str(task_id)) as watch:
            watch.wait(watch.generation, timeout)

    # -- looking at runs ----------------------------------------------------------------------

    def get(self, ref: str, *, tenant: str = DEFAULT_TENANT) -> Run:
        """The run named by `ref` — a run id or a workflow id — in `tenant`, or `RunNotFound`."""
        return self._db.run(lambda cur: find_run_txn(cur, ref, tenant))

    def describe(self, ref: str, *, tenant: str = DEFAULT_TENANT) -> RunDescription:
        """The run with its open tasks, timers, recent failures and discarded deliveries."""

        def txn(cur: Cursor) -> RunDescription:
            run = find_run_txn(cur, ref, tenant)
            return RunDescription(
                run=run,
                tasks=tuple(run_tasks_txn(cur, run.run_id)),
                recent_failures=tuple(run_failures_txn(cur, run.run_id)),
                timers=tuple(run_timers_txn(cur, run.run_id)),
                discarded=tuple(run_discarded_txn(cur, run.run_id)),
            )

        return self._db.run(txn)

    def history(self, ref: str, *, after_seq: int = 0, tenant: str = DEFAULT_TENANT) -> list[Event]:
        """The run's events after `after_seq`, in order (at most `MAX_HISTORY_PAGE`)."""

        def txn(cur: Cursor) -> list[Event]:
            run = find_run_txn(cur, ref, tenant)
            return read_events_txn(cur, run.run_id, after_seq=after_seq, limit=MAX_HISTORY_PAGE)

        return self._db.run(txn)

    def list(self, query: RunQuery) -> list[Run]:
        if not 1 <= query.limit <= 1000:
            raise InvalidInput("limit must be between 1 and 1000")
        return self._db.run(lambda cur: list_runs_txn(cur, query))

    def wait_closed(self, ref: str, *, timeout_s: float, tenant: str = DEFAULT_TENANT) -> Run:
        """The run once it has closed, or as it is when `timeout_s` passes."""
        deadline = time.monotonic() + timeout_s
        run = self.get(ref, tenant=tenant)
        if self._notifier is None:
            while not run.status.closed and (remaining := deadline - time.monotonic()) > 0:
                time.sleep(min(remaining, 0.05))
                run = self.get(run.run_id, tenant=tenant)
            return run
        with self._notifier.watch_run(run.run_id) as watch:
            while True:
                seen = watch.generation
                run = self.get(run.run_id, tenant=tenant)
                remaining = deadline - time.monotonic()
                if run.status.closed or remaining <= 0:
                    return run
                watch.wait(seen, min(remaining, _RUN_RECHECK_S))


def _drop_query_txn(cur: Cursor, task_id: int) -> None:
    task = get_task_txn(cur, task_id)
    if task is not None and task.kind is TaskKind.QUERY:
        delete_task_txn(cur, task_id)
    take_query_answer_txn(cur, task_id)


def find_run_txn(cur: Cursor, ref: str, tenant: str, *, for_update: bool = False) -> Run:
    """A run by run id or, failing that, by workflow id (its current run), within one tenant."""
    run: Run | None = None
    try:
        run_id = str(uuid.UUID(ref))
    except ValueError:
        run_id = ""
    if run_id:
        run = get_run_txn(cur, run_id, for_update=for_update)
    if run is None and ref and len(ref) <= MAX_ID_LENGTH:
        run = get_run_by_workflow_id_txn(cur, tenant, ref)
        if run is not None and for_update:
            run = _lock_current(cur, run, tenant, ref)
    if run is None or run.tenant != tenant:
        raise RunNotFound(ref)
    return run


def _lock_current(cur: Cursor, run: Run, tenant: str, workflow_id: str) -> Run | None:
    """Lock `run`, the current run of `workflow_id` when it was read. If it continued as new
    before the lock was had, the id names the chain's next run now: follow it (a few times, a
    chain may be quick), so a command by workflow id reaches the run that is current."""
    locked = get_run_txn(cur, run.run_id, for_update=True)
    for _ in range(_FOLLOW_LOCKED):
        if locked is None or locked.status is not RunStatus.CONTINUED_AS_NEW:
            break
        following = get_run_by_workflow_id_txn(cur, tenant, workflow_id)
        if following is None or following.run_id == locked.run_id:
            break
        locked = get_run_txn(cur, following.run_id, for_update=True)
    return locked


_FOLLOW_LOCKED: Final = 8
"""How many runs of a chain `_lock_current` follows."""
