"""Proto ↔ domain conversions, for the servicer and the client alike. No logic lives here."""

from __future__ import annotations

import json
from typing import Any, Protocol

from amber.abi import (
    ActivityOutcome,
    ActivityStatus,
    ErrorInfo,
    InvalidInput,
    NotMsgpack,
    WorkflowStatus,
    encode_command,
    pack,
    parse_command,
    parse_manifest,
    unpack,
)
from amber.history import (
    AuditEntry,
    Crash,
    Discarded,
    Event,
    EventType,
    FailureRecord,
    Principal,
    Run,
    RunStatus,
    Suspension,
    Task,
    TaskKind,
    TaskState,
    Timer,
    TimerKind,
    Troubled,
    VersionUse,
)
from amber.runtime.model import (
    DEFAULT_TENANT,
    ActivationStats,
    ClaimedTask,
    FailureReport,
    LeasedTask,
    NewCommand,
    QueueDepth,
    Recorded,
    Reported,
    RunCheck,
    RunDescription,
    ServerStatus,
    ThenWorkflow,
    TriageOutcome,
    WorkerSeen,
    WorkflowCompletion,
    from_ms,
    from_ms_or_none,
    idempotency_key,
    to_ms,
    to_ms_or_zero,
)
from amber.versions import ModuleVersion, TypeRollout, TypeStatus, VersionHealth, VersionStatus

from . import amber_pb2 as pb


def error_to_pb(error: ErrorInfo | None) -> pb.ErrorInfo | None:
    if error is None:
        return None
    return pb.ErrorInfo(type=error.type, message=error.message, non_retryable=error.non_retryable)


def error_from_pb(msg: pb.ErrorInfo) -> ErrorInfo:
    return ErrorInfo(type=msg.type, message=msg.message, non_retryable=msg.non_retryable)


def run_to_pb(run: Run) -> pb.RunInfo:
    error = None
    if run.error_type is not None:
        error = pb.ErrorInfo(type=run.error_type, message=run.error_message or "")
    return pb.RunInfo(
        run_id=run.run_id,
        tenant=run.tenant,
        workflow_id=run.workflow_id,
        workflow_type=run.workflow_type,
        digest=run.digest,
        status=run.status.value,
        input=run.input,
        result=run.result or b"",
        error=error,
        last_seq=run.last_seq,
        created_ms=to_ms_or_zero(run.created_at),
        updated_ms=to_ms_or_zero(run.updated_at),
        closed_ms=to_ms_or_zero(run.closed_at),
        queue=run.queue,
        parent_run_id=run.parent_run_id or "",
        cancel_requested=run.cancel_seq is not None,
        cancel_reason=run.cancel_reason or "",
        suspended_ms=to_ms_or_zero(run.suspension.since) if run.suspension else 0,
        suspended_reason=run.suspension.reason if run.suspension else "",
        suspended_fingerprint=(run.suspension.fingerprint or "") if run.suspension else "",
    )


def run_from_pb(msg: pb.RunInfo) -> Run:
    has_error = msg.HasField("error")
    return Run(
        run_id=msg.run_id,
        tenant=msg.tenant,
        workflow_id=msg.workflow_id,
        workflow_type=msg.workflow_type,
        digest=msg.digest,
        queue=msg.queue,
        status=RunStatus(msg.status),
        input=msg.input,
        result=msg.result if msg.status == RunStatus.COMPLETED else None,
        error_type=msg.error.type if has_error else None,
        error_message=msg.error.message if has_error else None,
        last_seq=msg.last_seq,
        next_cmd=0,
        created_at=from_ms(msg.created_ms),
        updated_at=from_ms(msg.updated_ms),
        closed_at=from_ms_or_none(msg.closed_ms),
        parent_run_id=msg.parent_run_id or None,
        cancel_seq=0 if msg.cancel_requested else None,
        cancel_reason=msg.cancel_reason or None,
        suspension=Suspension(
            since=from_ms(msg.suspended_ms),
            reason=msg.suspended_reason,
            fingerprint=msg.suspended_fingerprint or None,
        )
        if msg.suspended_ms
        else None,
    )


