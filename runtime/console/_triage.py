"""`/triage`: poisoned and suspended runs (reason, crashes, fingerprint) and what an operator does
about them: retry, resume (optionally on a fixed version), skip a step with a result, terminate,
export a bundle — for one run, or for every run one fingerprint poisoned.

Each action builds the same `TriageCommand` the `Triage` RPC builds for `amber triage ...` and
hands it to the same `TriageService.apply`; the export calls `TriageService.export` as the
`ExportRun` RPC does. So every action is checked, locked and audited exactly like the CLI's.
"""

from __future__ import annotations

import json
from typing import Final

from flask import Blueprint, request
from werkzeug.wrappers import Response

from amber.abi import InvalidInput, pack
from amber.runtime.model import TriageAction, TriageCommand, TriageOutcome

from ._auth import Gate
from ._pages import done, field, page, reason, tenant
from ._runs import labels_of
from ._wiring import ConsoleServices

MAX_RESULT_CHARS: Final = 60_000
"""Longest skipped-step result the form takes (the page's request limit is 64 KiB; larger
results go through `amber triage skip`)."""
_BULK: Final = (TriageAction.RETRY, TriageAction.RESUME, TriageAction.TERMINATE)


def _action(name: str) -> TriageAction:
    try:
        return TriageAction(name)
    except ValueError:
        raise InvalidInput(f"no triage action {name!r}") from None


def _command(
    action: TriageAction, operator: str, *, run_ids: tuple[str, ...] = (), fingerprint: str = ""
) -> TriageCommand:
    """The command the CLI would send for this form (named runs, or a fingerprint's)."""
    step: int | None = None
    result = b""
    if action is TriageAction.SKIP:
        text = field("step", required="name the step (activity command index) to skip")
        if not text.isdigit():
            raise InvalidInput(f"the step is a command index (0, 1, ...), not {text!r}")
        step = int(text)
        raw = field("result", required="give the step's result, as JSON", limit=MAX_RESULT_CHARS)
        try:
            result = pack(json.loads(raw))
        except ValueError as exc:
            raise InvalidInput(f"the result is not JSON: {exc}") from None
    version = field("version") if action in (TriageAction.RESUME, TriageAction.RETRY) else ""
    return TriageCommand(
        action=action,
        operator=operator,
        reason=reason(),
        tenant=tenant(),
        version=version,
        step=step,
        result=result,
        run_ids=run_ids,
        fingerprint=fingerprint,
    )


def _said(outcomes: list[TriageOutcome]) -> str:
    parts = [f"{o.run_id}: {o.outcome}" + (f" ({o.detail})" if o.detail else "") for o in outcomes]
    return "; ".join(parts) if parts else "No run was in that trouble."


def register(bp: Blueprint, services: ConsoleServices, gate: Gate) -> None:
    """`/triage` and its actions."""

    @bp.get("/triage")
    def triage() -> str:
        fingerprint = request.args.get("fingerprint", "").strip()
        return page(
            "triage.html",
            troubled=services.triage.troubled(tenant=tenant(), fingerprint=fingerprint),
            fingerprint=fingerprint,
            tenant=tenant(),
            labels=labels_of(services),
            bulk=[a.value for a in _BULK],
        )

    @bp.post("/triage/runs/<ref>/<action>")
    def triage_run(ref: str, action: str) -> Response:
        command = _command(_action(action), gate.acting(), run_ids=(ref,))
        outcomes = services.triage.apply(command)
        return done(_said(outcomes), "console.triage", tenant=command.tenant)

    @bp.post("/triage/fingerprints/<fingerprint>/<action>")
    def triage_fingerprint(fingerprint: str, action: str) -> Response:
        chosen = _action(action)
        if chosen not in _BULK:
            raise InvalidInput(f"{chosen.value} names one run, not a fingerprint")
        command = _command(chosen, gate.acting(), fingerprint=fingerprint)
        outcomes = services.triage.apply(command)
        return done(_said(outcomes), "console.triage", tenant=command.tenant)

    @bp.post("/triage/runs/<ref>/export")
    def export(ref: str) -> Response:
        bundle = services.triage.export(ref, operator=gate.acting(), tenant=tenant())
        return Response(
            bundle.encode(),
            mimetype="application/octet-stream",
            headers={"Content-Disposition": f'attachment; filename="{bundle.run.run_id}.bundle"'},
        )


