"""The templates of the home page, the run list and a run's page."""

from __future__ import annotations

from typing import Final

HOME: Final = """{% extends "console/layout.html" %}
{% block title %}Console{% endblock %}
{% block main %}
<h1>Amber console</h1>
<ul id="sections">
<li><a href="{{ url_for('console.runs') }}">Runs</a> — every run, filtered by status, workflow,
 version, tenant and time; a run's history, tasks, failures, approvals and queries.</li>
<li><a href="{{ url_for('console.versions') }}">Versions</a> — each workflow type's versions side
 by side; promote, ramp and roll back.</li>
<li><a href="{{ url_for('console.triage') }}">Triage</a> — poisoned and suspended runs; retry,
 resume, skip a step, terminate, export a bundle.</li>
<li><a href="{{ url_for('console.approvals') }}">Approvals</a> — what waits for whom.</li>
<li><a href="{{ url_for('console.audit') }}">Audit log</a> — every operator action, and its
 verification.</li>
</ul>
<p class="muted">Every action here runs the same audited service call as the matching
<code>amber</code> command, under your operator name.</p>
{% endblock %}
"""

RUNS: Final = """{% extends "console/layout.html" %}
{% block title %}Runs{% endblock %}
{% block main %}
<h1>Runs</h1>
<form method="get" class="filters" id="run-filters" action="{{ url_for('console.runs') }}">
<label>Status <select name="status" id="status">
<option value="">all</option>
{% for s in statuses %}<option value="{{ s }}" {{ 'selected' if filters.status and
 filters.status.value == s }}>{{ s }}</option>{% endfor %}
</select></label>
<label>Workflow type <input name="workflow_type" id="workflow_type"
 value="{{ filters.workflow_type }}"></label>
<label>Workflow id <input name="workflow_id" id="workflow_id" value="{{ filters.workflow_id }}">
</label>
<label>Version <input name="version" id="version" value="{{ filters.version }}"
 placeholder="digest, prefix or label"></label>
<label>Tenant <input name="tenant" id="tenant" value="{{ filters.tenant }}"></label>
<label>Created from (UTC) <input type="datetime-local" step="1" name="since" id="since"
 value="{{ filters.since.strftime('%Y-%m-%dT%H:%M:%S') if filters.since else '' }}"></label>
<label>to <input type="datetime-local" step="1" name="until" id="until"
 value="{{ filters.until.strftime('%Y-%m-%dT%H:%M:%S') if filters.until else '' }}"></label>
<button type="submit" id="apply-filters">Filter</button>
<a href="{{ url_for('console.runs') }}">clear</a>
</form>
<table id="runs">
<thead><tr><th>Run</th><th>Workflow</th><th>Workflow id</th><th>Status</th><th>Version</th>
<th>Tenant</th><th>Created</th><th>Closed</th></tr></thead>
<tbody>
{% for r in found.runs %}
<tr class="run-row">
<td class="mono"><a href="{{ url_for('console.run', ref=r.run_id, tenant=r.tenant) }}">
{{ r.run_id }}</a></td>
<td>{{ r.workflow_type }}</td><td class="wid">{{ r.workflow_id }}</td>
<td class="status status-{{ r.status.value }}">{{ r.status.value }}{% if r.suspension %}
 (suspended){% endif %}</td>
<td class="mono">{{ r.digest|short(labels) }}</td><td>{{ r.tenant }}</td>
<td>{{ r.created_at|when }}</td><td>{{ r.closed_at|when }}</td>
</tr>
{% else %}
<tr><td colspan="8" id="no-runs">No run matches.</td></tr>
{% endfor %}
</tbody>
</table>
<p class="muted" id="page-info">{{ found.runs|length }} shown, {{ found.scanned }} read.
{% if found.partial %}Stopped reading after {{ found.scanned }} runs: more may match further
 back.{% endif %}</p>
{% if filters.before %}<a href="{{ url_for('console.runs', **dict(next_args, before='')) }}">
Newest</a>{% endif %}
{% if found.next_before %}<a id="next-page" href="{{ url_for('console.runs', **next_args) }}">
Older →</a>{% endif %}
{% endblock %}
"""