def event_to_pb(event: Event) -> pb.Event:
    return pb.Event(
        seq=event.seq,
        type=event.type.value,
        payload=event.raw,  # passed through as stored: the server never decodes it
        digest=event.digest,
        time_ms=to_ms_or_zero(event.created_at),
    )


def event_from_pb(run_id: str, msg: pb.Event) -> Event:
    return Event(
        run_id=run_id,
        seq=msg.seq,
        type=EventType(msg.type),
        raw=msg.payload,
        digest=msg.digest,
        created_at=from_ms(msg.time_ms),
    )


def task_info_to_pb(task: Task) -> pb.TaskInfo:
    return pb.TaskInfo(
        task_id=task.task_id,
        kind=task.kind.value,
        name=task.name,
        cmd=task.cmd or 0,
        has_cmd=task.cmd is not None,
        state=task.state.value,
        attempt=task.attempt,
        max_attempts=task.max_attempts,
        visible_ms=to_ms_or_zero(task.visible_at),
        lease_owner=task.lease_owner or "",
        lease_expires_ms=to_ms_or_zero(task.lease_expires_at),
        consecutive_failures=task.consecutive_failures,
        last_failure=task.last_failure or "",
        pool=task.pool,
        crash_count=task.crash.count if task.crash else 0,
        crash_fingerprint=task.crash.fingerprint if task.crash else "",
        crash_step=(task.crash.step or 0) if task.crash else 0,
        has_crash_step=task.crash is not None and task.crash.step is not None,
        poisoned_ms=to_ms_or_zero(task.poisoned_at),
        poison_reason=task.poison_reason or "",
        crashed_attempts=task.crashed_attempts,
        queue=task.queue,
    )


def task_info_from_pb(run_id: str, digest: str, msg: pb.TaskInfo) -> Task:
    return Task(
        task_id=msg.task_id,
        run_id=run_id,
        kind=TaskKind(msg.kind),
        queue=msg.queue,
        cmd=msg.cmd if msg.has_cmd else None,
        name=msg.name,
        digest=digest,
        args=None,
        state=TaskState(msg.state),
        visible_at=from_ms(msg.visible_ms),
        lease_owner=msg.lease_owner or None,
        lease_expires_at=from_ms_or_none(msg.lease_expires_ms),
        fencing=0,
        attempt=msg.attempt,
        max_attempts=msg.max_attempts,
        consecutive_failures=msg.consecutive_failures,
        last_failure=msg.last_failure or None,
        scheduled_at=from_ms(msg.visible_ms),
        pool=msg.pool or "main",
        crash=Crash(
            step=msg.crash_step if msg.has_crash_step else None,
            fingerprint=msg.crash_fingerprint,
            count=msg.crash_count,
        )
        if msg.crash_fingerprint
        else None,
        poisoned_at=from_ms_or_none(msg.poisoned_ms),
        poison_reason=msg.poison_reason or None,
        crashed_attempts=msg.crashed_attempts,
    )


def failure_to_pb(failure: FailureRecord) -> pb.FailureInfo:
    return pb.FailureInfo(
        task_id=failure.task_id,
        kind=failure.kind,
        cmd=failure.cmd or 0,
        has_cmd=failure.cmd is not None,
        attempt=failure.attempt,
        digest=failure.digest,
        reason=failure.reason,
        trap_code=failure.trap_code or "",
        message=failure.message,
        fuel_used=failure.fuel_used or 0,
        memory_bytes=failure.memory_bytes or 0,
        worker=failure.worker or "",
        time_ms=to_ms_or_zero(failure.created_at),
        fingerprint=failure.fingerprint or "",
        pool=failure.pool or "",
        trace_id=failure.trace_id or "",
        host_calls=list(failure.host_calls),
        has_repro=failure.repro is not None,
    )


