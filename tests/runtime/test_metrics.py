"""The server's and the worker's `/metrics`, `/healthz` and `/readyz`, scraped over HTTP from a
real server and worker running real runs."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from amber.abi import InvalidInput
from amber.history import Database, RunStatus
from amber.runtime.metrics import OpsEndpoint, OpsListen
from amber.runtime.sandbox import Sandbox
from amber.runtime.server import AmberServer
from amber.runtime.worker import Worker, WorkerSettings
from tests.conftest import InProcessServer, wait_for
from tests.history._proxy import PgProxy, upstream_of

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _samples(url: str) -> dict[str, float]:
    """`name{labels}` → value, from a Prometheus text page (labels as exposed, sorted)."""
    status, text = _get(f"{url}/metrics")
    assert status == 200
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, f"not a Prometheus sample: {line!r}"
        samples[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return samples


def _value(samples: dict[str, float], name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    total, found = 0.0, False
    for key, value in samples.items():
        metric, _, rest = key.partition("{")
        if metric != name:
            continue
        if all(f'{k}="{v}"' in rest for k, v in labels.items()):
            total, found = total + value, True
    assert found, f"no {name} with {labels} in {sorted(k for k in samples if name in k)}"
    return total


@pytest.fixture
def served(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes]
) -> InProcessServer:
    srv = make_server(ops_listen=OpsListen())
    srv.client.upload_version(modules["chain"], promote=True)
    return srv


@pytest.fixture
def worker(served: InProcessServer, sandbox: Sandbox) -> Iterator[Worker]:
    worker = Worker(served.client, sandbox, WorkerSettings(poll_wait_s=0.2))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    yield worker
    worker.stop()
    thread.join(timeout=30)


def _ops_url(srv: InProcessServer) -> str:
    assert srv.server.ops is not None
    return srv.server.ops.url


def test_a_queued_task_shows_as_queue_depth_and_age(served: InProcessServer) -> None:
    served.client.start_run("chain", {"k": 1, "value": 0}, queue="metrics-q")
    samples = _samples(_ops_url(served))
    assert _value(samples, "amber_store_up") == 1
    assert _value(samples, "amber_queue_ready", queue="metrics-q", pool="main") == 1
    assert _value(samples, "amber_queue_oldest_ready_seconds", queue="metrics-q", pool="main") >= 0
    assert _value(samples, "amber_runs_started_total") >= 1
    assert _value(samples, "amber_rpc_seconds_count", method="StartRun", code="OK") >= 1
    assert _value(samples, "amber_db_transaction_seconds_count", outcome="committed") >= 1
    assert "amber_tasks_poisoned" in samples and "amber_runs_suspended" in samples


def test_completed_runs_move_the_counters_of_server_and_worker(
    served: InProcessServer, worker: Worker
) -> None:
    url = _ops_url(served)
    before = _samples(url)
    closed_before = sum(
        v for k, v in before.items() if k.startswith("amber_runs_closed_total") and "completed" in k
    )
    runs = [served.client.start_run("chain", {"k": 2, "value": n}).run.run_id for n in range(3)]
    for run_id in runs:
        assert served.client.result(run_id, wait_s=60).status is RunStatus.COMPLETED
    after = _samples(url)
    assert _value(after, "amber_runs_closed_total", status="completed") == closed_before + 3
    assert _value(after, "amber_tasks_finished_total", kind="activity", outcome="ok") >= 6
    assert _value(after, "amber_rpc_seconds_count", code="OK") > 0
    with pytest.raises(AssertionError):  # an unknown method never appears
        _value(after, "amber_rpc_seconds_count", method="NoSuchMethod")

    ops = OpsEndpoint(worker.metrics.registry, lambda: (True, "test"), OpsListen()).start()
    try:
        mine = _samples(ops.url)
    finally:
        ops.stop()
    assert _value(mine, "amber_worker_activation_seconds_count", kind="workflow") >= 3
    assert _value(mine, "amber_worker_activation_seconds_count", kind="activity") >= 6
    assert _value(mine, "amber_worker_task_seconds_count", kind="activity", outcome="ok") >= 6
    assert _value(mine, "amber_worker_fuel_used_count", kind="activity") >= 6
    assert _value(mine, "amber_worker_replayed_events_total") > 0
    assert _value(mine, "amber_worker_tasks_running") == 0


def test_health_routes_answer_and_unknown_paths_are_404(served: InProcessServer) -> None:
    url = _ops_url(served)
    assert _get(f"{url}/healthz") == (200, json.dumps({"status": "alive"}))
    status, body = _get(f"{url}/readyz")
    assert status == 200 and json.loads(body) == {"ready": True, "detail": "database reachable"}
    status, body = _get(f"{url}/admin")
    assert status == 404 and "/metrics" in json.loads(body)["error"]


def test_readiness_fails_fast_while_the_database_is_cut(database_url: str, db: Database) -> None:
    upstream = upstream_of(database_url)
    if upstream is None:
        pytest.skip("cannot tell where the test database listens")
    proxy = PgProxy(upstream)
    proxied = Database(proxy.dsn(database_url), connect_timeout_s=0.5, attempts=2).open()
    server = AmberServer(proxied, listen="127.0.0.1:0", ops_listen=OpsListen())
    server.start()
    try:
        assert server.ops is not None
        assert _get(f"{server.ops.url}/readyz")[0] == 200
        proxy.cut()
        status, body = _get(f"{server.ops.url}/readyz")
        assert status == 503
        assert json.loads(body)["detail"].startswith("database unavailable")
        samples = _samples(server.ops.url)  # still answers, saying the store did not
        assert _value(samples, "amber_store_up") == 0
        proxy.restore()
        wait_for(lambda: _get(f"{server.ops.url}/readyz")[0] == 200, 30, "readiness again")
    finally:
        server.stop(grace_s=0.5)
        proxied.close()
        proxy.close()


def test_a_taken_port_is_an_error_unless_any_port_will_do(served: InProcessServer) -> None:
    assert served.server.ops is not None
    taken = served.server.ops.port
    # One line for the command line to print, not an OSError traceback.
    with pytest.raises(InvalidInput, match=f"cannot serve metrics on 127.0.0.1:{taken}: "):
        OpsEndpoint(served.server.metrics.registry, lambda: (True, ""), OpsListen(port=taken))
    other = OpsEndpoint(
        served.server.metrics.registry,
        lambda: (True, ""),
        OpsListen(port=taken, any_port_if_taken=True),
    )
    assert other.port != taken
    other.stop()
