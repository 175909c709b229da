"""The worker: poll a queue over gRPC, run each task in a fresh sandbox, report the outcome.

A worker holds no state a crash could lose: a task it was running stays leased until the lease
runs out, then the server hands it to another worker. A late report from a worker that lost its
lease is refused by the fencing token. Guest faults never stop the loop — they become typed
failure reports — and so do the worker's own bugs on a single task.

Each report asks the server for the worker's next task (eager dispatch), so a busy worker polls
only when its queue has run dry.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol, TypeVar

from opentelemetry.trace import Span, Tracer

from amber.abi import (
    ActivityInput,
    ActivityOutcome,
    ActivityStatus,
    AmberError,
    ErrorInfo,
    RetryableError,
    WorkflowStatus,
    pack,
)
from amber.history import ActivityCompleted, Event, LeaseLost, TaskKind, VersionConflict
from amber.runtime.client import AmberClient, WorkStream
from amber.runtime.metrics import WorkerMetrics
from amber.runtime.model import (
    Clock,
    FailureReason,
    FailureReport,
    GuestFault,
    LeasedTask,
    NewCommand,
    NonDeterminism,
    NotAuthorised,
    PayloadTooLarge,
    RemoteError,
    SystemClock,
    ThenWorkflow,
    WorkflowCompletion,
    to_ms,
)
from amber.runtime.replay import (
    WRONG_RESULT_FAULTS,
    ActivityAttempt,
    ReplayMemo,
    WorkflowActivation,
    WorkflowStep,
    activate_workflow,
    answer_query,
    first_divergence,
    run_activity,
)
from amber.runtime.sandbox import (
    ActivityHost,
    ParallelSandbox,
    RecordingSandbox,
    SandboxLimits,
    SandboxRunner,
    repro_of,
)
from amber.runtime.tracing import context_from_traceparent, tracer

from ._budgets import Budgets, no_tighter_than_crash
from ._heartbeat import Heartbeats
from ._histories import RunCopies, RunCopy
from ._serving import ServingThreads

_log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings:
    """Which queue to serve and the sandbox budget of each kind of activation."""

    queue: str = "main"
    pool: str = "main"
    """main (healthy tasks) or surgical (poisoned tasks only, one at a time, no eager dispatch)."""
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    poll_wait_s: float = 20.0
    workflow_limits: SandboxLimits = field(default_factory=lambda: SandboxLimits(deadline_s=5.0))
    activity_limits: SandboxLimits = field(default_factory=lambda: SandboxLimits(deadline_s=60.0))
    slots: int = 1
    """Tasks run at once: they overlap the server round trips between activations, and run
    guest code at the same moment as far as the sandbox allows (`ParallelSandbox`: one guest
    in process, the others in child processes)."""
    release_on_start: bool = False
    """`worker_id` is stable across restarts and unique among live workers: on start, give up
    the leases a previous process under it held, instead of waiting for them to expire."""
    budgets: Budgets = field(default_factory=Budgets)
    """Limits per workflow type and per activity, over the two defaults above."""
    run_copies: int = 1024
    """Histories of recently served runs kept, so that after an activity completes the worker
    runs the workflow's next activation itself and reports both at once (0: never)."""
    stream: bool = True
    """Send reports, heartbeats and query answers in batches on streams (`WorkStream`), which
    the server records a batch at a time (group commit); False: a unary call each."""
    streams: int = 2
    """Streams open at once: the server records one's batch while the next gathers on another."""


class DetailedTrace(Protocol):
    """The surgical pool's extra tracing: a span per replayed event and per host call (the
    sandbox reports host calls to the same object), and the last host calls of a failure."""

    def begin(self, attributes: Mapping[str, Any]) -> None:
        """A new activation starts (with these span attributes): forget the previous one's
        host calls."""

    def replayed(self, events: Sequence[Event], digest: str) -> None:
        """Trace each event a workflow activation replays."""

    def recent_calls(self) -> tuple[str, ...]:
        """The last host calls of the current activation, oldest first."""