def failure_from_pb(run_id: str, msg: pb.FailureInfo) -> FailureRecord:
    return FailureRecord(
        task_id=msg.task_id,
        run_id=run_id,
        kind=msg.kind,
        cmd=msg.cmd if msg.has_cmd else None,
        attempt=msg.attempt,
        digest=msg.digest,
        reason=msg.reason,
        trap_code=msg.trap_code or None,
        message=msg.message,
        fuel_used=msg.fuel_used,
        memory_bytes=msg.memory_bytes,
        worker=msg.worker or None,
        created_at=from_ms(msg.time_ms),
        fingerprint=msg.fingerprint or None,
        pool=msg.pool or None,
        trace_id=msg.trace_id or None,
        host_calls=tuple(msg.host_calls),
    )


def description_to_pb(desc: RunDescription) -> pb.DescribeRunResponse:
    return pb.DescribeRunResponse(
        run=run_to_pb(desc.run),
        tasks=[task_info_to_pb(t) for t in desc.tasks],
        recent_failures=[failure_to_pb(f) for f in desc.recent_failures],
        unserved=[pb.QueueRef(queue=q, pool=p) for q, p in desc.unserved],
        timers=[
            pb.TimerInfo(
                timer_id=t.timer_id,
                kind=t.kind.value,
                cmd=t.cmd or 0,
                fire_ms=to_ms_or_zero(t.fire_at),
            )
            for t in desc.timers
        ],
        discarded=[
            pb.DiscardedInfo(kind=d.kind, detail=d.detail, time_ms=to_ms_or_zero(d.created_at))
            for d in desc.discarded
        ],
    )


def description_from_pb(msg: pb.DescribeRunResponse) -> RunDescription:
    run = run_from_pb(msg.run)
    return RunDescription(
        run=run,
        tasks=tuple(task_info_from_pb(run.run_id, run.digest, t) for t in msg.tasks),
        recent_failures=tuple(failure_from_pb(run.run_id, f) for f in msg.recent_failures),
        unserved=tuple((u.queue, u.pool) for u in msg.unserved),
        timers=tuple(
            Timer(
                run_id=run.run_id,
                timer_id=t.timer_id,
                kind=TimerKind(t.kind),
                cmd=t.cmd if t.kind == TimerKind.WORKFLOW else None,
                fire_at=from_ms(t.fire_ms),
            )
            for t in msg.timers
        ),
        discarded=tuple(
            Discarded(
                run_id=run.run_id, kind=d.kind, detail=d.detail, created_at=from_ms(d.time_ms)
            )
            for d in msg.discarded
        ),
    )


def version_to_pb(version: ModuleVersion) -> pb.VersionInfo:
    msg = pb.VersionInfo(
        digest=version.digest,
        size=version.size,
        manifest_json=json.dumps(version.manifest.to_json(), sort_keys=True),
        uploaded_ms=to_ms_or_zero(version.uploaded_at),
        current_for=list(version.current_for),
        candidate_for=list(version.candidate_for),
        labels=list(version.labels),
        retired_ms=to_ms_or_zero(version.retired_at),
    )
    if version.use is not None:
        msg.has_use = True
        msg.running_runs = version.use.running
        msg.closed_runs = version.use.closed
        msg.tasks = version.use.tasks
    msg.retire_blockers.extend(version.retire_blockers)
    return msg


def version_from_pb(msg: pb.VersionInfo) -> ModuleVersion:
    use = None
    if msg.has_use:
        use = VersionUse(running=msg.running_runs, closed=msg.closed_runs, tasks=msg.tasks)
    return ModuleVersion(
        digest=msg.digest,
        size=msg.size,
        manifest=parse_manifest(msg.manifest_json.encode()),
        uploaded_at=from_ms(msg.uploaded_ms),
        current_for=tuple(msg.current_for),
        candidate_for=tuple(msg.candidate_for),
        labels=tuple(msg.labels),
        retired_at=from_ms_or_none(msg.retired_ms),
        use=use,
        retire_blockers=tuple(msg.retire_blockers),
    )


