"""The application API as calls: each is a request, the RPC that takes it, and how to read the
answer. The blocking client and the asyncio client send exactly these, so the two cannot drift
apart in what they ask or how they read.

Rejected: an asyncio client that runs the blocking one in threads (every waiting call would hold
a thread: a thousand `await get_result` would need a thousand threads).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from amber.abi import pack, unpack
from amber.history import Event, Run, RunStatus
from amber.runtime.api import AUTHORIZATION_HEADER, GRPC_OPTIONS, OPERATOR_TOKEN_HEADER, ClientTls
from amber.runtime.api import amber_pb2 as pb
from amber.runtime.api import mapping as m
from amber.runtime.model import (
    MAX_HISTORY_PAGE,
    RunDescription,
    RunFailed,
    RunStillOpen,
    ServerStatus,
    StartResult,
)
from amber.runtime.tracing import trace_metadata

from ._token import discover_token

T = TypeVar("T")


def encode(value: Any) -> bytes:
    """A Python value as a msgpack payload (what workflows and activities receive)."""
    return pack(value)


def decode(payload: bytes | None) -> Any:
    """A msgpack payload as a Python value."""
    return None if payload is None else unpack(payload)


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One RPC: the stub method's name, its request, and the answer's reading."""

    method: str
    request: Any
    read: Callable[[Any], T]
    wait_s: float = 0.0
    """How long the server may hold the call (added to the client's timeout)."""
    operator: bool = False
    """Send the operator token."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a client sends to prove who it is."""

    token: str = ""
    """The API credential (`amber auth grant`), sent with every call to a server that checks
    them (`authorization: Bearer ...`)."""
    operator_token: str = ""
    """Sent with operator commands to a server with an operator token file."""

    @staticmethod
    def of(token: str | None, operator_token: str) -> Credentials:
        """The client's credentials; `token` None: found where the CLI finds it."""
        return Credentials(
            token=discover_token() if token is None else token, operator_token=operator_token
        )

    def metadata(self, *, operator: bool) -> tuple[tuple[str, str], ...]:
        """The call's metadata: the caller's trace context, and the credentials."""
        metadata = trace_metadata()  # the caller's trace continues on the server
        if self.token:
            metadata += ((AUTHORIZATION_HEADER, f"Bearer {self.token}"),)
        if operator and self.operator_token:
            metadata += ((OPERATOR_TOKEN_HEADER, self.operator_token),)
        return metadata


def channel(target: str, tls: ClientTls | None, channels: Any) -> Any:
    """A channel to `target` made by `channels` (`grpc` or `grpc.aio`): TLS with `tls`, else
    plaintext (loopback)."""
    if tls is None:
        return channels.insecure_channel(target, options=GRPC_OPTIONS)
    return channels.secure_channel(target, tls.grpc_credentials(), options=GRPC_OPTIONS)


def start_run(
    workflow_type: str,
    input: Any,
    *,
    raw_input: bytes | None,
    workflow_id: str,
    version: str,
    tenant: str,
    queue: str,
    execution_timeout_s: float,
    signal: str,
    signal_payload: Any,
    signal_request_id: str,
) -> Call[StartResult]:
    request = pb.StartRunRequest(
        workflow_type=workflow_type,
        input=raw_input if raw_input is not None else encode(input),
        workflow_id=workflow_id,
        version=version,
        tenant=tenant,
        queue=queue,
        execution_timeout_ms=int(execution_timeout_s * 1000),
        signal_name=signal,
        signal_payload=encode(signal_payload) if signal else b"",
        signal_request_id=signal_request_id,
    )

    def read(response: Any) -> StartResult:
        return StartResult(
            run=m.run_from_pb(response.run),
            already_started=response.already_started,
            signalled=response.signalled,
            duplicate=response.duplicate,
        )

    return Call("StartRun", request, read)


def signal(
    run: str, name: str, payload: Any, *, request_id: str, tenant: str, raw_payload: bytes | None
) -> Call[bool]:
    request = pb.SignalRunRequest(
        run_id=run,
        tenant=tenant,
        name=name,
        payload=raw_payload if raw_payload is not None else encode(payload),
        request_id=request_id,
    )
    return Call("SignalRun", request, lambda r: not r.duplicate)


