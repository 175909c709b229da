"""The operators' web console: runs, versions, triage, approvals and the audit log in a browser,
served from the approval page's app (one port) by the server.

Design: server-rendered pages (Flask + Jinja, templates as strings in the modules that use them,
no JavaScript, no asset from anywhere but the app itself), mounted as a blueprint on the approval
page's app, so the console inherits its security headers (a CSP without scripts, no framing, no
referrer, no caching), its signed session cookie (HttpOnly, SameSite=Lax) and Flask-WTF's CSRF
protection: every state-changing form is a POST that carries the session's CSRF token. Every
action calls the same service method, with the same arguments, that the gRPC handler behind the
matching `amber` command calls (`ConsoleServices` holds the server's own service objects), with
the logged-in operator as the actor, so it is checked, locked and audited exactly like the CLI.
Operators log in with their operator token where the server has a token file, or name themselves
where it has none (`amber dev` prints a single-use login link); see `_auth`.

Rule: imports `approvals`, `services`, `metrics` and `model` (and `history`, `versions`, `abi`),
never `server`: the server builds the console and hands it what it needs.

Rejected: a single-page app over the gRPC API (a build step, scripts and a token in the browser's
storage for pages a template renders in a few lines); calling the server over gRPC from the
console (a second authentication path for the same process); a separate port (a second listener,
session and CSRF set-up to secure, for the same operators); templates as files (package data to
ship and a loader to configure, for a dozen small pages).
"""

from __future__ import annotations

from ._app import Console
from ._auth import DEV_OPERATOR, LOGIN_LINK_TTL, SESSION_LIFETIME
from ._wiring import ConsoleOperators, ConsoleServices

__all__ = [
    "DEV_OPERATOR",
    "LOGIN_LINK_TTL",
    "SESSION_LIFETIME",
    "Console",
    "ConsoleOperators",
    "ConsoleServices",
]