def rollout_to_pb(status: TypeStatus) -> pb.RolloutStatus:
    r = status.rollout
    return pb.RolloutStatus(
        workflow_type=r.workflow_type,
        current=r.current,
        candidate=r.candidate or "",
        ramp_percent=r.ramp_percent,
        previous=r.previous or "",
        auto_upgrade_to=r.auto_upgrade_to or "",
        versions=[
            pb.VersionHealthInfo(
                digest=v.digest,
                role=v.role,
                running_runs=v.use.running,
                closed_runs=v.use.closed,
                activations=v.health.activations,
                succeeded=v.health.succeeded,
                fuel=v.health.fuel,
                failures=v.health.failures,
                labels=list(v.labels),
            )
            for v in status.versions
        ],
    )


def rollout_from_pb(msg: pb.RolloutStatus) -> TypeStatus:
    return TypeStatus(
        rollout=TypeRollout(
            workflow_type=msg.workflow_type,
            current=msg.current,
            candidate=msg.candidate or None,
            ramp_percent=msg.ramp_percent,
            previous=msg.previous or None,
            auto_upgrade_to=msg.auto_upgrade_to or None,
        ),
        versions=tuple(
            VersionStatus(
                digest=v.digest,
                role=v.role,
                labels=tuple(v.labels),
                use=VersionUse(running=v.running_runs, closed=v.closed_runs, tasks=0),
                health=VersionHealth(
                    digest=v.digest,
                    activations=v.activations,
                    succeeded=v.succeeded,
                    fuel=v.fuel,
                    failures=dict(v.failures),
                ),
            )
            for v in msg.versions
        ),
    )


def run_check_to_pb(check: RunCheck) -> pb.RunCheck:
    return pb.RunCheck(
        run_id=check.run_id,
        status=check.status,
        verdict=check.verdict,
        position=check.position if check.position is not None else -1,
        seq=check.seq or 0,
        recorded=check.recorded,
        issued=check.issued,
        detail=check.detail,
        checked_seq=check.checked_seq,
        outcome=check.outcome,
    )


def run_check_from_pb(msg: pb.RunCheck) -> RunCheck:
    return RunCheck(
        run_id=msg.run_id,
        status=msg.status,
        verdict=msg.verdict,
        position=msg.position if msg.position >= 0 else None,
        seq=msg.seq or None,
        recorded=msg.recorded,
        issued=msg.issued,
        detail=msg.detail,
        checked_seq=msg.checked_seq,
        outcome=msg.outcome,
    )


def claimed_to_pb(claimed: ClaimedTask) -> pb.Task:
    task, run = claimed.task, claimed.run
    msg = pb.Task(
        task_id=task.task_id,
        fencing=task.fencing,
        kind=task.kind.value,
        run_id=task.run_id,
        digest=task.digest,
        name=task.name,
        attempt=task.attempt,
        lease_expires_ms=to_ms_or_zero(task.lease_expires_at),
        tenant=run.tenant,
        pool=task.pool,
        crash_count=task.crash.count if task.crash else 0,
        traceparent=run.traceparent,
        crash_repro=claimed.crash_repro,
    )
    if task.kind is not TaskKind.ACTIVITY:
        msg.input = run.input
        msg.history.extend(event_to_pb(e) for e in claimed.events)
        if task.kind in (TaskKind.QUERY, TaskKind.CHECK):
            msg.name = task.name  # the query name ("check" for a check task)
            msg.args = run.workflow_type.encode()
        if task.kind is TaskKind.WORKFLOW and claimed.upgrade_to:
            msg.upgrade_to = claimed.upgrade_to
        return msg
    assert task.cmd is not None
    msg.cmd = task.cmd
    msg.args = task.args or b""
    msg.idempotency_key = idempotency_key(task.run_id, task.cmd)
    msg.cancel_requested = task.cancel_requested
    if task.heartbeat_details is not None:
        msg.heartbeat_details = task.heartbeat_details
        msg.has_heartbeat_details = True
    deadlines = [d for d in (task.attempt_deadline, task.close_by) if d is not None]
    if deadlines:
        msg.deadline_ms = to_ms_or_zero(min(deadlines))
    return msg


