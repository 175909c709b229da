"""Every `amber` command keeps the promise of `--json`: a walk of the real parser.

The parser is walked for its leaf commands (`run list`, `triage skip`, ...). `WALK` holds, for
each, the arguments that exercise it in one scenario against a real server with a worker: a
rollout, runs, a shipment signalled, cancelled and terminated, poisoned runs triaged, an approval
decided, the audit log read, a short benchmark. Each runs with `--json`; stdout must parse as
JSON, and a list must have the one list shape, `{"<things>": [...], "next_page": TOKEN or null}`.
A leaf the parser has and `WALK` lacks (or the reverse) fails the test: a new verb comes with its
entry. `UNWALKED` names the commands left out and why. Separately, every leaf's usage error under
`--json` must be the error object (`{"error": {"type", "message"}}` on stderr, exit 2).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from amber.history import EventType
from amber.runtime.client import AmberClient
from amber.runtime.model._settings import EngineSettings, PoisonPolicy
from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.worker._worker import Worker, WorkerSettings
from amber.tools.cli import _parser, main
from tests.conftest import ROOT, InProcessServer, wait_for

Command = tuple[str, ...]
FIELD = re.compile(r"\{(\w+)\}")
"""`{name}` in a step's words: a value of the scenario (JSON's braces hold quotes, not names)."""

ORDER = '{"order_id": "W-1", "sku": "X", "quantity": 1, "amount_cents": 10}'
SHIPMENT = {"address": "1 Main St", "deadline_days": 3}
POLICY = PoisonPolicy(
    crashes_to_poison=3,
    surgical_delays=(timedelta(minutes=30),),  # no surgical worker here: they stay poisoned
    suspend_after=timedelta(hours=24),
    crash_backoff=timedelta(milliseconds=10),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """How one leaf command is exercised."""

    args: Command
    """Its words after `amber --json`; `{name}` is filled from the scenario's values."""
    shape: str = ""
    """The list's key when it prints a list; "" for a single document."""
    codes: tuple[int, ...] = (0,)
    """The exit codes it may end with here."""
    keep: Callable[[Any], dict[str, str]] | None = None
    """Values its output hands to later steps."""
    own_process: bool = False
    """Run as `python -m amber.tools.cli` (it starts processes and installs signal handlers)."""


