"""The HTTP callback page: an approver opens the link they were sent and approves or rejects.

The page talks to the approval service only through `ApprovalDesk`, so it holds no state of its
own and validates nothing itself: the desk checks the token (expired, used, revoked, wrong step or
tenant) and audits every attempt. What the page adds is what a browser needs:

- Opening a link never decides anything. Mail scanners and chat link previews fetch links, so GET
  only shows the approval; deciding takes a POST from the page's own form.
- That POST is protected against cross-site request forgery with Flask-WTF's `CSRFProtect`: the
  form carries a signed token bound to the browser's session cookie (HttpOnly, SameSite=Lax,
  Secure behind https), and a POST without it is refused with 400 before the desk is called.
- Everything shown is escaped by Jinja's autoescape: the action text comes from workflow code.
- Strict security headers (no scripts, no framing, no referrer since the token is in the URL, no
  caching), and request logs with the token redacted.

Flask with Flask-WTF was chosen because both are long-maintained Pallets-ecosystem projects with
a CSRF implementation that has been reviewed and used for over a decade; Flask is typed. Rejected:
hand-rolled CSRF tokens (easy to get subtly wrong), a SameSite cookie alone (it does not stop a
same-site origin, such as another port on the host), and serving the page from the gRPC process's
own HTTP stack (there is none). `ApprovalPage` serves the app with werkzeug's threaded server,
which is enough for a handful of approvers and operators; a deployment that wants more can mount
`make_approval_app(...)` under any WSGI server. The server mounts the operators' console
(`runtime.console`) on the same app, before it starts: one port, one session, one CSRF set-up.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import ssl
import threading
from datetime import datetime
from typing import Any, Final
from urllib.parse import quote

from flask import Flask, render_template, request
from flask_wtf.csrf import CSRFError, CSRFProtect
from jinja2 import DictLoader
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Response

from amber.abi import RetryableError
from amber.runtime.model import (
    ApprovalClosed,
    ApprovalDesk,
    DecisionOutcome,
    InvalidToken,
    Throttle,
)

_log = logging.getLogger(__name__)

MAX_COMMENT_CHARS: Final = 1000
"""Longest comment an approver may send (a longer one is refused with 400, nothing decided)."""
MIN_SECRET_KEY_BYTES: Final = 32
_MAX_BODY_BYTES: Final = 64 * 1024
_DECISIONS: Final = {"approve": True, "reject": False}

SECURITY_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # The token is in the URL: never let it leave in a Referer header.
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
"""Sent with every response of the approval page, errors included."""

_TEMPLATES: Final = {
    "layout.html": """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>{% block title %}{% endblock %} · Amber approval</title>