def command_to_pb(new: NewCommand) -> pb.Command:
    return pb.Command(cmd=new.cmd, body=pack(encode_command(new.command)))


def command_from_pb(msg: pb.Command) -> NewCommand:
    try:
        doc = unpack(msg.body, what=f"command {msg.cmd}")
    except NotMsgpack as exc:
        raise InvalidInput(str(exc)) from None
    return NewCommand(cmd=msg.cmd, command=parse_command(msg.cmd, doc))


def workflow_completion_to_pb(done: WorkflowCompletion) -> pb.WorkflowCompletion:
    return pb.WorkflowCompletion(
        expected_last_seq=done.expected_last_seq,
        commands=[command_to_pb(c) for c in done.commands],
        status=done.status.value,
        result=done.result or b"",
        error=error_to_pb(done.error),
        reactivate=done.reactivate,
        migrate_to=done.migrate_to,
        upgrade_failed=b"" if done.upgrade_failed is None else pack(done.upgrade_failed),
    )


def workflow_completion_from_pb(msg: pb.WorkflowCompletion) -> WorkflowCompletion:
    try:
        status = WorkflowStatus(msg.status)
    except ValueError:
        raise InvalidInput(f"unknown workflow status {msg.status!r}") from None
    if status is WorkflowStatus.FAILED and not msg.HasField("error"):
        raise InvalidInput("a failed workflow completion needs an error")
    return WorkflowCompletion(
        expected_last_seq=msg.expected_last_seq,
        commands=tuple(command_from_pb(c) for c in msg.commands),
        status=status,
        result=msg.result
        if status in (WorkflowStatus.COMPLETED, WorkflowStatus.CONTINUE_AS_NEW)
        else None,
        error=error_from_pb(msg.error) if msg.HasField("error") else None,
        reactivate=msg.reactivate,
        migrate_to=msg.migrate_to,
        upgrade_failed=_upgrade_failed(msg.upgrade_failed),
    )


def _upgrade_failed(raw: bytes) -> dict[str, Any] | None:
    if not raw:
        return None
    try:
        detail = unpack(raw, what="upgrade_failed")
    except NotMsgpack as exc:
        raise InvalidInput(str(exc)) from None
    if not isinstance(detail, dict) or not isinstance(detail.get("to"), str):
        raise InvalidInput("upgrade_failed must be a map naming the version it tried ('to')")
    return detail


def activity_completion_to_pb(outcome: ActivityOutcome) -> pb.ActivityCompletion:
    return pb.ActivityCompletion(
        ok=outcome.status is ActivityStatus.COMPLETED,
        result=outcome.result or b"",
        error=error_to_pb(outcome.error),
    )


def activity_completion_from_pb(msg: pb.ActivityCompletion) -> ActivityOutcome:
    if msg.ok:
        return ActivityOutcome(status=ActivityStatus.COMPLETED, result=msg.result)
    return ActivityOutcome(status=ActivityStatus.FAILED, error=error_from_pb(msg.error))


MAX_HOST_CALLS = 32
"""Host calls kept with a failure record."""
MAX_REPRO_BYTES = 4 * 1024 * 1024
"""A larger repro blob is dropped (the failure is still recorded)."""


def failure_report_to_pb(report: FailureReport) -> pb.Failure:
    return pb.Failure(
        reason=report.reason,
        message=report.message,
        trap_code=report.trap_code or "",
        fuel_used=report.fuel_used or 0,
        memory_bytes=report.memory_bytes or 0,
        step=report.step or 0,
        has_step=report.step is not None,
        trace_id=report.trace_id,
        host_calls=list(report.host_calls),
        repro=report.repro,
    )


def failure_report_from_pb(msg: pb.Failure) -> FailureReport:
    return FailureReport(
        reason=msg.reason,
        message=msg.message[:4096],
        trap_code=msg.trap_code or None,
        fuel_used=msg.fuel_used or None,
        memory_bytes=msg.memory_bytes or None,
        step=msg.step if msg.has_step else None,
        trace_id=msg.trace_id[:64],
        host_calls=tuple(c[:200] for c in msg.host_calls[-MAX_HOST_CALLS:]),
        repro=msg.repro if len(msg.repro) <= MAX_REPRO_BYTES else b"",
    )


