"""`amber versions ...`: the registry and rollouts, as thin gRPC clients.

Exit codes: 0 done; 2 refused (bad input, conflict: the message says why and nothing changed);
3 when `check` found a run not compatible with the candidate, so a pipeline can gate on it
(`amber run migrate`, which moves the runs that pass, is a run verb: `_cmd_runs`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from amber.abi import InvalidInput
from amber.runtime.client import AmberClient
from amber.versions import ModuleVersion, TypeStatus

from . import _output as out
from ._operator import operator_name

_DIGEST_WIDTH = 16


def _short(digest: str | None) -> str:
    return digest[:_DIGEST_WIDTH] if digest else "-"


def upload(client: AmberClient, args: argparse.Namespace) -> int:
    wasm = Path(args.file).read_bytes()
    result = client.upload_version(
        wasm,
        promote=args.promote,
        label=args.label or "",
        operator=operator_name(args),
        reason=args.reason or "",
    )
    if args.json:
        out.emit_json({**out.version_json(result.version), "created": result.created})
        return 0
    verb = "uploaded" if result.created else "already stored"
    v = result.version
    print(f"{verb} {v.digest} ({v.size} bytes)")
    if v.retired_at is not None:  # storing it again does not bring it back
        print(f"retired       {v.retired_at:%Y-%m-%d %H:%M:%S}: nothing starts or moves onto it")
    _print_roles(v)
    return 0


def list_all(client: AmberClient, args: argparse.Namespace) -> int:
    versions = client.list_versions()
    if args.json:
        out.emit_list("versions", [out.version_json(v) for v in versions])
        return 0
    rows = [
        [_short(v.digest), ",".join(v.labels) or "-", str(v.size),
         v.uploaded_at.strftime("%Y-%m-%d %H:%M:%S"), ",".join(v.manifest.workflows),
         ",".join(v.current_for) or "-", ",".join(v.candidate_for) or "-",
         "retired" if v.retired_at else ""]
        for v in versions
    ]  # fmt: skip
    headers = ["DIGEST", "LABELS", "BYTES", "UPLOADED", "WORKFLOWS", "CURRENT FOR", "CANDIDATE FOR"]
    print(out.table(rows, [*headers, ""]))
    return 0


def show(client: AmberClient, args: argparse.Namespace) -> int:
    v = client.get_version(args.ref)
    if args.json:
        out.emit_json(out.version_json(v))
        return 0
    print(f"digest        {v.digest}")
    print(f"size          {v.size} bytes")
    print(f"uploaded      {v.uploaded_at.isoformat()}")
    print(f"abi           {v.manifest.abi}")
    print(f"activities    {', '.join(v.manifest.activities) or '-'}")
    _print_roles(v)
    if v.retired_at:
        print(f"retired       {v.retired_at.isoformat()}")
    if v.use is not None:
        print(
            f"drain         {v.use.running} open run(s) pinned, {v.use.tasks} task(s) queued,"
            f" {v.use.closed} closed run(s)"
        )
        if v.retired_at:
            state = "already retired"
        elif v.retire_blockers:
            state = "cannot be retired now: " + "; ".join(v.retire_blockers)
        else:
            state = "can be retired now"
        print(f"retire        {state}")
    return 0


def _print_roles(v: ModuleVersion) -> None:
    print(f"labels        {', '.join(v.labels) or '-'}")
    print(f"workflows     {', '.join(v.manifest.workflows) or '-'}")
    print(f"current for   {', '.join(v.current_for) or '-'}")
    print(f"candidate for {', '.join(v.candidate_for) or '-'}")


def label(client: AmberClient, args: argparse.Namespace) -> int:
    v = client.label_version(args.ref, args.label, operator=operator_name(args))
    if args.json:
        out.emit_json(out.version_json(v))
    else:
        print(f"{args.label} -> {v.digest}")
    return 0


def promote(client: AmberClient, args: argparse.Namespace) -> int:
    status = _change(client, args, "promote", args.ref)
    return _print_status(status, args, f"{args.type}: new runs start on {_short(args.ref)}…")


def ramp(client: AmberClient, args: argparse.Namespace) -> int:
    status = _change(client, args, "ramp", args.ref, percent=args.percent)
    text = f"{args.type}: {args.percent}% of new workflow ids start on the candidate"
    return _print_status(status, args, text)


def rollback(client: AmberClient, args: argparse.Namespace) -> int:
    status = _change(client, args, "rollback", "")
    return _print_status(status, args, f"{args.type}: rolled back")


def auto_upgrade(client: AmberClient, args: argparse.Namespace) -> int:
    if args.off:
        status = _change(client, args, "stop_auto_upgrade", "")
        return _print_status(status, args, f"{args.type}: automatic upgrades stopped")
    if not args.ref:
        raise InvalidInput("amber versions auto-upgrade: give a version, or --off")
    status = _change(client, args, "auto_upgrade", args.ref)
    text = f"{args.type}: open runs move on their next activation if their replay passes"
    return _print_status(status, args, text)


def _change(
    client: AmberClient, args: argparse.Namespace, action: str, ref: str, *, percent: int = 0
) -> TypeStatus:
    return client.change_rollout(
        args.type,
        action,
        ref,
        percent=percent,
        operator=operator_name(args),
        reason=args.reason or "",
    )


def status(client: AmberClient, args: argparse.Namespace) -> int:
    return _print_status(client.rollout(args.type), args, "")


def _print_status(status: TypeStatus, args: argparse.Namespace, headline: str) -> int:
    if args.json:
        out.emit_json(status_json(status))
        return 0
    if headline:
        print(headline)
    r = status.rollout
    print(f"type          {r.workflow_type}")
    print(f"current       {r.current}")
    if r.candidate:
        print(f"candidate     {r.candidate} ({r.ramp_percent}% of new workflow ids)")
    if r.previous:
        print(f"previous      {r.previous} (rollback target)")
    if r.auto_upgrade_to:
        print(f"auto-upgrade  {r.auto_upgrade_to}")
    rows = []
    for v in status.versions:
        h = v.health
        fuel = h.fuel // h.activations if h.activations else 0
        failures = ", ".join(f"{k} {n}" for k, n in sorted(h.failures.items())) or "-"
        rows.append(
            [_short(v.digest), ",".join(v.labels) or "-", v.role, str(v.use.running),
             str(h.activations), f"{100 * h.failure_rate:.1f}%", str(fuel), failures]
        )  # fmt: skip
    headers = ["DIGEST", "LABELS", "ROLE", "OPEN RUNS", "ACTIVATIONS", "FAILED", "FUEL/ACT"]
    print()
    print(out.table(rows, [*headers, "FAILURES BY REASON"]))
    return 0


def status_json(status: TypeStatus) -> dict[str, Any]:
    r = status.rollout
    return {
        "workflow_type": r.workflow_type,
        "current": r.current,
        "candidate": r.candidate,
        "ramp_percent": r.ramp_percent,
        "previous": r.previous,
        "auto_upgrade_to": r.auto_upgrade_to,
        "versions": [
            {
                "digest": v.digest,
                "labels": list(v.labels),
                "role": v.role,
                "open_runs": v.use.running,
                "closed_runs": v.use.closed,
                "activations": v.health.activations,
                "succeeded": v.health.succeeded,
                "fuel": v.health.fuel,
                "failures": dict(v.health.failures),
            }
            for v in status.versions
        ],
    }


def retire(client: AmberClient, args: argparse.Namespace) -> int:
    v = client.retire_version(args.ref, reason=args.reason, operator=operator_name(args))
    if args.json:
        out.emit_json(out.version_json(v))
    else:
        print(f"retired {v.digest}")
    return 0


def check(client: AmberClient, args: argparse.Namespace) -> int:
    candidate, checks = client.check_version(
        args.candidate,
        args.type,
        run_ids=args.run or (),
        closed_sample=args.closed_sample,
        wait_s=args.wait,
    )
    out.emit_checks(candidate, checks, as_json=args.json, migrating=False)
    # Closed runs are shown, but only open runs (the ones that could move) decide the answer.
    open_runs = [c for c in checks if c.status == "running"]
    return 3 if any(c.verdict not in ("compatible", "already_on") for c in open_runs) else 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `amber versions ...` to the CLI."""
    versions = sub.add_parser("versions", parents=[common], help="module versions").add_subparsers(
        dest="versions_command", required=True
    )
    p = versions.add_parser("upload", parents=[common], help="validate and store a module")
    p.add_argument("file")
    p.add_argument("--promote", action="store_true", help="make it current for its workflow types")
    p.add_argument("--label", help="name it, e.g. orders@2.0 (a label names one digest forever)")
    p.add_argument("--operator", help="who, for the audit log (default: your user name)")
    p.add_argument("--reason", help="why, for the audit log")
    p.set_defaults(remote=upload)
    p = versions.add_parser("list", parents=[common], help="every stored version and its roles")
    p.set_defaults(remote=list_all)
    p = versions.add_parser("show", parents=[common], help="one version, with its drain status")
    p.add_argument("ref", help="digest, prefix or label")
    p.set_defaults(remote=show)
    p = versions.add_parser("label", parents=[common], help="name a version")
    p.add_argument("ref", help="digest, prefix or label")
    p.add_argument("label")
    p.add_argument("--operator", help="who (default: your user name)")
    p.set_defaults(remote=label)

    def change(name: str, text: str) -> argparse.ArgumentParser:
        p = versions.add_parser(name, parents=[common], help=text)
        p.add_argument("type", help="workflow type")
        p.add_argument(
            "--reason", default="", help="why, for the audit log (recorded as 'no reason given')"
        )
        p.add_argument("--operator", help="who (default: your user name)")
        return p

    p = change("promote", "make a version current: new runs start on it")
    p.add_argument("ref", help="digest, prefix or label")
    p.set_defaults(remote=promote)
    p = change("ramp", "send a share of new workflow ids to a candidate version")
    p.add_argument("ref", help="digest, prefix or label")
    p.add_argument("percent", type=int, help="0-100")
    p.set_defaults(remote=ramp)
    p = change("rollback", "drop the candidate, or return to the previous current version")
    p.set_defaults(remote=rollback)
    p = change("auto-upgrade", "move open runs on their next activation (after a passing check)")
    p.add_argument("ref", nargs="?", help="digest, prefix or label")
    p.add_argument("--off", action="store_true", help="stop automatic upgrades")
    p.set_defaults(remote=auto_upgrade)
    p = versions.add_parser("status", parents=[common], help="a type's versions side by side")
    p.add_argument("type", help="workflow type")
    p.set_defaults(remote=status)
    p = versions.add_parser("retire", parents=[common], help="retire a version nothing uses")
    p.add_argument("ref", help="digest, prefix or label")
    p.add_argument("--reason", required=True)
    p.add_argument("--operator", help="who (default: your user name)")
    p.set_defaults(remote=retire)
    p = versions.add_parser("check", parents=[common], help="replay runs on a candidate version")
    p.add_argument("candidate", help="digest, prefix or label")
    p.add_argument("--type", required=True, help="workflow type")
    p.add_argument("--run", action="append", help="only this run (repeatable; default: all open)")
    p.add_argument("--closed-sample", type=int, default=20, help="recent closed runs to check too")
    p.add_argument("--wait", type=float, default=60.0, help="seconds to wait for the checks")
    p.set_defaults(remote=check)
