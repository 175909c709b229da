"""`amber approvals ...`, `amber approvers ...` and `amber audit ...` against a real server: an
approval decided from the terminal with a token an operator issued, then the audit log verified,
edited and truncated behind Amber's back, and named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amber.history import Cursor, Database
from tests.conftest import InProcessServer, wait_for
from tests.tools.test_cli import amber, served  # noqa: F401  (the fixture is used by name)


def _tamper(db: Database, statement: str) -> None:
    """Edit the log behind Amber's back, as someone who can switch the append-only trigger off
    (the table's owner, a superuser) could; the engine's own role cannot."""

    def txn(cur: Cursor) -> None:
        cur.execute("SET LOCAL session_replication_role = replica")
        cur.execute(statement)

    db.run(txn)


def test_an_approval_from_the_terminal_and_an_audit_log_that_detects_tampering(
    served: InProcessServer,  # noqa: F811
    modules: dict[str, bytes],
    db: Database,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    served.client.upload_version(modules["expense"], promote=True)
    code, _, err = amber(capsys, served, "approvers", "grant", "finance", "bob", "--reason", "team")
    assert code == 0, err
    policy = {"approvers": ["alice"], "roles": ["finance"], "required": 1}
    start = json.dumps({"expense_id": "E-7", "expires_ms": 86_400_000, "policy": policy})
    code, out, err = amber(capsys, served, "run", "start", "expense", "--input", start)
    assert code == 0, err
    wait_for(lambda: bool(served.client.list_approvals(status="pending")), 30, "the request")

    code, out, _ = amber(capsys, served, "--json", "approvals", "list", "--status", "pending")
    (row,) = json.loads(out)["approvals"]
    assert row["action"] == "pay expense E-7" and row["roles"] == ["finance"]
    approval = row["approval_id"]
    code, out, _ = amber(capsys, served, "--json", "approvals", "issue", approval,
                         "--approver", "bob", "--reason", "no mail gateway yet")  # fmt: skip
    token = json.loads(out)["token"]
    code, _, err = amber(capsys, served, "approvals", "issue", approval, "--approver", "zed",
                         "--reason", "x")  # fmt: skip
    assert code == 2 and "not an approver" in err
    code, _, err = amber(capsys, served, "approvals", "decide", token, "--approve", "--as", "eve")
    assert code == 2 and "belongs to someone else" in err
    code, out, _ = amber(capsys, served, "approvals", "decide", token, "--approve",
                         "--comment", "fine")  # fmt: skip
    assert code == 0 and "approved, 1 of 1" in out
    code, out, _ = amber(capsys, served, "approvals", "show", approval)
    assert "decision      bob approved via grpc" in out and "used" in out

    code, out, _ = amber(capsys, served, "audit", "verify")
    assert code == 0 and "audit log intact" in out
    head = out.split("head: ")[1].split()[1]
    code, out, _ = amber(capsys, served, "--json", "audit", "list")
    actions = [r["action"] for r in json.loads(out)["records"]]
    assert actions[:5] == [
        "version.upload",
        "approver.grant",
        "approval.issue",
        "approval.refused",
        "approval.approve",
    ]
    anchors = tmp_path / "anchors.jsonl"
    code, out, _ = amber(capsys, served, "audit", "anchor", "--to", str(anchors))
    assert code == 0 and f"anchored head 5 {head}" in out
    assert json.loads(anchors.read_text())["hash"] == head

    # The engine's own connection cannot edit or delete a record: the trigger refuses.
    with pytest.raises(Exception, match="append-only"):
        db.run(lambda cur: cur.execute("UPDATE amber_audit SET reason = 'x' WHERE seq = 5"))

    _tamper(db, "UPDATE amber_audit SET reason = 'fine!' WHERE seq = 5")
    code, out, _ = amber(capsys, served, "audit", "verify")
    assert code == 1 and "BROKEN at record 5" in out and "edited" in out
    code, out, _ = amber(capsys, served, "audit", "anchor", "--to", str(anchors))
    assert code == 1 and "nothing anchored" in out
    assert len(anchors.read_text().splitlines()) == 1
    _tamper(db, "UPDATE amber_audit SET reason = 'fine' WHERE seq = 5")
    assert amber(capsys, served, "audit", "verify", "--expect-head", head)[0] == 0
    assert amber(capsys, served, "audit", "verify", "--anchor", str(anchors))[0] == 0

    # Rewritten wholesale, head included, the chain is consistent again; only the anchor knows.
    _tamper(db, "DELETE FROM amber_audit WHERE seq >= 3")
    _tamper(db, "UPDATE amber_audit_head SET seq = 2, hash = (SELECT hash FROM amber_audit"
                " WHERE seq = 2)")  # fmt: skip
    assert amber(capsys, served, "audit", "verify")[0] == 0
    code, out, _ = amber(capsys, served, "audit", "verify", "--anchor", str(anchors))
    assert code == 1 and "not in the chain" in out
    _tamper(db, "DELETE FROM amber_audit WHERE seq = 1")
    code, out, _ = amber(capsys, served, "audit", "verify")
    assert code == 1 and "record 1" in out and "missing" in out
    code, _, err = amber(capsys, served, "audit", "verify", "--expect-head", "zz")
    assert code == 2 and "64 hex digits" in err
    code, _, err = amber(capsys, served, "audit", "verify", "--anchor", str(tmp_path / "none"))
    assert code == 2 and "cannot read the anchor file" in err
