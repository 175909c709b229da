"""The Python client: what applications, the CLI and workers use to talk to an Amber server."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc

from amber.history import (
    Approval,
    AuditEntry,
    AuditVerification,
    Event,
    Principal,
    Run,
    Troubled,
)
from amber.runtime.api import (
    MAX_MESSAGE_BYTES,
    ClientTls,
    error_from_rpc,
)
from amber.runtime.api import amber_pb2 as pb
from amber.runtime.api import amber_pb2_grpc as pb_grpc
from amber.runtime.api import approval_mapping as am
from amber.runtime.api import mapping as m
from amber.runtime.model import (
    ApprovalDetail,
    DecisionOutcome,
    LeasedTask,
    PayloadTooLarge,
    RunCheck,
    RunDescription,
    ServerStatus,
    StartResult,
    TriageOutcome,
)
from amber.versions import ModuleVersion, TypeStatus, UploadResult

from . import _calls as calls
from ._calls import decode as decode  # re-exported: callers imported them from here
from ._calls import encode as encode
from ._reports import ReportCalls
from ._stream import WorkStream

T = TypeVar("T")
DEFAULT_TARGET = "127.0.0.1:7233"
_ENVELOPE_ROOM = 64 * 1024
"""What a request needs besides its payload, within gRPC's message cap."""
UPLOAD_COMPILE_S_PER_MIB = 5.0
"""Extra seconds an upload may take per MiB of module, beyond the client timeout: the server
compiles what it stores (a Python component is about 18 MiB)."""