WALK: dict[Command, Step] = {
    ("status",): Step(args=("status",)),
    ("build",): Step(
        args=("build", "{root}/abi/samples/orders.c", "-o", "{tmp}/orders.wasm", "-D", "X=1")
    ),
    # A rollout of onboard@2 over onboard@1, which one parked run is pinned to.
    ("versions", "upload"): Step(
        args=("versions", "upload", "{tmp}/rollout_v2.wasm", "--label", "onboard@2")
    ),
    ("versions", "list"): Step(args=("versions", "list"), shape="versions"),
    ("versions", "show"): Step(args=("versions", "show", "onboard@2")),
    ("versions", "label"): Step(args=("versions", "label", "onboard@2", "onboard@2.0")),
    ("versions", "ramp"): Step(
        args=("versions", "ramp", "onboard", "onboard@2", "10", "--reason", "canary")
    ),
    ("versions", "status"): Step(args=("versions", "status", "onboard")),
    ("versions", "rollback"): Step(args=("versions", "rollback", "onboard", "--reason", "wait")),
    ("versions", "check"): Step(args=("versions", "check", "onboard@2", "--type", "onboard")),
    ("versions", "promote"): Step(args=("versions", "promote", "onboard", "onboard@2")),
    ("run", "migrate"): Step(
        args=("run", "migrate", "--to", "onboard@2", "--type", "onboard", "--reason", "ship")
    ),
    ("versions", "auto-upgrade"): Step(
        args=("versions", "auto-upgrade", "onboard", "onboard@2", "--reason", "checked")
    ),
    ("versions", "retire"): Step(args=("versions", "retire", "onboard@1", "--reason", "drained")),
    # A run's life.
    ("run", "start"): Step(
        args=("run", "start", "orders", "--input", ORDER, "--id", "w-1", "--wait", "30"),
        keep=lambda doc: {"order": doc["run_id"]},
    ),
    ("run", "describe"): Step(args=("run", "describe", "{order}")),
    ("run", "history"): Step(args=("run", "history", "{order}"), shape="events"),
    ("run", "result"): Step(args=("run", "result", "{order}")),
    ("run", "list"): Step(args=("run", "list", "--limit", "2"), shape="runs"),
    ("run", "reset"): Step(args=("run", "reset", "w-1", "--to-event", "4", "--reason", "again")),
    ("run", "query"): Step(args=("run", "query", "ship-1", "status", "--wait", "20")),
    ("run", "signal"): Step(
        args=("run", "signal", "ship-1", "delivered", "--payload", '{"signed_by": "Zed"}')
    ),
    ("run", "cancel"): Step(args=("run", "cancel", "ship-2", "--reason", "not needed")),
    ("run", "terminate"): Step(args=("run", "terminate", "ship-3", "--reason", "duplicate")),
    # Four runs whose activity was poisoned by the same crash.
    ("triage", "list"): Step(args=("triage", "list"), shape="runs"),
    ("triage", "show"): Step(args=("triage", "show", "{p1}")),
    ("triage", "export"): Step(args=("triage", "export", "{p1}", "-o", "{tmp}/run.bundle")),
    ("triage", "replay"): Step(args=("triage", "replay", "{tmp}/run.bundle", "--fresh")),
    ("triage", "skip"): Step(
        args=("triage", "skip", "{p1}", "--step", "{step}", "--result", "{}", "--reason", "hand"),
        shape="outcomes",
    ),
    ("triage", "retry"): Step(args=("triage", "retry", "{p2}", "--reason", "x"), shape="outcomes"),
    ("triage", "resume"): Step(
        args=("triage", "resume", "{p3}", "--reason", "x"), shape="outcomes"
    ),
    ("triage", "terminate"): Step(
        args=("triage", "terminate", "{p4}", "--reason", "x"), shape="outcomes"
    ),
    # An expense waiting for alice or bob.
    ("approvers", "grant"): Step(args=("approvers", "grant", "finance", "bob", "--reason", "in")),
    ("approvers", "list"): Step(args=("approvers", "list"), shape="roles"),
    ("approvers", "revoke"): Step(
        args=("approvers", "revoke", "finance", "bob", "--reason", "out")
    ),
    ("approvals", "list"): Step(
        args=("approvals", "list", "--status", "pending"), shape="approvals"
    ),
    ("approvals", "show"): Step(args=("approvals", "show", "{approval}")),
    ("approvals", "issue"): Step(
        args=("approvals", "issue", "{approval}", "--approver", "alice", "--reason", "no mail"),
        keep=lambda doc: {"token": doc["token"]},
    ),
    ("approvals", "decide"): Step(args=("approvals", "decide", "{token}", "--approve")),
    ("approvals", "revoke"): Step(args=("approvals", "revoke", "{approval}", "--reason", "x")),
    ("audit", "verify"): Step(args=("audit", "verify")),
    ("audit", "anchor"): Step(args=("audit", "anchor", "--to", "{tmp}/anchors.jsonl")),
    ("audit", "head"): Step(args=("audit", "head")),
    ("audit", "list"): Step(args=("audit", "list", "--limit", "3"), shape="records"),
    # Credentials (the scenario's server checks them; the walk runs as its admin).
    ("auth", "grant"): Step(
        args=("auth", "grant", "shop", "--role", "application", "--tenant", "acme", "--reason", "x")
    ),
    ("auth", "rotate"): Step(args=("auth", "rotate", "shop", "--reason", "leaked")),
    ("auth", "list"): Step(args=("auth", "list"), shape="principals"),
    ("auth", "revoke"): Step(args=("auth", "revoke", "shop", "--reason", "retired")),
    ("auth", "bootstrap"): Step(args=("auth", "bootstrap", "root", "--save", "{tmp}/boot")),
    # A benchmark cut to a few seconds: two workflows, every optional phase off (the Python
    # phase too: tests/tools/test_bench_smoke.py runs it).
    ("bench",): Step(
        args=(
            *("bench", "--database-url", "{server_url}", "--output", "{tmp}/bench.json"),
            *("--n", "2", "--k", "1", "--w", "1", "--latency-runs", "0", "--no-latency"),
            *("--idle-runs", "0", "--recovery-runs", "0", "--isolation-runs", "0"),
            *("--sandbox-repetitions", "0", "--commit-probe", "0", "--stats-settle", "0"),
            *("--auth-calls", "0", "--python-runs", "0"),
        ),
        own_process=True,
    ),
}

