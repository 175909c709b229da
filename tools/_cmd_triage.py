"""`amber triage ...`: see why runs are stuck, take them home, and release them — audited.

Exit codes: 0 done; 2 refused (bad input, not authorised, nothing to triage: the message says
why and nothing changed); 3 when a bulk command left a run unreleased, or when `replay` did not
reproduce the recorded failure (a pipeline can gate on it). Operator commands send the token in
`$AMBER_OPERATOR_TOKEN` (required when the server checks tokens).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amber.abi import InvalidInput, pack
from amber.history import TaskState, amber_home
from amber.runtime.client import AmberClient
from amber.runtime.model import Bundle, TriageOutcome

from . import _output as out
from ._operator import operator_name

if TYPE_CHECKING:
    from amber.surgical_pool import SandboxFactory

_WIDTH = 12


def _since(moment: Any) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def list_troubled(client: AmberClient, args: argparse.Namespace) -> int:
    runs = client.list_troubled(
        tenant=args.tenant or "", fingerprint=args.fingerprint or "", limit=args.limit
    )
    if args.json:
        out.emit_list(
            "runs",
            [
                {
                    "run": out.run_json(t.run),
                    "state": "suspended" if t.run.suspension else "poisoned",
                    "task_id": t.task_id,
                    "task_kind": t.task_kind,
                    "step": t.step,
                    "pool": t.pool,
                    "reason": t.reason,
                    "fingerprint": t.fingerprint,
                    "crashes": t.crashes,
                    "since": t.since.isoformat(),
                }
                for t in runs
            ],
        )
        return 0
    every = args.tenant == "*"  # every tenant's: say which run is whose
    rows = [
        [t.run.run_id, *([t.run.tenant] if every else []), t.run.workflow_type,
         t.run.digest[:_WIDTH], "suspended" if t.run.suspension else "poisoned",
         f"{t.task_kind or '-'}:{'-' if t.step is None else t.step}", str(t.crashes),
         _since(t.since), t.fingerprint or "-", out.compact(t.reason, 60)]
        for t in runs
    ]  # fmt: skip
    header = ["RUN", *(["TENANT"] if every else []), "TYPE", "VERSION", "STATE", "TASK"]
    header += ["CRASHES", "SINCE", "FINGERPRINT", "REASON"]
    print(out.table(rows, header) if rows else "no suspended or poisoned runs")
    return 0


def show(client: AmberClient, args: argparse.Namespace) -> int:
    desc = client.describe(args.run_id, tenant=args.tenant or "")
    if args.json:
        out.emit_json(out.description_json(desc))
        return 0
    run = desc.run
    print(f"run           {run.run_id} ({run.workflow_type}, {run.status.value})")
    print(f"version       {run.digest}")
    if run.suspension:
        s = run.suspension
        print(f"suspended     since {_since(s.since)}: {s.reason}")
        print(f"fingerprint   {s.fingerprint or '-'}")
    for t in desc.tasks:
        crash = t.crash
        line = f"task {t.task_id:<8} {t.kind.value}:{t.name} pool={t.pool} attempt={t.attempt}"
        if crash is not None:
            step = "-" if crash.step is None else crash.step
            line += f" crashes={crash.count} at step {step} fingerprint={crash.fingerprint}"
        if t.poisoned_at is not None:
            line += f" poisoned {_since(t.poisoned_at)} ({t.poison_reason})"
            if not run.suspension and t.state is TaskState.PENDING:
                line += f"; the surgical pool tries it next at {_since(t.visible_at)}"
        print(line)
    if not desc.recent_failures:
        print("no failures recorded")
        return 0
    rows = [
        [_since(f.created_at), f.kind, "-" if f.cmd is None else str(f.cmd), str(f.attempt),
         f.pool or "-", f.reason, f.trap_code or "-", out.fuel_text(f.reason, f.fuel_used),
         str(f.memory_bytes or 0), f.fingerprint or "-", f.trace_id or "-"]
        for f in desc.recent_failures
    ]  # fmt: skip
    header = ["AT", "KIND", "STEP", "ATTEMPT", "POOL", "REASON", "TRAP", "FUEL", "MEMORY"]
    print(out.table(rows, [*header, "FINGERPRINT", "TRACE"]))
    newest = desc.recent_failures[0]
    print(f"last failure  {newest.message}")
    if newest.host_calls:
        print(f"last {len(newest.host_calls)} host calls (oldest first):")
        for call in newest.host_calls:
            print(f"  {call}")
    return 0


def export(client: AmberClient, args: argparse.Namespace) -> int:
    data = client.export_run(args.run_id, operator=operator_name(args), tenant=args.tenant or "")
    bundle = Bundle.decode(data)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)  # as `amber build -o` does
    output.write_bytes(data)
    with_repro = sum(1 for f in bundle.failures if f.repro)
    if args.json:
        out.emit_json(
            {"file": str(args.output), "bytes": len(data), "events": len(bundle.events),
             "modules": len(bundle.modules), "failures": len(bundle.failures),
             "replayable": with_repro}
        )  # fmt: skip
        return 0
    print(
        f"wrote {args.output} ({len(data)} bytes): {len(bundle.events)} events,"
        f" {len(bundle.modules)} module(s), {len(bundle.failures)} failure(s),"
        f" {with_repro} replayable"
    )
    return 0


def replay(args: argparse.Namespace) -> int:
    """Local: needs no server and no database."""
    from amber.surgical_pool import failure_to_replay, replay_bundle

    bundle = Bundle.decode(Path(args.bundle).read_bytes())
    if args.history or (args.task is None and not any(f.repro for f in bundle.failures)):
        return _replay_history(args, bundle)
    failure = failure_to_replay(bundle, args.task)
    with contextlib.ExitStack() as stack:
        make = _sandbox_factory(args, stack)
        result = replay_bundle(bundle, make, failure=failure)
    rec = failure
    doc = {
        "run_id": bundle.run.run_id,
        "task_id": rec.task_id,
        "kind": rec.kind,
        "step": rec.cmd,
        "recorded": {
            "reason": rec.reason,
            "trap_code": rec.trap_code,
            "fuel_used": rec.fuel_used,
            "fuel_exact": out.fuel_exact(rec.reason),
        },
        "replayed": {
            "reason": result.reason,
            "trap_code": result.trap_code,
            "fuel_used": result.fuel_used,
            "memory_bytes": result.memory_bytes,
            "message": result.message,
        },
        "input_matches": result.input_matches,
        "reproduced": result.reproduced,
    }
    if args.json:
        out.emit_json(doc)
    else:
        step = "-" if rec.cmd is None else rec.cmd
        print(f"run       {bundle.run.run_id} task {rec.task_id} ({rec.kind}, step {step})")
        recorded_fuel = out.fuel_text(rec.reason, rec.fuel_used)
        print(f"recorded  {rec.reason} trap={rec.trap_code or '-'} fuel={recorded_fuel}")
        print(
            f"replayed  {result.reason} trap={result.trap_code or '-'}"
            f" fuel={out.fuel_text(result.reason, result.fuel_used)}"
        )
        print(f"          {result.message}")
        verdict = "REPRODUCED" if result.reproduced else "NOT reproduced"
        note = "" if result.input_matches else " (the rebuilt input differs from the recorded)"
        print(f"{verdict}{note}")
    return 0 if result.reproduced else 3


def _sandbox_factory(args: argparse.Namespace, stack: contextlib.ExitStack) -> SandboxFactory:
    """Where a replay runs its guests: a child process (default) or this one."""
    from amber.runtime.sandbox import Sandbox, SandboxEngine, SandboxRunner
    from amber.surgical_pool import IsolatedSandbox

    if args.artifacts:
        artifacts = Path(args.artifacts)
    elif args.fresh:
        artifacts = Path(stack.enter_context(tempfile.TemporaryDirectory()))
    else:
        artifacts = amber_home() / "artifacts"
    if args.in_process:
        engine = SandboxEngine(artifacts)
        stack.callback(engine.close)

        def in_process(source: Any, clock: Any) -> SandboxRunner:
            return Sandbox(engine, clock, source)

        return in_process

    def isolated(source: Any, clock: Any) -> SandboxRunner:
        sandbox = IsolatedSandbox(source, clock, artifact_dir=artifacts)
        stack.callback(sandbox.close)
        return sandbox

    return isolated


def _replay_history(args: argparse.Namespace, bundle: Bundle) -> int:
    """The whole history through the run's module, offline; exit 3 when it does not end as
    recorded."""
    from amber.surgical_pool import replay_history

    with contextlib.ExitStack() as stack:
        result = replay_history(bundle, _sandbox_factory(args, stack))
    doc = {
        "run_id": bundle.run.run_id,
        "events": len(bundle.events),
        "recorded": {"status": result.recorded_status},
        "replayed": {"status": result.replayed_status, "new_commands": result.new_commands},
        "result_matches": result.result_matches,
        "message": result.message,
        "reproduced": result.reproduced,
    }
    if args.json:
        out.emit_json(doc)
    else:
        print(f"run       {bundle.run.run_id} (whole history, {len(bundle.events)} events)")
        print(f"recorded  {result.recorded_status}")
        print(f"replayed  {result.replayed_status}")
        print(f"          {result.message}")
        # A whole-history replay reproduces the history, not a crash: say which.
        none = "" if any(f.repro for f in bundle.failures) else " (no failure in this bundle)"
        print(
            f"REPRODUCED: the whole history replays as recorded{none}"
            if result.reproduced
            else "NOT reproduced: the history does not replay as recorded"
        )
    return 0 if result.reproduced else 3


def _command(client: AmberClient, args: argparse.Namespace, action: str, **extra: Any) -> int:
    runs: Sequence[str] = args.runs if hasattr(args, "runs") else [args.run_id]
    fingerprint = getattr(args, "fingerprint", None) or ""
    if not runs and not fingerprint:
        raise InvalidInput("name a run, or --fingerprint for every run it poisoned")
    outcomes = client.triage(
        action,
        run_ids=list(runs),
        fingerprint=fingerprint,
        reason=args.reason,
        operator=operator_name(args),
        tenant=args.tenant or "",
        **extra,
    )
    _print_outcomes(outcomes, args)
    return 3 if any(o.outcome == "refused" for o in outcomes) else 0


def _print_outcomes(outcomes: Sequence[TriageOutcome], args: argparse.Namespace) -> None:
    if args.json:
        out.emit_list("outcomes", [_outcome_json(o) for o in outcomes])
        return
    if not outcomes:
        print("no run matched")
    for o in outcomes:
        moved = f" ({o.from_digest[:_WIDTH]} -> {o.to_digest[:_WIDTH]})" if o.from_digest else ""
        if o.from_digest == o.to_digest:
            moved = ""
        print(f"{o.run_id}: {o.outcome}{moved}{': ' + o.detail if o.detail else ''}")


def _outcome_json(o: TriageOutcome) -> dict[str, str]:
    return {
        "run_id": o.run_id,
        "outcome": o.outcome,
        "detail": o.detail,
        "from": o.from_digest,
        "to": o.to_digest,
    }


def resume(client: AmberClient, args: argparse.Namespace) -> int:
    return _command(client, args, "resume", version=args.version or "")


def retry(client: AmberClient, args: argparse.Namespace) -> int:
    return _command(client, args, "retry", version=args.version or "")


def skip(client: AmberClient, args: argparse.Namespace) -> int:
    try:
        value = json.loads(args.result)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"--result is not JSON: {exc}") from None
    result = pack(value)
    return _command(client, args, "skip", step=args.step, result=result)


def terminate(client: AmberClient, args: argparse.Namespace) -> int:
    return _command(client, args, "terminate")


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `amber triage ...` to the CLI."""
    triage = sub.add_parser(
        "triage", parents=[common], help="suspended and poisoned runs"
    ).add_subparsers(dest="triage_command", required=True)
    p = triage.add_parser("list", parents=[common], help="suspended and poisoned runs")
    p.add_argument("--fingerprint", help="only runs with this failure fingerprint")
    p.add_argument("--tenant", help="a tenant, or '*' for every tenant's (a '*' grant)")
    p.add_argument("--limit", type=int, default=100)
    p.set_defaults(remote=list_troubled)
    p = triage.add_parser("show", parents=[common], help="a run's failures, traces, host calls")
    p.add_argument("run_id")
    p.add_argument("--tenant")
    p.set_defaults(remote=show)
    p = triage.add_parser("export", parents=[common], help="write a self-contained bundle")
    p.add_argument("run_id")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--operator", help="who (default: your user name)")
    p.add_argument("--tenant")
    p.set_defaults(remote=export)
    p = triage.add_parser("replay", parents=[common], help="replay a bundle offline")
    p.add_argument("bundle")
    p.add_argument("--task", type=int, help="replay this task's newest failure")
    p.add_argument("--artifacts", help="compiled module cache (default $AMBER_HOME/artifacts)")
    p.add_argument("--fresh", action="store_true", help="compile into a temporary cache")
    p.add_argument("--in-process", action="store_true", help="no separate sandbox process")
    p.add_argument(
        "--history",
        action="store_true",
        help="replay the whole history and compare the outcome (the default for a bundle"
        " without failures)",
    )
    p.set_defaults(local=replay)

    def command(name: str, text: str, *, bulk: bool = True) -> argparse.ArgumentParser:
        p = triage.add_parser(name, parents=[common], help=text)
        if bulk:
            p.add_argument("runs", nargs="*", help="run ids or workflow ids")
            p.add_argument("--fingerprint", help="every run this failure fingerprint poisoned")
        else:
            p.add_argument("run_id")
        p.add_argument("--reason", required=True, help="why (recorded in the run's history)")
        p.add_argument("--operator", help="who (default: your user name)")
        p.add_argument("--tenant")
        return p

    p = command("resume", "continue a suspended or poisoned run, optionally on a fixed version")
    p.add_argument("--version", help="fixed version (digest, prefix or label): replay-gated")
    p.set_defaults(remote=resume)
    p = command("retry", "run a poisoned task again now (on --version, replay-gated)")
    p.add_argument("--version", help="fixed version (digest, prefix or label): replay-gated")
    p.set_defaults(remote=retry)
    p = command("skip", "complete a poisoned activity with a given result", bulk=False)
    p.add_argument("--step", type=int, required=True, help="the activity's command index")
    p.add_argument("--result", required=True, help="its result, as JSON")
    p.set_defaults(remote=skip)
    p = command("terminate", "close runs as terminated")
    p.set_defaults(remote=terminate)
