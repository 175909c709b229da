"""Results as Python values, from the blocking and the asyncio client, against a real server and
worker: completed, failed, terminated, still open, continued as new, and raw bytes on request."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import pytest

from amber.abi import pack
from amber.runtime.client import AmberClient, AsyncAmberClient
from amber.runtime.model import RunFailed, RunStillOpen
from amber.runtime.sandbox import Sandbox
from amber.runtime.worker import Worker, WorkerSettings
from tests.conftest import InProcessServer


@pytest.fixture
def served(
    make_server: Callable[..., InProcessServer], sandbox: Sandbox, modules: dict[str, bytes]
) -> Iterator[InProcessServer]:
    srv = make_server()
    for name in ("chain", "hostile"):
        srv.client.upload_version(modules[name], promote=True)
    worker = Worker(srv.client, sandbox, WorkerSettings(poll_wait_s=0.2))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    yield srv
    worker.stop()
    thread.join(timeout=30)


def test_get_result_decodes_and_gives_raw_bytes_on_request(served: InProcessServer) -> None:
    client = served.client
    run_id = client.start_run("chain", {"k": 2, "value": 40}).run.run_id
    assert client.get_result(run_id, wait_s=60) == {"value": 42}
    assert client.get_result(run_id, raw=True) == pack({"value": 42})


def test_a_run_without_a_result_raises_with_its_status_and_error(
    served: InProcessServer,
) -> None:
    client = served.client
    bad = client.start_run("chain", {"k": -1, "value": 0}).run.run_id  # the workflow fails it
    with pytest.raises(RunFailed) as failed:
        client.get_result(bad, wait_s=60)
    assert failed.value.status == "failed" and failed.value.error_type == "BadInput"
    napping = client.start_run("sleeper", {"ms": 600_000}).run.run_id
    with pytest.raises(RunStillOpen):
        client.get_result(napping, wait_s=0.2)
    client.terminate(napping, reason="not needed", operator="ops")
    with pytest.raises(RunFailed) as terminated:
        client.get_result(napping)
    assert terminated.value.status == "terminated"


def test_the_asyncio_client_starts_waits_and_decodes_many_runs_at_once(
    served: InProcessServer,
) -> None:
    async def main() -> list[object]:
        async with AsyncAmberClient(served.target) as client:
            await client.wait_ready(10)
            started = await asyncio.gather(
                *(client.start_run("chain", {"k": 1, "value": n}) for n in range(10))
            )
            values = await asyncio.gather(
                *(client.get_result(s.run.run_id, wait_s=60) for s in started)
            )
            events = await client.history(started[0].run.run_id)
            assert events[-1].type.value == "RunCompleted"
            status = await client.status()
            assert status.database_ok
            with pytest.raises(RunFailed):
                bad = await client.start_run("chain", {"k": -1, "value": 0})
                await client.get_result(bad.run.run_id, wait_s=60)
            return list(values)

    assert asyncio.run(main()) == [{"value": n + 1} for n in range(10)]


def test_the_two_clients_raise_the_same_typed_errors(served: InProcessServer) -> None:
    from amber.abi import AmberError

    with pytest.raises(AmberError) as blocking:
        served.client.describe("no-such-run")

    async def main() -> None:
        async with AsyncAmberClient(served.target) as client:
            await client.describe("no-such-run")

    with pytest.raises(AmberError) as non_blocking:
        asyncio.run(main())
    assert type(non_blocking.value) is type(blocking.value)


def test_a_blocking_client_is_unchanged_for_callers_of_result(served: InProcessServer) -> None:
    client: AmberClient = served.client
    run_id = client.start_run("chain", {"k": 1, "value": 1}).run.run_id
    run = client.result(run_id, wait_s=60)
    assert run.status.value == "completed" and isinstance(run.result, bytes)
