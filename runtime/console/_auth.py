"""Who is at the console: operator logins kept in the signed session, and single-use login links.

- **Login** (`/login`): with an operator token file the operator pastes their token (the name is
  the file's; a name given as well must match), without one they name themselves (as with the
  CLI's `--operator`). The session (Flask's signed cookie: HttpOnly, SameSite=Lax) then holds the
  operator's name, when they logged in, and — with a token file — the sha256 of their token,
  never the token. Every request re-checks that hash against the server's file and the login's
  age (`SESSION_LIFETIME`), so an operator removed from the file is out at once.
- **Reading** needs a login when the server has a token file (pages show inputs, results and
  approvals); without one (development) anyone who reaches the port may read. **Acting** always
  needs a login: the name goes into the audit record. Every form is a POST with Flask-WTF's CSRF
  token, the login form included (no login CSRF).
- **Login links** (`/login/<secret>`, for `amber dev`): 256 random bits, only their sha256 kept
  in this process, single use, expiring after `LOGIN_LINK_TTL`; opening one logs the browser in
  as operator `dev`. They are refused when the server has a token file: a link must not be a way
  around the tokens. A server that checks API credentials (`amber dev`) hands them out only
  through `amber status`, to a caller with an operator credential.

Rejected: HTTP basic auth (the browser resends the token with every request and cannot log out);
keeping the token in the session (the cookie is signed, not encrypted); a login link that works
many times (a link copied from a terminal's scroll-back would stay a key).
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import threading
from datetime import datetime, timedelta
from typing import Final

from flask import Blueprint, redirect, request, session, url_for
from werkzeug.wrappers import Response

from amber.abi import AmberError
from amber.runtime.model import Clock, NotAuthorised, Throttle

from ._pages import error_page, field, page
from ._wiring import ConsoleOperators

_log = logging.getLogger(__name__)

SESSION_LIFETIME: Final = timedelta(hours=8)
"""How long a console login lasts."""
LOGIN_LINK_TTL: Final = timedelta(minutes=30)
"""How long a login link printed by `amber dev` can be used (once)."""
DEV_OPERATOR: Final = "dev"
"""The operator a login link logs in as."""
_NAME: Final = re.compile(r"[A-Za-z0-9_.@\-]{1,128}")
_OPERATOR, _KEY, _SINCE = "console_operator", "console_token_sha256", "console_since"
_LINK = "console_by_link"

LOGIN_PAGE: Final = """{% extends "console/layout.html" %}
{% block title %}Log in{% endblock %}
{% block main %}
<h1>Log in</h1>
{% if problem %}<p class="error" id="error" role="alert">{{ problem }}</p>{% endif %}
<form method="post" class="stack" action="{{ url_for('console.login') }}">
<input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<input type="hidden" name="next" value="{{ next }}">
{% if tokens_required %}
<label>Operator token <input type="password" name="token" id="token" autocomplete="off"
 required></label>
