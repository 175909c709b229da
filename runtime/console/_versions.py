"""`/versions`: per workflow type its versions side by side (role, ramp, open runs, activations,
failure rate, fuel), and promote / ramp / roll back, each behind a confirmation step.

A change is two POSTs: the first (the form) shows what will change, from the rollout as it is
now; the second (`confirm`) carries it out through `Rollout` exactly as `amber versions promote |
ramp | rollback` does (same arguments, the operator as actor, audited in its transaction) and
then, as the RPC does, drops this server's cached upgrade target of the type.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from flask import Blueprint, request
from werkzeug.wrappers import Response

from amber.abi import InvalidInput
from amber.versions import ModuleVersion, TypeStatus, UnknownWorkflowType

from ._auth import Gate
from ._pages import done, field, page
from ._present import short
from ._wiring import ConsoleServices


class Change(enum.StrEnum):
    PROMOTE = "promote"
    RAMP = "ramp"
    ROLLBACK = "rollback"


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeView:
    """One workflow type on the versions page."""

    workflow_type: str
    status: TypeStatus | None
    """None while no version is current for it."""
    choices: tuple[ModuleVersion, ...]
    """Versions that declare the type and are not retired (what promote and ramp may name)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """A rollout change as the operator asked for it, before confirming."""

    change: Change
    workflow_type: str
    ref: str
    percent: int
    reason: str


def _types(services: ConsoleServices) -> list[TypeView]:
    versions = services.registry.list()
    names = sorted({t for v in versions for t in v.manifest.workflows})
    views = []
    for name in names:
        try:
            status: TypeStatus | None = services.rollout.status(name)
        except UnknownWorkflowType:
            status = None
        choices = tuple(
            v for v in versions if name in v.manifest.workflows and v.retired_at is None
        )
        views.append(TypeView(workflow_type=name, status=status, choices=choices))
    return views


def _proposal(workflow_type: str) -> Proposal:
    try:
        change = Change(request.form.get("change", ""))
    except ValueError:
        raise InvalidInput("choose promote, ramp or rollback") from None
    ref = field("ref", required="choose a version") if change is not Change.ROLLBACK else ""
    percent = 0
    if change is Change.RAMP:
        text = field("percent", required="give the ramp percentage (0–100)")
        if not text.isdigit() or not 0 <= int(text) <= 100:
            raise InvalidInput(f"a ramp is a whole percentage from 0 to 100, not {text!r}")
        percent = int(text)
    return Proposal(
        change=change,
        workflow_type=workflow_type,
        ref=ref,
        percent=percent,
        # As the RPC does: the audit says so rather than record an empty reason.
        reason=field("reason") or f"{change.value}: no reason given",
    )


def _describe(services: ConsoleServices, proposal: Proposal) -> str:
    """What the change will do, said against the rollout as it is now."""
    rollout = services.rollout.status(proposal.workflow_type).rollout
    labels = {v.digest: v.labels for v in services.registry.list()}
    kind = proposal.workflow_type
    now = f"current {short(rollout.current, labels)}"
    if rollout.candidate:
        now += f", candidate {short(rollout.candidate, labels)} at {rollout.ramp_percent} %"
    if proposal.change is Change.ROLLBACK:
        if rollout.candidate:
            what = f"Drop the candidate of {kind}: every new run starts on the current version."
        elif rollout.previous:
            what = f"Make {short(rollout.previous, labels)} current for {kind} again."
        else:
            what = f"Nothing to roll back for {kind}: there is no candidate or previous version."
        return f"{what} (Now: {now}.)"
    target = short(services.registry.get(proposal.ref).digest, labels)
    if proposal.change is Change.PROMOTE:
        return (
            f"Make {target} the current version of {kind}: every new run starts on it."
            f" (Now: {now}.)"
        )
    return (
        f"Send {proposal.percent} % of new {kind} runs (chosen by workflow id) to {target}; the"
        f" others start on the current version. (Now: {now}.)"
    )


def _apply(services: ConsoleServices, proposal: Proposal, actor: str) -> str:
    now = services.clock.now()
    kind = proposal.workflow_type
    if proposal.change is Change.PROMOTE:
        services.rollout.promote(kind, proposal.ref, now=now, actor=actor, reason=proposal.reason)
        said = f"Promoted {proposal.ref} for {kind}."
    elif proposal.change is Change.RAMP:
        services.rollout.ramp(
            kind, proposal.ref, proposal.percent, now=now, actor=actor, reason=proposal.reason
        )
        said = f"Ramped {kind} to {proposal.percent} % on {proposal.ref}."
    else:
        services.rollout.rollback(kind, now=now, actor=actor, reason=proposal.reason)
        said = f"Rolled back {kind}."
    services.tasks.forget_upgrade_target(kind)
    return said


