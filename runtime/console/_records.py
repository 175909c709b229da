"""`/approvals` and `/audit`: what waits for whom (and issuing or revoking an approver's link, as
`amber approvals issue | revoke` do), and the audit log with its verification.

The audit log is shown newest first, a window of `AUDIT_WINDOW` chain positions per page (with a
target filter a window may hold few records). `verify` recomputes the whole chain through
`AuditService.verify`, as `amber audit verify` does; it is a POST because it reads every record.
"""

from __future__ import annotations

from typing import Final

from flask import Blueprint, request
from werkzeug.wrappers import Response

from amber.abi import InvalidInput
from amber.history import AuditVerification

from ._auth import Gate
from ._pages import done, field, page, reason, tenant
from ._wiring import ConsoleServices

AUDIT_WINDOW: Final = 100
"""Chain positions per page of the audit log."""
APPROVAL_STATUSES: Final = ("pending", "approved", "rejected", "expired", "cancelled")


def register(bp: Blueprint, services: ConsoleServices, gate: Gate) -> None:
    """`/approvals` (+ issue, revoke) and `/audit` (+ verify)."""

    def approvals_page(issued_link: str = "") -> str:
        status = request.values.get("status", "")
        chosen = request.values.get("approval", "").strip()
        where = tenant()
        run = request.values.get("run", "").strip()
        if run:  # a run id or a workflow id, as everywhere
            run = services.runs.get(run, tenant=where).run_id
        return page(
            "approvals.html",
            approvals=services.approvals.list_approvals(tenant=where, status=status, run_id=run),
            detail=services.approvals.show(chosen, tenant=where) if chosen else None,
            statuses=APPROVAL_STATUSES,
            status=status,
            tenant=where,
            issued_link=issued_link,
        )

    @bp.get("/approvals")
    def approvals() -> str:
        return approvals_page()

    @bp.post("/approvals/<approval_id>/issue")
    def issue_link(approval_id: str) -> str:
        issued = services.approvals.issue(
            approval_id,
            field("approver", required="name the approver to issue a link for", limit=128),
            operator=gate.acting(),
            reason=reason(),
            tenant=tenant(),
        )
        # Shown once, on this response only: it is a bearer credential (not kept in the session).
        return approvals_page(issued_link=issued.link or issued.token)

    @bp.post("/approvals/<approval_id>/revoke")
    def revoke_links(approval_id: str) -> Response:
        approver = field("approver", limit=128)
        count = services.approvals.revoke(
            approval_id,
            operator=gate.acting(),
            reason=reason(),
            tenant=tenant(),
            approver=approver or None,
        )
        return done(
            f"Revoked {count} link(s).",
            "console.approvals",
            approval=approval_id,
            tenant=tenant(),
        )

    def audit_page(verification: AuditVerification | None = None) -> str:
        target = request.values.get("target", "").strip()
        head_seq, head_hash = services.audit.head()
        text = request.values.get("upto", "")
        if text and not text.isdigit():
            raise InvalidInput("upto must be a record number")
        upto = min(int(text), head_seq) if text else head_seq
        after = max(upto - AUDIT_WINDOW, 0)
        entries = services.audit.list(target or None, AUDIT_WINDOW, after_seq=after)
        return page(
            "audit.html",
            entries=[e for e in reversed(entries) if e.seq <= upto],
            target=target,
            head_seq=head_seq,
            head_hash=head_hash.hex(),
            older=after if after > 0 else None,
            verification=verification,
        )

    @bp.get("/audit")
    def audit() -> str:
        return audit_page()

    @bp.post("/audit/verify")
    def verify_audit() -> str:
        expect = field("expect_head", limit=64)
        try:
            anchor = bytes.fromhex(expect) if expect else None
        except ValueError:
            raise InvalidInput("the expected head is 64 hex digits") from None
        return audit_page(services.audit.verify(anchor))


