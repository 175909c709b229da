"""`amber`: the command-line entry point (argument parsing and dispatch only)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from amber.abi import AmberError

from . import (
    _cmd_approvals,
    _cmd_audit,
    _cmd_bench,
    _cmd_client,
    _cmd_dev,
    _cmd_processes,
    _cmd_triage,
    _cmd_versions,
)
from ._build import BuildError, build_module
from ._operator import operator_token

SERVER_ENV = "AMBER_SERVER"


def _build(args: argparse.Namespace) -> int:
    source = Path(args.source)
    output = Path(args.output) if args.output else source.with_suffix(".wasm")
    defines = dict(d.split("=", 1) if "=" in d else (d, "1") for d in args.define)
    result = build_module(source, output, defines=defines)
    if args.json:
        from ._output import emit_json

        emit_json({"output": str(result.output), "size": result.size, "sha256": result.sha256,
                   "manifest": dict(result.manifest)})  # fmt: skip
    else:
        print(f"built {result.output} ({result.size} bytes, sha256 {result.sha256})")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="amber", description="Durable execution on versioned Wasm."
    )
    parser.add_argument(
        "--server",
        default=os.environ.get(SERVER_ENV, "127.0.0.1:7233"),
        help="server address (default $AMBER_SERVER or 127.0.0.1:7233)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    # Also accepted after the subcommand (`amber run list --json`), as users type it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "dev", parents=[common], help="embedded PostgreSQL + server + worker + a demo run"
    )
    p.add_argument("--home", default=os.environ.get("AMBER_HOME", ".amber"))
    p.add_argument("--listen", default="127.0.0.1:7233")
    p.add_argument("--once", action="store_true", help="exit after the demo run")
    p.add_argument("--no-demo", action="store_true")
    p.set_defaults(local=_cmd_dev.dev)

    p = sub.add_parser(
        "server", parents=[common], help="run the gRPC server (AMBER_DATABASE_URL or embedded)"
    )
    p.add_argument("--listen", default="127.0.0.1:7233")
    p.add_argument("--port-file", help="write the bound port here (with --listen host:0)")
    p.add_argument("--lease-seconds", type=float, default=30.0)
    p.add_argument("--db-pool", type=int, default=16)
    p.add_argument("--approvals-listen", help="serve the approval page on HOST:PORT")
    p.add_argument("--approvals-url", help="the page's public URL, for the links sent out")
    p.set_defaults(local=_cmd_processes.serve)

    p = sub.add_parser("worker", parents=[common], help="run a worker polling the server")
    p.add_argument("--pool", choices=["main", "surgical"], default="main")
    p.add_argument(
        "--slots", type=int, default=8, help="tasks run at once (the surgical pool runs one)"
    )
    p.add_argument("--queue", default="main")
    p.add_argument("--artifacts", help="precompiled module cache (default $AMBER_HOME/artifacts)")
    p.add_argument("--fuel", type=int, default=1_000_000_000)
    p.add_argument(
        "--memory-mb", type=int, help="linear memory per activation (main 64, surgical 32)"
    )
    p.add_argument("--workflow-deadline", type=float, default=5.0, help="seconds")
    p.add_argument("--activity-deadline", type=float, default=60.0, help="seconds")
    p.add_argument("--poll-wait", type=float, default=5.0, help="long-poll seconds")
    p.add_argument("--connect-timeout", type=float, default=30.0)
    p.add_argument(
        "--worker-id",
        help="a stable identity, unique among live workers (e.g. the pod or unit name): on start"
        " the worker gives up the leases its previous process held instead of waiting for them"
        " to expire (default host:pid, nothing released)",
    )
    p.set_defaults(local=_cmd_processes.work)

    p = sub.add_parser("build", parents=[common], help="compile a C guest to an Amber module")
    p.add_argument("source")
    p.add_argument("-o", "--output")
    p.add_argument("-D", "--define", action="append", default=[], metavar="NAME[=VALUE]")
    p.set_defaults(local=_build)

    p = sub.add_parser(
        "bench",
        parents=[common],
        help="N workflows x K activities (--peers: beside Temporal and DBOS); writes JSON",
    )
    _cmd_bench.add_arguments(p)
    p.set_defaults(local=_cmd_bench.main)

    _add_versions(sub, common)

    run = sub.add_parser(
        "run", aliases=["runs"], parents=[common], help="workflow runs"
    ).add_subparsers(dest="run_command", required=True)
    p = run.add_parser("start", parents=[common])
    p.add_argument("workflow_type")
    p.add_argument("--input", help="JSON, or @file.json")
    p.add_argument("--id", help="workflow id (idempotency key)")
    p.add_argument("--version", help="pin to this digest or prefix")
    p.add_argument("--tenant")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for the result")
    p.add_argument("--execution-timeout", type=float, help="seconds before the run times out")
    p.add_argument("--signal", help="signal-with-start: deliver this signal (start if needed)")
    p.add_argument("--signal-payload", help="JSON payload of --signal")
    p.set_defaults(remote=_cmd_client.run_start)
    p = run.add_parser("signal", parents=[common], help="send a signal to a run")
    p.add_argument("run_id", help="run id or workflow id")
    p.add_argument("name")
    p.add_argument("--payload", help="JSON")
    p.add_argument("--request-id", help="deduplication key")
    p.add_argument("--tenant", default="")
    p.set_defaults(remote=_cmd_client.run_signal)
    p = run.add_parser("query", parents=[common], help="read a value the workflow published")
    p.add_argument("run_id", help="run id or workflow id")
    p.add_argument("name")
    p.add_argument("--wait", type=float, default=10.0, help="seconds to wait for a worker")
    p.add_argument("--tenant", default="")
    p.set_defaults(remote=_cmd_client.run_query)
    for name, fn, text in (
        ("cancel", _cmd_client.run_cancel, "ask the workflow to cancel (it may compensate)"),
        ("terminate", _cmd_client.run_terminate, "close the run at once"),
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
    p.set_defaults(remote=_cmd_client.run_reset)
    for name, fn in (("describe", _cmd_client.run_describe), ("history", _cmd_client.run_history)):
        p = run.add_parser(name, parents=[common])
        p.add_argument("run_id", help="run id or workflow id")
        p.add_argument("--tenant", default="")
        p.set_defaults(remote=fn)
    p = run.add_parser("result", parents=[common])
    p.add_argument("run_id", help="run id or workflow id")
    p.add_argument("--tenant", default="")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for the run to close")
    p.set_defaults(remote=_cmd_client.run_result)
    p = run.add_parser("list", parents=[common])
    p.add_argument("--status", choices=["running", "completed", "failed"])
    p.add_argument("--type")
    p.add_argument("--tenant")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--page")
    p.set_defaults(remote=_cmd_client.run_list)
    p = run.add_parser(
        "migrate", parents=[common], help="move open runs that pass a replay check to a version"
    )
    p.add_argument("--to", required=True, help="candidate digest, prefix or label")
    p.add_argument("--type", required=True, help="workflow type")
    p.add_argument("--run", action="append", help="only this run (repeatable; default: all open)")
    p.add_argument("--reason", required=True)
    p.add_argument("--operator", help="who (default: your user name)")
    p.add_argument("--wait", type=float, default=60.0, help="seconds to wait for the checks")
    p.set_defaults(remote=_cmd_versions.migrate)
    _cmd_triage.register(sub, common)
    _cmd_approvals.register(sub, common)
    _cmd_audit.register(sub, common)
    return parser


def _add_versions(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    versions = sub.add_parser("versions", parents=[common], help="module versions").add_subparsers(
        dest="versions_command", required=True
    )
    p = versions.add_parser("upload", parents=[common], help="validate and store a module")
    p.add_argument("file")
    p.add_argument("--promote", action="store_true", help="make it current for its workflow types")
    p.add_argument("--label", help="name it, e.g. orders@2.0 (a label names one digest forever)")
    p.set_defaults(remote=_cmd_versions.upload)
    p = versions.add_parser("list", parents=[common])
    p.set_defaults(remote=_cmd_versions.list_all)
    p = versions.add_parser("show", parents=[common], help="one version, with its drain status")
    p.add_argument("ref", help="digest, prefix or label")
    p.set_defaults(remote=_cmd_versions.show)
    p = versions.add_parser("label", parents=[common], help="name a version")
    p.add_argument("ref", help="digest, prefix or label")
    p.add_argument("label")
    p.add_argument("--operator", help="who (default: your user name)")
    p.set_defaults(remote=_cmd_versions.label)

    def change(name: str, text: str) -> argparse.ArgumentParser:
        p = versions.add_parser(name, parents=[common], help=text)
        p.add_argument("type", help="workflow type")
        p.add_argument("--reason", default="")
        p.add_argument("--operator", help="who (default: your user name)")
        return p

    p = change("promote", "make a version current: new runs start on it")
    p.add_argument("ref", help="digest, prefix or label")
    p.set_defaults(remote=_cmd_versions.promote)
    p = change("ramp", "send a share of new workflow ids to a candidate version")
    p.add_argument("ref", help="digest, prefix or label")
    p.add_argument("percent", type=int, help="0-100")
    p.set_defaults(remote=_cmd_versions.ramp)
    p = change("rollback", "drop the candidate, or return to the previous current version")
    p.set_defaults(remote=_cmd_versions.rollback)
    p = change("auto-upgrade", "move open runs on their next activation (after a passing check)")
    p.add_argument("ref", nargs="?", help="digest, prefix or label")
    p.add_argument("--off", action="store_true", help="stop automatic upgrades")
    p.set_defaults(remote=_cmd_versions.auto_upgrade)
    p = versions.add_parser("status", parents=[common], help="a type's versions side by side")
    p.add_argument("type", help="workflow type")
    p.set_defaults(remote=_cmd_versions.status)
    p = versions.add_parser("retire", parents=[common], help="retire a version nothing uses")
    p.add_argument("ref", help="digest, prefix or label")
    p.add_argument("--reason", required=True)
    p.add_argument("--operator", help="who (default: your user name)")
    p.set_defaults(remote=_cmd_versions.retire)
    p = versions.add_parser("check", parents=[common], help="replay runs on a candidate version")
    p.add_argument("candidate", help="digest, prefix or label")
    p.add_argument("--type", required=True, help="workflow type")
    p.add_argument("--run", action="append", help="only this run (repeatable; default: all open)")
    p.add_argument("--closed-sample", type=int, default=20, help="recent closed runs to check too")
    p.add_argument("--wait", type=float, default=60.0, help="seconds to wait for the checks")
    p.set_defaults(remote=_cmd_versions.check)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        local: Callable[[argparse.Namespace], int] | None = getattr(args, "local", None)
        if local is not None:
            return local(args)
        from amber.runtime.client import AmberClient

        token = operator_token()
        with AmberClient(args.server, operator_token=token) as client:
            return int(args.remote(client, args))
    except (AmberError, BuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