<style>
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; padding: 2rem 1rem; color: #1a1a1a; }
main { max-width: 40rem; margin: 0 auto; }
.action { font-size: 1.25rem; font-weight: 600; white-space: pre-wrap; overflow-wrap: anywhere; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; }
dt { font-weight: 600; } dd { margin: 0; overflow-wrap: anywhere; }
label { display: block; font-weight: 600; margin-top: 1rem; }
textarea { width: 100%; box-sizing: border-box; font: inherit; }
button { font: inherit; padding: .5rem 1.5rem; margin: 1rem .5rem 0 0; cursor: pointer; }
button:focus-visible, textarea:focus-visible { outline: 3px solid #1f5fbf; outline-offset: 2px; }
#approve { background: #1d6b32; color: #fff; border: 0; }
#reject { background: #a3261c; color: #fff; border: 0; }
</style>
</head>
<body><main>
{% block main %}{% endblock %}
</main></body>
</html>
""",
    "approval.html": """{% extends "layout.html" %}
{% block title %}Approval requested{% endblock %}
{% block main %}
<h1>Approval requested</h1>
<p class="action" id="action">{{ view.action }}</p>
<dl>
<dt>Run</dt><dd id="run">{{ view.run_id }}</dd>
<dt>Workflow</dt><dd>{{ view.workflow_type }} (tenant {{ view.tenant }})</dd>
<dt>Step</dt><dd id="step">{{ view.step }}</dd>
<dt>Approver</dt><dd id="approver">{{ view.approver }}</dd>
<dt>Status</dt><dd id="status">{{ view.status }}</dd>
<dt>Approvals</dt><dd id="approvals">{{ view.approvals }} of {{ view.required }}</dd>
<dt>Expires</dt><dd><time datetime="{{ expires }}">{{ expires }}</time></dd>
</dl>
{% if view.status == "pending" %}
<form method="post" action="{{ url_for('decide', token=token) }}">
<input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<label for="comment">Comment (optional)</label>
<textarea id="comment" name="comment" rows="3" maxlength="{{ max_comment }}"></textarea>
<button type="submit" id="approve" name="decision" value="approve">Approve</button>
<button type="submit" id="reject" name="decision" value="reject">Reject</button>
</form>
{% else %}
<p>This approval is closed: there is nothing left to decide.</p>
{% endif %}
{% endblock %}
""",
    "outcome.html": """{% extends "layout.html" %}
{% block title %}Decision recorded{% endblock %}
{% block main %}
<h1>Decision recorded</h1>
<p class="action" id="outcome" role="status">{{ headline }}</p>
<p id="detail">{{ detail }}</p>
<p>You can close this page.</p>
{% endblock %}
""",
    "error.html": """{% extends "layout.html" %}
{% block title %}{{ heading }}{% endblock %}
{% block main %}
<h1 id="error">{{ heading }}</h1>
<p role="alert">{{ message }}</p>
{% endblock %}
""",
}

# Deliberately one message for every kind of bad token: the page must not help anyone guess.
_INVALID_LINK = (
    "This approval link is invalid, expired, already used or revoked. "
    "If you still need to decide, ask for a new link."
)


def make_approval_app(
    desk: ApprovalDesk,
    *,
    secret_key: bytes,
    https: bool = False,
    throttle: Throttle | None = None,
) -> Flask:
    """The approval page as a WSGI app, for `ApprovalPage` or any WSGI server.

    `throttle` counts invalid links per client address; past its limit, that address's link
    requests get 429 without being checked (None: the default, 100 a minute).

    `secret_key` signs the session cookie and the CSRF tokens; every process serving the same
    links must share it. Set `https` when browsers reach the page over https (the session cookie
    is then marked Secure).
    """
    if len(secret_key) < MIN_SECRET_KEY_BYTES:
        raise ValueError(f"the approval page's secret key needs {MIN_SECRET_KEY_BYTES}+ bytes")
    app = Flask(__name__)
    app.jinja_loader = DictLoader(_TEMPLATES)
    app.config.update(
        SECRET_KEY=secret_key,
        SESSION_COOKIE_NAME="amber_approval",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=https,
        MAX_CONTENT_LENGTH=_MAX_BODY_BYTES,
        # Flask-WTF's https check compares the Referer with the host, but `no-referrer` (the token
        # is in the URL) means browsers send none; the session-bound token is the protection.
        WTF_CSRF_SSL_STRICT=False,
    )
    CSRFProtect(app)
    links = throttle or Throttle("invalid approval links")

    @app.before_request
    def _limit() -> tuple[str, int] | None:
        if request.endpoint not in ("show", "decide"):
            return None
        source = request.remote_addr or "unknown"
        wait = links.blocked(source)
        if wait is None:
            return None
        links.refused(source)
        return _error_page(
            429,
            "Too many attempts",
            f"Too many invalid approval links were opened from your address. Try again in"
            f" {wait:.0f} seconds; nothing was recorded.",
        )

    @app.after_request
    def _secure(response: Response) -> Response:
        response.headers.update(SECURITY_HEADERS)
        return response

    @app.get("/approvals/<token>")
    def show(token: str) -> str:
        view = desk.view(token)
        return render_template(
            "approval.html",
            view=view,
            token=token,
            expires=_iso(view.expires_at),
            max_comment=MAX_COMMENT_CHARS,
        )

    @app.post("/approvals/<token>/decision")
    def decide(token: str) -> str | tuple[str, int]:
        approve = _DECISIONS.get(request.form.get("decision", ""))
        if approve is None:
            return _error_page(400, "Request refused", "Choose Approve or Reject.")
        comment = request.form.get("comment", "").strip()
        if len(comment) > MAX_COMMENT_CHARS:
            return _error_page(
                400,
                "Request refused",
                f"The comment is longer than {MAX_COMMENT_CHARS:,} characters; nothing was "
                "recorded. Go back, shorten it and decide again.",
            )
        outcome = desk.decide(token, approve=approve, comment=comment, via="http")
        headline, detail = _describe(approve, outcome)
        return render_template("outcome.html", headline=headline, detail=detail)

    @app.errorhandler(InvalidToken)
    def _invalid_token(_: InvalidToken) -> tuple[str, int]:
        links.refused(request.remote_addr or "unknown")
        return _error_page(404, "Link not valid", _INVALID_LINK)

    @app.errorhandler(ApprovalClosed)
    def _closed(_: ApprovalClosed) -> tuple[str, int]:
        return _error_page(
            409, "Already decided", "This approval is already closed; your decision was not used."
        )

    @app.errorhandler(CSRFError)
    def _csrf(error: Any) -> tuple[str, int]:
        _log.info("approval decision refused: %s", error.description)
        return _error_page(
            400,
            "Request refused",
            "This decision did not come from the approval page, or the page was open too long. "
            "Open the approval link again and decide there.",
        )

    @app.errorhandler(RetryableError)
    def _unavailable(error: RetryableError) -> tuple[str, int, dict[str, str]]:
        _log.warning("approval page: service unavailable: %s", error)
        page, status = _error_page(
            503,
            "Try again shortly",
            "Approvals cannot be reached right now. Open the link again in a minute to see "
            "whether your decision was recorded.",
        )
        return page, status, {"Retry-After": "30"}

    @app.errorhandler(RequestEntityTooLarge)
    def _too_large(_: RequestEntityTooLarge) -> tuple[str, int]:
        return _error_page(413, "Request refused", "The form is too large; nothing was recorded.")

    @app.errorhandler(HTTPException)
    def _http_error(error: HTTPException) -> Response:
        # Werkzeug's response keeps the status and its headers (Allow on a 405); only the page
        # is ours, so that every error looks the same and says nothing about the token.
        response = error.get_response()
        if error.code == 404 and request.path.startswith("/approvals/"):
            heading, message = "Link not valid", _INVALID_LINK
        elif error.code == 404:  # outside the links (the console is mounted beside them)
            heading, message = "Not found", "There is no page at this address."
        elif (error.code or 500) >= 500:
            heading, message = "Something went wrong", "Nothing was recorded; try again later."
        else:
            heading, message = "Request refused", error.description or ""
        response.set_data(render_template("error.html", heading=heading, message=message))
        return response

    def log_exception(exc_info: Any) -> None:
        # Flask's own logger names the request path, which holds the token: redact it.
        _log.error("approval page error on %s", _redact(request.path), exc_info=exc_info)

    app.log_exception = log_exception  # type: ignore[method-assign]
    return app


def _error_page(status: int, heading: str, message: str) -> tuple[str, int]:
    return render_template("error.html", heading=heading, message=message), status


def _describe(approve: bool, outcome: DecisionOutcome) -> tuple[str, str]:
    """The outcome page's headline and the approval's state after the decision."""
    if not outcome.counted:
        headline = "Already decided by you: counted once"
    elif approve:
        noun = "approval" if outcome.required == 1 else "approvals"
        headline = f"Approved — {outcome.approvals} of {outcome.required} {noun}"
    else:
        headline = "Rejected"
    if outcome.status == "pending":
        short = max(outcome.required - outcome.approvals, 0)
        detail = f"The approval is still pending: {short} more needed."
    else:
        detail = f"The approval is now {outcome.status}."
    return headline, detail


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


# Approval tokens, and the console's single-use login secrets (`/login/<secret>`), are bearer
# credentials in the path.
_TOKEN_IN_PATH = re.compile(r"(/approvals/|/login/)[^/?#\s\"']+")


def _redact(text: str) -> str:
    return _TOKEN_IN_PATH.sub(r"\1<token>", text)


class _RedactingHandler(WSGIRequestHandler):
    # The token in the path is a bearer credential: request logs must not carry it.
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("%s %s -> %s", self.command, _redact(self.path), code)

    def log(self, type: str, message: str, *args: Any) -> None:
        level = logging.ERROR if type == "error" else logging.INFO
        if _log.isEnabledFor(level):
            _log.log(level, "%s", _redact(message % args))


class ApprovalPage:
    """Serves the approval page over HTTP from a background thread of this process.

    Use it where the approval service runs (`amber server`, `amber dev`, tests); give
    `public_url` when approvers reach it through a proxy, so the links sent out point there.
    """

    def __init__(
        self,
        desk: ApprovalDesk,
        *,
        secret_key: bytes,
        host: str = "127.0.0.1",
        port: int = 0,
        any_port_if_taken: bool = False,
        public_url: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._public_url = public_url.rstrip("/") if public_url else None
        self.app = make_approval_app(
            desk,
            secret_key=secret_key,
            https=ssl_context is not None
            or bool(self._public_url and self._public_url.startswith("https://")),
        )
        """The WSGI app (tests may wrap `app.wsgi_app` before `start`)."""
        self._host = host
        self._ssl = ssl_context
        self._requested_port = port
        self._any_port_if_taken = any_port_if_taken
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        """The bound port once started."""

    def start(self) -> int:
        """Listen and serve in a daemon thread; returns the bound port (useful with port 0)."""
        if self._server is not None:
            raise RuntimeError("the approval page is already started")
        try:
            server = self._bind(self._requested_port)
        except OSError:
            if not self._any_port_if_taken or self._requested_port == 0:
                raise
            _log.warning(
                "port %d is taken: the approval page takes a free one", self._requested_port
            )
            server = self._bind(0)
        self._server = server
        self.port = server.port
        # The poll interval bounds how long `stop` waits for the serving loop to notice.
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="amber-approval-page",
            daemon=True,
        )
        self._thread.start()
        _log.info("approval page listening on %s", self.base_url)
        return self.port

    def _bind(self, port: int) -> BaseWSGIServer:
        """The server on `port`; `OSError` if it is taken (werkzeug itself would exit)."""
        sock = socket.create_server((self._host, port))
        bound = sock.getsockname()[1]
        fd = sock.detach()
        try:  # werkzeug serves a duplicate of it
            return make_server(
                self._host,
                bound,
                self.app,
                threaded=True,
                request_handler=_RedactingHandler,
                fd=fd,
                ssl_context=self._ssl,
            )
        finally:
            os.close(fd)

    def stop(self) -> None:
        """Stop listening (requests in flight finish on their own threads). Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def base_url(self) -> str:
        """Where approvers reach the page: `public_url`, or the bound host and port."""
        if self._public_url:
            return self._public_url
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"{'https' if self._ssl else 'http'}://{host}:{self.port}"

    def url_for_token(self, token: str) -> str:
        """The link to send an approver for `token`."""
        return f"{self.base_url}/approvals/{quote(token, safe='')}"
