"""`AsyncAmberClient`: the application API for asyncio programs, on gRPC's own asyncio channel.

It sends the same calls as `AmberClient` (`_calls`), so the two differ only in how they wait.
Operator and worker verbs stay on the blocking client: they belong to tools, not applications.
"""

from __future__ import annotations

from typing import Any, TypeVar

import grpc
import grpc.aio

from amber.history import Event, Run
from amber.runtime.api import ClientTls, error_from_rpc
from amber.runtime.api import amber_pb2_grpc as pb_grpc
from amber.runtime.model import RunDescription, ServerStatus, StartResult

from . import _calls as calls
from ._client import DEFAULT_TARGET

T = TypeVar("T")


class AsyncAmberClient:
    """A connection to one Amber server for asyncio code. Use one per event loop:
    `async with AsyncAmberClient(target) as client: ...`."""

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        timeout_s: float = 30.0,
        operator_token: str = "",
        token: str | None = None,
        tls: ClientTls | None = None,
    ) -> None:
        """`token`: the API credential (see `AmberClient`)."""
        self.target = target
        self._timeout = timeout_s
        self._credentials = calls.Credentials.of(token, operator_token)
        self._channel = calls.channel(target, tls, grpc.aio)
        self._stub = pb_grpc.AmberStub(self._channel)  # type: ignore[no-untyped-call]

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> AsyncAmberClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def wait_ready(self, timeout_s: float = 10.0) -> None:
        """Wait until the server accepts connections."""
        import asyncio

        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout_s)
        except TimeoutError:
            raise TimeoutError(f"no Amber server at {self.target} after {timeout_s} s") from None

    async def _run(self, call: calls.Call[T]) -> T:
        metadata = self._credentials.metadata(operator=call.operator)
        rpc = getattr(self._stub, call.method)
        try:
            answer = await rpc(call.request, timeout=self._timeout + call.wait_s, metadata=metadata)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from None
        return call.read(answer)

    async def start_run(
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
        """As `AmberClient.start_run`."""
        return await self._run(
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

    async def signal(
        self,
        run: str,
        name: str,
        payload: Any = None,
        *,
        request_id: str = "",
        tenant: str = "",
        raw_payload: bytes | None = None,
    ) -> bool:
        """As `AmberClient.signal`."""
        return await self._run(
            calls.signal(
                run, name, payload, request_id=request_id, tenant=tenant, raw_payload=raw_payload
            )
        )

    async def query(self, run: str, name: str, *, wait_s: float = 10.0, tenant: str = "") -> Any:
        """As `AmberClient.query`."""
        return await self._run(calls.query(run, name, wait_s=wait_s, tenant=tenant))

    async def cancel(
        self, run: str, *, reason: str = "", operator: str = "", tenant: str = ""
    ) -> bool:
        """As `AmberClient.cancel`."""
        return await self._run(calls.cancel(run, reason=reason, operator=operator, tenant=tenant))

    async def terminate(
        self, run: str, *, reason: str, operator: str = "", tenant: str = ""
    ) -> None:
        """As `AmberClient.terminate`."""
        await self._run(calls.terminate(run, reason=reason, operator=operator, tenant=tenant))

    async def describe(self, run_id: str, *, tenant: str = "") -> RunDescription:
        """As `AmberClient.describe`."""
        return await self._run(calls.describe(run_id, tenant=tenant))

    async def history(self, run: str, *, after_seq: int = 0, tenant: str = "") -> list[Event]:
        """As `AmberClient.history`."""
        events: list[Event] = []
        while after_seq >= 0:
            page, after_seq = await self._run(
                calls.history_page(run, after_seq=after_seq, tenant=tenant)
            )
            events += page
        return events

    async def result(self, run_id: str, *, wait_s: float = 0.0, tenant: str = "") -> Run:
        """As `AmberClient.result`."""
        return await self._run(calls.result(run_id, wait_s=wait_s, tenant=tenant))

    async def get_result(
        self, run: str, *, wait_s: float = 60.0, raw: bool = False, tenant: str = ""
    ) -> Any:
        """As `AmberClient.get_result`: the decoded result, or `RunFailed` / `RunStillOpen`."""
        closed = await self.result(run, wait_s=wait_s, tenant=tenant)
        while (next_id := calls.follows(closed)) is not None:
            closed = await self.result(next_id, wait_s=wait_s, tenant=tenant)
        return calls.value_of(closed, raw=raw)

    async def list_runs(
        self,
        *,
        tenant: str = "",
        status: str = "",
        workflow_type: str = "",
        limit: int = 50,
        page_token: str = "",
    ) -> tuple[list[Run], str]:
        """As `AmberClient.list_runs`."""
        return await self._run(
            calls.list_runs(
                tenant=tenant,
                status=status,
                workflow_type=workflow_type,
                limit=limit,
                page_token=page_token,
            )
        )

    async def status(self) -> ServerStatus:
        """As `AmberClient.status`."""
        return await self._run(calls.status())
