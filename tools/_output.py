"""How the CLI prints: humans get aligned text, scripts get JSON (`--json`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from amber.abi import payload_json
from amber.history import Event, Run, Task
from amber.runtime.model import FailureReason, RunCheck, RunDescription
from amber.versions import ModuleVersion


def clip(text: str, width: int) -> str:
    """`text` cut to `width` characters, with a mark where it was cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def run_json(run: Run) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "tenant": run.tenant,
        "workflow_id": run.workflow_id,
        "workflow_type": run.workflow_type,
        "version": run.digest,
        "status": run.status.value,
        "input": payload_json(run.input),
        "result": payload_json(run.result),
        "error": None
        if run.error_type is None
        else {"type": run.error_type, "message": run.error_message},
        "last_seq": run.last_seq,
        "created_at": run.created_at.isoformat(),
        "closed_at": run.closed_at.isoformat() if run.closed_at else None,
        "suspended": None
        if run.suspension is None
        else {
            "since": run.suspension.since.isoformat(),
            "reason": run.suspension.reason,
            "fingerprint": run.suspension.fingerprint,
        },
    }


def event_json(event: Event) -> dict[str, Any]:
    body = event.readable()
    return {
        "seq": event.seq,
        "type": event.type.value,
        "time": event.created_at.isoformat(),
        "version": event.digest,
        "payload": body,
    }


def version_json(version: ModuleVersion) -> dict[str, Any]:
    use = version.use
    return {
        "digest": version.digest,
        "size": version.size,
        "uploaded_at": version.uploaded_at.isoformat(),
        "labels": list(version.labels),
        "current_for": list(version.current_for),
        "candidate_for": list(version.candidate_for),
        "retired_at": version.retired_at.isoformat() if version.retired_at else None,
        "use": None
        if use is None
        else {"open_runs": use.running, "closed_runs": use.closed, "tasks": use.tasks},
        "retire_blockers": list(version.retire_blockers),
        "manifest": version.manifest.to_json(),
    }


def description_json(desc: RunDescription) -> dict[str, Any]:
    return {
        "run": run_json(desc.run),
        "tasks": [
            {
                "task_id": t.task_id,
                "kind": t.kind.value,
                "name": t.name,
                "queue": t.queue,
                "cmd": t.cmd,
                "state": t.state.value,
                "attempt": t.attempt,
                "max_attempts": t.max_attempts,
                "crashed_attempts": t.crashed_attempts,
                "visible_at": t.visible_at.isoformat(),
                "lease_owner": t.lease_owner,
                "lease_expires_at": t.lease_expires_at.isoformat() if t.lease_expires_at else None,
                "consecutive_failures": t.consecutive_failures,
                "last_failure": t.last_failure,
                "pool": t.pool,
                "crashes": None
                if t.crash is None
                else {
                    "step": t.crash.step,
                    "fingerprint": t.crash.fingerprint,
                    "count": t.crash.count,
                },
                "poisoned_at": t.poisoned_at.isoformat() if t.poisoned_at else None,
                "poison_reason": t.poison_reason,
            }
            for t in desc.tasks
        ],
        "recent_failures": [
            {
                "time": f.created_at.isoformat(),
                "kind": f.kind,
                "step": f.cmd,
                "attempt": f.attempt,
                "reason": f.reason,
                "trap_code": f.trap_code,
                "fuel_used": f.fuel_used,
                "fuel_exact": fuel_exact(f.reason),
                "memory_bytes": f.memory_bytes,
                "worker": f.worker,
                "message": f.message,
                "pool": f.pool,
                "fingerprint": f.fingerprint,
                "trace_id": f.trace_id,
                "host_calls": list(f.host_calls),
            }
            for f in desc.recent_failures
        ],
        "timers": [
            {
                "timer": t.timer_id,
                "kind": t.kind.value,
                "cmd": t.cmd,
                "fire_at": t.fire_at.isoformat(),
            }
            for t in desc.timers
        ],
        "discarded": [
            {"time": d.created_at.isoformat(), "kind": d.kind, "detail": d.detail}
            for d in desc.discarded
        ],
    }


def attempts_text(task: Task) -> str:
    """A task's attempt against its retry budget (`1/3`, `2/∞`), its crashed attempts apart
    (`1/1 +3 crashed`): crashes do not consume retries."""
    text = f"{task.counted_attempts}/{task.max_attempts or '∞'}"
    return f"{text} +{task.crashed_attempts} crashed" if task.crashed_attempts else text


def fuel_exact(reason: str) -> bool:
    """Whether a failure's recorded fuel is the fuel it used. A deadline kill's is a lower
    bound: wasmtime does not write its fuel counter back when it interrupts a guest, so the
    count stops at the guest's last call (a loop without calls reads about 0)."""
    return reason != FailureReason.DEADLINE


