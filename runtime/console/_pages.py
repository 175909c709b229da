"""What every console page shares: the layout, rendering, reading a form, the error page, and
what a finished action shows (a message on the page it returns to)."""

from __future__ import annotations

from typing import Any, Final

from flask import flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from amber.abi import InvalidInput
from amber.runtime.model import DEFAULT_TENANT
from amber.runtime.services import MAX_REASON_LENGTH

MAX_FIELD_CHARS: Final = 2_000
"""Longest text a console form field takes (a skipped step's result has its own limit)."""

LAYOUT: Final = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>{% block title %}{% endblock %} · Amber console</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1a1a1a; background: #fafafa; }
header { background: #2b2118; color: #fff; padding: .5rem 1rem; display: flex; gap: 1.25rem;
  align-items: center; flex-wrap: wrap; }
header a { color: #ffd58a; text-decoration: none; font-weight: 600; }
header .who { margin-left: auto; }
header form { display: inline; }
main { padding: 1rem; max-width: 90rem; }
h1 { font-size: 1.4rem; margin: .25rem 0 1rem; } h2 { font-size: 1.1rem; margin-top: 1.5rem; }
table { border-collapse: collapse; width: 100%; background: #fff; margin-bottom: 1rem; }
th, td { border: 1px solid #ddd; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f0ebe4; }
td.json, pre { font: 12px/1.35 ui-monospace, monospace; white-space: pre-wrap;
  overflow-wrap: anywhere; margin: 0; }
.mono { font-family: ui-monospace, monospace; font-size: 12px; }
form.inline { display: inline-flex; gap: .25rem; flex-wrap: wrap; align-items: center;
  margin: .15rem 0; }
form.filters { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: end;
  background: #fff; padding: .5rem; border: 1px solid #ddd; margin-bottom: 1rem; }
form.filters label, form.stack label { display: flex; flex-direction: column; font-weight: 600; }
form.stack { display: flex; flex-direction: column; gap: .5rem; max-width: 30rem; }
input, select, textarea, button { font: inherit; }
button { cursor: pointer; padding: .2rem .7rem; }
button.danger { background: #a3261c; color: #fff; border: 0; }
button.go { background: #1d6b32; color: #fff; border: 0; }
.flash { background: #e6f4ea; border: 1px solid #1d6b32; padding: .5rem; margin-bottom: 1rem; }
.error { background: #fdecea; border: 1px solid #a3261c; padding: .5rem; margin-bottom: 1rem; }
.status-running { color: #1f5fbf; } .status-completed { color: #1d6b32; }
.status-failed, .status-terminated, .status-timed_out { color: #a3261c; }
.muted { color: #666; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dt { font-weight: 600; } dd { margin: 0; overflow-wrap: anywhere; }
</style>
</head>
<body>
<header>
<a href="{{ url_for('console.home') }}">Amber</a>
<a href="{{ url_for('console.runs') }}">Runs</a>
<a href="{{ url_for('console.versions') }}">Versions</a>
<a href="{{ url_for('console.triage') }}">Triage</a>
<a href="{{ url_for('console.approvals') }}">Approvals</a>
<a href="{{ url_for('console.audit') }}">Audit log</a>
<span class="who">
{% if operator %}operator <strong id="operator">{{ operator }}</strong>
<form method="post" action="{{ url_for('console.logout') }}">
<input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<button type="submit" id="logout">Log out</button></form>
{% else %}<a href="{{ url_for('console.login') }}" id="login-link">Log in</a>{% endif %}
</span>
</header>
<main>
{% for message in get_flashed_messages() %}
<p class="flash" id="flash" role="status">{{ message }}</p>
{% endfor %}
{% block main %}{% endblock %}
</main>
</body>
</html>
"""

ERROR_PAGE: Final = """{% extends "console/layout.html" %}
{% block title %}{{ heading }}{% endblock %}
{% block main %}
<h1 id="error-heading">{{ heading }}</h1>
<p class="error" id="error" role="alert">{{ message }}</p>
{% if login %}<p><a href="{{ url_for('console.login') }}">Log in</a></p>{% endif %}
<p><a href="{{ url_for('console.home') }}">Back to the console</a></p>
{% endblock %}
"""

TEMPLATES: Final = {"console/layout.html": LAYOUT, "console/error.html": ERROR_PAGE}


def page(template: str, **context: Any) -> str:
    """Render one of the console's templates (`console/<template>`)."""
    return render_template(f"console/{template}", **context)


def error_page(status: int, heading: str, message: str, *, login: bool = False) -> tuple[str, int]:
    """The console's page for a refused or failed request, with its status code."""
    return page("error.html", heading=heading, message=message, login=login), status


def field(name: str, *, required: str = "", limit: int = MAX_FIELD_CHARS) -> str:
    """A form field, stripped; `InvalidInput` (shown to the operator) when it is missing and
    `required` says why it is needed, or when it is longer than `limit`."""
    value = request.form.get(name, "").strip()
    if required and not value:
        raise InvalidInput(required)
    if len(value) > limit:
        raise InvalidInput(f"{name} is longer than {limit:,} characters")
    return value


def reason() -> str:
    """The form's reason: required for every audited command, and as long as the command line
    allows (`MAX_REASON_LENGTH`)."""
    return field(
        "reason", required="give a reason: it goes into the audit log", limit=MAX_REASON_LENGTH
    )


def tenant() -> str:
    """The tenant a page or form is about (query string or form; the default tenant if none)."""
    value = request.values.get("tenant", "").strip()
    return value or DEFAULT_TENANT


def done(message: str, endpoint: str, **values: Any) -> Response:
    """After an action: show `message` on the page `endpoint` (post/redirect/get)."""
    flash(message)
    return redirect(url_for(endpoint, **values), code=303)
