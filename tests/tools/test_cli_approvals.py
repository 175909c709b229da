"""`amber approvals ...`, `amber approvers ...` and `amber audit ...` against a real server: an
approval decided from the terminal with a token an operator issued, then the audit log verified,
edited and truncated behind Amber's back, and named."""

from __future__ import annotations

import json

import pytest

from amber.history import Database
from tests.conftest import InProcessServer, wait_for
from tests.tools.test_cli import amber, served  # noqa: F401  (the fixture is used by name)


def test_an_approval_from_the_terminal_and_an_audit_log_that_detects_tampering(
    served: InProcessServer,  # noqa: F811
    modules: dict[str, bytes],
    db: Database,
    capsys: pytest.CaptureFixture[str],
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
    assert actions[:4] == [
        "approver.grant",
        "approval.issue",
        "approval.refused",
        "approval.approve",
    ]

    db.run(lambda cur: cur.execute("UPDATE amber_audit SET reason = 'fine!' WHERE seq = 4"))
    code, out, _ = amber(capsys, served, "audit", "verify")
    assert code == 1 and "BROKEN at record 4" in out and "edited" in out
    db.run(lambda cur: cur.execute("UPDATE amber_audit SET reason = 'fine' WHERE seq = 4"))
    assert amber(capsys, served, "audit", "verify", "--expect-head", head)[0] == 0
    db.run(lambda cur: cur.execute("DELETE FROM amber_audit WHERE seq = 2"))
    code, out, _ = amber(capsys, served, "audit", "verify")
    assert code == 1 and "record 2" in out and "missing" in out
    code, _, err = amber(capsys, served, "audit", "verify", "--expect-head", "zz")
    assert code == 2 and "64 hex digits" in err
