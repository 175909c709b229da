"""`amber run ...` (alias `runs`): a workflow run's life, as thin clients of the gRPC API.

Exit codes: 0 done; 2 refused (the message says why); 3 when the run ended without a result
(failed, cancelled, terminated, timed out: `start --wait`, `result`) or `migrate` left a run
unmoved; 4 when `start --wait` or `result` found the run still open.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from amber.abi import InvalidInput, jsonable, payload_json
from amber.history import Run, RunStatus
from amber.runtime.client import AmberClient, encode

from . import _output as out
from ._operator import operator_name


def _parse_input(text: str | None) -> bytes:
    if text is None:
        return encode(None)
    if text.startswith("@"):
        text = Path(text[1:]).read_text("utf-8")
    try:
        return encode(json.loads(text))
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"--input is not valid JSON: {exc}") from None


def _json_option(text: str | None, flag: str) -> object:
    """An option that holds JSON (`--payload`, `--signal-payload`): None when not given."""
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{flag} is not valid JSON: {exc}") from None


def run_start(client: AmberClient, args: argparse.Namespace) -> int:
    started = client.start_run(
        args.workflow_type,
        raw_input=_parse_input(args.input),
        workflow_id=args.id or "",
        version=args.version or "",
        tenant=args.tenant or "",
        execution_timeout_s=args.execution_timeout or 0.0,
        signal=args.signal or "",
        signal_payload=_json_option(args.signal_payload, "--signal-payload"),
        signal_request_id=args.signal_request_id or "",
    )
    run = started.run
    if args.wait:  # what a continue-as-new chain started here ends with, as `result` shows
        run = client.chain_result(run.run_id, wait_s=args.wait)
    if args.json:
        doc = {**out.run_json(run), "already_started": started.already_started}
        if args.signal:
            doc.update(signalled=started.signalled, duplicate=started.duplicate)
        out.emit_json(doc)
        return _exit_code(run) if args.wait else 0
    if started.already_started:
        print(f"workflow id {run.workflow_id} already started run {run.run_id}")
    if started.duplicate:
        print("signal not delivered: its request id was delivered before")
    print(out.run_text(run))
    return _exit_code(run) if args.wait else 0


def _exit_code(run: Run) -> int:
    """0 completed (or continued as a new run), 3 ended without a result, 4 still open."""
    if run.status is RunStatus.RUNNING:
        return 4
    return 0 if run.status in (RunStatus.COMPLETED, RunStatus.CONTINUED_AS_NEW) else 3


def run_describe(client: AmberClient, args: argparse.Namespace) -> int:
    desc = client.describe(args.run_id, tenant=args.tenant)
    if args.json:
        out.emit_json(out.description_json(desc))
        return 0
    print(out.run_text(desc.run))
    if desc.run.suspension is not None:
        s = desc.run.suspension
        print(f"SUSPENDED since {s.since:%Y-%m-%d %H:%M:%S}: {s.reason} (see `amber triage show`)")
    for t in desc.tasks:
        if t.poisoned_at is not None and desc.run.suspension is None:
            print(
                f"POISONED since {t.poisoned_at:%Y-%m-%d %H:%M:%S}: {t.kind.value} task"
                f" {t.task_id}, {t.poison_reason} (see `amber triage show`)"
            )
    if desc.tasks:
        print("\nopen tasks")
        rows = [
            [str(t.task_id), t.kind.value, t.name, "-" if t.cmd is None else str(t.cmd),
             t.queue, t.state.value, out.attempts_text(t), t.pool,
             str(t.crash.count) if t.crash else "0", t.lease_owner or "-",
             t.last_failure or "-"]
            for t in desc.tasks
        ]  # fmt: skip
        header = ["TASK", "KIND", "NAME", "STEP", "QUEUE", "STATE", "ATTEMPT", "POOL", "CRASHES"]
        header.append("LEASE")
        print(out.table(rows, [*header, "LAST FAILURE"]))
        for queue, pool in desc.unserved:
            print(
                f"note: no {pool} worker polled queue {out.printable(queue)!r} on this server"
                " lately: nobody may be serving it (`amber status` lists the workers)"
            )
    if desc.timers:
        print("\ntimers")
        rows = [
            [t.timer_id, t.kind.value, t.fire_at.strftime("%Y-%m-%d %H:%M:%S")] for t in desc.timers
        ]
        print(out.table(rows, ["TIMER", "KIND", "FIRES AT"]))
    if desc.discarded:
        print("\ndiscarded deliveries (recorded, not applied)")
        rows = [[d.created_at.strftime("%H:%M:%S"), d.kind, d.detail] for d in desc.discarded]
        print(out.table(rows, ["TIME", "KIND", "DETAIL"]))
    if desc.recent_failures:
        print("\nrecent failures")
        rows = [
            [f.created_at.strftime("%H:%M:%S"), f.kind, "-" if f.cmd is None else str(f.cmd),
             str(f.attempt), f.reason, f.trap_code or "-", out.fuel_text(f.reason, f.fuel_used),
             out.compact(f.message, 70)]
            for f in desc.recent_failures
        ]  # fmt: skip
        print(
            out.table(
                rows, ["TIME", "KIND", "STEP", "ATTEMPT", "REASON", "TRAP", "FUEL", "MESSAGE"]
            )
        )
    return 0


def run_history(client: AmberClient, args: argparse.Namespace) -> int:
    events = client.history(args.run_id, tenant=args.tenant)
    if args.json:
        out.emit_list("events", [out.event_json(e) for e in events])
    else:
        print(out.history_text(events))
    return 0


def run_result(client: AmberClient, args: argparse.Namespace) -> int:
    run = client.chain_result(args.run_id, wait_s=args.wait, tenant=args.tenant)
    if args.json:
        out.emit_json(out.run_json(run))
    elif run.status is RunStatus.COMPLETED:
        print(out.compact(payload_json(run.result), 10_000))
    elif run.status is RunStatus.RUNNING:
        print(f"run {run.run_id} is still running")
    elif run.status is RunStatus.CONTINUED_AS_NEW:
        print(f"run {run.run_id} continued as a new run (its workflow id names the current one)")
    else:
        detail = f": {run.error_type}: {run.error_message}" if run.error_type else ""
        print(f"{run.status.value}{detail}")
    return _exit_code(run)


def run_list(client: AmberClient, args: argparse.Namespace) -> int:
    runs, token = client.list_runs(
        tenant=args.tenant or "", status=args.status or "", workflow_type=args.type or "",
        limit=args.limit, page_token=args.page or "",
    )  # fmt: skip
    if args.json:
        out.emit_list("runs", [out.run_json(r) for r in runs], token)
        return 0
    rows = [
        [r.run_id, r.workflow_type, out.clip(r.workflow_id, 24), r.status.value, r.digest[:12],
         r.created_at.strftime("%Y-%m-%d %H:%M:%S")]
        for r in runs
    ]  # fmt: skip
    print(out.table(rows, ["RUN", "TYPE", "WORKFLOW ID", "STATUS", "VERSION", "CREATED"]))
    if token:
        print(f"\nmore: --page {token}")
    return 0


def run_signal(client: AmberClient, args: argparse.Namespace) -> int:
    payload = _json_option(args.payload, "--payload")
    delivered = client.signal(
        args.run_id, args.name, payload, request_id=args.request_id or "", tenant=args.tenant
    )
    if args.json:
        out.emit_json({"delivered": delivered, "duplicate": not delivered})
    else:
        print("signal delivered" if delivered else "duplicate delivery ignored (same request id)")
    return 0


def run_query(client: AmberClient, args: argparse.Namespace) -> int:
    value = client.query(args.run_id, args.name, wait_s=args.wait, tenant=args.tenant)
    if args.json:
        out.emit_json(jsonable(value))
    else:
        print(out.compact(jsonable(value), 10_000))
    return 0


def run_cancel(client: AmberClient, args: argparse.Namespace) -> int:
    requested = client.cancel(
        args.run_id, reason=args.reason, operator=operator_name(args), tenant=args.tenant
    )
    if args.json:
        out.emit_json(
            {"run": args.run_id, "requested": requested, "already_requested": not requested}
        )
    else:
        print("cancellation requested" if requested else "cancellation was already requested")
    return 0


def run_terminate(client: AmberClient, args: argparse.Namespace) -> int:
    client.terminate(
        args.run_id, reason=args.reason, operator=operator_name(args), tenant=args.tenant
    )
    if args.json:
        out.emit_json({"run": args.run_id, "terminated": True})
    else:
        print("terminated")
    return 0


def run_reset(client: AmberClient, args: argparse.Namespace) -> int:
    run = client.reset(
        args.run_id,
        to_event=args.to_event,
        reason=args.reason,
        operator=operator_name(args),
        tenant=args.tenant,
    )
    if args.json:
        out.emit_json(out.run_json(run))
    else:
        print(f"new run {run.run_id} replays events 1..{args.to_event} and goes on from there")
    return 0


def migrate(client: AmberClient, args: argparse.Namespace) -> int:
    candidate, checks = client.migrate_runs(
        args.to,
        args.type,
        run_ids=args.run or (),
        reason=args.reason,
        operator=operator_name(args),
        wait_s=args.wait,
    )
    out.emit_checks(candidate, checks, as_json=args.json, migrating=True)
    # 0 only when every run moved (or had nothing to move).
    return 3 if any(c.outcome not in ("migrated", "skipped") for c in checks) else 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `amber run ...` (and its alias `amber runs ...`) to the CLI."""
    run = sub.add_parser(
        "run", aliases=["runs"], parents=[common], help="workflow runs"
    ).add_subparsers(dest="run_command", required=True)
    p = run.add_parser("start", parents=[common], help="start a run (idempotent on --id)")
    p.add_argument("workflow_type")
    p.add_argument("--input", help="JSON, or @file.json")
    p.add_argument("--id", help="workflow id (idempotency key)")
    p.add_argument("--version", help="pin to this digest or prefix")
    p.add_argument("--tenant")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for the result")
    p.add_argument("--execution-timeout", type=float, help="seconds before the run times out")
    p.add_argument("--signal", help="signal-with-start: deliver this signal (start if needed)")
    p.add_argument("--signal-payload", help="JSON payload of --signal")
    p.add_argument(
        "--signal-request-id", help="deduplication key of --signal (a redelivery is reported)"
    )
    p.set_defaults(remote=run_start)
    p = run.add_parser("signal", parents=[common], help="send a signal to a run")
    p.add_argument("run_id", help="run id or workflow id")
    p.add_argument("name")
    p.add_argument("--payload", help="JSON")
    p.add_argument("--request-id", help="deduplication key")
    p.add_argument("--tenant", default="")
    p.set_defaults(remote=run_signal)
    p = run.add_parser("query", parents=[common], help="read a value the workflow published")
    p.add_argument("run_id", help="run id or workflow id")
    p.add_argument("name")
    p.add_argument("--wait", type=float, default=10.0, help="seconds to wait for a worker")
    p.add_argument("--tenant", default="")
    p.set_defaults(remote=run_query)
    for name, fn, text in (
        ("cancel", run_cancel, "ask the workflow to cancel (it may compensate)"),
        ("terminate", run_terminate, "close the run at once"),
    ):
        p = run.add_parser(name, parents=[common], help=text)
        p.add_argument("run_id", help="run id or workflow id")
        p.add_argument("--reason", required=name == "terminate", default="")
        p.add_argument("--operator", help="who (default: your user name)")
        p.add_argument("--tenant", default="")
        p.set_defaults(remote=fn)
    p = run.add_parser("reset", parents=[common], help="re-run from an earlier point of history")
    p.add_argument("run_id", help="run id or workflow id")
    p.add_argument("--to-event", type=int, required=True, help="keep events 1..N")
    p.add_argument("--reason", required=True)
    p.add_argument("--operator", help="who (default: your user name)")
    p.add_argument("--tenant", default="")
    p.set_defaults(remote=run_reset)
    for name, fn, text in (
        ("describe", run_describe, "why a run is where it is: tasks, timers, failures"),
        ("history", run_history, "a run's events, payloads decoded"),
    ):
        p = run.add_parser(name, parents=[common], help=text)
        p.add_argument("run_id", help="run id or workflow id")
        p.add_argument("--tenant", default="")
        p.set_defaults(remote=fn)
    p = run.add_parser("result", parents=[common], help="a run's result (waiting with --wait)")
    p.add_argument("run_id", help="run id or workflow id")
    p.add_argument("--tenant", default="")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for the run to close")
    p.set_defaults(remote=run_result)
    p = run.add_parser("list", parents=[common], help="runs, newest first, with filters")
    p.add_argument("--status", choices=[s.value for s in RunStatus])
    p.add_argument("--type")
    p.add_argument("--tenant")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--page")
    p.set_defaults(remote=run_list)
    p = run.add_parser(
        "migrate", parents=[common], help="move open runs that pass a replay check to a version"
    )
    p.add_argument("--to", required=True, help="candidate digest, prefix or label")
    p.add_argument("--type", required=True, help="workflow type")
    p.add_argument("--run", action="append", help="only this run (repeatable; default: all open)")
    p.add_argument("--reason", required=True)
    p.add_argument("--operator", help="who (default: your user name)")
    p.add_argument("--wait", type=float, default=60.0, help="seconds to wait for the checks")
    p.set_defaults(remote=migrate)
