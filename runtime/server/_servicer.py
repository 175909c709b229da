"""The gRPC servicer: validate, call a service, map. Each method is a few lines."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from amber.abi import InvalidInput
from amber.history import RunQuery, RunStatus
from amber.runtime.api import amber_pb2 as pb
from amber.runtime.api import amber_pb2_grpc as pb_grpc
from amber.runtime.api import mapping as m
from amber.runtime.api import tenant_of
from amber.runtime.approvals import ApprovalService
from amber.runtime.model import Clock, SignalRequest, StartRequest
from amber.runtime.services import (
    AuditService,
    CredentialService,
    MigrationService,
    Notifier,
    RunService,
    TaskService,
    TriageService,
    check_queue,
)
from amber.runtime.tracing import current_traceparent
from amber.versions import Rollout, VersionRegistry

from ._approval_rpc import ApprovalRpcs
from ._audit_rpc import AuditRpcs
from ._auth_rpc import AuthRpcs
from ._operators import Operators
from ._rpc import rpc as _rpc
from ._status import StatusBoard
from ._triage_rpc import TriageRpcs, operator_token
from ._worker_rpc import WorkerCalls

_log = logging.getLogger(__name__)
MAX_POLL_WAIT_S = 60.0
MAX_RESULT_WAIT_S = 300.0
_IDLE_RECHECK_S = 5.0
"""A waiting poll re-checks this often even without a notification (NOTIFY may be lost)."""


def _wait_s(ms: int, cap: float) -> float:
    if ms < 0:
        raise InvalidInput("wait_ms must not be negative")
    return min(ms / 1000, cap)


class AmberServicer(TriageRpcs, ApprovalRpcs, AuditRpcs, AuthRpcs, pb_grpc.AmberServicer):
    def __init__(
        self,
        runs: RunService,
        tasks: TaskService,
        registry: VersionRegistry,
        notifier: Notifier,
        clock: Clock,
        default_queue: str,
        rollout: Rollout,
        migration: MigrationService,
        triage: TriageService,
        operators: Operators,
        approvals: ApprovalService,
        audit: AuditService,
        board: StatusBoard,
        credentials: CredentialService,
        checks_credentials: bool,
    ) -> None:
        TriageRpcs.__init__(self, triage, operators)
        ApprovalRpcs.__init__(self, approvals, operators)
        AuditRpcs.__init__(self, audit)
        AuthRpcs.__init__(self, credentials, checking=checks_credentials)
        self._runs = runs
        self._tasks = tasks
        self._registry = registry
        self._notifier = notifier
        self._clock = clock
        self._default_queue = default_queue
        self._rollout = rollout
        self._migration = migration
        self._board = board
        self._worker_calls = WorkerCalls(tasks, default_queue, checks_credentials, board.seen)

    def _actor(self, context: Any, claimed: str) -> str:
        """Who runs an operator command: the token's operator where the server checks tokens,
        else the name the caller gives ("api" when none)."""
        if self._operators.by_hash is None:
            return claimed or "api"
        return self._operators.authorise(operator_token(context), claimed)

    # -- applications ----------------------------------------------------------------------

    @_rpc
    def StartRun(self, request: pb.StartRunRequest, context: Any) -> pb.StartRunResponse:
        result = self._runs.start(
            StartRequest(
                workflow_type=request.workflow_type,
                input=request.input,
                tenant=tenant_of(request),
                workflow_id=request.workflow_id,
                version=request.version,
                queue=request.queue,
                execution_timeout_ms=request.execution_timeout_ms,
                traceparent=current_traceparent(),
                signal=SignalRequest(
                    name=request.signal_name,
                    payload=request.signal_payload,
                    request_id=request.signal_request_id,
                )
                if request.signal_name
                else None,
            )
        )
        return pb.StartRunResponse(
            run=m.run_to_pb(result.run),
            already_started=result.already_started,
            signalled=result.signalled,
            duplicate=result.duplicate,
        )

    @_rpc
    def SignalRun(self, request: pb.SignalRunRequest, context: Any) -> pb.SignalRunResponse:
        signal = SignalRequest(
            name=request.name, payload=request.payload, request_id=request.request_id
        )
        result = self._runs.signal(request.run_id, signal, tenant=tenant_of(request))
        return pb.SignalRunResponse(seq=result.seq, duplicate=result.duplicate)

    @_rpc
    def QueryRun(self, request: pb.QueryRunRequest, context: Any) -> pb.QueryRunResponse:
        wait = _wait_s(request.wait_ms, MAX_POLL_WAIT_S) if request.wait_ms else 10.0
        answer = self._runs.query(
            request.run_id, request.name, timeout_s=wait, tenant=tenant_of(request)
        )
        return pb.QueryRunResponse(result=answer.value, ended=answer.ended)

    @_rpc
    def CancelRun(self, request: pb.CancelRunRequest, context: Any) -> pb.CancelRunResponse:
        already = self._runs.cancel(
            request.run_id,
            reason=request.reason,
            by=self._actor(context, request.operator),
            tenant=tenant_of(request),
        )
        return pb.CancelRunResponse(already_requested=already)

    @_rpc
    def TerminateRun(
        self, request: pb.TerminateRunRequest, context: Any
    ) -> pb.TerminateRunResponse:
        if not request.reason:
            raise InvalidInput("terminating a run needs a reason")
        self._runs.terminate(
            request.run_id,
            reason=request.reason,
            by=self._actor(context, request.operator),
            tenant=tenant_of(request),
        )
        return pb.TerminateRunResponse()

    @_rpc
    def ResetRun(self, request: pb.ResetRunRequest, context: Any) -> pb.ResetRunResponse:
        if not request.reason:
            raise InvalidInput("resetting a run needs a reason")
        run = self._runs.reset(
            request.run_id,
            to_event=request.to_event,
            reason=request.reason,
            by=self._actor(context, request.operator),
            tenant=tenant_of(request),
        )
        return pb.ResetRunResponse(run=m.run_to_pb(run))

    @_rpc
    def DescribeRun(self, request: pb.DescribeRunRequest, context: Any) -> pb.DescribeRunResponse:
        desc = self._runs.describe(request.run_id, tenant=tenant_of(request))
        return m.description_to_pb(replace(desc, unserved=self._board.unserved(desc.tasks)))

    @_rpc
    def GetHistory(self, request: pb.GetHistoryRequest, context: Any) -> pb.GetHistoryResponse:
        tenant = tenant_of(request)
        run = self._runs.get(request.run_id, tenant=tenant)
        events = self._runs.history(run.run_id, after_seq=request.after_seq, tenant=tenant)
        return pb.GetHistoryResponse(events=[m.event_to_pb(e) for e in events], run_id=run.run_id)

    @_rpc
    def GetResult(self, request: pb.GetResultRequest, context: Any) -> pb.GetResultResponse:
        wait = _wait_s(request.wait_ms, MAX_RESULT_WAIT_S)
        tenant = tenant_of(request)
        run = self._runs.wait_closed(request.run_id, timeout_s=wait, tenant=tenant)
        return pb.GetResultResponse(run=m.run_to_pb(run), closed=run.status.closed)

    @_rpc
    def ListRuns(self, request: pb.ListRunsRequest, context: Any) -> pb.ListRunsResponse:
        try:
            status = RunStatus(request.status) if request.status else None
        except ValueError:
            raise InvalidInput(f"unknown run status {request.status!r}") from None
        before = None
        if request.page_token:
            try:
                before = str(uuid.UUID(request.page_token))
            except ValueError:
                raise InvalidInput("malformed page token") from None
        limit = request.limit or 50
        runs = self._runs.list(
            RunQuery(
                tenant=tenant_of(request),
                status=status,
                workflow_type=request.workflow_type or None,
                limit=limit,
                before=before,
            )
        )
        token = runs[-1].run_id if len(runs) == limit else ""
        return pb.ListRunsResponse(runs=[m.run_to_pb(r) for r in runs], next_page_token=token)

    # -- versions --------------------------------------------------------------------------

    @_rpc
    def UploadVersion(
        self, request: pb.UploadVersionRequest, context: Any
    ) -> pb.UploadVersionResponse:
        now = self._clock.now()
        # With operator tokens, uploading is an operator command; without, the uploader names
        # itself (or is named by its address).
        claimed = request.operator or (
            "" if self._operators.by_hash is not None else f"unnamed client {_peer(context)}"
        )
        actor = self._actor(context, claimed)
        result = self._registry.upload(
            request.module, now=now, label=request.label, actor=actor, reason=request.reason
        )
        if request.promote:  # audited like any promotion; each type on its own
            for workflow_type in result.version.manifest.workflows:
                self._rollout.promote(
                    workflow_type,
                    result.version.digest,
                    now=now,
                    actor=actor,
                    reason=request.reason or "upload --promote",
                )
            self._tasks_forget(result.version.manifest.workflows)
            result = replace(result, version=self._registry.get(result.version.digest))
        return pb.UploadVersionResponse(
            version=m.version_to_pb(result.version), created=result.created
        )

    @_rpc
    def ListVersions(
        self, request: pb.ListVersionsRequest, context: Any
    ) -> pb.ListVersionsResponse:
        return pb.ListVersionsResponse(versions=[m.version_to_pb(v) for v in self._registry.list()])

    @_rpc
    def GetVersion(self, request: pb.GetVersionRequest, context: Any) -> pb.GetVersionResponse:
        return pb.GetVersionResponse(version=m.version_to_pb(self._registry.get(request.ref)))

    @_rpc
    def GetModule(self, request: pb.GetModuleRequest, context: Any) -> pb.GetModuleResponse:
        return pb.GetModuleResponse(module=self._registry.module_bytes(request.digest))

    @_rpc
    def LabelVersion(self, request: pb.LabelVersionRequest, context: Any) -> pb.GetVersionResponse:
        version = self._registry.label(
            request.ref,
            request.label,
            now=self._clock.now(),
            actor=self._actor(context, request.operator),
        )
        return pb.GetVersionResponse(version=m.version_to_pb(version))

    @_rpc
    def ChangeRollout(self, request: pb.ChangeRolloutRequest, context: Any) -> pb.RolloutStatus:
        change = _ROLLOUT_ACTIONS.get(request.action)
        if change is None:
            raise InvalidInput(
                f"unknown rollout action {request.action!r} (one of {', '.join(_ROLLOUT_ACTIONS)})"
            )
        kind = request.workflow_type
        note = _Note(
            now=self._clock.now(),
            actor=self._actor(context, request.operator),
            # The audit says so rather than record an empty reason nobody can tell from a bug.
            reason=request.reason.strip() or f"{request.action}: no reason given",
        )
        change(self._rollout, request, note)
        self._tasks_forget([kind])
        return m.rollout_to_pb(self._rollout.status(kind))

    def _tasks_forget(self, workflow_types: Sequence[str]) -> None:
        for workflow_type in workflow_types:
            self._tasks.forget_upgrade_target(workflow_type)

    @_rpc
    def GetRollout(self, request: pb.GetRolloutRequest, context: Any) -> pb.RolloutStatus:
        return m.rollout_to_pb(self._rollout.status(request.workflow_type))

    @_rpc
    def RetireVersion(
        self, request: pb.RetireVersionRequest, context: Any
    ) -> pb.GetVersionResponse:
        if not request.reason:
            raise InvalidInput("retiring a version needs a reason")
        version = self._registry.retire(
            request.ref,
            now=self._clock.now(),
            actor=self._actor(context, request.operator),
            reason=request.reason,
        )
        return pb.GetVersionResponse(version=m.version_to_pb(version))

    @_rpc
    def CheckVersion(
        self, request: pb.CheckVersionRequest, context: Any
    ) -> pb.CheckVersionResponse:
        digest, checks = self._migration.check(
            request.candidate,
            request.workflow_type,
            run_ids=list(request.run_ids),
            closed_sample=request.closed_sample,
            timeout_s=_wait_s(request.wait_ms, MAX_RESULT_WAIT_S) if request.wait_ms else 60.0,
        )
        return pb.CheckVersionResponse(
            candidate=digest, runs=[m.run_check_to_pb(c) for c in checks]
        )

    @_rpc
    def MigrateRuns(self, request: pb.MigrateRunsRequest, context: Any) -> pb.MigrateRunsResponse:
        if not request.reason:
            raise InvalidInput("migrating runs needs a reason")
        digest, checks = self._migration.migrate(
            request.candidate,
            request.workflow_type,
            run_ids=list(request.run_ids),
            actor=self._actor(context, request.operator),
            reason=request.reason,
            timeout_s=_wait_s(request.wait_ms, MAX_RESULT_WAIT_S) if request.wait_ms else 60.0,
        )
        return pb.MigrateRunsResponse(candidate=digest, runs=[m.run_check_to_pb(c) for c in checks])

    # -- workers ---------------------------------------------------------------------------

    @_rpc
    def GetStatus(self, request: pb.GetStatusRequest, context: Any) -> pb.GetStatusResponse:
        return m.status_to_pb(self._board.status())

    @_rpc
    def PollTask(self, request: pb.PollTaskRequest, context: Any) -> pb.PollTaskResponse:
        if not request.worker_id:
            raise InvalidInput("worker_id is required")
        queue = request.queue or self._default_queue
        check_queue(queue)
        pool = request.pool or "main"
        if pool not in ("main", "surgical"):
            raise InvalidInput(f"unknown pool {pool!r} (main or surgical)")
        self._board.seen(request.worker_id[:256], queue, pool)
        deadline = time.monotonic() + _wait_s(request.wait_ms, MAX_POLL_WAIT_S)
        notifier = self._notifier
        seen = notifier.task_generation(queue, pool)
        try:
            while context.is_active():
                seen = notifier.task_generation(queue, pool)
                claimed = self._tasks.claim(
                    queue=queue,
                    worker=request.worker_id,
                    pool=pool,
                    holding=list(request.holding) if request.reconcile else None,
                )
                if claimed is not None:
                    notifier.pass_on(queue, pool)
                    return pb.PollTaskResponse(task=m.claimed_to_pb(claimed))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                wait = min(remaining, self._until_visible(queue, pool))
                notifier.wait_tasks(queue, seen, wait, pool)
        except BaseException:
            notifier.pass_on(queue, pool)  # a wake it may have taken must not end with it
            raise
        if notifier.task_generation(queue, pool) != seen:  # woken, then cancelled: pass it on
            notifier.pass_on(queue, pool)
        return pb.PollTaskResponse()

    def _until_visible(self, queue: str, pool: str) -> float:
        """Seconds until the queue's next delayed task becomes visible (or a safety recheck)."""
        visible_at = self._tasks.next_visible(queue, pool)
        if visible_at is None:
            return _IDLE_RECHECK_S
        wait = (visible_at - self._clock.now()).total_seconds()
        return min(max(wait, 0.005), _IDLE_RECHECK_S)

    @_rpc
    def CompleteTask(
        self, request: pb.CompleteTaskRequest, context: Any
    ) -> pb.CompleteTaskResponse:
        return self._worker_calls.complete(request)

    @_rpc
    def FailTask(self, request: pb.FailTaskRequest, context: Any) -> pb.FailTaskResponse:
        return self._worker_calls.fail(request)

    @_rpc
    def Heartbeat(self, request: pb.HeartbeatRequest, context: Any) -> pb.HeartbeatResponse:
        return self._worker_calls.heartbeat(request)

    @_rpc
    def ReleaseLeases(
        self, request: pb.ReleaseLeasesRequest, context: Any
    ) -> pb.ReleaseLeasesResponse:
        released = self._tasks.release_leases_of(request.worker_id)
        return pb.ReleaseLeasesResponse(released=released)

    @_rpc
    def CompleteQuery(
        self, request: pb.CompleteQueryRequest, context: Any
    ) -> pb.CompleteQueryResponse:
        return self._worker_calls.complete_query(request)

    def Work(
        self, request_iterator: Iterator[pb.WorkBatch], context: Any
    ) -> Iterator[pb.WorkAnswers]:
        return self._worker_calls.stream(request_iterator, context)

    def end_streams(self) -> int:
        """End the workers' open streams (see `WorkerCalls.end_streams`)."""
        return self._worker_calls.end_streams()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Note:
    """Who changes a rollout, when and why (for the audit record)."""

    now: datetime
    actor: str
    reason: str