def leased_from_pb(msg: pb.Task) -> LeasedTask:
    kind = TaskKind(msg.kind)
    return LeasedTask(
        task_id=msg.task_id,
        fencing=msg.fencing,
        kind=kind,
        run_id=msg.run_id,
        tenant=msg.tenant,
        digest=msg.digest,
        name=msg.name,
        attempt=msg.attempt,
        lease_expires_at=from_ms(msg.lease_expires_ms),
        input=msg.input,
        events=tuple(event_from_pb(msg.run_id, e) for e in msg.history),
        cmd=msg.cmd,
        args=msg.args,
        idempotency_key=msg.idempotency_key,
        heartbeat_details=msg.heartbeat_details if msg.has_heartbeat_details else None,
        deadline=from_ms_or_none(msg.deadline_ms),
        cancel_requested=msg.cancel_requested,
        upgrade_to=msg.upgrade_to,
        pool=msg.pool or "main",
        crash_count=msg.crash_count,
        traceparent=msg.traceparent,
        crash_repro=msg.crash_repro,
    )


def then_workflow_to_pb(request: pb.CompleteTaskRequest, then: ThenWorkflow) -> None:
    request.then_workflow.CopyFrom(workflow_completion_to_pb(then.done))
    request.then_digest = then.digest


def then_workflow_from_pb(request: pb.CompleteTaskRequest) -> ThenWorkflow | None:
    if not request.HasField("then_workflow"):
        return None
    done = workflow_completion_from_pb(request.then_workflow)
    return ThenWorkflow(done=done, digest=request.then_digest)


def recorded_to_pb(recorded: Recorded) -> pb.CompleteTaskResponse:
    return pb.CompleteTaskResponse(
        next=claimed_to_pb(recorded.next) if recorded.next is not None else None,
        appended=[event_to_pb(e) for e in recorded.appended],
        combined=recorded.combined,
    )


def reported_from_pb(run_id: str, msg: pb.CompleteTaskResponse) -> Reported:
    return Reported(
        next=leased_from_pb(msg.next) if msg.HasField("next") else None,
        appended=tuple(event_from_pb(run_id, e) for e in msg.appended),
        combined=msg.combined,
    )


def stats_to_pb(
    task: LeasedTask, stats: ActivationStats | None, *, fuel_used: int = 0
) -> pb.ActivationStats:
    """What an activation cost, labelled with the version and kind that ran (for health)."""
    msg = pb.ActivationStats(digest=task.digest, kind=task.kind.value, fuel_used=fuel_used)
    if stats is not None:
        msg.fuel_used = stats.fuel_used
        msg.memory_bytes = stats.memory_bytes
        msg.host_calls = stats.host_calls
        msg.duration_us = int(stats.duration_s * 1_000_000)
    return msg


def troubled_to_pb(t: Troubled) -> pb.TroubledRun:
    return pb.TroubledRun(
        run=run_to_pb(t.run),
        task_id=t.task_id or 0,
        task_kind=t.task_kind or "",
        step=t.step or 0,
        has_step=t.step is not None,
        pool=t.pool or "",
        reason=t.reason,
        fingerprint=t.fingerprint or "",
        crashes=t.crashes,
        since_ms=to_ms_or_zero(t.since),
    )


def troubled_from_pb(msg: pb.TroubledRun) -> Troubled:
    return Troubled(
        run=run_from_pb(msg.run),
        task_id=msg.task_id or None,
        task_kind=msg.task_kind or None,
        step=msg.step if msg.has_step else None,
        pool=msg.pool or None,
        reason=msg.reason,
        fingerprint=msg.fingerprint or None,
        crashes=msg.crashes,
        since=from_ms(msg.since_ms),
    )


