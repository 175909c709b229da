"""`amber status`: server, database, URLs, workers and queues, in text and JSON."""

from __future__ import annotations

import json
import secrets
import urllib.request
from collections.abc import Callable

import pytest

from amber.runtime.metrics import OpsListen
from amber.runtime.server import ApprovalPageOptions
from amber.tools.cli import main
from tests.conftest import InProcessServer, wait_for
from tests.tools.test_cli import amber, served  # noqa: F401  (the fixture is used by name)

KEYS = {"server", "database", "console_url", "metrics_url", "workers", "queues"}


def test_status_names_the_database_workers_queues_and_a_working_metrics_url(
    make_server: Callable[..., InProcessServer],
    capsys: pytest.CaptureFixture[str],
    modules: dict[str, bytes],
) -> None:
    srv = make_server(ops_listen=OpsListen())
    srv.client.upload_version(modules["chain"], promote=True)
    srv.client.start_run("chain", {"k": 1, "value": 0}, queue="status-q")  # nobody serves it
    # A worker announces itself by polling.
    srv.client.poll_task(worker_id="status-worker", queue="status-q", pool="main", wait_s=0)
    code, out, _ = amber(capsys, srv, "status", "--json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == KEYS
    assert doc["server"]["reachable"] is True and doc["database"]["ok"] is True
    assert any(
        w["worker_id"] == "status-worker" and w["queue"] == "status-q" for w in doc["workers"]
    )
    queue = next(q for q in doc["queues"] if q["queue"] == "status-q" and q["pool"] == "main")
    assert queue["ready"] + queue["leased"] == 1
    with urllib.request.urlopen(doc["metrics_url"], timeout=10) as page:
        assert page.status == 200 and b"amber_queue_ready" in page.read()

    code, out, _ = amber(capsys, srv, "status")
    assert code == 0
    assert "database  ok" in out and "status-worker" in out and "status-q" in out


def test_status_without_metrics_says_so(
    served: InProcessServer,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    wait_for(lambda: bool(served.client.status().workers), 10, "the worker's first poll")
    code, out, _ = amber(capsys, served, "--json", "status")
    doc = json.loads(out)
    assert code == 0 and doc["metrics_url"] == "" and doc["workers"][0]["worker_id"] == "cli-test"


def test_status_of_no_server_is_exit_1_in_the_same_shape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["--server", "127.0.0.1:1", "status", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and set(doc) == KEYS and doc["server"]["reachable"] is False


@pytest.mark.parametrize("links", [False, True])
def test_the_console_url_opens_the_console_and_under_dev_logs_in(
    make_server: Callable[..., InProcessServer],
    capsys: pytest.CaptureFixture[str],
    links: bool,
) -> None:
    srv = make_server(
        approval_page=ApprovalPageOptions(secret_key=secrets.token_bytes(32)),
        status_login_links=links,
    )
    code, out, _ = amber(capsys, srv, "status", "--json")
    url = json.loads(out)["console_url"]
    assert code == 0 and url.startswith("http://127.0.0.1:")
    assert ("/login/" in url) is links
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    with opener.open(url, timeout=10) as page:  # follows the login's redirect
        body = page.read().decode()
    assert page.status == 200 and "/runs" in body
    if links:
        assert "Log out" in body or "logout" in body.lower()