_RolloutAction = Callable[[Rollout, pb.ChangeRolloutRequest, _Note], object]
_ROLLOUT_ACTIONS: dict[str, _RolloutAction] = {
    "promote": lambda r, q, n: r.promote(
        q.workflow_type, q.ref, now=n.now, actor=n.actor, reason=n.reason
    ),
    "ramp": lambda r, q, n: r.ramp(
        q.workflow_type, q.ref, q.percent, now=n.now, actor=n.actor, reason=n.reason
    ),
    "rollback": lambda r, q, n: r.rollback(
        q.workflow_type, now=n.now, actor=n.actor, reason=n.reason
    ),
    "auto_upgrade": lambda r, q, n: r.auto_upgrade(
        q.workflow_type, q.ref, now=n.now, actor=n.actor, reason=n.reason
    ),
    "stop_auto_upgrade": lambda r, q, n: r.auto_upgrade(
        q.workflow_type, None, now=n.now, actor=n.actor, reason=n.reason
    ),
}


def _peer(context: Any) -> str:
    """The caller's address without its port ("ipv4:127.0.0.1:5555" -> "127.0.0.1")."""
    peer = str(context.peer() or "")
    kind, _, rest = peer.partition(":")
    host = rest.rsplit(":", 1)[0] if kind in ("ipv4", "ipv6") else peer
    return host.strip("[]") or "unknown"
