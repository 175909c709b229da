"""The HTTP approval page: rendering, security headers, CSRF, and a real headless browser.

The page is driven against a fake `ApprovalDesk` (the page only calls `view` and `decide`); what
the desk does with a token is the approval service's contract and is tested there.
"""

from __future__ import annotations

import logging
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pytest
from flask.testing import FlaskClient
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait
from werkzeug.serving import make_server

from amber.abi import RetryableError
from amber.runtime.approvals._page import (
    MAX_COMMENT_CHARS,
    SECURITY_HEADERS,
    ApprovalPage,
    make_approval_app,
)
from amber.runtime.model._approvals import ApprovalView, DecisionOutcome
from amber.runtime.model._errors import ApprovalClosed, InvalidToken
from tests.conftest import wait_for
from tests.runtime._browser import browser

__all__ = ["browser"]  # the fixture, used by the browser tests below

SECRET = b"approval-page-test-secret-0123456789"
HOSTILE_ACTION = '<script>alert("pwned")</script> refund 120.00 EUR & "more"'


@dataclass(frozen=True, slots=True)
class Call:
    token: str
    approve: bool
    comment: str
    via: str


@dataclass
class FakeDesk:
    """An `ApprovalDesk` over a dict of tokens: records every `decide` call, counts a second
    decision by the same approver once, and closes an approval on rejection or quorum."""

    views: dict[str, ApprovalView]
    calls: list[Call] = field(default_factory=list)
    _decided_by: dict[str, set[str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def view(self, token: str) -> ApprovalView:
        try:
            return self.views[token]
        except KeyError:
            raise InvalidToken("no such token") from None

    def decide(self, token: str, *, approve: bool, comment: str, via: str) -> DecisionOutcome:
        with self._lock:
            self.calls.append(Call(token, approve, comment, via))
            view = self.view(token)
            if view.status != "pending":
                raise ApprovalClosed(f"approval {view.approval_id} is {view.status}")
            decided = self._decided_by.setdefault(view.approval_id, set())
            counted = view.approver not in decided
            decided.add(view.approver)
            approvals = view.approvals + (1 if counted and approve else 0)
            if not approve and counted:
                status = "rejected"
            elif approvals >= view.required:
                status = "approved"
            else:
                status = "pending"
            self._set(view.approval_id, status=status, approvals=approvals)
            return DecisionOutcome(
                approval_id=view.approval_id,
                status=status,
                counted=counted,
                approvals=approvals,
                required=view.required,
            )

    def _set(self, approval_id: str, **changes: Any) -> None:
        for token, view in self.views.items():
            if view.approval_id == approval_id:
                self.views[token] = replace(view, **changes)


def make_view(approver: str = "alice", *, action: str = HOSTILE_ACTION) -> ApprovalView:
    return ApprovalView(
        approval_id="appr-1",
        tenant="acme",
        run_id="run-42",
        workflow_type="refunds",
        step=7,
        action=action,
        approver=approver,
        status="pending",
        required=2,
        approvals=0,
        expires_at=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
    )


@pytest.fixture
def desk() -> FakeDesk:
    return FakeDesk(
        {
            "tok-alice": make_view("alice"),
            "tok-alice-again": make_view("alice"),
            "tok-bob": make_view("bob"),
        }
    )


@pytest.fixture
def client(desk: FakeDesk) -> FlaskClient:
    return make_approval_app(desk, secret_key=SECRET).test_client()


def csrf_token_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, html
    return match.group(1)


def open_page(client: FlaskClient, token: str) -> str:
    """GET the approval page (which starts the session); returns the form's CSRF token."""
    response = client.get(f"/approvals/{token}")
    assert response.status_code == 200
    return csrf_token_of(response.text)


# -- Flask test client --------------------------------------------------------------------------


def test_the_page_shows_the_approval_with_the_action_escaped(client: FlaskClient) -> None:
    response = client.get("/approvals/tok-alice")

    assert response.status_code == 200
    html = response.text
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt; refund 120.00 EUR &amp;" in html
    for shown in ("run-42", "refunds", "acme", ">7<", ">alice<", ">pending<", "0 of 2"):
        assert shown in html
    assert "2030-01-02T03:04:05+00:00" in html
    assert 'id="approve"' in html and 'id="reject"' in html
    assert 'action="/approvals/tok-alice/decision"' in html
    assert csrf_token_of(html)


def test_every_response_carries_the_security_headers(client: FlaskClient) -> None:
    for response in (
        client.get("/approvals/tok-alice"),
        client.get("/approvals/unknown"),
        client.post("/approvals/tok-alice/decision", data={"decision": "approve"}),
        client.get("/approvals/tok-alice/decision"),
    ):
        for name, value in SECURITY_HEADERS.items():
            assert response.headers[name] == value, (response.status, name)
    assert response.status_code == 405 and "POST" in response.headers["Allow"]


def test_the_session_cookie_is_httponly_and_samesite_and_secure_only_over_https(
    desk: FakeDesk,
) -> None:
    plain = make_approval_app(desk, secret_key=SECRET).test_client()
    cookie = plain.get("/approvals/tok-alice").headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie

    https = make_approval_app(desk, secret_key=SECRET, https=True).test_client()
    assert "Secure" in https.get("/approvals/tok-alice").headers["Set-Cookie"]


def test_an_unknown_token_is_a_404_that_tells_nothing(client: FlaskClient, desk: FakeDesk) -> None:
    response = client.get("/approvals/no-such-token")

    assert response.status_code == 404
    assert "invalid, expired, already used or revoked" in response.text
    assert "no such token" not in response.text
    assert desk.calls == []


def test_a_post_without_the_csrf_token_is_refused_before_the_desk(
    client: FlaskClient, desk: FakeDesk
) -> None:
    good = open_page(client, "tok-alice")
    other_session = make_approval_app(desk, secret_key=SECRET).test_client()
    open_page(other_session, "tok-bob")

    refused = [
        client.post("/approvals/tok-alice/decision", data={"decision": "approve"}),
        client.post(
            "/approvals/tok-alice/decision", data={"decision": "approve", "csrf_token": "forged"}
        ),
        # A genuine token is bound to its own session: it is worthless in another one.
        other_session.post(
            "/approvals/tok-alice/decision", data={"decision": "approve", "csrf_token": good}
        ),
    ]

    assert [r.status_code for r in refused] == [400, 400, 400]
    assert all("Request refused" in r.text for r in refused)
    assert desk.calls == []


@pytest.mark.parametrize(("button", "approve"), [("approve", True), ("reject", False)])
def test_a_post_with_the_csrf_token_decides_once(
    client: FlaskClient, desk: FakeDesk, button: str, approve: bool
) -> None:
    csrf = open_page(client, "tok-alice")

    response = client.post(
        "/approvals/tok-alice/decision",
        data={"csrf_token": csrf, "decision": button, "comment": " ok <b>by me</b> "},
    )

    assert response.status_code == 200
    assert desk.calls == [Call("tok-alice", approve, "ok <b>by me</b>", "http")]
    outcome = "Approved — 1 of 2 approvals" if approve else "Rejected"
    assert f'id="outcome" role="status">{outcome}<' in response.text


def test_a_second_decision_by_the_same_approver_is_counted_once(
    client: FlaskClient, desk: FakeDesk
) -> None:
    for token in ("tok-alice", "tok-alice-again"):
        csrf = open_page(client, token)
        response = client.post(
            f"/approvals/{token}/decision", data={"csrf_token": csrf, "decision": "approve"}
        )
        assert response.status_code == 200

    assert "Already decided by you: counted once" in response.text
    assert "still pending: 1 more needed" in response.text


def test_a_decision_on_a_closed_approval_is_a_409(client: FlaskClient, desk: FakeDesk) -> None:
    csrf = open_page(client, "tok-bob")
    client.post("/approvals/tok-bob/decision", data={"csrf_token": csrf, "decision": "reject"})

    response = client.post(
        "/approvals/tok-alice/decision", data={"csrf_token": csrf, "decision": "approve"}
    )

    assert response.status_code == 409
    assert "Already decided" in response.text
    assert len(desk.calls) == 2


def test_a_decision_with_an_invalid_token_reaches_the_desk_and_is_a_404(
    client: FlaskClient, desk: FakeDesk
) -> None:
    csrf = open_page(client, "tok-alice")

    response = client.post(
        "/approvals/revoked-token/decision", data={"csrf_token": csrf, "decision": "approve"}
    )

    assert response.status_code == 404
    assert "invalid, expired, already used or revoked" in response.text
    # The desk sees the attempt so that it can audit it; it changed nothing.
    assert desk.calls == [Call("revoked-token", True, "", "http")]
    assert desk.views["tok-alice"].approvals == 0


@pytest.mark.parametrize(
    "form",
    [
        {"decision": "approve", "comment": "x" * (MAX_COMMENT_CHARS + 1)},
        {"decision": "maybe"},
        {"comment": "no button"},
    ],
    ids=["comment-too-long", "unknown-decision", "no-decision"],
)
def test_a_bad_form_is_refused_before_the_desk(
    client: FlaskClient, desk: FakeDesk, form: dict[str, str]
) -> None:
    csrf = open_page(client, "tok-alice")

    response = client.post("/approvals/tok-alice/decision", data={"csrf_token": csrf, **form})

    assert response.status_code == 400
    assert desk.calls == []


class UnreachableDesk(FakeDesk):
    def view(self, token: str) -> ApprovalView:
        raise RetryableError("database unreachable")


class BrokenDesk(FakeDesk):
    def view(self, token: str) -> ApprovalView:
        raise RuntimeError("a bug in the desk")


def test_an_outage_is_a_503_and_a_crash_a_500_both_with_the_page_headers() -> None:
    outage = make_approval_app(UnreachableDesk({}), secret_key=SECRET).test_client()
    response = outage.get("/approvals/tok-alice")
    assert response.status_code == 503 and response.headers["Retry-After"] == "30"

    broken = make_approval_app(BrokenDesk({}), secret_key=SECRET).test_client()
    response = broken.get("/approvals/tok-alice")
    assert response.status_code == 500
    assert "Something went wrong" in response.text and "a bug" not in response.text
    assert response.headers["X-Frame-Options"] == "DENY"


def test_a_short_secret_key_is_rejected(desk: FakeDesk) -> None:
    with pytest.raises(ValueError, match="secret key"):
        make_approval_app(desk, secret_key=b"short")


# -- The served page ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Seen:
    """One request the served page answered."""

    method: str
    path: str
    status: int
    with_session_cookie: bool


class Recorder:
    """WSGI middleware that records what the page answered (a browser hides status codes)."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.seen: list[Seen] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        def recording(status: str, headers: Any, exc_info: Any = None) -> Any:
            self.seen.append(
                Seen(
                    environ["REQUEST_METHOD"],
                    environ["PATH_INFO"],
                    int(status.split()[0]),
                    "amber_approval=" in environ.get("HTTP_COOKIE", ""),
                )
            )
            return start_response(status, headers, exc_info)

        return self.app(environ, recording)

    def posts(self) -> list[Seen]:
        return [seen for seen in self.seen if seen.method == "POST"]


@dataclass
class Served:
    page: ApprovalPage
    desk: FakeDesk
    recorder: Recorder


@pytest.fixture
def served(desk: FakeDesk) -> Iterator[Served]:
    page = ApprovalPage(desk, secret_key=SECRET, host="127.0.0.1", port=0)
    recorder = Recorder(page.app.wsgi_app)
    page.app.wsgi_app = recorder  # type: ignore[method-assign]
    page.start()
    try:
        yield Served(page, desk, recorder)
    finally:
        page.stop()


def test_the_served_page_answers_on_its_port_and_keeps_tokens_out_of_the_logs(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    url = served.page.url_for_token("tok-alice")
    assert url == f"http://127.0.0.1:{served.page.port}/approvals/tok-alice"
    assert served.page.url_for_token("a/b c").endswith("/approvals/a%2Fb%20c")

    with caplog.at_level(logging.DEBUG, logger="amber.runtime.approvals._page"):
        with urllib.request.urlopen(url, timeout=5) as response:
            assert response.status == 200
            assert response.headers["X-Frame-Options"] == "DENY"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(served.page.url_for_token("tok-unknown"), timeout=5)
        assert refused.value.code == 404

    assert "/approvals/<token>" in caplog.text
    assert "tok-alice" not in caplog.text and "tok-unknown" not in caplog.text


# -- A real browser -----------------------------------------------------------------------------


def wait_until_shown(driver: WebDriver, element_id: str) -> str:
    WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.ID, element_id))
    return str(driver.find_element(By.ID, element_id).text)


def test_an_approver_approves_in_a_real_browser(browser: WebDriver, served: Served) -> None:
    browser.get(served.page.url_for_token("tok-alice"))

    assert browser.find_element(By.ID, "action").text == HOSTILE_ACTION
    assert browser.find_element(By.ID, "approvals").text == "0 of 2"
    browser.find_element(By.ID, "comment").send_keys("Checked the invoice.")
    browser.find_element(By.ID, "approve").click()

    assert wait_until_shown(browser, "outcome") == "Approved — 1 of 2 approvals"
    assert served.desk.calls == [Call("tok-alice", True, "Checked the invoice.", "http")]
    assert served.recorder.posts()[0].status == 200


ATTACK_PAGE = """<!doctype html>
<title>You won a prize</title>
<form id="attack" method="post" action="{action}">
<input type="hidden" name="decision" value="approve">
<input type="hidden" name="comment" value="forged">
</form>
<script>document.getElementById("attack").submit()</script>
"""


@pytest.fixture
def attacker(served: Served) -> Iterator[int]:
    """Another web server on loopback whose page auto-submits a forged approval (no CSRF
    token) to the approval page; yields its port."""
    decision_url = served.page.url_for_token("tok-alice") + "/decision"
    body = ATTACK_PAGE.format(action=decision_url).encode()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
        return [body]

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
    )
    thread.start()
    try:
        yield server.port
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.mark.parametrize(
    ("attacker_host", "cookie_sent"),
    [
        # Another origin on the same site: SameSite lets the session cookie through, so only the
        # missing CSRF token stops the forgery.
        ("127.0.0.1", True),
        # Another site altogether: SameSite=Lax withholds the cookie from the cross-site POST.
        ("localhost", False),
    ],
    ids=["cross-origin-same-site", "cross-site"],
)
def test_a_cross_site_post_without_the_csrf_token_is_refused_in_a_real_browser(
    browser: WebDriver, served: Served, attacker: int, attacker_host: str, cookie_sent: bool
) -> None:
    browser.get(served.page.url_for_token("tok-alice"))  # the approver's session exists
    assert browser.get_cookie("amber_approval") is not None

    browser.get(f"http://{attacker_host}:{attacker}/")
    wait_for(lambda: bool(served.recorder.posts()), 10, "the forged POST")

    assert served.recorder.posts() == [
        Seen("POST", "/approvals/tok-alice/decision", 400, cookie_sent)
    ]
    assert wait_until_shown(browser, "error") == "Request refused"
    assert served.desk.calls == []
    assert served.desk.views["tok-alice"].approvals == 0


def test_a_page_asked_for_a_taken_port_takes_a_free_one_when_allowed() -> None:
    import socket

    from amber.runtime.approvals._page import ApprovalPage

    holder = socket.create_server(("127.0.0.1", 0))
    taken = holder.getsockname()[1]
    try:
        strict = ApprovalPage(FakeDesk(views={}), secret_key=b"k" * 32, port=taken)
        with pytest.raises(OSError):
            strict.start()
        page = ApprovalPage(
            FakeDesk(views={}), secret_key=b"k" * 32, port=taken, any_port_if_taken=True
        )
        try:
            assert page.start() not in (0, taken)
        finally:
            page.stop()
    finally:
        holder.close()