APPROVALS: Final = """{% extends "console/layout.html" %}
{% block title %}Approvals{% endblock %}
{% block main %}
<h1>Approvals</h1>
<form method="get" class="filters" action="{{ url_for('console.approvals') }}">
<label>Tenant <input name="tenant" value="{{ tenant }}"></label>
<label>Status <select name="status"><option value="">all</option>
{% for s in statuses %}<option {{ 'selected' if s == status }}>{{ s }}</option>{% endfor %}
</select></label>
<label>Run <input name="run"></label>
<button type="submit">Filter</button>
</form>
{% if issued_link %}<p class="flash" id="issued-link">A new link (shown once, send it to the
 approver): <span class="mono">{{ issued_link }}</span></p>{% endif %}
{% if detail %}{% set a = detail.approval %}
<section id="approval-detail">
<h2>Approval <span class="mono">{{ a.approval_id }}</span>: {{ a.status }}</h2>
<dl><dt>Action</dt><dd>{{ a.action }}</dd>
<dt>Run</dt><dd class="mono"><a href="{{ url_for('console.run', ref=a.run_id, tenant=a.tenant)
 }}">{{ a.run_id }}</a> step {{ a.cmd }}</dd>
<dt>Policy</dt><dd>{{ a.required }} of approvers {{ a.approvers|join(', ') or '—' }}, roles {{
 a.roles|join(', ') or '—' }}</dd>
<dt>Expires</dt><dd>{{ a.expires_at|when }}</dd></dl>
<h3>Decisions</h3>
<table><thead><tr><th>Approver</th><th>Decision</th><th>Comment</th><th>Via</th><th>At</th>
</tr></thead><tbody>{% for d in detail.decisions %}<tr><td>{{ d.approver }}</td>
<td>{{ 'approve' if d.approve else 'reject' }}</td><td>{{ d.comment }}</td><td>{{ d.via }}</td>
<td>{{ d.decided_at|when }}</td></tr>{% else %}<tr><td colspan="5">None yet.</td></tr>
{% endfor %}</tbody></table>
<h3>Links</h3>
<table><thead><tr><th>Approver</th><th>Status</th><th>Issued</th><th>By</th><th>Expires</th>
</tr></thead><tbody>{% for t in detail.tokens %}<tr><td>{{ t.approver }}</td><td>{{ t.status
}}</td><td>{{ t.issued_at|when }}</td><td>{{ t.issued_by or 'delivery' }}</td>
<td>{{ t.expires_at|when }}</td></tr>{% else %}<tr><td colspan="5">None.</td></tr>{% endfor %}
</tbody></table>
{% if a.status == 'pending' %}
<form method="post" class="inline" action="{{ url_for('console.issue_link',
 approval_id=a.approval_id) }}"><input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<input type="hidden" name="tenant" value="{{ a.tenant }}">
<input name="approver" placeholder="approver" required>
<input name="reason" placeholder="reason" required>
<button type="submit" class="go">Issue a link</button></form>
<form method="post" class="inline" action="{{ url_for('console.revoke_links',
 approval_id=a.approval_id) }}"><input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<input type="hidden" name="tenant" value="{{ a.tenant }}">
<input name="approver" placeholder="approver (all if empty)">
<input name="reason" placeholder="reason" required>
<button type="submit" class="danger">Revoke links</button></form>
{% endif %}
</section>
{% endif %}
<table id="approval-list"><thead><tr><th>Approval</th><th>Status</th><th>Action</th><th>Run</th>
<th>Step</th><th>Approvers</th><th>Roles</th><th>Required</th><th>Created</th><th>Expires</th>
</tr></thead><tbody>
{% for a in approvals %}<tr class="approval-row"><td class="mono"><a href="{{
 url_for('console.approvals', approval=a.approval_id, tenant=a.tenant) }}">{{ a.approval_id
}}</a></td><td>{{ a.status }}</td><td>{{ a.action }}</td>
<td class="mono"><a href="{{ url_for('console.run', ref=a.run_id, tenant=a.tenant) }}">{{
 a.run_id }}</a></td><td>{{ a.cmd }}</td><td>{{ a.approvers|join(', ') }}</td>
<td>{{ a.roles|join(', ') }}</td><td>{{ a.required }}</td><td>{{ a.created_at|when }}</td>
<td>{{ a.expires_at|when }}</td></tr>
{% else %}<tr><td colspan="10">No approval.</td></tr>{% endfor %}
</tbody></table>
{% endblock %}
"""

AUDIT: Final = """{% extends "console/layout.html" %}
{% block title %}Audit log{% endblock %}
{% block main %}
<h1>Audit log</h1>
<p>Head: record <span id="head-seq">{{ head_seq }}</span>, hash
 <span class="mono" id="head-hash">{{ head_hash }}</span> (record it elsewhere to check later
 that the log was not rewritten).</p>
<form method="post" class="inline" action="{{ url_for('console.verify_audit') }}">
<input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<input name="expect_head" size="64" placeholder="expected head hash (optional)"
 aria-label="expected head">
<button type="submit" id="verify" class="go">Verify the chain</button>
</form>
{% if verification %}
<p class="{{ 'flash' if verification.ok else 'error' }}" id="verification" role="status">
{% if verification.ok %}Verified: {{ verification.checked }} records, none edited, missing or
 out of place.{% else %}Broken: {{ verification.problem }}{% if verification.first_bad_seq %}
 (first bad record: {{ verification.first_bad_seq }}){% endif %}.{% endif %}</p>
{% endif %}
<form method="get" class="filters" action="{{ url_for('console.audit') }}">
<label>Target <input name="target" value="{{ target }}"
 placeholder="run id, workflow type, digest"></label>
<button type="submit">Filter</button>
</form>
<table id="audit"><thead><tr><th>#</th><th>Time</th><th>Operator</th><th>Action</th>
<th>Target</th><th>Reason</th><th>Detail</th></tr></thead><tbody>
{% for e in entries %}<tr class="audit-row"><td>{{ e.seq }}</td><td>{{ e.at|when }}</td>
<td class="actor">{{ e.actor }}</td><td class="action">{{ e.action }}</td>
<td class="mono target">{{ e.target }}</td><td>{{ e.reason }}</td>
<td class="json">{{ e.detail|tojson }}</td></tr>
{% else %}<tr><td colspan="7">No record here.</td></tr>{% endfor %}
</tbody></table>
{% if older %}<a id="older" href="{{ url_for('console.audit', target=target, upto=older) }}">
Older →</a>{% endif %}
{% endblock %}
"""

TEMPLATES: Final = {"console/approvals.html": APPROVALS, "console/audit.html": AUDIT}