class AmberClient(ReportCalls):
    """A connection to one Amber server. Thread-safe. Errors come back as Amber's typed errors."""

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        timeout_s: float = 30.0,
        operator_token: str = "",
        token: str | None = None,
        tls: ClientTls | None = None,
    ) -> None:
        """`token`: the API credential, for a server that checks them (`amber auth grant`; None:
        `$AMBER_TOKEN` or a token file, see `discover_token`; "": none);
        `operator_token`: sent with operator commands to a server with an operator token file;
        `tls`: connect over TLS (None: plaintext, for loopback)."""
        self.target = target
        self._timeout = timeout_s
        self._credentials = calls.Credentials.of(token, operator_token)
        self._channel = calls.channel(target, tls, grpc)
        self._stub = pb_grpc.AmberStub(self._channel)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> AmberClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(
        self,
        rpc: Callable[..., T],
        request: Any,
        *,
        extra_timeout_s: float = 0.0,
        operator: bool = False,
    ) -> T:
        metadata = self._credentials.metadata(operator=operator)
        try:
            return rpc(request, timeout=self._timeout + extra_timeout_s, metadata=metadata)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from None

    def wait_ready(self, timeout_s: float = 10.0) -> None:
        """Block until the server accepts connections."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout_s)
        except grpc.FutureTimeoutError:
            raise TimeoutError(f"no Amber server at {self.target} after {timeout_s} s") from None

    # -- runs --------------------------------------------------------------------------------

    def _run(self, call: calls.Call[T]) -> T:
        rpc = getattr(self._stub, call.method)
        answer = self._call(rpc, call.request, extra_timeout_s=call.wait_s, operator=call.operator)
        return call.read(answer)

    def start_run(
        self,
        workflow_type: str,
        input: Any = None,
        *,
        raw_input: bytes | None = None,
        workflow_id: str = "",
        version: str = "",
        tenant: str = "",
        queue: str = "",
        execution_timeout_s: float = 0.0,
        signal: str = "",
        signal_payload: Any = None,
        signal_request_id: str = "",
    ) -> StartResult:
        """Start a run (idempotent on `workflow_id`). `input` is msgpack-encoded for you.

        With `signal`, this is signal-with-start: the signal is delivered to the run, which is
        started first unless it already runs.
        """
        return self._run(
            calls.start_run(
                workflow_type,
                input,
                raw_input=raw_input,
                workflow_id=workflow_id,
                version=version,
                tenant=tenant,
                queue=queue,
                execution_timeout_s=execution_timeout_s,
                signal=signal,
                signal_payload=signal_payload,
                signal_request_id=signal_request_id,
            )
        )

    def signal(
        self,
        run: str,
        name: str,
        payload: Any = None,
        *,
        request_id: str = "",
        tenant: str = "",
        raw_payload: bytes | None = None,
    ) -> bool:
        """Send a signal; returns False when `request_id` was already delivered (a no-op)."""
        return self._run(
            calls.signal(
                run, name, payload, request_id=request_id, tenant=tenant, raw_payload=raw_payload
            )
        )

    def query(self, run: str, name: str, *, wait_s: float = 10.0, tenant: str = "") -> Any:
        """The value the workflow last published under `name` (decoded), replayed by a worker."""
        return self._run(calls.query(run, name, wait_s=wait_s, tenant=tenant))

    def cancel(self, run: str, *, reason: str = "", operator: str = "", tenant: str = "") -> bool:
        """Request cancellation; returns False if it had already been requested."""
        return self._run(calls.cancel(run, reason=reason, operator=operator, tenant=tenant))

    def terminate(self, run: str, *, reason: str, operator: str = "", tenant: str = "") -> None:
        """Close a run at once (audited with `reason` and `operator`)."""
        self._run(calls.terminate(run, reason=reason, operator=operator, tenant=tenant))

    def reset(
        self, run: str, *, to_event: int, reason: str, operator: str = "", tenant: str = ""
    ) -> Run:
        """Start a new run replaying this one's history up to `to_event`; returns it."""
        return self._run(
            calls.reset(run, to_event=to_event, reason=reason, operator=operator, tenant=tenant)
        )

    def describe(self, run_id: str, *, tenant: str = "") -> RunDescription:
        """The run, its open tasks and its recent failures."""
        return self._run(calls.describe(run_id, tenant=tenant))

    def history(self, run: str, *, after_seq: int = 0, tenant: str = "") -> list[Event]:
        """Every event after `after_seq` (`run` is a run id or a workflow id), page by page."""
        events: list[Event] = []
        while after_seq >= 0:
            page, after_seq = self._run(calls.history_page(run, after_seq=after_seq, tenant=tenant))
            events += page
        return events

    def result(self, run_id: str, *, wait_s: float = 0.0, tenant: str = "") -> Run:
        """The run, waiting up to `wait_s` for it to close (check `run.status.closed`)."""
        return self._run(calls.result(run_id, wait_s=wait_s, tenant=tenant))

    def get_result(
        self, run: str, *, wait_s: float = 60.0, raw: bool = False, tenant: str = ""
    ) -> Any:
        """The run's result as a Python value (its msgpack bytes with `raw`), waiting up to
        `wait_s` for it to close and following continue-as-new to the chain's last run.

        Raises `RunFailed` (failed, cancelled, terminated, timed out: with the error type and
        message) or `RunStillOpen` when the wait ran out."""
        return calls.value_of(self.chain_result(run, wait_s=wait_s, tenant=tenant), raw=raw)

    def chain_result(self, run: str, *, wait_s: float = 0.0, tenant: str = "") -> Run:
        """The run or, where it continued as new, its chain's last run (as in Temporal, the
        chain's result is that run's), waiting up to `wait_s` in all for it to close."""
        deadline = time.monotonic() + wait_s
        closed = self.result(run, wait_s=wait_s, tenant=tenant)
        while (next_id := calls.follows(closed)) is not None:
            left = max(0.0, deadline - time.monotonic())
            following = self.result(next_id, wait_s=left, tenant=tenant)
            if following.run_id == closed.run_id:  # no later run (yet): the chain ends here
                break
            closed = following
        return closed

    def list_runs(
        self,
        *,
        tenant: str = "",
        status: str = "",
        workflow_type: str = "",
        limit: int = 50,
        page_token: str = "",
    ) -> tuple[list[Run], str]:
        """A page of runs, newest first, and the token of the next page ("" at the end)."""
        return self._run(
            calls.list_runs(
                tenant=tenant,
                status=status,
                workflow_type=workflow_type,
                limit=limit,
                page_token=page_token,
            )
        )

    # -- versions ----------------------------------------------------------------------------

    def upload_version(
        self,
        wasm: bytes,
        *,
        promote: bool = False,
        label: str = "",
        operator: str = "",
        reason: str = "",
    ) -> UploadResult:
        """Store a module version (audited under `operator`, or the operator token's name, with
        `reason`)."""
        if len(wasm) > MAX_MESSAGE_BYTES - _ENVELOPE_ROOM:
            raise PayloadTooLarge(
                f"the module is {len(wasm)} bytes; one upload carries at most"
                f" {MAX_MESSAGE_BYTES - _ENVELOPE_ROOM} (and the server's own cap on module size"
                " is lower still unless raised)"
            )
        request = pb.UploadVersionRequest(
            module=wasm, promote=promote, label=label, operator=operator, reason=reason
        )
        # The server compiles the module before it answers: about 5 s for an 18 MB Python
        # component on a quiet machine, several times that on a busy one.
        allowance = UPLOAD_COMPILE_S_PER_MIB * len(wasm) / 2**20
        response = self._call(
            self._stub.UploadVersion, request, extra_timeout_s=allowance, operator=True
        )
        return UploadResult(version=m.version_from_pb(response.version), created=response.created)

    def list_versions(self) -> list[ModuleVersion]:
        response = self._call(self._stub.ListVersions, pb.ListVersionsRequest())
        return [m.version_from_pb(v) for v in response.versions]

    def get_version(self, ref: str) -> ModuleVersion:
        response = self._call(self._stub.GetVersion, pb.GetVersionRequest(ref=ref))
        return m.version_from_pb(response.version)

    def label_version(self, ref: str, label: str, *, operator: str = "") -> ModuleVersion:
        """Name a version (`orders@2.0`); a label names one digest forever."""
        request = pb.LabelVersionRequest(ref=ref, label=label, operator=operator)
        return m.version_from_pb(
            self._call(self._stub.LabelVersion, request, operator=True).version
        )

    def change_rollout(
        self,
        workflow_type: str,
        action: str,
        ref: str = "",
        *,
        percent: int = 0,
        operator: str = "",
        reason: str = "",
    ) -> TypeStatus:
        """promote / ramp / rollback / auto_upgrade / stop_auto_upgrade; audited."""
        request = pb.ChangeRolloutRequest(
            workflow_type=workflow_type,
            action=action,
            ref=ref,
            percent=percent,
            operator=operator,
            reason=reason,
        )
        return m.rollout_from_pb(self._call(self._stub.ChangeRollout, request, operator=True))

    def rollout(self, workflow_type: str) -> TypeStatus:
        """The type's versions side by side: role, pinned runs, activations, failures, fuel."""
        request = pb.GetRolloutRequest(workflow_type=workflow_type)
        return m.rollout_from_pb(self._call(self._stub.GetRollout, request))

    def retire_version(self, ref: str, *, reason: str, operator: str = "") -> ModuleVersion:
        """Retire a version nothing uses any more (refused, with the counts, otherwise)."""
        request = pb.RetireVersionRequest(ref=ref, reason=reason, operator=operator)
        return m.version_from_pb(
            self._call(self._stub.RetireVersion, request, operator=True).version
        )

    def check_version(
        self,
        candidate: str,
        workflow_type: str,
        *,
        run_ids: Sequence[str] = (),
        closed_sample: int = 0,
        wait_s: float = 60.0,
    ) -> tuple[str, list[RunCheck]]:
        """Replay runs on a candidate version; a verdict per run (first divergence if any)."""
        request = pb.CheckVersionRequest(
            candidate=candidate,
            workflow_type=workflow_type,
            run_ids=list(run_ids),
            closed_sample=closed_sample,
            wait_ms=int(wait_s * 1000),
        )
        response = self._call(self._stub.CheckVersion, request, extra_timeout_s=wait_s)
        return response.candidate, [m.run_check_from_pb(c) for c in response.runs]

    def migrate_runs(
        self,
        candidate: str,
        workflow_type: str,
        *,
        run_ids: Sequence[str] = (),
        reason: str,
        operator: str = "",
        wait_s: float = 60.0,
    ) -> tuple[str, list[RunCheck]]:
        """Move the open runs that pass a replay check onto `candidate` (audited)."""
        request = pb.MigrateRunsRequest(
            candidate=candidate,
            workflow_type=workflow_type,
            run_ids=list(run_ids),
            operator=operator,
            reason=reason,
            wait_ms=int(wait_s * 1000),
        )
        response = self._call(
            self._stub.MigrateRuns, request, extra_timeout_s=wait_s, operator=True
        )
        return response.candidate, [m.run_check_from_pb(c) for c in response.runs]

    # -- triage ------------------------------------------------------------------------------

    def list_troubled(
        self, *, tenant: str = "", fingerprint: str = "", limit: int = 100
    ) -> list[Troubled]:
        """Suspended runs and runs with a poisoned task, newest trouble first."""
        request = pb.ListTroubledRequest(tenant=tenant, fingerprint=fingerprint, limit=limit)
        response = self._call(self._stub.ListTroubled, request)
        return [m.troubled_from_pb(t) for t in response.runs]

    def export_run(self, run_id: str, *, operator: str = "", tenant: str = "") -> bytes:
        """A triage bundle of the run (see `runtime.Bundle`), for an offline replay."""
        request = pb.ExportRunRequest(run_id=run_id, operator=operator, tenant=tenant)
        response = self._call(self._stub.ExportRun, request, extra_timeout_s=60, operator=True)
        return bytes(response.bundle)

    def triage(
        self,
        action: str,
        *,
        run_ids: Sequence[str] = (),
        fingerprint: str = "",
        reason: str,
        operator: str = "",
        tenant: str = "",
        version: str = "",
        step: int | None = None,
        result: bytes = b"",
        wait_s: float = 60.0,
    ) -> list[TriageOutcome]:
        """An operator command (resume, retry, skip, terminate) on runs or, in bulk, on every
        run one fingerprint poisoned. A refusal of a single named run raises."""
        request = pb.TriageRequest(
            action=action,
            run_ids=list(run_ids),
            fingerprint=fingerprint,
            tenant=tenant,
            operator=operator,
            reason=reason,
            version=version,
            step=step or 0,
            has_step=step is not None,
            result=result,
        )
        response = self._call(self._stub.Triage, request, extra_timeout_s=wait_s, operator=True)
        return [m.triage_outcome_from_pb(o) for o in response.outcomes]

    # -- approvals ---------------------------------------------------------------------------

    def list_approvals(
        self, *, tenant: str = "", status: str = "", run_id: str = "", limit: int = 100
    ) -> list[Approval]:
        request = pb.ListApprovalsRequest(tenant=tenant, status=status, run_id=run_id, limit=limit)
        response = self._call(self._stub.ListApprovals, request)
        return [am.approval_from_pb(a) for a in response.approvals]

    def get_approval(self, approval_id: str, *, tenant: str = "") -> ApprovalDetail:
        request = pb.GetApprovalRequest(approval_id=approval_id, tenant=tenant)
        return am.detail_from_pb(self._call(self._stub.GetApproval, request))

    def decide_approval(
        self,
        token: str,
        *,
        approve: bool,
        comment: str = "",
        approver: str = "",
        tenant: str = "",
        run_id: str = "",
        step: int | None = None,
    ) -> DecisionOutcome:
        """Approve or reject with an approval token (single use; refusals raise
        `InvalidToken` or `ApprovalClosed` and change nothing)."""
        request = pb.DecideApprovalRequest(
            token=token,
            approve=approve,
            comment=comment,
            approver=approver,
            tenant=tenant,
            run_id=run_id,
            step=step or 0,
            has_step=step is not None,
        )
        r = self._call(self._stub.DecideApproval, request)
        return DecisionOutcome(
            approval_id=r.approval_id,
            status=r.status,
            counted=r.counted,
            approvals=r.approvals,
            required=r.required,
        )

    def issue_approval_token(
        self, approval_id: str, approver: str, *, reason: str, operator: str = "", tenant: str = ""
    ) -> tuple[str, str]:
        """Mint a fresh token for an approver: (token, link). Shown once, stored as a hash."""
        request = pb.IssueApprovalTokenRequest(
            approval_id=approval_id,
            approver=approver,
            tenant=tenant,
            operator=operator,
            reason=reason,
        )
        r = self._call(self._stub.IssueApprovalToken, request, operator=True)
        return r.token, r.link

    def revoke_approval_tokens(
        self,
        approval_id: str,
        *,
        reason: str,
        approver: str = "",
        operator: str = "",
        tenant: str = "",
    ) -> int:
        request = pb.RevokeApprovalTokensRequest(
            approval_id=approval_id,
            approver=approver,
            tenant=tenant,
            operator=operator,
            reason=reason,
        )
        return int(self._call(self._stub.RevokeApprovalTokens, request, operator=True).revoked)

    def change_approver_role(
        self,
        *,
        grant: bool,
        role: str,
        approver: str,
        reason: str,
        operator: str = "",
        tenant: str = "",
    ) -> bool:
        request = pb.ChangeApproverRoleRequest(
            grant=grant,
            tenant=tenant,
            role=role,
            approver=approver,
            operator=operator,
            reason=reason,
        )
        return bool(self._call(self._stub.ChangeApproverRole, request, operator=True).changed)

    def list_approver_roles(self, *, tenant: str = "") -> list[tuple[str, str]]:
        response = self._call(
            self._stub.ListApproverRoles, pb.ListApproverRolesRequest(tenant=tenant)
        )
        return [(m.role, m.approver) for m in response.members]

    # -- audit -------------------------------------------------------------------------------

    def verify_audit(self, expect_head: bytes = b"") -> AuditVerification:
        """Recompute the audit log's hash chain on the server; where it first breaks."""
        r = self._call(
            self._stub.VerifyAudit,
            pb.VerifyAuditRequest(expect_head=expect_head),
            extra_timeout_s=300,
        )
        return AuditVerification(
            ok=r.ok,
            checked=r.checked,
            head_seq=r.head_seq,
            head_hash=r.head_hash,
            first_bad_seq=r.first_bad_seq or None,
            first_bad_audit_id=r.first_bad_audit_id or None,
            problem=r.problem,
        )

    def status(self) -> ServerStatus:
        """The server's view of itself: database, console and metrics URLs, the workers that
        polled it in the last 30 s, and the depth of every queue."""
        return self._run(calls.status())

    def audit_head(self) -> tuple[int, bytes]:
        """The audit chain's head (records, last hash), as stored: verify before trusting it."""
        r = self._call(self._stub.VerifyAudit, pb.VerifyAuditRequest(head_only=True))
        return int(r.head_seq), bytes(r.head_hash)

    def list_audit(
        self, *, target: str = "", limit: int = 100, after_seq: int = 0
    ) -> list[AuditEntry]:
        request = pb.ListAuditRequest(target=target, limit=limit, after_seq=after_seq)
        return [m.audit_from_pb(r) for r in self._call(self._stub.ListAudit, request).records]

    # -- credentials (admins) ----------------------------------------------------------------

    def change_credential(
        self,
        action: str,
        name: str,
        *,
        role: str = "",
        tenants: Sequence[str] = (),
        queues: Sequence[str] = (),
        pools: Sequence[str] = (),
        reason: str,
    ) -> tuple[Principal, str]:
        """Grant, rotate or revoke a principal's API credential (audited under the calling
        admin); returns the principal and, for grant and rotate, its new token (shown once)."""
        request = pb.ChangeCredentialRequest(
            action=action,
            name=name,
            role=role,
            tenants=list(tenants),
            queues=list(queues),
            pools=list(pools),
            reason=reason,
        )
        response = self._call(self._stub.ChangeCredential, request)
        return m.principal_from_pb(response.principal), response.token

    def list_credentials(self) -> list[Principal]:
        """Every principal, live and revoked (never a token)."""
        response = self._call(self._stub.ListCredentials, pb.ListCredentialsRequest())
        return [m.principal_from_pb(p) for p in response.principals]

    def get_module(self, digest: str) -> bytes:
        response = self._call(self._stub.GetModule, pb.GetModuleRequest(digest=digest))
        return bytes(response.module)

    # -- workers -----------------------------------------------------------------------------

    def poll_task(
        self,
        *,
        worker_id: str,
        queue: str = "",
        wait_s: float = 20.0,
        pool: str = "",
        holding: Sequence[int] | None = None,
    ) -> LeasedTask | None:
        """Lease a task of `queue`: a healthy one, or with `pool="surgical"` a poisoned one.

        `holding`: the tasks this worker runs now; the server then frees any other lease it
        granted `worker_id` that never arrived (lease reconciliation)."""
        request = pb.PollTaskRequest(
            worker_id=worker_id,
            queue=queue,
            wait_ms=int(wait_s * 1000),
            pool=pool,
            reconcile=holding is not None,
            holding=list(holding or ()),
        )
        response = self._call(self._stub.PollTask, request, extra_timeout_s=wait_s)
        return m.leased_from_pb(response.task) if response.HasField("task") else None

    # A worker's reports (`ReportCalls`), each as its own call.

    def _send_completion(self, request: pb.CompleteTaskRequest) -> pb.CompleteTaskResponse:
        response: pb.CompleteTaskResponse = self._call(self._stub.CompleteTask, request)
        return response

    def _send_failure(self, request: pb.FailTaskRequest) -> pb.FailTaskResponse:
        response: pb.FailTaskResponse = self._call(self._stub.FailTask, request)
        return response

    def _send_heartbeat(self, request: pb.HeartbeatRequest) -> pb.HeartbeatResponse:
        response: pb.HeartbeatResponse = self._call(self._stub.Heartbeat, request)
        return response

    def _send_answer(self, request: pb.CompleteQueryRequest) -> None:
        self._call(self._stub.CompleteQuery, request)

    def release_leases(self, worker_id: str) -> int:
        """Give up every lease held under `worker_id` (each becomes a failed "worker lost"
        attempt at once). Only for a worker starting under a stable id whose previous process
        is gone; returns how many were released."""
        request = pb.ReleaseLeasesRequest(worker_id=worker_id)
        return int(self._call(self._stub.ReleaseLeases, request).released)

    def work_stream(self, *, max_batch: int = 64, lines: int = 2) -> WorkStream:
        """Streams that carry this worker's reports, heartbeats and query answers in batches
        (`lines` of them open at once): it has the same methods as this client for them (a
        worker uses one)."""
        metadata = self._credentials.metadata(operator=False)
        return WorkStream(
            lambda batches: self._stub.Work(batches, metadata=metadata),
            timeout_s=self._timeout,
            max_batch=max_batch,
            lines=lines,
        )
