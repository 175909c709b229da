"""The `amber` command line, against a real server (and `amber dev` on embedded PostgreSQL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.worker._worker import Worker, WorkerSettings
from amber.tools.cli import main
from tests.conftest import ROOT, InProcessServer

ORDER_JSON = '{"order_id": "C-1", "sku": "X", "quantity": 1, "amount_cents": 10}'


@pytest.fixture
def served(make_server, sandbox: Sandbox) -> Iterator[InProcessServer]:
    """A server with a worker thread serving it."""
    srv: InProcessServer = make_server()
    worker = Worker(srv.client, sandbox, WorkerSettings(worker_id="cli-test", poll_wait_s=0.2))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    yield srv
    worker.stop()
    thread.join(timeout=5)


def amber(
    capsys: pytest.CaptureFixture[str], srv: InProcessServer, *args: str
) -> tuple[int, str, str]:
    code = main(["--server", srv.target, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_build_upload_start_and_inspect(
    served: InProcessServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    wasm = tmp_path / "orders.wasm"
    code, out, _ = amber(
        capsys, served, "build", str(ROOT / "abi/samples/orders.c"), "-o", str(wasm)
    )
    assert code == 0 and "built" in out and wasm.exists()

    code, out, _ = amber(capsys, served, "versions", "upload", str(wasm))
    assert code == 0 and out.startswith("uploaded ")
    digest = out.split()[1]
    code, out, _ = amber(capsys, served, "versions", "upload", str(wasm))
    assert code == 0 and out.startswith(f"already stored {digest}")

    code, out, _ = amber(capsys, served, "--json", "versions", "list")
    (version,) = json.loads(out)["versions"]
    assert version["digest"] == digest and version["current_for"] == ["orders"]
    code, out, _ = amber(capsys, served, "versions", "show", digest[:10])
    assert code == 0 and "reserve_inventory" in out

    code, out, _ = amber(
        capsys, served, "--json", "run", "start", "orders", "--input", ORDER_JSON,
        "--id", "cli-1", "--wait", "30",
    )  # fmt: skip
    started = json.loads(out)
    assert started["status"] == "completed" and started["result"]["tracking"] == "trk-C-1"
    run_id = started["run_id"]

    code, out, _ = amber(capsys, served, "run", "result", run_id)
    assert code == 0 and json.loads(out)["status"] == "shipped"
    code, out, _ = amber(capsys, served, "run", "history", run_id)
    assert code == 0 and "RunCompleted" in out and "ActivityScheduled" in out
    code, out, _ = amber(capsys, served, "--json", "run", "history", run_id)
    assert [e["type"] for e in json.loads(out)["events"]][-1] == "RunCompleted"
    code, out, _ = amber(capsys, served, "run", "describe", run_id)
    assert code == 0 and "completed" in out
    code, out, _ = amber(capsys, served, "run", "list", "--status", "completed")
    assert code == 0 and run_id in out
    code, out, _ = amber(
        capsys, served, "run", "start", "orders", "--input", ORDER_JSON, "--id", "cli-1"
    )
    assert code == 0 and "already started" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("run", "start", "nope", "--input", "{}"), "no uploaded module declares workflow type"),
        (("run", "start", "orders", "--input", "{bad json"), "--input is not valid JSON"),
        (("run", "describe", "0190a5e8-0000-7000-8000-000000000000"), "not found"),
        (("run", "describe", "not-a-uuid"), "not found"),
        (("versions", "show", "zz"), "is not a version digest"),
        (("versions", "show", "abcdef0123"), "no module version matches"),
        (("bench", "--isolation-kinds", "fuel,forkbomb"), "--isolation-kinds takes some of"),
        # A number no field can hold: said plainly, not a traceback.
        (("run", "list", "--limit", "9" * 20), "9" * 20 + " is out of range"),
        (("run", "reset", "x", "--to-event", "9" * 20, "--reason", "r"), "is out of range"),
        (("audit", "list", "--after", "-" + "9" * 20), "is out of range"),
        (("audit", "list", "--limit", "0"), "--limit must be between 1 and 1000"),
    ],
)
def test_bad_commands_get_a_clear_error(
    served: InProcessServer, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    code, _, err = amber(capsys, served, *args)
    assert code == 2
    assert message in err


def test_uploading_garbage_is_refused(
    served: InProcessServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    junk = tmp_path / "junk.wasm"
    junk.write_bytes(os.urandom(2048))
    code, _, err = amber(capsys, served, "versions", "upload", str(junk))
    assert code == 2 and "not a WebAssembly module" in err
    code, out, _ = amber(capsys, served, "--json", "versions", "list")
    assert json.loads(out) == {"versions": [], "next_page": None}


@pytest.mark.slow
def test_amber_dev_once_runs_the_demo_on_embedded_postgres(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "AMBER_DATABASE_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "amber.tools.cli", "dev", "--once", "--home", str(tmp_path / "home"),
         "--listen", "127.0.0.1:0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "embedded PostgreSQL" in done.stdout
    assert "status     completed" in done.stdout
    assert '"status":"shipped"' in done.stdout
    assert "RunCompleted" in done.stdout
    assert "order placed" in done.stdout + done.stderr  # the guest's own INFO log, once
    assert (done.stdout + done.stderr).count("order placed") == 1  # not again on replay
    assert (tmp_path / "home" / "pgdata" / "PG_VERSION").exists()


def test_signal_query_cancel_terminate_and_reset_from_the_command_line(
    served: InProcessServer,
    capsys: pytest.CaptureFixture[str],
    modules: dict[str, bytes],
) -> None:
    import time

    served.client.upload_version(modules["shipment"], promote=True)
    served.client.upload_version(modules["orders"], promote=True)
    shipment = '{"shipment_id": "C-9", "address": "x", "deadline_days": 2}'
    code, out, _ = amber(capsys, served, "--json", "run", "start", "shipment", "--input", shipment,
                         "--id", "cli-ship")  # fmt: skip
    assert code == 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        code, out, _ = amber(capsys, served, "run", "query", "cli-ship", "status", "--json")
        if code == 0 and json.loads(out)["status"] == "in_transit":
            break
        time.sleep(0.1)
    assert json.loads(out)["status"] == "in_transit"
    code, out, _ = amber(capsys, served, "run", "signal", "cli-ship", "delivered",
                         "--payload", '{"signed_by": "Zed"}', "--request-id", "r1")  # fmt: skip
    assert code == 0 and "delivered" in out
    code, out, _ = amber(capsys, served, "run", "signal", "cli-ship", "delivered",
                         "--payload", '{"signed_by": "Zed"}', "--request-id", "r1")  # fmt: skip
    assert code == 0 and "duplicate" in out
    code, out, _ = amber(capsys, served, "--json", "run", "signal", "cli-ship", "delivered",
                         "--payload", "{}", "--request-id", "r1")  # fmt: skip
    assert code == 0 and json.loads(out) == {"delivered": False, "duplicate": True}
    code, out, _ = amber(capsys, served, "--json", "run", "result", "cli-ship", "--wait", "20")
    assert json.loads(out)["result"]["signed_by"] == "Zed"

    code, out, _ = amber(capsys, served, "run", "start", "shipment", "--input", shipment,
                         "--id", "cli-cancel")  # fmt: skip
    code, out, _ = amber(
        capsys, served, "run", "cancel", "cli-cancel", "--reason", "no longer needed"
    )
    assert code == 0 and "cancellation requested" in out
    code, out, _ = amber(capsys, served, "--json", "run", "result", "cli-cancel", "--wait", "20")
    assert json.loads(out)["status"] == "cancelled"

    code, out, _ = amber(capsys, served, "run", "start", "shipment", "--input", shipment,
                         "--id", "cli-term")  # fmt: skip
    with pytest.raises(SystemExit):  # argparse: --reason is required
        amber(capsys, served, "run", "terminate", "cli-term")
    assert "--reason" in capsys.readouterr().err
    code, out, _ = amber(capsys, served, "run", "terminate", "cli-term", "--reason", "duplicate")
    assert code == 0
    code, out, _ = amber(capsys, served, "run", "describe", "cli-term")
    assert "terminated" in out

    order = '{"order_id": "C-10", "sku": "S", "quantity": 1, "amount_cents": 1}'
    code, out, _ = amber(capsys, served, "run", "start", "orders", "--input", order,
                         "--id", "cli-reset", "--wait", "20")  # fmt: skip
    code, out, _ = amber(capsys, served, "run", "reset", "cli-reset", "--to-event", "4",
                         "--reason", "re-ship")  # fmt: skip
    assert code == 0 and "replays events 1..4" in out
    code, out, _ = amber(capsys, served, "--json", "run", "result", "cli-reset", "--wait", "20")
    assert json.loads(out)["status"] == "completed"
    code, out, _ = amber(capsys, served, "--json", "run", "history", "cli-reset")
    started = json.loads(out)["events"][0]
    assert started["type"] == "RunStarted" and "reset_from" in started["payload"]


def test_start_wait_and_result_follow_a_continue_as_new_chain_to_its_end(
    served: InProcessServer, capsys: pytest.CaptureFixture[str], modules: dict[str, bytes]
) -> None:
    # `countdown` continues as new with n - 1 until n is 0: what the starter waits for is the
    # chain's result, as in Temporal, not the first run's `continued_as_new`.
    served.client.upload_version(modules["hostile"], promote=True)
    code, out, _ = amber(capsys, served, "--json", "run", "start", "countdown",
                         "--input", '{"n": 2}', "--id", "chain-1", "--wait", "30")  # fmt: skip
    assert code == 0, out
    last = json.loads(out)
    assert last["status"] == "completed" and last["result"] == {"done": True}
    first = served.client.list_runs(workflow_type="countdown")[0][-1]
    assert first.status.value == "continued_as_new" and first.run_id != last["run_id"]
    code, out, _ = amber(capsys, served, "--json", "run", "result", first.run_id, "--wait", "5")
    assert code == 0 and json.loads(out)["run_id"] == last["run_id"]


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--guests", "0"),
        ("--slice-fuel", "-1"),
        ("--slice-cpu-ms", "-1"),
        ("--slice-cpu-ms", "nan"),
    ],
)
def test_a_worker_option_out_of_range_fails_before_it_looks_for_a_server(
    capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    # Nothing listens there: an operator's typo must not wait out the connection timeout.
    code = main(["--server", "127.0.0.1:9", "worker", "--connect-timeout", "30", flag, value])
    assert code == 2
    assert flag in capsys.readouterr().err


def test_tables_show_control_characters_escaped_and_other_text_as_is() -> None:
    """Names in tables come from anyone who may start a run or claim an approver's name: an
    escape sequence or a newline must not reach the operator's terminal as such."""
    from datetime import UTC, datetime

    from amber.history import Run, RunStatus
    from amber.tools._output import run_text, table

    when = datetime(2026, 1, 1, tzinfo=UTC)
    failed = Run(run_id="r", tenant="t", workflow_id="w", workflow_type="x", digest="d",
                 status=RunStatus.FAILED, queue="main", input=b"\xc0", error_type="Oops",
                 error_message="bad\x1b[2J\nFAKE line", last_seq=3, next_cmd=0,
                 created_at=when, updated_at=when, result=None, closed_at=when)  # fmt: skip
    assert "bad\\x1b[2J\\nFAKE line" in run_text(failed) and "\x1b" not in run_text(failed)

    text = table([["root\x1b[31m\nFAKE", "Müller 請求"]], ["ACTOR", "NAME"])
    assert "\x1b" not in text and "\n" not in text.split("\n", 1)[1]
    assert "root\\x1b[31m\\nFAKE" in text and "Müller 請求" in text