class Worker:
    """Serves one queue until stopped, `settings.slots` tasks at a time."""

    def __init__(
        self,
        client: AmberClient,
        sandbox: SandboxRunner,
        settings: WorkerSettings | None = None,
        clock: Clock | None = None,
        detail: DetailedTrace | None = None,
        spans: Tracer | None = None,
    ) -> None:
        self._client = client
        self.settings = settings or WorkerSettings()
        self._clock = clock or SystemClock()
        self._sandbox = RecordingSandbox(sandbox, self._clock)
        self._detail = detail
        self._stop = threading.Event()
        self.refused: NotAuthorised | None = None
        """Why the server refused this worker (its credential or role), which stopped it."""
        self.stream = (
            client.work_stream(lines=self.settings.streams) if self.settings.stream else None
        )
        """The stream its reports travel on (None: unary calls)."""
        self._reports: AmberClient | WorkStream = self.stream or client
        self._heartbeat = Heartbeats(self._reports, self.settings.worker_id, self._clock)
        self._heartbeat.start()
        self._tracer = spans or tracer()
        self._counting = threading.Lock()
        self._polling = threading.Lock()
        combine = self.settings.pool == "main" and detail is None
        self._copies = RunCopies(self.settings.run_copies if combine else 0)
        self._memo = ReplayMemo() if combine else None
        """What it keeps of its runs' last activations, for the next to do only what is new."""
        self._slot = threading.local()
        """Per slot: when the task it runs started (for giving up on a report), and how it
        ended (for the metrics)."""
        self.metrics = WorkerMetrics()
        """What this worker's `/metrics` serves."""
        self.completed = 0
        self.failed = 0
        self.combined = 0
        """Activities reported together with the workflow activation that followed them."""
        # Up to as many tasks waiting in the lane as there are slots: the lane runs `guests`
        # at once, and a poisoned batch leaves more than that waiting (`_serving`).
        extra = self.settings.slots if isinstance(sandbox, ParallelSandbox) else 0
        self._threads = ServingThreads(self._serve, self.settings.slots, extra)
        """Slots, and a thread more for each task waiting in the sandbox's background lane."""
        if isinstance(sandbox, ParallelSandbox):
            sandbox.watch_background(
                self._threads.background_started, self._threads.background_ended
            )

    def stop(self) -> None:
        self._stop.set()
        self._heartbeat.stop()

    def close(self) -> None:
        """Stop, and end the stream (after `run` returned: reports still in flight fail)."""
        self.stop()
        if self.stream is not None:
            self.stream.close()

    def run(self) -> None:
        """Poll and execute until `stop()`, in `settings.slots` threads; survives server
        outages by backing off."""
        if self.settings.release_on_start:
            self._release_predecessor_leases()
        self._threads.run()

    def _release_predecessor_leases(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                released = self._client.release_leases(self.settings.worker_id)
            except RetryableError as exc:  # the server is not up yet, or the database is down
                _log.warning("releasing old leases failed (%s); retrying in %.1f s", exc, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            except AmberError as exc:  # e.g. an older server without the call: they expire
                _log.warning("old leases not released (%s); they expire instead", exc)
                return
            if released:
                _log.info(
                    "released %d leases a previous %s held", released, self.settings.worker_id
                )
            return

    def _serve(self, retire: Callable[[], bool]) -> bool:
        """One thread's loop (`ServingThreads`): until stopped (False) or retired (True)."""
        backoff = 0.1
        while not self._stop.is_set():
            if retire():
                return True
            try:
                # One slot polls at a time; the others wait their turn here. A long poll holds
                # a server thread, so an idle worker holds one, not one per slot; a poll woken
                # by a new task hands the turn on as soon as it has it, and a busy slot never
                # polls (each report brings its next task).
                with self._polling:
                    if self._stop.is_set():
                        return False
                    task = self._poll(self.settings.poll_wait_s)
                self._run_from(task)
                backoff = 0.1
            except NotAuthorised as exc:  # no retry fixes a missing, revoked or wrong credential
                if self.refused is None:
                    self.refused = exc
                    _log.error(
                        "the server refuses this worker (%s); stopping: give it a worker"
                        " credential (AMBER_TOKEN; amber auth grant NAME --role worker)",
                        exc,
                    )
                self.stop()
            except AmberError as exc:
                _log.warning("server call failed (%s); retrying in %.1f s", exc, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
        return False

    def run_once(self, *, wait_s: float) -> bool:
        """Poll for a task and run it, then every task handed back eagerly after it.

        Returns whether there was any work.
        """
        return self._run_from(self._poll(wait_s))

    def _poll(self, wait_s: float) -> LeasedTask | None:
        return self._client.poll_task(
            worker_id=self.settings.worker_id,
            queue=self.settings.queue,
            wait_s=wait_s,
            pool=self.settings.pool,
            holding=self._heartbeat.holding(),
        )

    def _run_from(self, task: LeasedTask | None) -> bool:
        """Run `task`, then every task handed back eagerly after it; whether there was one."""
        if task is None:
            return False
        while task is not None:
            task = self._execute(task)
        return True

    @property
    def _next_queue(self) -> str | None:
        """Ask for a next task only while not stopping (a stopping worker would strand it), and
        never in the surgical pool (eager dispatch hands out healthy tasks)."""
        if self._stop.is_set() or self.settings.pool != "main":
            return None
        return self.settings.queue

    def _execute(self, task: LeasedTask) -> LeasedTask | None:
        attributes = {
            "amber.run_id": task.run_id,
            "amber.task_kind": task.kind.value,
            "amber.name": task.name,
            "amber.step": task.cmd if task.kind is TaskKind.ACTIVITY else -1,
            "amber.attempt": task.attempt,
            "amber.module_digest": task.digest,
            "amber.pool": self.settings.pool,
        }
        self._heartbeat.track(task)
        self._sandbox.last = None
        if self._detail is not None:
            self._detail.begin(attributes)
        self._slot.started_at = self._clock.now()
        self._slot.outcome = "error"  # unless it reports a success or a failure
        self.metrics.task_started()
        started = time.perf_counter()
        try:
            with self._tracer.start_as_current_span(
                f"amber.{task.kind.value}",
                context=context_from_traceparent(task.traceparent),  # the run's one trace
                attributes=attributes,
            ) as span:
                next_task = self._execute_in(task, span)
                if self._slot.outcome == "error":
                    self._slot.outcome = "ok"
                return next_task
        finally:
            self._heartbeat.untrack(task)
            self.metrics.task_ended(
                task.kind.value, self._slot.outcome, time.perf_counter() - started
            )

    def _execute_in(self, task: LeasedTask, span: Span) -> LeasedTask | None:
        try:
            if task.kind is TaskKind.WORKFLOW:
                return self._run_workflow(task, span)
            if task.kind is TaskKind.QUERY:
                self._run_query(task)
                return None
            if task.kind is TaskKind.CHECK:
                self._run_check(task)
                return None
            return self._run_activity(task, span)
        except GuestFault as fault:
            span.set_attribute("amber.failure", fault.reason.value)
            span.set_attribute("amber.step", fault.step if fault.step is not None else -1)
            span.set_attribute("amber.fuel_used", fault.fuel_used or 0)
            span.set_attribute("amber.memory_bytes", fault.memory_bytes or 0)
            if fault.trap_code:
                span.set_attribute("amber.trap_code", fault.trap_code)
            _log.info("task %d failed: %s", task.task_id, fault)
            return self._report(task, self._report_of(task, fault, span))
        except (LeaseLost, VersionConflict) as exc:
            _log.info("task %d result discarded: %s", task.task_id, exc)
            self._slot.outcome = "discarded"
            return None
        except PayloadTooLarge as exc:
            reason = FailureReason.PAYLOAD_TOO_LARGE
            return self._report(task, FailureReport(reason=reason, message=str(exc)))
        except (RetryableError, RemoteError):
            raise  # the lease will expire and the task will run again
        except Exception as exc:  # a bug on one task must not stop the worker
            _log.exception("worker error on task %d", task.task_id)
            return self._report(task, FailureReport(reason="worker_error", message=repr(exc)))

    def _deliver(self, task: LeasedTask, send: Callable[[], T]) -> T:
        """Send a task's outcome, retrying through server or database outages.

        Resending is safe — the fencing token makes a duplicate a `LeaseLost` — and cheaper than
        letting the lease lapse, which would run the task again. Gives up once the lease is
        past saving (the sweeper will have re-queued the task by then), but not before one resend:
        a worker that was stalled (stopped, swapped out) finds its connection dropped by the
        server's keepalive, and the resend on a fresh one gets the server's verdict — usually
        `LeaseLost` — instead of leaving what became of the result unknown.
        """
        delay = 0.05
        resent = False
        while True:
            try:
                return send()
            except RetryableError as exc:
                started_at: datetime = self._slot.started_at
                give_up = self._heartbeat.expires_at(task) + (task.lease_expires_at - started_at)
                if self._stop.is_set():
                    raise
                if resent and self._clock.now() >= give_up:
                    _log.warning(
                        "task %d: report abandoned, its lease lapsed (%s); the task runs again",
                        task.task_id,
                        exc,
                    )
                    raise
                _log.warning("task %d: report failed (%s); retrying", task.task_id, exc)
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                resent = True

    def _report(self, task: LeasedTask, report: FailureReport) -> LeasedTask | None:
        self._slot.outcome = report.reason
        with self._counting:
            self.failed += 1
        try:
            return self._deliver(
                task,
                lambda: self._reports.fail_task(
                    task, report, worker_id=self.settings.worker_id, next_queue=self._next_queue
                ),
            )
        except LeaseLost:
            _log.info("task %d: failure report refused, lease lost", task.task_id)
            return None

    def _report_of(self, task: LeasedTask, fault: GuestFault, span: Span) -> FailureReport:
        """The failure report, with what triage needs: the trace, the last host calls and the
        repro of the activation."""
        repro = b""
        if self._sandbox.last is not None:
            request, started_at = self._sandbox.last
            last_seq = task.events[-1].seq if task.events else 0
            repro = repro_of(request, started_at, last_seq).encode()
        context = span.get_span_context()
        return FailureReport(
            reason=fault.reason.value,
            message=str(fault),
            trap_code=fault.trap_code,
            fuel_used=fault.fuel_used,
            memory_bytes=fault.memory_bytes,
            step=fault.step,
            trace_id=format(context.trace_id, "032x") if context.is_valid else "",
            host_calls=self._detail.recent_calls() if self._detail is not None else (),
            repro=repro,
        )

    def _activation(self, task: LeasedTask, digest: str, workflow_type: str) -> WorkflowActivation:
        if self._detail is not None:
            self._detail.replayed(task.events, digest)
        return WorkflowActivation(
            run_id=task.run_id,
            workflow_type=workflow_type,
            digest=digest,
            input=task.input,
            events=task.events,
            limits=no_tighter_than_crash(
                self._workflow_limits(workflow_type), task.crash_repro, exact=self._diagnoses
            ),
        )

    def _try_upgrade(self, task: LeasedTask) -> tuple[WorkflowStep | None, dict[str, Any] | None]:
        """Replay on the automatic upgrade version: its step if the run is compatible there,
        else why not (the run then stays on its version, which is not tried again)."""
        try:
            return activate_workflow(
                self._sandbox, self._activation(task, task.upgrade_to, task.name)
            ), None
        except GuestFault as fault:
            detail: dict[str, Any] = {
                "to": task.upgrade_to,
                "reason": fault.reason.value,
                "message": fault.detail[:1000],
            }
            if isinstance(fault, NonDeterminism):
                detail.update(position=fault.position, recorded=fault.recorded, issued=fault.issued)
            return None, detail

    def _run_check(self, task: LeasedTask) -> None:
        """Replay a run on a candidate version (the task's digest) and report the verdict."""
        activation = self._activation(task, task.digest, task.args.decode())
        verdict: dict[str, Any] = {"checked_seq": task.events[-1].seq if task.events else 0}
        try:
            activate_workflow(self._sandbox, activation, fresh=True)  # not the run's own step
            verdict["verdict"] = "compatible"
        except NonDeterminism as fault:
            verdict.update(_incompatible(fault, str(fault)))
        except GuestFault as fault:
            # A guest that faults on results meant for other commands (a Python v2 that swapped
            # two activities raises KeyError on the first) diverged before it faulted: say where.
            wrong_result = isinstance(fault, WRONG_RESULT_FAULTS)
            found = first_divergence(self._sandbox, activation) if wrong_result else None
            if found is None:
                verdict.update(verdict="failed", detail=str(fault))
            else:
                verdict.update(
                    _incompatible(found, f"{found} (replayed whole, it failed: {fault})")
                )
        result = pack(verdict)
        self._deliver(
            task,
            lambda: self._reports.complete_query(
                task, worker_id=self.settings.worker_id, result=result, error=None
            ),
        )

    def _run_workflow(self, task: LeasedTask, span: Span) -> LeasedTask | None:
        step, failed_upgrade = None, None
        if task.upgrade_to:
            step, failed_upgrade = self._try_upgrade(task)
        if step is None:
            step = activate_workflow(
                self._sandbox,
                self._activation(task, task.digest, task.name),
                memo=self._memo,
            )
        self.metrics.activation("workflow", step.stats.duration_s, step.stats.fuel_used)
        self.metrics.replayed(len(task.events), continued=step.stats.continued)
        span.set_attribute("amber.step", step.first_new_cmd)
        span.set_attribute("amber.continued", step.stats.continued)
        span.set_attribute("amber.fuel_used", step.stats.fuel_used)
        span.set_attribute("amber.memory_bytes", step.stats.memory_bytes)
        done = replace(
            _completion(step),
            migrate_to=task.upgrade_to if failed_upgrade is None and task.upgrade_to else "",
            upgrade_failed=failed_upgrade,
        )
        reported = self._deliver(
            task,
            lambda: self._reports.report_workflow(
                task,
                done,
                worker_id=self.settings.worker_id,
                next_queue=self._next_queue,
                stats=step.stats,
            ),
        )
        self._keep_copy(task, done, reported.appended)
        with self._counting:
            self.completed += 1
        return reported.next

    def _keep_copy(
        self, task: LeasedTask, done: WorkflowCompletion, appended: tuple[Event, ...]
    ) -> None:
        """Keep the run's history as this report left it, if the run goes on."""
        if self._copies.capacity <= 0:
            return
        copy = RunCopy(
            run_id=task.run_id,
            workflow_type=task.name,
            digest=done.migrate_to or task.digest,
            input=task.input,
            events=task.events,
        ).extended(appended)
        if copy is None or done.status is not WorkflowStatus.SUSPENDED:
            self._forget(task.run_id)
        else:
            self._copies.put(copy)

    def _forget(self, run_id: str) -> None:
        """Drop what this worker keeps of a run to activate it again (it closed, or its copy
        no longer follows the server's history)."""
        self._copies.drop(run_id)
        if self._memo is not None:
            self._memo.drop(run_id)

    def _then_workflow(
        self, task: LeasedTask, outcome: ActivityOutcome
    ) -> tuple[ThenWorkflow, RunCopy] | None:
        """The run's next activation after this activity's completion, run on the worker's copy
        of the history (None: no copy, or the activation failed: the workflow task runs it)."""
        copy = self._copies.get(task.run_id)
        if copy is None or outcome.status is not ActivityStatus.COMPLETED:
            return None
        assert outcome.result is not None
        completed = Event.of(
            run_id=task.run_id,
            seq=copy.head + 1,
            payload=ActivityCompleted(cmd=task.cmd, result=outcome.result, attempt=task.attempt),
            digest=task.digest,
            created_at=self._clock.now(),
        )
        seen = copy.extended((completed,))
        assert seen is not None
        activation = WorkflowActivation(
            run_id=task.run_id,
            workflow_type=copy.workflow_type,
            digest=copy.digest,
            input=copy.input,
            events=seen.events,
            limits=self._workflow_limits(copy.workflow_type),
        )
        attributes: dict[str, str | int] = {
            "amber.run_id": task.run_id,
            "amber.task_kind": TaskKind.WORKFLOW.value,
            "amber.name": copy.workflow_type,
            "amber.attempt": 1,
            "amber.module_digest": copy.digest,
            "amber.pool": self.settings.pool,
            "amber.after_activity": task.cmd,
        }
        with self._tracer.start_as_current_span("amber.workflow", attributes=attributes) as span:
            try:
                step = activate_workflow(self._sandbox, activation, memo=self._memo)
            except GuestFault as fault:  # its workflow task meets it again and reports it
                span.set_attribute("amber.failure", fault.reason.value)
                _log.info(
                    "run %s: next activation left to its workflow task: %s", task.run_id, fault
                )
                self._forget(task.run_id)
                return None
            self.metrics.activation("workflow", step.stats.duration_s, step.stats.fuel_used)
            self.metrics.replayed(len(activation.events), continued=step.stats.continued)
            span.set_attribute("amber.step", step.first_new_cmd)
            span.set_attribute("amber.fuel_used", step.stats.fuel_used)
            span.set_attribute("amber.memory_bytes", step.stats.memory_bytes)
        return ThenWorkflow(done=_completion(step), digest=copy.digest), copy

    def _run_query(self, task: LeasedTask) -> None:
        """Replay the run and answer with its published value; nothing is appended."""
        activation = WorkflowActivation(
            run_id=task.run_id,
            workflow_type=task.args.decode(),
            digest=task.digest,
            input=task.input,
            events=task.events,
            limits=self._workflow_limits(task.args.decode()),
        )
        result: bytes | None = None
        error: ErrorInfo | None = None
        ended = ""
        try:
            answer = answer_query(self._sandbox, activation, task.name)
            result, ended = answer.value, answer.ended
        except GuestFault as fault:
            error = ErrorInfo(type=type(fault).__name__, message=fault.detail)
        self._deliver(
            task,
            lambda: self._reports.complete_query(
                task, worker_id=self.settings.worker_id, result=result, error=error, ended=ended
            ),
        )

    def _activity_host(self, task: LeasedTask) -> ActivityHost:
        return ActivityHost(
            idempotency_key=task.idempotency_key,
            http=self._sandbox.http_policy(task.digest),
            heartbeat=lambda details: self._heartbeat.guest_beat(task, details),
            cancel_requested=lambda: self._heartbeat.cancel_requested(task),
        )

    @property
    def _diagnoses(self) -> bool:
        """A surgical worker runs a crashed task under exactly the limits it crashed under."""
        return self.settings.pool == "surgical"

    def _workflow_limits(self, workflow_type: str) -> SandboxLimits:
        return self.settings.budgets.for_workflow(workflow_type, self.settings.workflow_limits)

    def _run_activity(self, task: LeasedTask, span: Span) -> LeasedTask | None:
        limits = self.settings.budgets.for_activity(task.name, self.settings.activity_limits)
        now = self._clock.now()
        if task.deadline is not None:
            # The attempt's own start-to-close / schedule-to-close deadline replaces the worker's
            # default: the workflow's author chose it (a 10-minute charge is not cut at 60 s),
            # and the server reports the kill as that timeout.
            own = max((task.deadline - now).total_seconds(), 0.001)
            limits = replace(limits, deadline_s=own)
        limits = no_tighter_than_crash(
            limits, task.crash_repro, deadline=task.deadline is None, exact=self._diagnoses
        )
        report = run_activity(
            self._sandbox,
            ActivityAttempt(
                digest=task.digest,
                cmd=task.cmd,
                input=ActivityInput(
                    run_id=task.run_id,
                    activity=task.name,
                    args=task.args,
                    attempt=task.attempt,
                    idempotency_key=task.idempotency_key,
                    deadline_ms=to_ms(now) + int(limits.deadline_s * 1000),
                    heartbeat_details=task.heartbeat_details,
                ),
                limits=limits,
                host=self._activity_host(task),
            ),
        )
        self.metrics.activation("activity", report.stats.duration_s, report.stats.fuel_used)
        span.set_attribute("amber.fuel_used", report.stats.fuel_used)
        span.set_attribute("amber.memory_bytes", report.stats.memory_bytes)
        then = self._then_workflow(task, report.outcome)
        reported = self._deliver(
            task,
            lambda: self._reports.report_activity(
                task,
                report.outcome,
                worker_id=self.settings.worker_id,
                next_queue=self._next_queue,
                stats=report.stats,
                then=None if then is None else then[0],
            ),
        )
        span.set_attribute("amber.combined", reported.combined)
        if then is not None:
            copy = then[1].extended(reported.appended) if reported.combined else None
            if copy is None or then[0].done.status is not WorkflowStatus.SUSPENDED:
                self._forget(task.run_id)
            else:
                self._copies.put(copy)
        with self._counting:  # an activation applied with the activity counts as one more
            self.completed += 1 + reported.combined
            self.combined += reported.combined
        return reported.next


def _completion(step: WorkflowStep) -> WorkflowCompletion:
    """What a workflow activation reports."""
    return WorkflowCompletion(
        expected_last_seq=step.expected_last_seq,
        commands=tuple(
            NewCommand(cmd=step.first_new_cmd + i, command=c)
            for i, c in enumerate(step.new_commands)
        ),
        status=step.status,
        result=step.result,
        error=step.error,
        reactivate=step.reactivate,
    )


def _incompatible(found: NonDeterminism, detail: str) -> dict[str, Any]:
    """A check's verdict for a run that diverges on the candidate."""
    return {
        "verdict": "incompatible",
        "position": found.position,
        "seq": found.seq or 0,
        "recorded": found.recorded,
        "issued": found.issued,
        "detail": detail,
    }