def register(bp: Blueprint, services: ConsoleServices, gate: Gate) -> None:
    """`/versions` and `/versions/<type>/change` (confirm, then apply)."""

    @bp.get("/versions")
    def versions() -> str:
        return page(
            "versions.html",
            types=_types(services),
            labels={v.digest: v.labels for v in services.registry.list()},
        )

    @bp.post("/versions/<workflow_type>/change")
    def change_rollout(workflow_type: str) -> str | Response:
        actor = gate.acting()
        proposal = _proposal(workflow_type)
        if request.form.get("confirm") != "yes":
            return page(
                "confirm.html", proposal=proposal, description=_describe(services, proposal)
            )
        return done(_apply(services, proposal, actor), "console.versions")


VERSIONS: Final = """{% extends "console/layout.html" %}
{% block title %}Versions{% endblock %}
{% block main %}
<h1>Versions</h1>
{% for t in types %}
<section class="type" id="type-{{ t.workflow_type }}">
<h2>{{ t.workflow_type }}</h2>
{% if t.status %}
<table class="versions"><thead><tr><th>Version</th><th>Role</th><th>Ramp</th><th>Open runs</th>
<th>Closed runs</th><th>Activations</th><th>Failure rate</th><th>Fuel / activation</th>
<th>Failures by reason</th></tr></thead><tbody>
{% for v in t.status.versions %}<tr class="version-row">
<td class="mono">{{ v.digest|short(labels) }}</td><td class="role">{{ v.role }}</td>
<td>{{ (t.status.rollout.ramp_percent ~ ' %') if v.role == 'candidate' else '' }}</td>
<td>{{ v.use.running }}</td><td>{{ v.use.closed }}</td><td>{{ v.health.activations }}</td>
<td>{{ '%.1f %%'|format(v.health.failure_rate * 100) }}</td>
<td>{{ '{:,}'.format(v.health.fuel // v.health.activations) if v.health.activations else ''
}}</td>
<td>{% for reason, count in v.health.failures.items() %}{{ reason }}: {{ count }}{{ ', ' if not
 loop.last }}{% endfor %}</td>
</tr>{% endfor %}
</tbody></table>
{% else %}<p class="muted">No version is current for this type yet.</p>{% endif %}
<form method="post" class="inline" action="{{ url_for('console.change_rollout',
 workflow_type=t.workflow_type) }}">
<input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<select name="change" aria-label="change">
<option value="promote">promote</option><option value="ramp">ramp</option>
<option value="rollback">roll back</option></select>
<select name="ref" aria-label="version"><option value="">version…</option>
{% for v in t.choices %}<option value="{{ v.digest }}">{{ v.digest|short(labels) }}</option>
{% endfor %}</select>
<input name="percent" type="number" min="0" max="100" placeholder="ramp %" aria-label="ramp %">
<input name="reason" placeholder="reason" aria-label="reason">
<button type="submit" class="change">Review…</button>
</form>
</section>
{% else %}<p>No version has been uploaded.</p>{% endfor %}
{% endblock %}
"""

CONFIRM: Final = """{% extends "console/layout.html" %}
{% block title %}Confirm{% endblock %}
{% block main %}
<h1>Confirm: {{ proposal.change.value }} {{ proposal.workflow_type }}</h1>
<p id="proposal">{{ description }}</p>
{% if proposal.reason %}<p>Reason: {{ proposal.reason }}</p>{% endif %}
<form method="post" class="inline" action="{{ url_for('console.change_rollout',
 workflow_type=proposal.workflow_type) }}">
<input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<input type="hidden" name="change" value="{{ proposal.change.value }}">
<input type="hidden" name="ref" value="{{ proposal.ref }}">
<input type="hidden" name="percent" value="{{ proposal.percent }}">
<input type="hidden" name="reason" value="{{ proposal.reason }}">
<input type="hidden" name="confirm" value="yes">
<button type="submit" id="confirm" class="danger">Yes, {{ proposal.change.value }}</button>
<a href="{{ url_for('console.versions') }}" id="cancel">Cancel</a>
</form>
{% endblock %}
"""

TEMPLATES: Final = {"console/versions.html": VERSIONS, "console/confirm.html": CONFIRM}