def fuel_text(reason: str, fuel_used: int | None) -> str:
    """A failure's fuel as a person should read it: `>=N` where it is a lower bound."""
    if fuel_used is None:
        return "-"
    return str(fuel_used) if fuel_exact(reason) else f">={fuel_used}"


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def emit_list(key: str, items: list[Any], next_page: str | None = None) -> None:
    """Every list the CLI prints has one shape: `{KEY: [...], "next_page": TOKEN or null}`
    (a bare array could never say that there is more)."""
    emit_json({key: items, "next_page": next_page or None})


def compact(value: Any, width: int = 60) -> str:
    text = json.dumps(value, separators=(",", ":"), sort_keys=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def printable(text: str) -> str:
    """`text` safe for a terminal: control characters (an escape sequence, a newline) shown
    escaped, as `repr` writes them. Names in tables may come from anyone who can start a run."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """Rows under a header, in aligned columns, every cell made `printable`."""
    rows = [[printable(c) for c in row] for row in rows]
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return "\n".join(lines)


def run_text(run: Run) -> str:
    """A run's summary, every line `printable`: the workflow id, the error and the cancel
    reason come from callers and guests."""
    lines = [
        f"run        {run.run_id}",
        f"workflow   {run.workflow_type} (id {run.workflow_id}, tenant {run.tenant})",
        f"version    {run.digest}",
        f"status     {run.status.value}",
        f"input      {compact(payload_json(run.input), 200)}",
    ]
    if run.result is not None:
        lines.append(f"result     {compact(payload_json(run.result), 200)}")
    if run.error_type is not None:
        lines.append(f"error      {run.error_type}: {run.error_message}")
    if run.cancel_seq is not None and not run.status.closed:
        lines.append(f"cancel     requested: {run.cancel_reason or '(no reason)'}")
    if run.parent_run_id:
        lines.append(f"parent     {run.parent_run_id}")
    lines.append(f"history    {run.last_seq} events")
    return "\n".join(printable(line) for line in lines)


def history_text(events: Sequence[Event]) -> str:
    rows = []
    for e in events:
        body = event_json(e)["payload"]
        rows.append(
            [
                str(e.seq),
                e.created_at.strftime("%H:%M:%S.%f")[:-3],
                e.type.value,
                e.digest[:12],
                compact(body, 80),
            ]
        )
    return table(rows, ["SEQ", "TIME", "EVENT", "VERSION", "DETAILS"])


def emit_checks(
    candidate: str, checks: Sequence[RunCheck], *, as_json: bool, migrating: bool
) -> None:
    """Print replay checks against `candidate` (`versions check`), or, with `migrating`, the
    moves that followed them (`run migrate`): a table and a summary, or JSON."""
    if as_json:
        emit_json({"candidate": candidate, "runs": [check_json(c) for c in checks]})
        return
    print(f"candidate {candidate}")
    rows = [
        [c.run_id, c.status, c.verdict, *([c.outcome or "-"] if migrating else []),
         _divergence(c)]
        for c in checks
    ]  # fmt: skip
    headers = ["RUN", "STATUS", "VERDICT", *(["OUTCOME"] if migrating else []), "FIRST DIVERGENCE"]
    print(table(rows, headers))
    print()
    for label, group in (
        ("open", [c for c in checks if c.status == "running"]),
        ("closed", [c for c in checks if c.status != "running"]),
    ):
        if not group and label == "closed":
            continue
        verdicts: dict[str, int] = {}
        for c in group:
            verdicts[c.verdict] = verdicts.get(c.verdict, 0) + 1
        summary = ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())) or "none"
        note = " (closed runs never move: they gate nothing)" if label == "closed" else ""
        print(f"{len(group)} {label} run(s): {summary}{note}")
    if migrating:
        moved = sum(1 for c in checks if c.outcome == "migrated")
        print(f"{moved} migrated; the others stay on their version")


def _divergence(c: RunCheck) -> str:
    if c.verdict == "incompatible":
        return (
            f"command {c.position} (event {c.seq}): history has {c.recorded},"
            f" the candidate issued {c.issued}"
        )
    return compact(c.detail, 80) if c.detail else "-"


def check_json(c: RunCheck) -> dict[str, Any]:
    return {
        "run_id": c.run_id,
        "status": c.status,
        "verdict": c.verdict,
        "position": c.position,
        "seq": c.seq,
        "recorded": c.recorded,
        "issued": c.issued,
        "detail": c.detail,
        "checked_seq": c.checked_seq,
        "outcome": c.outcome or None,
    }
