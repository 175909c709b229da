"""What an `amber` process loads: a verb that talks to a server, and `--help`, run without the
engine (no wasmtime, PostgreSQL driver or Flask in the CLI process)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

import pytest

from tests.conftest import ROOT, InProcessServer

ENGINE = frozenset({"wasmtime", "psycopg", "psycopg_pool", "flask", "werkzeug"})


def run_cli(argv: Sequence[str]) -> tuple[int, str, set[str]]:
    """Run `main(argv)` in a fresh interpreter: (exit code, its output, top-level modules loaded
    by the end)."""
    code = (
        "import sys\n"
        "from amber.tools.cli import main\n"
        "try:\n"
        f"    status = main({list(argv)!r})\n"
        "except SystemExit as exc:\n"
        "    status = exc.code\n"
        "print('\\nLOADED', *sorted({m.split('.')[0] for m in sys.modules}))\n"
        "sys.exit(status)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    out, _, loaded = done.stdout.rpartition("\nLOADED ")
    assert loaded, done.stderr
    return done.returncode, out, set(loaded.split())


def test_run_list_talks_to_the_server_without_the_engine(
    make_server, modules: dict[str, bytes]
) -> None:
    srv: InProcessServer = make_server()
    srv.client.upload_version(modules["orders"], promote=True)
    started = srv.client.start_run("orders", {"order_id": "S-1"}, workflow_id="cli-start-1")

    status, out, loaded = run_cli(["--server", srv.target, "run", "list"])

    assert status == 0 and started.run.run_id in out, out
    assert "grpc" in loaded  # it did reach the server
    assert not loaded & ENGINE, f"`amber run list` loaded {sorted(loaded & ENGINE)}"


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["dev", "--help"]])
def test_help_runs_without_the_engine(argv: list[str]) -> None:
    status, out, loaded = run_cli(argv)
    assert status == 0 and "usage: amber" in out
    assert not loaded & ENGINE, f"`amber {' '.join(argv)}` loaded {sorted(loaded & ENGINE)}"


def test_describe_names_a_tasks_queue_and_says_when_no_worker_polls_it(
    make_server, modules: dict[str, bytes]
) -> None:
    srv: InProcessServer = make_server()
    srv.client.upload_version(modules["orders"], promote=True)
    srv.client.start_run("orders", {"order_id": "S-2"}, workflow_id="lost-1", queue="nobody")
    assert srv.client.poll_task(worker_id="w", queue="main", wait_s=0.1) is None  # seen on main

    status, out, _ = run_cli(["--server", srv.target, "run", "describe", "lost-1"])
    assert status == 0, out
    assert "QUEUE" in out and " nobody " in out
    assert "no main worker polled queue 'nobody' on this server lately" in out
    status, out, _ = run_cli(["--server", srv.target, "--json", "run", "describe", "lost-1"])
    assert '"queue": "nobody"' in out


def test_audit_list_takes_a_workflow_id_as_its_target(
    make_server, modules: dict[str, bytes]
) -> None:
    srv: InProcessServer = make_server()
    srv.client.upload_version(modules["orders"], promote=True)
    run_id = srv.client.start_run("orders", {"order_id": "S-3"}, workflow_id="audited-1").run.run_id
    srv.client.terminate("audited-1", reason="test", operator="ops")

    for target in ("audited-1", run_id):
        status, out, _ = run_cli(["--server", srv.target, "audit", "list", "--target", target])
        assert status == 0 and "run.terminate" in out and run_id in out, out
