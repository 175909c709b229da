"""The console through Flask's test client, on a real server with real runs: every page renders
real data, filters and paging narrow the run list, actions go through the audited services, and
refusals (no CSRF token, no login, bad input) are clear pages, never a 500."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from flask.testing import FlaskClient

from amber.history import RunStatus
from amber.runtime.console import LOGIN_LINK_TTL, SESSION_LIFETIME
from amber.runtime.model._bundle import Bundle
from amber.runtime.model._clock import ManualClock
from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.server import ApprovalPageOptions
from tests.conftest import InProcessServer
from tests.console.conftest import (
    OPERATOR_TOKEN,
    Scenario,
    operators_with_carol,
    populate,
    serving,
)
from tests.runtime._engine_helpers import make_worker


def browser_of(srv: InProcessServer) -> FlaskClient:
    page = srv.server.approval_page
    assert page is not None
    return page.app.test_client()


def csrf(client: FlaskClient, path: str = "/login") -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text)
    assert match, f"no form on {path}"
    return match.group(1)


def log_in(client: FlaskClient, *, name: str = "", token: str = "") -> None:
    response = client.post(
        "/login", data={"csrf_token": csrf(client), "name": name, "token": token}
    )
    assert response.status_code == 303, response.text


def post(client: FlaskClient, path: str, **form: str) -> tuple[int, str]:
    response = client.post(path, data={"csrf_token": csrf(client), **form})
    if response.status_code == 303:
        response = client.get(response.headers["Location"])
    return response.status_code, response.text


def run_ids_in(html: str) -> list[str]:
    return re.findall(r'class="mono"><a href="/runs/([0-9a-f-]{36})', html)


@pytest.fixture
def dev(
    console_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> tuple[InProcessServer, Scenario]:
    srv = console_server()
    return srv, populate(srv, modules, sandbox)


def test_every_page_renders_real_data_with_payloads_decoded(
    dev: tuple[InProcessServer, Scenario], sandbox: Sandbox
) -> None:
    srv, scenario = dev
    client = browser_of(srv)
    assert srv.server.console_url == srv.server.approval_link_base + "/"

    home = client.get("/")
    assert home.status_code == 200 and 'href="/runs"' in home.text
    runs = client.get("/runs").text
    assert set(run_ids_in(runs)) >= {*scenario.completed, scenario.poisoned, scenario.expense}

    page = client.get(f"/runs/{scenario.completed[0]}").text
    assert "RunCompleted" in page and "ActivityScheduled" in page
    assert "{&#34;k&#34;: 2, &#34;value&#34;: 1}" in page  # the input as JSON, not msgpack/base64
    assert "$bytes" not in page
    by_workflow_id = client.get("/runs/chain-2")  # a workflow id names its run too
    assert scenario.completed[1] in by_workflow_id.text

    poisoned = client.get(f"/runs/{scenario.poisoned}").text
    assert "non_determinism" in poisoned and "surgical" in poisoned
    # Its crash did not spend the task's retry budget, and the page says so.
    assert re.search(r"<td>1 / ∞\s+\+1 crashed</td>", poisoned), poisoned
    fingerprint = re.search(r'class="mono fingerprint">([0-9a-f]{16})<', poisoned)
    assert fingerprint, "the failure's fingerprint is shown"
    expense = client.get(f"/runs/{scenario.expense}").text
    assert "pay expense E-1" in expense and "alice" in expense  # its pending approval

    versions = client.get("/versions").text
    assert "onboard" in versions and "onboard@2" in versions and "current" in versions
    triage = client.get("/triage").text
    assert scenario.poisoned in triage and fingerprint.group(1) in triage
    approvals = client.get("/approvals?status=pending").text
    assert "pay expense E-1" in approvals
    assert "pay expense E-1" in client.get("/approvals?run=expense-E-1").text
    audit = client.get("/audit").text
    assert "run.terminate" in audit and "started by mistake" in audit

    log_in(client, name="dana")
    with serving(make_worker(srv.client, sandbox, worker_id="query-answerer")):
        status, answered = post(client, f"/runs/{scenario.shipping}/query", name="status")
    assert status == 200
    assert "in_transit" in re.search(r'id="query-answer">([^<]*)<', answered).group(1)  # type: ignore[union-attr]


def test_filters_and_paging_narrow_the_run_list(
    dev: tuple[InProcessServer, Scenario],
) -> None:
    srv, scenario = dev
    client = browser_of(srv)

    def listed(**query: str) -> set[str]:
        response = client.get("/runs", query_string=query)
        assert response.status_code == 200, response.text
        return set(run_ids_in(response.text))

    assert listed(status="completed") >= set(scenario.completed)
    assert scenario.poisoned not in listed(status="completed")
    assert listed(status="terminated") == {scenario.terminated}
    assert listed(status="cancelled") == {scenario.cancelled}
    assert listed(workflow_type="expense") == {scenario.expense}
    assert listed(workflow_id="chain-2") == {scenario.completed[1]}
    assert listed(version="onboard@2") == set()
    chain_digest = srv.client.describe(scenario.completed[0]).run.digest
    assert listed(version=chain_digest[:10]) == {*scenario.completed, scenario.terminated}
    assert listed(tenant="nobody") == set()
    later = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    earlier = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    assert listed(since=later) == set()
    assert listed(until=earlier) == set()
    assert scenario.poisoned in listed(since=earlier, until=later)

    extra = [srv.client.start_run("chain", {"k": 1, "value": i}).run.run_id for i in range(55)]
    first = client.get("/runs", query_string={"status": "running", "workflow_type": "chain"})
    page_one = run_ids_in(first.text)
    assert page_one == sorted(extra, reverse=True)[:50]
    older = re.search(r'id="next-page" href="([^"]+)"', first.text)
    assert older, "a full page links to the next one"
    page_two = run_ids_in(client.get(older.group(1).replace("&amp;", "&")).text)
    assert set(page_one) | set(page_two) == set(extra) and not set(page_one) & set(page_two)


def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(
    dev: tuple[InProcessServer, Scenario],
) -> None:
    srv, scenario = dev
    client = browser_of(srv)
    log_in(client, name="dana")
    response = client.post(f"/triage/runs/{scenario.poisoned}/terminate", data={"reason": "forged"})
    assert response.status_code == 400 and "did not come from the console" in response.text
    assert srv.client.describe(scenario.poisoned).run.status is RunStatus.RUNNING


def test_without_a_login_actions_are_refused_and_the_name_is_the_logged_in_one(
    dev: tuple[InProcessServer, Scenario],
) -> None:
    srv, scenario = dev
    client = browser_of(srv)
    assert client.get("/triage").status_code == 200  # no token file: reading is open
    status, page = post(client, f"/triage/runs/{scenario.poisoned}/terminate", reason="x")
    assert status == 403 and "log in" in page
    assert srv.client.describe(scenario.poisoned).run.status is RunStatus.RUNNING

    log_in(client, name="dana")
    status, page = post(client, f"/triage/runs/{scenario.poisoned}/terminate", reason="")
    assert status == 400 and "give a reason" in page
    status, page = post(
        client, f"/triage/runs/{scenario.poisoned}/terminate", reason="duplicate order"
    )
    assert status == 200 and f"{scenario.poisoned}: terminated" in page
    assert srv.client.describe(scenario.poisoned).run.status is RunStatus.TERMINATED
    (entry,) = [e for e in srv.client.list_audit() if e.action == "run.triage.terminate"]
    assert (entry.actor, entry.target, entry.reason) == (
        "dana",
        scenario.poisoned,
        "duplicate order",
    )


def test_with_a_token_file_every_page_needs_a_token_login(
    console_server: Callable[..., InProcessServer],
) -> None:
    srv = console_server(operators=operators_with_carol())
    client = browser_of(srv)
    response = client.get("/runs?status=running")
    assert response.status_code == 303
    assert response.headers["Location"].startswith("/login?next=/runs")
    assert srv.server.console_login_link() is None  # no way around the tokens

    for name, token in (("carol", "wrong"), ("mallory", OPERATOR_TOKEN), ("carol", "")):
        response = client.post(
            "/login", data={"csrf_token": csrf(client), "name": name, "token": token}
        )
        assert response.status_code == 403, (name, token)
        assert client.get("/runs").status_code == 303

    log_in(client, token=OPERATOR_TOKEN)
    page = client.get("/runs")
    assert page.status_code == 200 and '<strong id="operator">carol</strong>' in page.text
    assert client.get("/login/anything").status_code == 403


def test_a_login_link_logs_in_as_dev_once_and_expires(
    console_server: Callable[..., InProcessServer],
) -> None:
    clock = ManualClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    srv = console_server(clock=clock)
    link = srv.server.console_login_link()
    assert link is not None and link.startswith(srv.server.console_url + "login/")
    path = link.removeprefix(srv.server.console_url.rstrip("/"))

    client = browser_of(srv)
    assert client.get(path).status_code == 303
    assert '<strong id="operator">dev</strong>' in client.get("/").text
    assert browser_of(srv).get(path).status_code == 403  # single use

    late = srv.server.console_login_link()
    assert late is not None
    clock.advance(LOGIN_LINK_TTL + timedelta(seconds=1))
    assert (
        browser_of(srv).get(late.removeprefix(srv.server.console_url.rstrip("/"))).status_code
        == 403
    )

    clock.advance(SESSION_LIFETIME)  # the first browser's login has run out
    assert 'id="login-link"' in client.get("/").text


def test_a_rollout_change_is_confirmed_first_then_audited(
    dev: tuple[InProcessServer, Scenario],
) -> None:
    srv, scenario = dev
    client = browser_of(srv)
    log_in(client, name="dana")
    form = {"change": "ramp", "ref": scenario.onboard_v2, "percent": "10", "reason": "canary"}
    status, page = post(client, "/versions/onboard/change", **form)
    assert status == 200 and "Send 10 % of new onboard runs" in page and 'id="confirm"' in page
    assert srv.client.rollout("onboard").rollout.candidate is None  # nothing changed yet

    status, page = post(client, "/versions/onboard/change", **form, confirm="yes")
    assert status == 200 and "Ramped onboard to 10 %" in page
    rollout = srv.client.rollout("onboard").rollout
    assert (rollout.candidate, rollout.ramp_percent) == (scenario.onboard_v2, 10)
    (entry,) = [e for e in srv.client.list_audit() if e.action == "version.ramp"]
    assert (entry.actor, entry.reason) == ("dana", "canary")

    status, page = post(client, "/versions/onboard/change", change="rollback", confirm="yes")
    assert status == 200 and srv.client.rollout("onboard").rollout.candidate is None


def test_export_skip_and_approval_links_go_through_the_audited_services(
    dev: tuple[InProcessServer, Scenario],
) -> None:
    srv, scenario = dev
    client = browser_of(srv)
    log_in(client, name="dana")
    response = client.post(
        f"/triage/runs/{scenario.poisoned}/export", data={"csrf_token": csrf(client)}
    )
    assert response.status_code == 200
    assert "attachment" in response.headers["Content-Disposition"]
    bundle = Bundle.decode(response.data)
    assert bundle.run.run_id == scenario.poisoned and bundle.exported_by == "dana"

    status, page = post(
        client, f"/triage/runs/{scenario.poisoned}/skip", step="0", result="{oops", reason="r"
    )
    assert status == 400 and "not JSON" in page

    (approval,) = srv.client.list_approvals(status="pending")
    link = f"/approvals/{approval.approval_id}/issue"
    # A reason as long as the command line allows, and no longer.
    status, page = post(client, link, approver="alice", reason="r" * 4097)
    assert status == 400 and "longer than 4,096 characters" in page
    status, page = post(client, link, approver="alice", reason="no mail gateway " + "r" * 4000)
    assert status == 200 and "/approvals/" in re.search(
        r'id="issued-link"[^>]*>(.*?)</p>', page, re.S
    ).group(1)  # type: ignore[union-attr]
    actions = [(e.action, e.actor) for e in srv.client.list_audit()]
    assert ("run.export", "dana") in actions and ("approval.issue", "dana") in actions

    status, page = post(client, "/audit/verify")
    assert status == 200 and "Verified:" in page


def test_errors_are_console_pages_not_500s(dev: tuple[InProcessServer, Scenario]) -> None:
    srv, _ = dev
    client = browser_of(srv)
    for path, status, text in (
        ("/runs/no-such-run", 404, "no-such-run"),
        ("/runs?status=sleeping", 400, "unknown run status"),
        ("/runs?since=yesterday", 400, "must look like"),
        ("/runs?version=nope", 404, "nope"),
        ("/no/such/page", 404, "There is no page at this address."),
        ("/approvals?run=nope", 404, "nope"),
        ("/approvals?approval=nope", 404, "no approval"),
        ("/audit?upto=x", 400, "record number"),
    ):
        response = client.get(path)
        assert response.status_code == status, (path, response.text)
        assert text in response.text, path
        assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert "Link not valid" in client.get("/approvals/unknown-token").text  # the page's own 404


def test_a_server_can_serve_the_approval_page_without_the_console(
    make_server: Callable[..., InProcessServer],
) -> None:
    import secrets

    from amber.runtime.server._server import ApprovalPageOptions

    srv = make_server(
        approval_page=ApprovalPageOptions(secret_key=secrets.token_bytes(32), console=False)
    )
    assert srv.server.console is None and srv.server.console_url == ""
    assert srv.server.console_login_link() is None
    assert browser_of(srv).get("/runs").status_code == 404


def test_login_secrets_are_kept_out_of_the_request_logs() -> None:
    from amber.runtime.approvals._page import _redact

    assert _redact("GET /login/s3cr3t HTTP/1.1") == "GET /login/<token> HTTP/1.1"
    assert _redact("/login?next=/runs") == "/login?next=/runs"


def test_on_a_server_that_checks_credentials_the_console_takes_an_operators_credential(
    make_server: Callable[..., InProcessServer],
) -> None:
    srv = make_server(
        check_credentials=True,
        approval_page=ApprovalPageOptions(secret_key=secrets.token_bytes(32)),
        status_login_links=True,
    )
    grant = srv.server.credentials.grant
    ops = grant("ana", "operator", tenants=["*"], by="t", reason="on call").token
    scoped = grant("bo", "operator", tenants=["acme"], by="t", reason="one tenant").token
    app = grant("shop", "application", tenants=["*"], by="t", reason="a service").token
    client = browser_of(srv)
    assert client.get("/runs").status_code == 303  # reading needs a login too

    for token, why in ((scoped, "bound to every tenant"), (app, "may not use the console"),
                       ("amb_forged", "unknown, rotated or revoked")):  # fmt: skip
        response = client.post("/login", data={"csrf_token": csrf(client), "token": token})
        assert response.status_code == 403 and why in response.text
    log_in(client, token=ops)
    page = client.get("/runs")
    assert page.status_code == 200 and '<strong id="operator">ana</strong>' in page.text

    # Revoking the credential logs the session out on its next request.
    srv.server.credentials.grant("root", "admin", by="t", reason="t")
    srv.server.credentials.revoke("ana", by="root", reason="left the team")
    assert client.get("/runs").status_code == 303

    # The dev login link still works: it is handed out only through `amber status`, which
    # itself needs an operator's credential.
    link = srv.server.console_login_link()
    assert link is not None
    fresh = browser_of(srv)
    assert fresh.get(link.removeprefix(srv.server.console_url.rstrip("/"))).status_code == 303
    assert fresh.get("/runs").status_code == 200