def query(run: str, name: str, *, wait_s: float, tenant: str) -> Call[Any]:
    request = pb.QueryRunRequest(run_id=run, tenant=tenant, name=name, wait_ms=int(wait_s * 1000))
    return Call("QueryRun", request, lambda r: decode(r.result), wait_s=wait_s)


def cancel(run: str, *, reason: str, operator: str, tenant: str) -> Call[bool]:
    request = pb.CancelRunRequest(run_id=run, tenant=tenant, reason=reason, operator=operator)
    return Call("CancelRun", request, lambda r: not r.already_requested, operator=True)


def terminate(run: str, *, reason: str, operator: str, tenant: str) -> Call[None]:
    request = pb.TerminateRunRequest(run_id=run, tenant=tenant, reason=reason, operator=operator)
    return Call("TerminateRun", request, lambda r: None, operator=True)


def reset(run: str, *, to_event: int, reason: str, operator: str, tenant: str) -> Call[Run]:
    request = pb.ResetRunRequest(
        run_id=run, tenant=tenant, to_event=to_event, reason=reason, operator=operator
    )
    return Call("ResetRun", request, lambda r: m.run_from_pb(r.run), operator=True)


def describe(run_id: str, *, tenant: str) -> Call[RunDescription]:
    request = pb.DescribeRunRequest(run_id=run_id, tenant=tenant)
    return Call("DescribeRun", request, m.description_from_pb)


def history_page(run: str, *, after_seq: int, tenant: str) -> Call[tuple[list[Event], int]]:
    """One page of events, and the seq to continue after (-1 when it was the last page)."""
    request = pb.GetHistoryRequest(run_id=run, after_seq=after_seq, tenant=tenant)

    def read(response: Any) -> tuple[list[Event], int]:
        page = response.events
        events = [m.event_from_pb(response.run_id, e) for e in page]
        return events, (page[-1].seq if len(page) >= MAX_HISTORY_PAGE else -1)

    return Call("GetHistory", request, read)


def result(run_id: str, *, wait_s: float, tenant: str) -> Call[Run]:
    request = pb.GetResultRequest(run_id=run_id, wait_ms=int(wait_s * 1000), tenant=tenant)
    return Call("GetResult", request, lambda r: m.run_from_pb(r.run), wait_s=wait_s)


def follows(run: Run) -> str | None:
    """The workflow id to ask next when `run` continued as new (its chain's result is the last
    run's, as in Temporal), else None."""
    return run.workflow_id if run.status is RunStatus.CONTINUED_AS_NEW else None


def value_of(run: Run, *, raw: bool) -> Any:
    """A closed run's result as a Python value (its msgpack bytes with `raw`); `RunFailed` when
    it closed without one, `RunStillOpen` when it has not closed."""
    if not run.status.closed:
        raise RunStillOpen(f"run {run.run_id} is still {run.status.value}", run_id=run.run_id)
    if run.status is RunStatus.COMPLETED:
        return run.result if raw else decode(run.result)
    detail = f": {run.error_type}: {run.error_message}" if run.error_type else ""
    raise RunFailed(
        f"run {run.run_id} {run.status.value}{detail}",
        run_id=run.run_id,
        status=run.status.value,
        error_type=run.error_type or "",
        error_message=run.error_message or "",
    )


def list_runs(
    *, tenant: str, status: str, workflow_type: str, limit: int, page_token: str
) -> Call[tuple[list[Run], str]]:
    request = pb.ListRunsRequest(
        tenant=tenant,
        status=status,
        workflow_type=workflow_type,
        limit=limit,
        page_token=page_token,
    )
    return Call(
        "ListRuns", request, lambda r: ([m.run_from_pb(x) for x in r.runs], r.next_page_token)
    )


def status() -> Call[ServerStatus]:
    return Call("GetStatus", pb.GetStatusRequest(), m.status_from_pb)
