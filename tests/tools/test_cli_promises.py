"""Small promises of the command line: its version, the addresses people type, errors under
`--json`, every run status, and a reader that leaves a pipe early."""

from __future__ import annotations

import json
import os
import sys

import pytest

from amber import __version__
from amber.tools.cli import _parser, main, server_address
from tests.conftest import InProcessServer
from tests.tools.test_cli import amber, served  # noqa: F401  (the fixture is used by name)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"amber {__version__}"


@pytest.mark.parametrize(
    ("typed", "address"),
    [
        ("localhost", "localhost:7233"),  # gRPC alone would go to 443
        ("localhost:9000", "localhost:9000"),
        ("http://10.0.0.5:7233/", "10.0.0.5:7233"),
        ("grpc://amber.internal", "amber.internal:7233"),
        ("::1", "[::1]:7233"),
        ("[::1]:7300", "[::1]:7300"),
    ],
)
def test_server_addresses_as_people_type_them(typed: str, address: str) -> None:
    assert server_address(typed) == address


@pytest.mark.parametrize(
    ("words", "server"),
    [
        (["--server", "h:1", "worker"], "h:1"),
        (["worker", "--server", "h:1"], "h:1"),  # after the verb, as people type it
        (["run", "list", "--server", "h"], "h:7233"),
        (["run", "list"], "127.0.0.1:7233"),
    ],
)
def test_server_is_taken_before_or_after_the_verb(
    words: list[str], server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AMBER_SERVER", raising=False)
    assert _parser().parse_args(words).server == server


def test_an_error_under_json_is_a_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--json", "--server", "127.0.0.1:1", "run", "list"])
    error = json.loads(capsys.readouterr().err)["error"]
    assert code == 2 and error["type"] and "unavailable" in error["message"]


def test_every_status_filters_and_a_cancelled_run_is_not_still_cancelled(
    served: InProcessServer,  # noqa: F811
    modules: dict[str, bytes],
    capsys: pytest.CaptureFixture[str],
) -> None:
    served.client.upload_version(modules["hostile"], promote=True)
    run_id = served.client.start_run("sleeper", {"ms": 600_000}, workflow_id="a-" + "x" * 40).run
    served.client.terminate(run_id.run_id, reason="not needed", operator="ops")
    code, out, _ = amber(capsys, served, "run", "list", "--status", "terminated")
    assert code == 0 and run_id.run_id in out and "a-xxxxxxxxxxxxxxxxxxxxx…" in out
    code, out, _ = amber(capsys, served, "run", "result", run_id.run_id)
    assert code == 3 and out.startswith("terminated") and "still" not in out
    code, out, _ = amber(capsys, served, "--json", "run", "terminate", run_id.run_id,
                         "--reason", "again")  # fmt: skip
    assert code == 2  # already closed: refused, and said so


def test_a_reader_leaving_the_pipe_early_gets_no_traceback(
    served: InProcessServer,  # noqa: F811
    modules: dict[str, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `amber run list | head -1`: the reader is gone before amber has written everything.
    served.client.upload_version(modules["chain"], promote=True)
    for i in range(3):
        served.client.start_run("chain", {"k": 0, "value": i})
    read, write = os.pipe()
    os.close(read)  # the reader left
    gone = os.fdopen(write, "w", buffering=1)
    monkeypatch.setattr(sys, "stdout", gone)
    assert main(["--server", served.target, "run", "list"]) == 0


def test_operator_commands_answer_in_json_when_asked(
    served: InProcessServer,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = amber(capsys, served, "--json", "approvers", "grant", "finance", "ann",
                         "--reason", "joined")  # fmt: skip
    assert code == 0, out
    assert json.loads(out) == {
        "approver": "ann", "role": "finance", "action": "grant", "changed": True
    }  # fmt: skip
    code, out, _ = amber(capsys, served, "--json", "audit", "head")
    head = json.loads(out)
    assert code == 0 and head["seq"] >= 1 and len(head["hash"]) == 64
