"""The console as a Flask blueprint: its pages, its error page, and how it is mounted on the
approval page's app (one port, one session cookie, one CSRF protection, one set of headers)."""

from __future__ import annotations

import logging
from functools import cached_property
from typing import Any, Final
from urllib.parse import quote

from flask import Blueprint, Flask, redirect, request, url_for
from flask_wtf.csrf import CSRFError
from jinja2 import BaseLoader, DictLoader
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

from amber.abi import AmberError, Conflict, InvalidInput, NotFound, RetryableError
from amber.runtime.model import NotAuthorised

from . import _auth, _pages, _records, _run_templates, _runs, _triage, _versions
from ._auth import Gate, LoginLinks
from ._pages import error_page
from ._present import payload_text, short, when
from ._wiring import ConsoleOperators, ConsoleServices

_log = logging.getLogger(__name__)

_OPEN_ENDPOINTS: Final = frozenset({"console.login", "console.log_in", "console.login_link"})
"""Pages anyone may open even where reading needs a login."""
_STATUS: Final = (
    (NotAuthorised, 403, "Not allowed"),
    (InvalidInput, 400, "Request refused"),
    (NotFound, 404, "Not found"),
    (Conflict, 409, "Not now"),
    (RetryableError, 503, "Try again shortly"),
)
"""How an error from a service is shown: the first class that matches."""


class _Blueprint(Blueprint):
    """A blueprint whose templates are the console's own strings (no files to ship)."""

    def __init__(self, templates: dict[str, str]) -> None:
        super().__init__("console", __name__)
        self._templates = templates

    @cached_property
    def jinja_loader(self) -> BaseLoader | None:
        return DictLoader(self._templates)


class Console:
    """The operators' web console; mount it on the approval page's app with `mount`."""

    def __init__(self, services: ConsoleServices, operators: ConsoleOperators) -> None:
        self.gate = Gate(operators, services.clock)
        self.links = LoginLinks(services.clock)
        templates = {
            **_pages.TEMPLATES,
            **_auth.TEMPLATES,
            **_run_templates.TEMPLATES,
            **_versions.TEMPLATES,
            **_triage.TEMPLATES,
            **_records.TEMPLATES,
        }
        bp = _Blueprint(templates)
        bp.add_app_template_filter(when, "when")
        bp.add_app_template_filter(short, "short")
        bp.add_app_template_filter(payload_text, "payload")
        bp.context_processor(lambda: {"operator": self.gate.operator()})
        bp.before_request(self._readers_only)
        _auth.register(bp, self.gate, self.links)
        _runs.register(bp, services)
        _versions.register(bp, services, self.gate)
        _triage.register(bp, services, self.gate)
        _records.register(bp, services, self.gate)
        bp.register_error_handler(AmberError, _service_error)
        bp.register_error_handler(CSRFError, _csrf_error)
        bp.register_error_handler(HTTPException, _http_error)
        bp.register_error_handler(Exception, _unexpected)
        self.blueprint = bp

    def mount(self, app: Flask) -> None:
        """Serve the console from `app` (before it serves its first request)."""
        app.register_blueprint(self.blueprint)

    def login_link(self, base_url: str) -> str | None:
        """A single-use login link (operator `dev`) under `base_url`, or None when the server
        has an operator token file (then operators log in with their tokens)."""
        if not self.gate.operators.links_allowed:
            return None
        return f"{base_url.rstrip('/')}/login/{quote(self.links.mint(), safe='')}"

    def _readers_only(self) -> Response | None:
        if request.endpoint in _OPEN_ENDPOINTS or self.gate.may_read():
            return None
        if request.method == "GET":
            return redirect(url_for("console.login", next=request.full_path), code=303)
        raise NotAuthorised("log in to the console first")


def _service_error(error: Exception) -> tuple[str, int]:
    for kind, status, heading in _STATUS:
        if isinstance(error, kind):
            if status >= 500:
                _log.warning("console: %s", error)
            return error_page(status, heading, str(error), login=status == 403)
    return error_page(400, "Request refused", str(error))


def _csrf_error(error: Any) -> tuple[str, int]:
    _log.info("console form refused: %s", error.description)
    return error_page(
        400,
        "Request refused",
        "This form did not come from the console, or it was open too long (over an hour). "
        "Nothing was changed: reload the page and try again.",
    )


def _http_error(error: HTTPException) -> Response:
    response = error.get_response()
    page, _ = error_page(error.code or 500, error.name, error.description or "")
    response.set_data(page)
    response.content_type = "text/html; charset=utf-8"
    return response


def _unexpected(error: Exception) -> tuple[str, int]:
    _log.exception("console: unexpected error on %s %s", request.method, request.path)
    return error_page(
        500,
        "Something went wrong",
        "The console hit an error it did not expect. An action may or may not have been "
        "carried out: check the run and the audit log before trying again.",
    )
