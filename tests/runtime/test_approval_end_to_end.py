"""The approval page end to end: a real server serving it, the `expense` workflow waiting, the
approver's link from the delivery sink opened in headless chromium, Approve clicked, the run
paid — and the same link replayed afterwards refused without a change."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from amber.history import EventType, RunStatus
from amber.runtime.client._client import decode
from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.server._server import ApprovalPageOptions
from tests.conftest import InProcessServer
from tests.runtime._browser import browser  # noqa: F401  (the fixture is used by name)
from tests.runtime._engine_helpers import make_worker, settle
from tests.runtime.test_approvals import Inbox


def _shown(driver: WebDriver, element_id: str) -> str:
    WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.ID, element_id))
    return str(driver.find_element(By.ID, element_id).text)


def test_an_approver_approves_through_the_page_and_the_run_pays(
    browser: WebDriver,  # noqa: F811
    make_server: Callable[..., InProcessServer],
    modules: dict[str, bytes],
    sandbox: Sandbox,
) -> None:
    inbox = Inbox()
    srv = make_server(
        approval_sink=inbox,
        approval_page=ApprovalPageOptions(secret_key=secrets.token_bytes(32)),
    )
    srv.client.upload_version(modules["expense"], promote=True)
    policy = {"approvers": ["alice"], "roles": [], "required": 1}
    run_id = srv.client.start_run(
        "expense", {"expense_id": "E-9", "policy": policy, "expires_ms": 3_600_000}
    ).run.run_id
    settle(make_worker(srv.client, sandbox))
    srv.server.sweep()
    (issued,) = inbox.issued
    assert issued.link.startswith(srv.server.approval_link_base + "/approvals/")

    browser.get(issued.link)
    assert browser.find_element(By.ID, "action").text == "pay expense E-9"
    browser.find_element(By.ID, "comment").send_keys("receipt attached")
    browser.find_element(By.ID, "approve").click()
    assert _shown(browser, "outcome").startswith("Approved")

    settle(make_worker(srv.client, sandbox))
    run = srv.client.result(run_id)
    assert run.status is RunStatus.COMPLETED and decode(run.result)["status"] == "paid"
    (decision,) = decode(run.result)["decisions"]
    assert decision["approver"] == "alice" and decision["comment"] == "receipt attached"
    before = len(srv.client.history(run_id))

    browser.get(issued.link)  # the used link, replayed
    assert "expired, already used or revoked" in browser.page_source
    assert len(srv.client.history(run_id)) == before
    resolved = [e for e in srv.client.history(run_id) if e.type is EventType.APPROVAL_RESOLVED]
    assert len(resolved) == 1