UNWALKED: dict[Command, str] = {
    ("dev",): "runs until stopped; its stdout is the log of a server, two workers and the demo",
    ("server",): "runs until stopped; its stdout is a log (its address is written by --port-file)",
    ("worker",): "runs until stopped; its stdout is a log",
}
"""Long-running processes print a log, not a document; their usage errors are still checked."""


def leaf_commands(parser: argparse.ArgumentParser) -> set[Command]:
    """Every command a user can run, by its canonical words (an alias such as `runs` for `run`
    names the same parser and is not counted again)."""
    leaves: set[Command] = set()

    def walk(p: argparse.ArgumentParser, words: Command) -> None:
        groups = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not groups:
            leaves.add(words)
        for group in groups:
            seen: set[int] = set()
            for name, child in group.choices.items():
                if id(child) not in seen:
                    seen.add(id(child))
                    walk(child, (*words, name))

    walk(parser, ())
    return leaves


def test_the_walk_finds_a_new_command() -> None:
    parser = _parser()
    before = leaf_commands(parser)
    assert ("run", "list") in before and ("runs", "list") not in before and ("bench",) in before
    versions = next(
        a for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    ).choices["versions"]
    group = next(a for a in versions._actions if isinstance(a, argparse._SubParsersAction))
    group.add_parser("frobnicate")
    assert leaf_commands(parser) - before == {("versions", "frobnicate")}


def test_every_command_has_an_entry() -> None:
    leaves = leaf_commands(_parser())
    assert not set(WALK) & set(UNWALKED)
    missing = sorted(leaves - set(WALK) - set(UNWALKED))
    assert not missing, f"commands without an entry in WALK (or UNWALKED, with a reason): {missing}"
    stale = sorted((set(WALK) | set(UNWALKED)) - leaves)
    assert not stale, f"entries for commands the parser does not have: {stale}"


def _error_object(err: str) -> dict[str, Any]:
    """The error object, the last line on stderr (a process may have logged before it)."""
    doc = json.loads(err.strip().splitlines()[-1])
    assert set(doc) == {"error"} and set(doc["error"]) == {"type", "message"}, doc
    assert doc["error"]["type"] and doc["error"]["message"], doc
    return doc


