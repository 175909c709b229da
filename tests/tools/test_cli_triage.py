"""`amber triage ...` against a real server: list, show, refusals that exit 2 with the reason, a
terminate; and a server that checks operator tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amber.history import Database, EventType
from amber.runtime.client._client import AmberClient
from amber.runtime.model._errors import NotAuthorised
from amber.runtime.server._operators import Operators, token_hash
from amber.runtime.server._server import AmberServer
from amber.tools.cli import main
from tests.conftest import InProcessServer, wait_for
from tests.tools.test_cli import amber, served  # noqa: F401  (the fixture is used by name)


def _poisoned(srv: InProcessServer, modules: dict[str, bytes]) -> str:
    """A run whose workflow diverges on replay: poisoned at its first failure."""
    srv.client.upload_version(modules["hostile"], promote=True)
    run_id = srv.client.start_run("diverge", {"x": 1}).run.run_id
    wait_for(lambda: bool(srv.client.list_troubled()), 30, "the run to be poisoned")
    return run_id


def test_triage_from_the_command_line(
    served: InProcessServer,  # noqa: F811
    modules: dict[str, bytes],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    run_id = _poisoned(served, modules)
    code, out, _ = amber(capsys, served, "triage", "list")
    assert code == 0 and run_id in out and "poisoned" in out and "workflow:-" in out
    code, out, _ = amber(capsys, served, "--json", "triage", "list")
    (row,) = json.loads(out)["runs"]
    assert row["run"]["run_id"] == run_id and row["crashes"] == 1 and row["fingerprint"]
    code, out, _ = amber(capsys, served, "triage", "show", run_id)
    assert code == 0 and "non_determinism" in out and row["fingerprint"] in out
    assert "pool=surgical" in out and "crashes=1" in out
    assert "the surgical pool tries it next at" in out  # when the stuck run moves again
    bundle = tmp_path / "not" / "yet" / "there.bundle"  # directories made, as `build -o` does
    code, out, _ = amber(capsys, served, "triage", "export", run_id, "-o", str(bundle))
    assert code == 0 and bundle.stat().st_size > 0
    code, out, _ = amber(capsys, served, "run", "describe", run_id)  # running, yet poisoned
    assert code == 0 and "POISONED since" in out and "non_determinism" in out

    code, _, err = amber(capsys, served, "triage", "retry", "--reason", "why")
    assert code == 2 and "name a run" in err
    code, _, err = amber(capsys, served, "triage", "skip", run_id, "--step", "0",
                         "--result", "{nope", "--reason", "x")  # fmt: skip
    assert code == 2 and "--result is not JSON" in err
    code, _, err = amber(capsys, served, "triage", "resume", run_id, "--version", "f00dfeed",
                         "--reason", "x")  # fmt: skip
    assert code != 0 and "f00dfeed" in err  # a poisoned run resumes, but only onto a version

    code, out, _ = amber(capsys, served, "triage", "terminate", run_id, "--reason", "a test",
                         "--operator", "ops")  # fmt: skip
    assert code == 0 and f"{run_id}: terminated" in out
    assert amber(capsys, served, "triage", "list")[1].strip() == "no suspended or poisoned runs"
    closing = served.client.history(run_id)[-1]
    assert closing.type is EventType.RUN_TERMINATED and closing.payload["by"] == "ops"
    # A second operator a moment late learns why the run is past triage, and who acted.
    code, _, err = amber(capsys, served, "triage", "skip", run_id, "--step", "0",
                         "--result", "{}", "--reason", "late", "--operator", "bob")  # fmt: skip
    assert code == 2 and "is already terminated" in err
    assert "last command on it: run.triage.terminate by ops" in err


def test_a_server_with_operator_tokens_takes_the_operator_from_the_token(
    db: Database,
    modules: dict[str, bytes],
    sandbox: object,
    served: InProcessServer,  # noqa: F811  (poisons the run: its worker serves this database)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tokens = tmp_path / "operators"
    tokens.write_text(f"alice {token_hash('alice-token')}\n")
    server = AmberServer(db, listen="127.0.0.1:0", operators=Operators.from_file(tokens))
    target = f"127.0.0.1:{server.start()}"
    try:
        run_id = _poisoned(served, modules)
        for token in ("", "mallory"):
            with AmberClient(target, operator_token=token) as client:
                with pytest.raises(NotAuthorised):
                    client.triage("retry", run_ids=[run_id], reason="x", operator="alice")
                with pytest.raises(NotAuthorised):
                    client.export_run(run_id, operator="alice")
        with AmberClient(target, operator_token="alice-token") as client:
            with pytest.raises(NotAuthorised, match="belongs to 'alice'"):
                client.triage("retry", run_ids=[run_id], reason="x", operator="bob")
            (outcome,) = client.triage("retry", run_ids=[run_id], reason="try again")
            assert outcome.outcome == "retried"
        # The CLI with a token names no operator of its own: the token does.
        wait_for(lambda: bool(served.client.list_troubled()), 30, "the run to be poisoned again")
        monkeypatch.setenv("AMBER_OPERATOR_TOKEN", "alice-token")
        code = main(["--server", target, "triage", "retry", run_id, "--reason", "once more"])
        assert code == 0, capsys.readouterr().err
        events = [e for e in served.client.history(run_id) if e.type is EventType.RUN_RESUMED]
        assert [e.payload["by"] for e in events] == ["alice", "alice"]
    finally:
        server.stop(grace_s=0.5)


def test_replaying_a_healthy_run_s_bundle_says_it_reproduced_the_history(
    served: InProcessServer,  # noqa: F811
    modules: dict[str, bytes],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    served.client.upload_version(modules["orders"], promote=True)
    order = {"order_id": "T-1", "sku": "X", "quantity": 1, "amount_cents": 10}
    run_id = served.client.start_run("orders", order).run.run_id
    assert served.client.result(run_id, wait_s=30).status.value == "completed"
    bundle = tmp_path / "ok.bundle"
    code, _, err = amber(capsys, served, "triage", "export", run_id, "-o", str(bundle))
    assert code == 0, err
    code, out, _ = amber(capsys, served, "triage", "replay", str(bundle), "--fresh")
    assert code == 0
    assert "REPRODUCED: the whole history replays as recorded (no failure in this bundle)" in out


def test_triage_list_with_tenant_star_lists_every_tenants_troubled_runs(
    served: InProcessServer,  # noqa: F811
    modules: dict[str, bytes],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `--tenant '*'` used to look for a tenant named "*" and say there was nothing to triage.
    ours = _poisoned(served, modules)
    theirs = served.client.start_run("diverge", {"x": 2}, tenant="acme").run.run_id
    wait_for(
        lambda: bool(served.client.list_troubled(tenant="acme")), 30, "acme's run to be poisoned"
    )
    code, out, _ = amber(capsys, served, "triage", "list")
    assert code == 0 and ours in out and theirs not in out
    code, out, _ = amber(capsys, served, "triage", "list", "--tenant", "*")
    assert code == 0 and ours in out and theirs in out and "TENANT" in out and " acme " in out
    (fingerprint,) = {t.fingerprint for t in served.client.list_troubled(tenant="acme")}
    code, _, err = amber(capsys, served, "triage", "retry", "--fingerprint", fingerprint,
                         "--tenant", "*", "--reason", "x")  # fmt: skip
    assert code == 2 and "a triage command acts in one tenant" in err
    assert len(served.client.list_troubled(tenant="*")) == 2  # nothing was retried