TRIAGE: Final = """{% extends "console/layout.html" %}
{% block title %}Triage{% endblock %}
{% block main %}
<h1>Triage</h1>
<form method="get" class="filters" action="{{ url_for('console.triage') }}">
<label>Tenant <input name="tenant" value="{{ tenant }}"></label>
<label>Fingerprint <input name="fingerprint" id="fingerprint" value="{{ fingerprint }}"></label>
<button type="submit">Filter</button>
</form>
{% if fingerprint %}
<h2>Every run fingerprint <span class="mono">{{ fingerprint }}</span> poisoned</h2>
{% for action in bulk %}
<form method="post" class="inline" action="{{ url_for('console.triage_fingerprint',
 fingerprint=fingerprint, action=action) }}">
<input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<input type="hidden" name="tenant" value="{{ tenant }}">
{% if action != 'terminate' %}<input name="version" placeholder="on version (optional)">{% endif %}
<input name="reason" placeholder="reason" required>
<button type="submit" class="{{ 'danger' if action == 'terminate' else 'go' }}">{{ action }}
 all</button></form>
{% endfor %}
{% endif %}
<table id="troubled"><thead><tr><th>Run</th><th>Workflow</th><th>State</th><th>Task</th>
<th>Step</th><th>Crashes</th><th>Since</th><th>Fingerprint</th><th>Reason</th><th>Version</th>
<th>Actions</th></tr></thead><tbody>
{% for t in troubled %}<tr class="troubled-row" data-run="{{ t.run.run_id }}">
<td class="mono"><a href="{{ url_for('console.run', ref=t.run.run_id, tenant=t.run.tenant) }}">
{{ t.run.run_id }}</a></td>
<td>{{ t.run.workflow_type }} <span class="muted">{{ t.run.workflow_id }}</span></td>
<td>{{ 'suspended' if t.run.suspension else 'poisoned' }}</td>
<td>{{ t.task_kind or '' }} {{ t.task_id or '' }} <span class="muted">{{ t.pool or ''
}}</span></td>
<td>{{ t.step if t.step is not none else '' }}</td><td>{{ t.crashes }}</td>
<td>{{ t.since|when }}</td>
<td class="mono"><a href="{{ url_for('console.triage', fingerprint=t.fingerprint,
 tenant=t.run.tenant) }}">{{ t.fingerprint or '' }}</a></td>
<td class="reason">{{ t.reason }}</td><td class="mono">{{ t.run.digest|short(labels) }}</td>
<td>
{% set run = t.run.run_id %}
<form method="post" class="inline" action="{{ url_for('console.triage_run', ref=run,
 action='retry') }}"><input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<input type="hidden" name="tenant" value="{{ t.run.tenant }}">
<input name="version" placeholder="on version (optional)" aria-label="retry version">
<input name="reason" placeholder="reason" aria-label="retry reason" required>
<button type="submit" class="go retry">Retry</button></form>
<form method="post" class="inline" action="{{ url_for('console.triage_run', ref=run,
 action='resume') }}"><input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<input type="hidden" name="tenant" value="{{ t.run.tenant }}">
<input name="version" placeholder="on version (optional)" aria-label="resume version">
<input name="reason" placeholder="reason" aria-label="resume reason" required>
<button type="submit" class="go resume">Resume</button></form>
<form method="post" class="inline" action="{{ url_for('console.triage_run', ref=run,
 action='skip') }}"><input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<input type="hidden" name="tenant" value="{{ t.run.tenant }}">
<input name="step" size="3" placeholder="step" aria-label="skip step"
 value="{{ t.step if t.step is not none else '' }}">
<input name="result" placeholder='result JSON, e.g. {"ok": true}' aria-label="skip result">
<input name="reason" placeholder="reason" aria-label="skip reason" required>
<button type="submit" class="skip">Skip step</button></form>
<form method="post" class="inline" action="{{ url_for('console.triage_run', ref=run,
 action='terminate') }}"><input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<input type="hidden" name="tenant" value="{{ t.run.tenant }}">
<input name="reason" placeholder="reason" aria-label="terminate reason" required>
<button type="submit" class="danger terminate">Terminate</button></form>
<form method="post" class="inline" action="{{ url_for('console.export', ref=run) }}">
<input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<input type="hidden" name="tenant" value="{{ t.run.tenant }}">
<button type="submit" class="export">Export bundle</button></form>
</td></tr>
{% else %}<tr><td colspan="11" id="no-trouble">No run is poisoned or suspended.</td></tr>
{% endfor %}
</tbody></table>
{% endblock %}
"""

TEMPLATES: Final = {"console/triage.html": TRIAGE}