RUN: Final = """{% extends "console/layout.html" %}
{% block title %}Run {{ run.run_id }}{% endblock %}
{% block main %}
<h1>Run <span class="mono" id="run-id">{{ run.run_id }}</span></h1>
<dl id="summary">
<dt>Workflow</dt><dd>{{ run.workflow_type }} (id <span id="workflow-id">{{ run.workflow_id
}}</span>, tenant {{ run.tenant }})</dd>
<dt>Status</dt><dd id="run-status" class="status-{{ run.status.value }}">{{ run.status.value
}}</dd>
{% if run.suspension %}<dt>Suspended</dt><dd id="suspension">since {{ run.suspension.since|when
}}: {{ run.suspension.reason }} (fingerprint <span class="mono">{{ run.suspension.fingerprint
}}</span>)</dd>{% endif %}
<dt>Version</dt><dd class="mono">{{ run.digest|short(labels) }}</dd>
<dt>Input</dt><dd><pre id="input">{{ run.input|payload }}</pre></dd>
{% if run.result is not none %}<dt>Result</dt><dd><pre id="result">{{ run.result|payload
}}</pre></dd>{% endif %}
{% if run.error_type %}<dt>Error</dt><dd id="run-error">{{ run.error_type }}: {{
run.error_message }}</dd>{% endif %}
{% if run.cancel_seq is not none and run.status.value == 'running' %}<dt>Cancel</dt>
<dd>requested: {{ run.cancel_reason or '(no reason)' }}</dd>{% endif %}
{% if run.parent_run_id %}<dt>Parent</dt><dd class="mono"><a href="{{ url_for('console.run',
 ref=run.parent_run_id, tenant=run.tenant) }}">{{ run.parent_run_id }}</a></dd>{% endif %}
<dt>Created</dt><dd>{{ run.created_at|when }}</dd>
<dt>Closed</dt><dd>{{ run.closed_at|when }}</dd>
<dt>History</dt><dd>{{ run.last_seq }} events</dd>
</dl>

<h2>Query</h2>
<form method="post" class="inline" action="{{ url_for('console.query', ref=run.run_id,
 tenant=run.tenant) }}">
<input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<input name="name" id="query-name" placeholder="query name" required
 value="{{ answer.name if answer else '' }}">
<button type="submit" id="ask">Ask</button>
</form>
{% if answer %}
{% if answer.problem %}<p class="error" id="query-problem">{{ answer.problem }}</p>
{% else %}<pre id="query-answer">{{ answer.value|tojson }}</pre>{% endif %}
{% endif %}

<h2>Pending approvals</h2>
<table id="approvals"><thead><tr><th>Approval</th><th>Step</th><th>Action</th><th>Approvers</th>
<th>Roles</th><th>Required</th><th>Expires</th></tr></thead><tbody>
{% for a in approvals %}<tr><td class="mono"><a href="{{ url_for('console.approvals',
 approval=a.approval_id, tenant=a.tenant) }}">{{ a.approval_id }}</a></td><td>{{ a.cmd }}</td>
<td>{{ a.action }}</td><td>{{ a.approvers|join(', ') }}</td><td>{{ a.roles|join(', ') }}</td>
<td>{{ a.required }}</td><td>{{ a.expires_at|when }}</td></tr>
{% else %}<tr><td colspan="7">None.</td></tr>{% endfor %}
</tbody></table>

<h2>Open tasks</h2>
<table id="tasks"><thead><tr><th>Task</th><th>Kind</th><th>Name</th><th>Step</th><th>Queue</th>
<th>State</th>
<th>Pool</th><th>Attempt</th><th>Lease owner</th><th>Lease expires</th><th>Visible at</th>
<th>Crashes</th><th>Poisoned</th></tr></thead><tbody>
{% for t in description.tasks %}<tr>
<td>{{ t.task_id }}</td><td>{{ t.kind.value }}</td><td>{{ t.name }}</td>
<td>{{ t.cmd if t.cmd is not none else '' }}</td><td>{{ t.queue }}</td>
<td>{{ t.state.value }}</td><td>{{ t.pool }}</td>
<td>{{ t.counted_attempts }} / {{ t.max_attempts or '∞' }}{% if t.crashed_attempts %}
+{{ t.crashed_attempts }} crashed{% endif %}</td><td class="lease-owner">{{ t.lease_owner or ''
}}</td><td>{{ t.lease_expires_at|when }}</td><td>{{ t.visible_at|when }}</td>
<td>{% if t.crash %}{{ t.crash.count }} × <span class="mono">{{ t.crash.fingerprint }}</span>
{% endif %}</td>
<td>{% if t.poisoned_at %}{{ t.poisoned_at|when }}: {{ t.poison_reason }}{% endif %}</td>
</tr>{% else %}<tr><td colspan="13">None.</td></tr>{% endfor %}
</tbody></table>

<h2>Failures</h2>
<table id="failures"><thead><tr><th>Time</th><th>Kind</th><th>Step</th><th>Attempt</th>
<th>Reason</th><th>Trap</th><th>Fingerprint</th><th>Fuel</th><th>Memory</th><th>Pool</th>
<th>Worker</th><th>Message</th></tr></thead><tbody>
{% for f in description.recent_failures %}<tr>
<td>{{ f.created_at|when }}</td><td>{{ f.kind }}</td><td>{{ f.cmd if f.cmd is not none else ''
}}</td><td>{{ f.attempt }}</td><td class="reason">{{ f.reason }}</td><td>{{ f.trap_code or ''
}}</td><td class="mono fingerprint">{{ f.fingerprint or '' }}</td>
<td>{{ '{:,}'.format(f.fuel_used) if f.fuel_used is not none else '' }}</td>
<td>{{ '{:,}'.format(f.memory_bytes) if f.memory_bytes is not none else '' }}</td>
<td>{{ f.pool or '' }}</td><td>{{ f.worker or '' }}</td><td>{{ f.message }}</td>
</tr>{% else %}<tr><td colspan="12">None.</td></tr>{% endfor %}
</tbody></table>

{% if description.timers %}<h2>Timers</h2>
<table id="timers"><thead><tr><th>Timer</th><th>Kind</th><th>Step</th><th>Fires at</th></tr>
</thead><tbody>{% for t in description.timers %}<tr><td>{{ t.timer_id }}</td>
<td>{{ t.kind.value }}</td><td>{{ t.cmd }}</td><td>{{ t.fire_at|when }}</td></tr>{% endfor %}
</tbody></table>{% endif %}

<h2>Operator actions</h2>
<table id="run-audit"><thead><tr><th>#</th><th>Time</th><th>Operator</th><th>Action</th>
<th>Reason</th></tr></thead><tbody>
{% for e in audit %}<tr><td>{{ e.seq }}</td><td>{{ e.at|when }}</td><td>{{ e.actor }}</td>
<td>{{ e.action }}</td><td>{{ e.reason }}</td></tr>
{% else %}<tr><td colspan="5">None.</td></tr>{% endfor %}
</tbody></table>

<h2>History</h2>
<table id="timeline"><thead><tr><th>#</th><th>Time</th><th>Event</th><th>Version</th>
<th>Details</th></tr></thead><tbody>
{% for e in events %}<tr class="event"><td>{{ e.seq }}</td><td>{{ e.time }}</td>
<td class="event-type">{{ e.type }}</td><td class="mono">{{ e.digest|short(labels) }}</td>
<td class="json">{{ e.details }}</td></tr>{% endfor %}
</tbody></table>
{% if more_after %}<a href="{{ url_for('console.run', ref=run.run_id, tenant=run.tenant,
 after=more_after) }}">Later events →</a>{% endif %}
{% endblock %}
"""

TEMPLATES: Final = {
    "console/home.html": HOME,
    "console/runs.html": RUNS,
    "console/run.html": RUN,
}
