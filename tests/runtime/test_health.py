"""Health while PostgreSQL is away: the gRPC health service turns NOT_SERVING, RPCs fail at once
with "database unavailable" (saying a retry with the same request id is safe) instead of waiting
out the client's deadline, and everything comes back when the database does."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from amber.history import Database, StoreUnavailable
from amber.runtime.client import AmberClient
from amber.runtime.server import AmberServer
from amber.tools.cli import main
from tests.conftest import wait_for
from tests.history._proxy import PgProxy, upstream_of

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture
def cut_able(database_url: str, db: Database) -> Iterator[tuple[AmberServer, PgProxy, str]]:
    upstream = upstream_of(database_url)
    if upstream is None:
        pytest.skip("cannot tell where the test database listens")
    proxy = PgProxy(upstream)
    proxied = Database(proxy.dsn(database_url), connect_timeout_s=1.0, attempts=2).open()
    server = AmberServer(proxied, listen="127.0.0.1:0")
    port = server.start()
    yield server, proxy, f"127.0.0.1:{port}"
    proxy.restore()
    server.stop(grace_s=0.5)
    proxied.close()
    proxy.close()


def _health(target: str, service: str = "") -> int:
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)  # type: ignore[no-untyped-call]
        answer = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        return int(answer.status)


def test_an_outage_is_reported_by_health_and_calls_fail_fast_with_the_cause(
    cut_able: tuple[AmberServer, PgProxy, str], capsys: pytest.CaptureFixture[str]
) -> None:
    server, proxy, target = cut_able
    assert _health(target) == SERVING and _health(target, "amber.v1.Amber") == SERVING
    proxy.cut()
    wait_for(lambda: _health(target) == NOT_SERVING, 30, "NOT_SERVING")
    assert server.database_down is not None
    # A client whose deadline is 20 s gets the server's answer, not its own deadline.
    with AmberClient(target, timeout_s=20) as client, pytest.raises(StoreUnavailable) as refused:
        client.describe("any-run")
    message = str(refused.value)
    assert message.startswith("database unavailable")
    assert "retrying with the same request id is safe" in message
    assert main(["--server", target, "run", "list"]) == 2
    assert "database unavailable" in capsys.readouterr().err

    proxy.restore()
    wait_for(lambda: _health(target) == SERVING, 30, "SERVING again")
    with AmberClient(target, timeout_s=20) as client:
        runs, _ = client.list_runs()
        assert isinstance(runs, list)