def triage_outcome_to_pb(o: TriageOutcome) -> pb.TriageOutcome:
    return pb.TriageOutcome(
        run_id=o.run_id,
        outcome=o.outcome,
        detail=o.detail,
        from_digest=o.from_digest,
        to_digest=o.to_digest,
    )


def triage_outcome_from_pb(msg: pb.TriageOutcome) -> TriageOutcome:
    return TriageOutcome(
        run_id=msg.run_id,
        outcome=msg.outcome,
        detail=msg.detail,
        from_digest=msg.from_digest,
        to_digest=msg.to_digest,
    )


def audit_to_pb(e: AuditEntry) -> pb.AuditRecord:
    return pb.AuditRecord(
        seq=e.seq,
        time_ms=to_ms_or_zero(e.at),
        actor=e.actor,
        action=e.action,
        target=e.target,
        reason=e.reason,
        detail=pack(e.detail),
        hash=e.hash,
    )


def audit_from_pb(r: pb.AuditRecord) -> AuditEntry:
    return AuditEntry(
        seq=r.seq,
        at=from_ms(r.time_ms),
        actor=r.actor,
        action=r.action,
        target=r.target,
        reason=r.reason,
        detail=unpack(r.detail, what="an audit record's detail"),
        hash=r.hash,
    )


class _HasTenant(Protocol):
    tenant: str


def tenant_of(request: _HasTenant) -> str:
    """The tenant a request names; the default tenant when it names none."""
    return request.tenant or DEFAULT_TENANT


def status_to_pb(status: ServerStatus) -> pb.GetStatusResponse:
    return pb.GetStatusResponse(
        version=status.version,
        database_ok=status.database_ok,
        database_detail=status.database_detail,
        console_url=status.console_url,
        metrics_url=status.metrics_url,
        workers=[
            pb.WorkerSeen(
                worker_id=w.worker_id,
                queue=w.queue,
                pool=w.pool,
                last_seen_ms=to_ms(w.last_seen),
            )
            for w in status.workers
        ],
        queues=[
            pb.QueueDepth(
                queue=q.queue,
                pool=q.pool,
                ready=q.ready,
                delayed=q.delayed,
                leased=q.leased,
                oldest_ready_s=q.oldest_ready_s,
            )
            for q in status.queues
        ],
    )


def status_from_pb(msg: pb.GetStatusResponse) -> ServerStatus:
    return ServerStatus(
        version=msg.version,
        database_ok=msg.database_ok,
        database_detail=msg.database_detail,
        console_url=msg.console_url,
        metrics_url=msg.metrics_url,
        workers=tuple(
            WorkerSeen(
                worker_id=w.worker_id,
                queue=w.queue,
                pool=w.pool,
                last_seen=from_ms(w.last_seen_ms),
            )
            for w in msg.workers
        ),
        queues=tuple(
            QueueDepth(
                queue=q.queue,
                pool=q.pool,
                ready=q.ready,
                delayed=q.delayed,
                leased=q.leased,
                oldest_ready_s=q.oldest_ready_s,
            )
            for q in msg.queues
        ),
    )


def principal_to_pb(p: Principal) -> pb.PrincipalInfo:
    return pb.PrincipalInfo(
        name=p.name,
        role=p.role,
        tenants=list(p.tenants),
        queues=list(p.queues),
        pools=list(p.pools),
        created_at_ms=to_ms_or_zero(p.created_at),
        created_by=p.created_by,
        rotated_at_ms=to_ms_or_zero(p.rotated_at),
        revoked_at_ms=to_ms_or_zero(p.revoked_at),
    )


def principal_from_pb(m: pb.PrincipalInfo) -> Principal:
    return Principal(
        name=m.name,
        role=m.role,
        tenants=tuple(m.tenants),
        queues=tuple(m.queues),
        pools=tuple(m.pools),
        created_at=from_ms(m.created_at_ms),
        created_by=m.created_by,
        rotated_at=from_ms_or_none(m.rotated_at_ms),
        revoked_at=from_ms_or_none(m.revoked_at_ms),
    )