@pytest.mark.parametrize("command", sorted(leaf_commands(_parser())), ids=" ".join)
def test_a_usage_error_under_json_is_the_error_object(
    command: Command, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--json", *command, "--no-such-flag"])
    out, err = capsys.readouterr()
    assert exited.value.code == 2 and out == ""
    assert _error_object(err)["error"]["type"] == "UsageError"


@pytest.fixture
def scenario(
    make_server: Callable[..., InProcessServer],
    sandbox: Sandbox,
    modules: dict[str, bytes],
    server_url: str,
    tmp_path: Path,
) -> Iterator[tuple[InProcessServer, dict[str, str]]]:
    """A server and a worker, and the state the walk needs: a parked run on onboard@1 (its
    successor is uploaded by the walk), three shipments, four runs poisoned by the same crash,
    and an expense waiting for approval."""
    srv = make_server(settings=EngineSettings(poison=POLICY), check_credentials=True)
    credentials = srv.server.credentials
    admin = credentials.grant("walker", "admin", by="test", reason="the walk").token
    fleet = credentials.grant("fleet", "worker", by="test", reason="the walk").token
    anonymous, srv.client = srv.client, AmberClient(srv.target, timeout_s=20, token=admin)
    anonymous.close()
    workers = AmberClient(srv.target, timeout_s=20, token=fleet)
    worker = Worker(workers, sandbox, WorkerSettings(worker_id="walk", poll_wait_s=0.2))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    c = srv.client
    (tmp_path / "rollout_v2.wasm").write_bytes(modules["rollout_v2"])
    for name in ("orders", "shipment", "expense", "hostile"):
        c.upload_version(modules[name], promote=True)
    c.upload_version(modules["rollout_v1"], promote=True, label="onboard@1")
    c.start_run("onboard", {"user": "u1"}, workflow_id="u1")
    for n in (1, 2, 3):
        c.start_run("shipment", {"shipment_id": f"S-{n}", **SHIPMENT}, workflow_id=f"ship-{n}")
    poisoned = [c.start_run("good", {"crash": True, "n": n}).run.run_id for n in range(4)]
    policy = {"approvers": ["alice"], "roles": ["finance"], "required": 1}
    expense = {"expense_id": "E-1", "expires_ms": 86_400_000, "policy": policy}
    c.start_run("expense", expense, workflow_id="e-1")

    def parked(workflow_id: str) -> bool:
        return any(e.type is EventType.SIGNAL_AWAITED for e in c.history(workflow_id))

    wait_for(lambda: parked("u1") and parked("ship-1"), 30, "the runs to wait for their signals")
    wait_for(
        lambda: all(c.describe(r).tasks[0].pool == "surgical" for r in poisoned),
        60,
        "the runs to be poisoned",
    )
    wait_for(lambda: bool(c.list_approvals(status="pending")), 30, "the approval request")
    task = c.describe(poisoned[0]).tasks[0]
    values = {
        "root": str(ROOT),
        "tmp": str(tmp_path),
        "server_url": server_url,
        **{f"p{i + 1}": run_id for i, run_id in enumerate(poisoned)},
        "step": str(task.cmd),
        "approval": c.list_approvals(status="pending")[0].approval_id,
        "admin_token": admin,
    }
    yield srv, values
    worker.stop()
    thread.join(timeout=10)
    workers.close()


def _run(step: Step, srv: InProcessServer, words: list[str], tmp: Path) -> tuple[int, str, str]:
    """One command with `--json`: in process, or as its own process."""
    argv = ["--server", srv.target, "--json", *words]
    if step.own_process:
        env = {**os.environ, "AMBER_HOME": str(tmp / "home")}
        done = subprocess.run(
            [sys.executable, "-m", "amber.tools.cli", *argv],
            cwd=tmp, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        return done.returncode, done.stdout, done.stderr
    code = main(argv)
    return code, "", ""


def test_every_command_prints_json(
    scenario: tuple[InProcessServer, dict[str, str]],
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    srv, values = scenario
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AMBER_TOKEN", values.pop("admin_token"))
    monkeypatch.setenv("AMBER_DATABASE_URL", database_url)  # `auth bootstrap` writes there
    capsys.readouterr()
    for command, step in WALK.items():
        words = [FIELD.sub(lambda m: values[m[1]], word) for word in step.args]
        code, out, err = _run(step, srv, words, tmp_path)
        if not step.own_process:
            out, err = capsys.readouterr()
        where = f"amber --json {' '.join(words)} exited {code}\n{out}\n{err}"
        assert code in step.codes, where
        try:
            doc = json.loads(out)
        except json.JSONDecodeError:
            pytest.fail(f"not JSON: {where}")
        if step.shape:
            assert isinstance(doc, dict) and set(doc) == {step.shape, "next_page"}, where
            assert isinstance(doc[step.shape], list) and doc[step.shape], where
            assert doc["next_page"] is None or isinstance(doc["next_page"], str), where
        elif command != ("run", "query"):  # a query answers with whatever was published
            assert isinstance(doc, dict) and doc, where
        if step.keep is not None:
            values.update(step.keep(doc))
    # The scenario did what it says (so the walk did not print JSON about nothing).
    c = srv.client
    assert c.result("ship-1").status.value == "completed"
    assert c.result("ship-3").status.value == "terminated"
    assert c.result(values["p4"]).status.value == "terminated"
    assert c.get_version("onboard@1").retired_at is not None
    assert [a.status for a in c.list_approvals(run_id=c.result("e-1").run_id)] == ["approved"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("run", "start", "orders", "--signal", "go", "--signal-payload", "{bad"),
            "not valid JSON",
        ),
        (("run", "signal", "w-9", "go", "--payload", "{bad"), "--payload is not valid JSON"),
        (("versions", "auto-upgrade", "onboard"), "give a version, or --off"),
        (("bench", "--peers", "--peers-script", "/nonexistent"), "no peers' harness"),
        (("run", "describe", "nope"), "not found"),
    ],
)
def test_a_refusal_under_json_is_the_error_object(
    make_server: Callable[..., InProcessServer],
    capsys: pytest.CaptureFixture[str],
    args: Command,
    message: str,
) -> None:
    srv = make_server()
    code = main(["--server", srv.target, "--json", *args])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", err
    assert message in _error_object(err)["error"]["message"]