<label>Name (optional: must be the token's) <input name="name" id="name"></label>
{% else %}
<p class="muted">This server has no operator token file: name yourself, as with
<code>--operator</code>. Your name goes into the audit log of everything you do.</p>
<label>Operator name <input name="name" id="name" required maxlength="128"></label>
{% endif %}
<button type="submit" id="log-in" class="go">Log in</button>
</form>
{% endblock %}
"""


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


MAX_LIVE_LINKS = 1000
"""Unused login links kept at once (`amber status` under `amber dev` mints one per call)."""


class LoginLinks:
    """Single-use, expiring login secrets; only their hashes are kept, in this process."""

    def __init__(self, clock: Clock, ttl: timedelta = LOGIN_LINK_TTL) -> None:
        self._clock = clock
        self._ttl = ttl
        self._expiry: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def mint(self) -> str:
        """A new secret for `/login/<secret>`: shown once, usable once, until it expires."""
        secret = secrets.token_urlsafe(32)
        now = self._clock.now()
        with self._lock:
            self._expiry = {k: t for k, t in self._expiry.items() if t > now}
            while len(self._expiry) >= MAX_LIVE_LINKS:  # the oldest go first
                del self._expiry[min(self._expiry, key=self._expiry.__getitem__)]
            self._expiry[token_sha256(secret)] = now + self._ttl
        return secret

    def redeem(self, secret: str) -> bool:
        """Whether `secret` is a live link; it is spent either way."""
        with self._lock:
            expires = self._expiry.pop(token_sha256(secret), None)
        return expires is not None and self._clock.now() < expires


class Gate:
    """The operator of the current request, from the session, re-checked on every request."""

    def __init__(self, operators: ConsoleOperators, clock: Clock) -> None:
        self.operators = operators
        self._clock = clock
        self.throttle = Throttle("failed console logins")
        """Failed logins per client address; past the limit, logins are refused unchecked."""

    def operator(self) -> str | None:
        """The logged-in operator, or None (no login, expired, or token no longer listed)."""
        name, since = session.get(_OPERATOR), session.get(_SINCE)
        if not isinstance(name, str) or not isinstance(since, int | float):
            return None
        age = self._clock.now().timestamp() - since
        if not 0 <= age <= SESSION_LIFETIME.total_seconds():
            return None
        holder_of = self.operators.holder_of
        by_link = session.get(_LINK) is True  # a link handed out to an authenticated operator
        if holder_of is not None and not by_link and holder_of(str(session.get(_KEY, ""))) != name:
            return None
        return name

    def may_read(self) -> bool:
        return not self.operators.tokens_required or self.operator() is not None

    def acting(self) -> str:
        """The operator an action is recorded under; `NotAuthorised` without a login."""
        name = self.operator()
        if name is None:
            raise NotAuthorised("log in to the console first: actions are recorded under your name")
        return name

    def log_in(self, name: str, token: str, *, by_link: bool = False) -> None:
        session.clear()  # a fresh session (and CSRF token) for the new identity
        session[_OPERATOR] = name
        session[_SINCE] = self._clock.now().timestamp()
        if by_link:
            session[_LINK] = True
        elif self.operators.tokens_required:
            session[_KEY] = token_sha256(token)

    def check_login(self, token: str, name: str) -> str:
        """The operator these credentials name; `NotAuthorised`/`InvalidInput` otherwise."""
        if self.operators.tokens_required:
            if not token:
                raise NotAuthorised("enter your operator token")
            return self.operators.authorise(token, name)
        if not _NAME.fullmatch(name):
            raise NotAuthorised("a name is 1–128 letters, digits, and . _ @ -")
        return self.operators.authorise("", name)


def safe_next(target: str) -> str:
    """Where to go after logging in: a path on this site only (no open redirect)."""
    ok = target.startswith("/") and not target.startswith("//") and "\\" not in target
    return target if ok else url_for("console.home")


def register(bp: Blueprint, gate: Gate, links: LoginLinks) -> None:
    """`/login`, `/login/<secret>` and `/logout`."""

    @bp.get("/login")
    def login() -> str:
        return page(
            "login.html",
            next=safe_next(request.args.get("next", "")),
            tokens_required=gate.operators.tokens_required,
            problem="",
        )

    @bp.post("/login")
    def log_in() -> Response | tuple[str, int]:
        target = safe_next(request.form.get("next", ""))
        token = request.form.get("token", "")
        source = request.remote_addr or "unknown"
        try:
            wait = gate.throttle.blocked(source)
            if wait is not None:
                raise NotAuthorised(
                    f"too many failed logins from {source}: try again in {wait:.0f} s"
                )
            name = gate.check_login(token, field("name", limit=128))
        except AmberError as exc:
            gate.throttle.refused(source)
            _log.info("console login refused: %s", exc)
            html = page(
                "login.html",
                next=target,
                tokens_required=gate.operators.tokens_required,
                problem=str(exc),
            )
            return html, 403
        gate.log_in(name, token)
        return redirect(target, code=303)

    @bp.get("/login/<secret>")
    def login_link(secret: str) -> Response | tuple[str, int]:
        if not gate.operators.links_allowed or not links.redeem(secret):
            return error_page(
                403,
                "Link not valid",
                "This login link is invalid, already used or expired. Log in with the form.",
                login=True,
            )
        gate.log_in(DEV_OPERATOR, "", by_link=True)
        return redirect(url_for("console.home"), code=303)

    @bp.post("/logout")
    def logout() -> Response:
        session.clear()
        return redirect(url_for("console.login"), code=303)


TEMPLATES: Final = {"console/login.html": LOGIN_PAGE}
