"""The console in real headless chromium, on a real server with an operator token file and real
runs: an operator logs in with their token, every page renders real data (a screenshot of each is
written to tests/output/console/), a filter narrows the run list, a rollout change is confirmed
first, a triage action terminates a poisoned run and the audit log names the operator — and a
forged cross-site POST and a browser without a login are refused."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait
from werkzeug.serving import make_server

from amber.history import RunStatus
from amber.runtime.sandbox._sandbox import Sandbox
from tests.conftest import InProcessServer
from tests.console.conftest import (
    OPERATOR_TOKEN,
    Scenario,
    operators_with_carol,
    populate,
    screenshot_path,
    serving,
)
from tests.runtime._browser import browser
from tests.runtime._engine_helpers import make_worker

__all__ = ["browser"]  # the fixture, used by name below


def shown(driver: WebDriver, element_id: str) -> str:
    WebDriverWait(driver, 15).until(lambda d: d.find_elements(By.ID, element_id))
    return str(driver.find_element(By.ID, element_id).text)


def snap(driver: WebDriver, name: str) -> None:
    """A full-page screenshot for people to look at (the window grows to the page's height)."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(int(height) + 40, 800), 6000))
    driver.execute_script("window.scrollTo(0, 0)")
    assert driver.save_screenshot(str(screenshot_path(name)))
    driver.set_window_size(1024, 768)


def listed_runs(driver: WebDriver) -> set[str]:
    return {
        str(link.text)
        for link in driver.find_elements(By.CSS_SELECTOR, "#runs tr.run-row td.mono a")
    }


@pytest.fixture
def guarded(
    console_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> tuple[InProcessServer, Scenario]:
    srv = console_server(operators=operators_with_carol())
    return srv, populate(srv, modules, sandbox)


def test_an_operator_reads_every_page_filters_runs_and_terminates_a_poisoned_run(
    browser: WebDriver, guarded: tuple[InProcessServer, Scenario], sandbox: Sandbox
) -> None:
    srv, scenario = guarded
    base = srv.server.console_url.rstrip("/")
    browser.delete_all_cookies()

    browser.get(f"{base}/triage")  # not logged in: sent to the login page first
    assert browser.current_url.startswith(f"{base}/login?next=/triage")
    snap(browser, "login")
    browser.find_element(By.ID, "token").send_keys(OPERATOR_TOKEN)
    browser.find_element(By.ID, "log-in").click()
    assert shown(browser, "operator") == "carol"
    assert browser.current_url.startswith(f"{base}/triage")

    browser.get(f"{base}/")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#sections a")) == 5
    snap(browser, "home")

    # -- the run list, then a filter that narrows it ---------------------------------------
    browser.find_element(By.LINK_TEXT, "Runs").click()
    everything = listed_runs(browser)
    assert {*scenario.completed, scenario.poisoned, scenario.expense} <= everything
    snap(browser, "runs")
    Select(browser.find_element(By.ID, "status")).select_by_value("completed")
    browser.find_element(By.ID, "workflow_type").send_keys("chain")
    browser.find_element(By.ID, "apply-filters").click()
    WebDriverWait(browser, 15).until(lambda d: "status=completed" in d.current_url)
    assert listed_runs(browser) == set(scenario.completed)
    snap(browser, "runs-filtered")

    # -- a run's page: timeline decoded, tasks, failures; a query answered by a worker -----
    browser.get(f"{base}/runs/{scenario.poisoned}")
    assert shown(browser, "run-status") == "running"
    reasons = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#failures td.reason")]
    assert "non_determinism" in reasons
    assert browser.find_elements(By.CSS_SELECTOR, "#failures td.fingerprint")[0].text
    snap(browser, "run-poisoned")
    browser.get(f"{base}/runs/{scenario.shipping}")
    types = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#timeline .event-type")]
    assert types[0] == "RunStarted" and "ActivityCompleted" in types
    assert '"shipment_id": "S-1"' in browser.find_element(By.ID, "input").text
    with serving(make_worker(srv.client, sandbox, worker_id="query-answerer")):
        browser.find_element(By.ID, "query-name").send_keys("status")
        browser.find_element(By.ID, "ask").click()
        assert "in_transit" in shown(browser, "query-answer")
    snap(browser, "run")

    # -- versions: a ramp is confirmed before anything changes -------------------------------
    browser.get(f"{base}/versions")
    section = browser.find_element(By.ID, "type-onboard")
    Select(section.find_element(By.NAME, "change")).select_by_value("ramp")
    Select(section.find_element(By.NAME, "ref")).select_by_value(scenario.onboard_v2)
    section.find_element(By.NAME, "percent").send_keys("25")
    section.find_element(By.NAME, "reason").send_keys("canary")
    snap(browser, "versions")
    section.find_element(By.CSS_SELECTOR, "button.change").click()
    assert "Send 25 % of new onboard runs" in shown(browser, "proposal")
    snap(browser, "versions-confirm")
    assert srv.client.rollout("onboard").rollout.candidate is None
    browser.find_element(By.ID, "confirm").click()
    assert "Ramped onboard to 25 %" in shown(browser, "flash")
    assert srv.client.rollout("onboard").rollout.ramp_percent == 25

    # -- triage: terminate the poisoned run ---------------------------------------------------
    browser.get(f"{base}/triage")
    row = browser.find_element(By.CSS_SELECTOR, f'tr[data-run="{scenario.poisoned}"]')
    assert "non_determinism" in row.find_element(By.CSS_SELECTOR, "td.reason").text
    snap(browser, "triage")
    row.find_element(By.CSS_SELECTOR, 'input[aria-label="terminate reason"]').send_keys(
        "replays differently: duplicate of order A-1"
    )
    row.find_element(By.CSS_SELECTOR, "button.terminate").click()
    assert f"{scenario.poisoned}: terminated" in shown(browser, "flash")
    assert srv.client.describe(scenario.poisoned).run.status is RunStatus.TERMINATED
    assert shown(browser, "no-trouble") == "No run is poisoned or suspended."

    # -- the audit log names carol, and verifies ---------------------------------------------
    browser.get(f"{base}/audit")
    rows = [
        (
            r.find_element(By.CSS_SELECTOR, ".actor").text,
            r.find_element(By.CSS_SELECTOR, ".action").text,
        )
        for r in browser.find_elements(By.CSS_SELECTOR, "#audit tr.audit-row")
    ]
    assert ("carol", "run.triage.terminate") in rows and ("carol", "version.ramp") in rows
    browser.find_element(By.ID, "verify").click()
    assert shown(browser, "verification").startswith("Verified:")
    snap(browser, "audit")

    browser.get(f"{base}/approvals")
    assert "pay expense E-1" in browser.find_element(By.ID, "approval-list").text
    snap(browser, "approvals")

    # -- logged out, the same pages are closed again -----------------------------------------
    browser.find_element(By.ID, "logout").click()
    browser.get(f"{base}/runs/{scenario.expense}")
    assert browser.current_url.startswith(f"{base}/login")


ATTACK_PAGE = """<!doctype html>
<title>You won a prize</title>
<form id="attack" method="post" action="{action}">
<input type="hidden" name="reason" value="forged">
</form>
<script>document.getElementById("attack").submit()</script>
"""


@pytest.fixture
def attacker(guarded: tuple[InProcessServer, Scenario]) -> Iterator[int]:
    """Another web server on loopback whose page auto-submits a forged terminate (without the
    CSRF token) to the console; yields its port."""
    srv, scenario = guarded
    action = f"{srv.server.console_url}triage/runs/{scenario.expense}/terminate"
    body = ATTACK_PAGE.format(action=action).encode()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
        return [body]

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield server.port
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_forged_cross_site_post_is_refused_even_with_a_logged_in_operator(
    browser: WebDriver, guarded: tuple[InProcessServer, Scenario], attacker: int
) -> None:
    srv, scenario = guarded
    base = srv.server.console_url.rstrip("/")
    browser.delete_all_cookies()
    browser.get(f"{base}/login")
    browser.find_element(By.ID, "token").send_keys(OPERATOR_TOKEN)
    browser.find_element(By.ID, "log-in").click()
    assert shown(browser, "operator") == "carol"

    port = attacker
    browser.get(f"http://127.0.0.1:{port}/")  # same site, other origin: the cookie goes along
    assert shown(browser, "error-heading") == "Request refused"
    assert "did not come from the console" in shown(browser, "error")
    snap(browser, "refused")
    assert srv.client.describe(scenario.expense).run.status is RunStatus.RUNNING
    assert not [e for e in srv.client.list_audit() if e.reason == "forged"]
