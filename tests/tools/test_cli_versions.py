"""`amber versions ...` and `amber runs migrate` against a real server: a rollout driven from
the command line, the drain status, and refusals that exit 2 with the reason."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from amber.runtime.sandbox._sandbox import Sandbox
from tests.conftest import InProcessServer
from tests.tools.test_cli import amber, served  # noqa: F401  (the fixture is used by name)


@pytest.fixture
def wasm(modules: dict[str, bytes], tmp_path: Path) -> Iterator[dict[str, Path]]:
    paths = {}
    for v in (1, 2, 3):
        path = tmp_path / f"rollout_v{v}.wasm"
        path.write_bytes(modules[f"rollout_v{v}"])
        paths[f"v{v}"] = path
    yield paths


def _json(capsys: pytest.CaptureFixture[str], srv: InProcessServer, *args: str) -> object:
    code, out, err = amber(capsys, srv, "--json", *args)
    assert code in (0, 3), err
    return json.loads(out)


def test_a_rollout_from_the_command_line(
    served: InProcessServer,  # noqa: F811
    sandbox: Sandbox,
    wasm: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = amber(capsys, served, "versions", "upload", str(wasm["v1"]), "--promote",
                         "--label", "onboard@1")  # fmt: skip
    assert code == 0 and "labels        onboard@1" in out and "current for   onboard" in out
    code, out, _ = amber(capsys, served, "versions", "upload", str(wasm["v2"]))
    v2 = out.split()[1]
    assert amber(capsys, served, "versions", "label", v2[:12], "onboard@2")[0] == 0
    code, out, _ = amber(capsys, served, "run", "start", "onboard", "--input", '{"user": "u1"}',
                         "--id", "u1")  # fmt: skip
    assert code == 0

    code, out, _ = amber(capsys, served, "versions", "ramp", "onboard", "onboard@2", "25",
                         "--reason", "canary")  # fmt: skip
    assert code == 0 and "25% of new workflow ids" in out and "candidate" in out
    status = _json(capsys, served, "versions", "status", "onboard")
    assert isinstance(status, dict) and status["ramp_percent"] == 25
    roles = {v["labels"][0]: v["role"] for v in status["versions"]}
    assert roles == {"onboard@1": "current", "onboard@2": "candidate"}
    code, out, _ = amber(capsys, served, "versions", "status", "onboard")
    assert "OPEN RUNS" in out and "FAILURES BY REASON" in out

    checked = _json(capsys, served, "versions", "check", "onboard@2", "--type", "onboard")
    assert isinstance(checked, dict)
    assert [r["verdict"] for r in checked["runs"]] in (["compatible"], [])
    code, out, _ = amber(capsys, served, "versions", "check", "onboard@2", "--type", "onboard")
    assert code == 0 and "run(s):" in out

    code, out, _ = amber(capsys, served, "versions", "promote", "onboard", "onboard@2")
    assert code == 0
    code, out, _ = amber(capsys, served, "versions", "show", "onboard@1")
    assert "drain" in out and "cannot be retired now: 1 open run(s) are pinned to it" in out
    code, out, _ = amber(capsys, served, "versions", "show", "onboard@2")  # now the current one
    assert "cannot be retired now: new runs of onboard start on it" in out
    shown = _json(capsys, served, "versions", "show", "onboard@2")
    assert isinstance(shown, dict) and shown["retire_blockers"] == [
        "new runs of onboard start on it"
    ]
    code, _, err = amber(capsys, served, "versions", "retire", "onboard@1", "--reason", "old")
    assert code == 2 and "1 open run(s) are pinned to it" in err
    code, out, _ = amber(capsys, served, "versions", "rollback", "onboard")
    assert code == 0 and "rolled back" in out


def test_migrate_refuses_incompatible_runs_and_exits_3(
    served: InProcessServer,  # noqa: F811
    wasm: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    amber(capsys, served, "versions", "upload", str(wasm["v1"]), "--promote")
    code, out, _ = amber(capsys, served, "versions", "upload", str(wasm["v3"]), "--label", "o@3")
    for i in range(2):
        amber(
            capsys, served, "run", "start", "onboard", "--input", '{"user": "x"}', "--id", f"x{i}"
        )
    _wait_parked(served, ["x0", "x1"])
    code, out, _ = amber(capsys, served, "versions", "check", "o@3", "--type", "onboard")
    assert code == 3 and "incompatible" in out and "command 1" in out
    code, out, _ = amber(capsys, served, "runs", "migrate", "--to", "o@3", "--type", "onboard",
                         "--reason", "try")  # fmt: skip
    assert code == 3 and "0 migrated" in out and "refused" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["versions", "ramp", "onboard", "f" * 64, "10"], "no module version"),
        (["versions", "ramp", "onboard", "onboard@1", "101"], "percentage from 0 to 100"),
        (["versions", "label", "onboard@1", "onboard@1"], None),  # same digest: a no-op
        (["versions", "promote", "nope", "onboard@1"], "nope"),
        (["versions", "auto-upgrade", "onboard", "onboard@1"], "versions check"),
    ],
)
def test_bad_rollout_commands_exit_2_with_the_reason(
    served: InProcessServer,  # noqa: F811
    wasm: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str | None,
) -> None:
    amber(
        capsys, served, "versions", "upload", str(wasm["v1"]), "--promote", "--label", "onboard@1"
    )
    code, _, err = amber(capsys, served, *args)
    if message is None:
        assert code == 0
    else:
        assert code == 2 and message in err, err


def _wait_parked(srv: InProcessServer, workflow_ids: list[str]) -> None:
    import time

    deadline = time.monotonic() + 30
    for wid in workflow_ids:
        while not any(e.type.value == "SignalAwaited" for e in srv.client.history(wid)):
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_a_rollout_change_without_a_reason_is_audited_as_such(
    served: InProcessServer,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    wasm: dict[str, Path],
) -> None:
    for v in ("v1", "v2"):  # the first upload becomes current by itself
        code, out, err = amber(capsys, served, "--json", "versions", "upload", str(wasm[v]))
        assert code == 0, err
    digest = json.loads(out)["digest"]
    code, _, err = amber(capsys, served, "versions", "promote", "onboard", digest)
    assert code == 0, err
    code, out, _ = amber(capsys, served, "--json", "audit", "list")
    reasons = [r["reason"] for r in json.loads(out)["records"] if "promote" in r["action"]]
    assert reasons == ["promote: no reason given"], out


def test_uploading_a_retired_version_again_says_it_stays_retired(
    served: InProcessServer,  # noqa: F811
    wasm: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    amber(capsys, served, "versions", "upload", str(wasm["v1"]), "--label", "o@1")
    amber(capsys, served, "versions", "upload", str(wasm["v2"]), "--promote")
    code, _, err = amber(capsys, served, "versions", "retire", "o@1", "--reason", "unused")
    assert code == 0, err
    code, out, _ = amber(capsys, served, "versions", "upload", str(wasm["v1"]))
    assert code == 0 and "already stored" in out
    assert "nothing starts or moves onto it" in out


def test_an_upload_records_why_it_was_made(
    served: InProcessServer,  # noqa: F811
    wasm: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    amber(capsys, served, "versions", "upload", str(wasm["v1"]))  # current: its type's first
    code, _, err = amber(capsys, served, "versions", "upload", str(wasm["v2"]), "--promote",
                         "--reason", "fixes the welcome mail", "--operator", "ana")  # fmt: skip
    assert code == 0, err
    records = served.client.list_audit()
    upload = [(r.actor, r.reason) for r in records if r.action == "version.upload"]
    promote = [(r.actor, r.reason) for r in records if r.action == "version.promote"]
    assert upload[-1] == ("ana", "fixes the welcome mail")
    assert promote == [("ana", "fixes the welcome mail")]
