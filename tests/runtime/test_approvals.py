"""Human approval steps against a real server and the `expense` sample: approve, reject, expiry
into the timeout path, a 2-of-3 quorum with a duplicate click, and every refused token — each
refusal changes nothing in the run and leaves an audit record."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from amber.abi import NotFound
from amber.history import Database, EventType, RunStatus, audit_for_txn
from amber.runtime.approvals._service import token_hash
from amber.runtime.client._client import decode
from amber.runtime.model._approvals import IssuedToken
from amber.runtime.model._clock import ManualClock
from amber.runtime.model._errors import ApprovalClosed, InvalidToken
from amber.runtime.sandbox._sandbox import Sandbox
from tests.conftest import InProcessServer
from tests.runtime._engine_helpers import make_worker, settle

DAY_MS = 24 * 3600 * 1000


class Inbox:
    """An approval sink that keeps what it was given, by approver (tests read the tokens)."""

    def __init__(self) -> None:
        self.issued: list[IssuedToken] = []
        self._lock = threading.Lock()

    def deliver(self, issued: IssuedToken) -> None:
        with self._lock:
            self.issued.append(issued)

    def token(self, approver: str) -> str:
        return next(i.token for i in reversed(self.issued) if i.approver == approver)


Engine = tuple[InProcessServer, ManualClock, Inbox]


@pytest.fixture
def engine(make_server: Callable[..., InProcessServer], modules: dict[str, bytes]) -> Engine:
    clock, inbox = ManualClock(), Inbox()
    srv = make_server(clock=clock, approval_sink=inbox)
    srv.client.upload_version(modules["expense"], promote=True)
    return srv, clock, inbox


def _start(
    engine: Engine,
    sandbox: Sandbox,
    *,
    approvers: list[str] | None = None,
    roles: list[str] | None = None,
    required: int = 1,
    expires_ms: int = DAY_MS,
    **extra: Any,
) -> str:
    srv, _, _ = engine
    policy = {"approvers": approvers or [], "roles": roles or [], "required": required}
    run_id = srv.client.start_run(
        "expense",
        {"expense_id": "E-1", "policy": policy, "expires_ms": expires_ms, **extra},
    ).run.run_id
    settle(make_worker(srv.client, sandbox))  # requests the approval and waits
    srv.server.sweep()  # mints and delivers the tokens
    return run_id


def _finish(engine: Engine, sandbox: Sandbox, run_id: str) -> dict[str, Any]:
    srv, _, _ = engine
    settle(make_worker(srv.client, sandbox))
    run = srv.client.result(run_id)
    assert run.status is RunStatus.COMPLETED, srv.client.describe(run_id)
    result: dict[str, Any] = decode(run.result)
    return result


def _refusals(db: Database) -> list[str]:
    def txn(cur: Any) -> list[str]:
        cur.execute("SELECT reason FROM amber_audit WHERE action = 'approval.refused' ORDER BY 1")
        return [row[0] for row in cur.fetchall()]

    return db.run(txn)


def test_an_approval_lets_the_run_pay(engine: Engine, sandbox: Sandbox) -> None:
    srv, _, inbox = engine
    run_id = _start(engine, sandbox, approvers=["alice"])
    (issued,) = inbox.issued
    assert issued.approver == "alice" and len(issued.token) >= 32  # ≥ 192 bits, url-safe
    assert srv.client.result(run_id).status is RunStatus.RUNNING
    outcome = srv.client.decide_approval(issued.token, approve=True, comment="ok")
    assert outcome.status == "approved" and outcome.counted
    result = _finish(engine, sandbox, run_id)
    assert result["status"] == "paid" and result["outcome"] == "approved"
    assert [(d["approver"], d["approve"], d["comment"]) for d in result["decisions"]] == [
        ("alice", True, "ok")
    ]
    (approval,) = srv.client.list_approvals(run_id=run_id)
    assert approval.status == "approved" and approval.action == "pay expense E-1"


def test_a_rejection_ends_the_approval(engine: Engine, sandbox: Sandbox) -> None:
    srv, _, inbox = engine
    run_id = _start(engine, sandbox, approvers=["alice", "bob"], required=2)
    srv.client.decide_approval(inbox.token("bob"), approve=False, comment="too much")
    result = _finish(engine, sandbox, run_id)
    assert result["status"] == "rejected" and result["outcome"] == "rejected"
    with pytest.raises(InvalidToken):  # the other approver's token was revoked with it
        srv.client.decide_approval(inbox.token("alice"), approve=True)


def test_expiry_takes_the_timeout_path(engine: Engine, sandbox: Sandbox) -> None:
    srv, clock, inbox = engine
    run_id = _start(engine, sandbox, approvers=["alice"], expires_ms=3 * DAY_MS)
    clock.advance(timedelta(days=3, seconds=1))  # three days pass: no worker holds the run
    srv.server.sweep()
    result = _finish(engine, sandbox, run_id)
    assert result["status"] == "escalated" and result["outcome"] == "expired"
    with pytest.raises(InvalidToken):
        srv.client.decide_approval(inbox.token("alice"), approve=True)
    events = [e.type for e in srv.client.history(run_id)]
    assert events.count(EventType.APPROVAL_RESOLVED) == 1


def test_a_quorum_of_two_of_three_counts_a_duplicate_click_once(
    engine: Engine, sandbox: Sandbox, db: Database
) -> None:
    srv, _, inbox = engine
    run_id = _start(engine, sandbox, approvers=["ann", "bea", "cid"], required=2)
    first = srv.client.decide_approval(inbox.token("ann"), approve=True)
    assert (first.status, first.approvals, first.required) == ("pending", 1, 2)
    with pytest.raises(InvalidToken, match="invalid, expired, used or revoked"):
        srv.client.decide_approval(inbox.token("ann"), approve=True)  # the same click again
    token, _ = srv.client.issue_approval_token(
        first.approval_id, "ann", reason="ann lost the mail", operator="ops"
    )
    again = srv.client.decide_approval(token, approve=True)  # a second token, same approver
    assert not again.counted and again.approvals == 1 and again.status == "pending"
    done = srv.client.decide_approval(inbox.token("bea"), approve=True)
    assert done.status == "approved" and done.approvals == 2
    result = _finish(engine, sandbox, run_id)
    assert [d["approver"] for d in result["decisions"]] == ["ann", "bea"]
    assert _refusals(db) == ["token already used"]


def test_replayed_forged_and_misdirected_tokens_change_nothing_and_are_audited(
    engine: Engine, sandbox: Sandbox, db: Database
) -> None:
    srv, _, inbox = engine
    run_id = _start(engine, sandbox, approvers=["alice"])
    other = _start(engine, sandbox, approvers=["alice"])
    token = inbox.token("alice")  # the newest: `other`'s
    before = len(srv.client.history(other))
    attempts: list[tuple[str, dict[str, Any]]] = [
        (secrets.token_urlsafe(24), {}),  # forged
        ("", {}),  # empty
        ("x" * 500, {}),  # oversized
        (token, {"run_id": run_id}),  # for another run
        (token, {"step": 7}),  # for another step
        (token, {"tenant": "acme"}),  # for another tenant
        (token, {"approver": "mallory"}),  # someone else's link
    ]
    for bad, where in attempts:
        with pytest.raises(InvalidToken):
            srv.client.decide_approval(bad, approve=True, **where)
    assert len(srv.client.history(other)) == before
    (pending,) = srv.client.list_approvals(run_id=other)
    detail = srv.client.get_approval(pending.approval_id)
    assert detail.approval.status == "pending" and not detail.decisions
    assert [t.status for t in detail.tokens] == ["pending"]
    assert sorted(_refusals(db)) == sorted(
        [
            "identity mismatch: claimed 'mallory'",
            "malformed token",
            "malformed token",
            "unknown token",
            "wrong run",
            "wrong step",
            "wrong tenant",
        ]
    )
    srv.client.decide_approval(token, approve=True)  # the real one still works, once
    with pytest.raises(InvalidToken):
        srv.client.decide_approval(token, approve=True)  # replayed
    assert _finish(engine, sandbox, other)["status"] == "paid"
    assert srv.client.result(run_id).status is RunStatus.RUNNING


def test_a_refused_decision_is_recorded_under_the_tokens_approver_never_the_callers_claim(
    engine: Engine, sandbox: Sandbox, db: Database
) -> None:
    """Deciding needs no credential, only the token: a caller's claimed identity is a claim.
    Recorded as the actor, it let anyone without a credential write audit records "by root",
    escape sequences included."""
    srv, _, inbox = engine
    _start(engine, sandbox, approvers=["alice"])
    forged = "apv_" + "B" * 32
    for claim, token in (("root\x1b[31m\nFAKE", forged), ("mallory", inbox.token("alice"))):
        with pytest.raises(InvalidToken):
            srv.client.decide_approval(token, approve=True, approver=claim)

    def txn(cur: Any) -> list[tuple[str, str]]:
        cur.execute(
            "SELECT actor, reason FROM amber_audit WHERE action = 'approval.refused' ORDER BY seq"
        )
        return [(row[0], row[1]) for row in cur.fetchall()]

    assert db.run(txn) == [
        ("unauthenticated", "unknown token"),
        ("alice", "identity mismatch: claimed 'mallory'"),
    ]
    entries = db.run(lambda cur: audit_for_txn(cur, "token:" + token_hash(forged).hex()[:12]))
    assert entries[0].detail["claimed_approver"] == "root\x1b[31m\nFAKE"


def test_an_approver_whose_role_was_removed_after_issue_is_refused(
    engine: Engine, sandbox: Sandbox, db: Database
) -> None:
    srv, _, inbox = engine
    for who in ("bob", "eve"):
        srv.client.change_approver_role(
            grant=True, role="finance", approver=who, reason="team", operator="ops"
        )
    run_id = _start(engine, sandbox, roles=["finance"])
    assert sorted(i.approver for i in inbox.issued) == ["bob", "eve"]
    srv.client.change_approver_role(
        grant=False, role="finance", approver="bob", reason="left the team", operator="ops"
    )
    with pytest.raises(InvalidToken, match="no longer authorised"):
        srv.client.decide_approval(inbox.token("bob"), approve=True)
    assert _refusals(db) == ["approver no longer authorised by the current policy"]
    srv.client.decide_approval(inbox.token("eve"), approve=True)
    assert _finish(engine, sandbox, run_id)["decisions"][0]["approver"] == "eve"
    (detail,) = [srv.client.get_approval(a.approval_id) for a in srv.client.list_approvals()]
    assert {t.approver: t.status for t in detail.tokens} == {"bob": "revoked", "eve": "used"}
    entries = db.run(lambda cur: audit_for_txn(cur, f"approval:{detail.approval.approval_id}"))
    assert [(e.action, e.actor) for e in entries][::-1] == [
        ("approval.refused", "bob"),  # the token's own approver, whom it names
        ("approval.approve", "eve"),
    ]


def test_a_decision_before_the_workflow_waits_is_kept_and_applied_when_it_does(
    engine: Engine, sandbox: Sandbox
) -> None:
    srv, _, inbox = engine
    policy = {"approvers": ["alice"], "roles": [], "required": 1}
    run_id = srv.client.start_run(
        "expense",
        {"expense_id": "E-2", "policy": policy, "expires_ms": DAY_MS, "prepare_first": True},
    ).run.run_id
    worker = make_worker(srv.client, sandbox)
    worker.stop()  # one task at a time: the activation, not yet `prepare`
    assert worker.run_once(wait_s=2)
    srv.server.sweep()
    srv.client.decide_approval(inbox.token("alice"), approve=True)  # `prepare` has not run
    types = [e.type for e in srv.client.history(run_id)]
    assert EventType.APPROVAL_RESOLVED in types and EventType.ACTIVITY_COMPLETED not in types
    tasks = {t.name: t.state.value for t in srv.client.describe(run_id).tasks}
    assert tasks["prepare"] == "pending"  # the decision came first; the workflow waits later
    assert _finish(engine, sandbox, run_id)["status"] == "paid"


def test_operator_commands_on_approvals(engine: Engine, sandbox: Sandbox) -> None:
    srv, _, inbox = engine
    run_id = _start(engine, sandbox, approvers=["alice", "bob"], required=2)
    (approval,) = srv.client.list_approvals(run_id=run_id, status="pending")
    assert (
        srv.client.revoke_approval_tokens(
            approval.approval_id, approver="alice", reason="phished", operator="ops"
        )
        == 1
    )
    with pytest.raises(InvalidToken):
        srv.client.decide_approval(inbox.token("alice"), approve=True)
    with pytest.raises(Exception, match="not an approver"):
        srv.client.issue_approval_token(approval.approval_id, "zed", reason="x", operator="ops")
    srv.client.decide_approval(inbox.token("bob"), approve=False)
    with pytest.raises(ApprovalClosed):
        srv.client.issue_approval_token(approval.approval_id, "alice", reason="x", operator="o")


def test_closing_a_run_cancels_its_pending_approval_and_a_reset_requests_it_again(
    engine: Engine, sandbox: Sandbox
) -> None:
    srv, clock, inbox = engine
    run_id = _start(engine, sandbox, approvers=["alice"])
    old_token = inbox.token("alice")
    asked = next(
        e.seq for e in srv.client.history(run_id) if e.type is EventType.APPROVAL_REQUESTED
    )
    new_run = srv.client.reset(run_id, to_event=asked, reason="retry the request")
    (old,) = srv.client.list_approvals(run_id=run_id)
    assert old.status == "cancelled"  # the old run was terminated by the reset
    with pytest.raises(InvalidToken):
        srv.client.decide_approval(old_token, approve=True)
    (again,) = srv.client.list_approvals(run_id=new_run.run_id)
    assert again.status == "pending" and again.expires_at == old.expires_at
    srv.server.sweep()
    srv.client.decide_approval(inbox.token("alice"), approve=True)
    assert _finish(engine, sandbox, new_run.run_id)["status"] == "paid"

    closing = _start(engine, sandbox, approvers=["bob"])
    srv.client.terminate(closing, reason="withdrawn")
    (cancelled,) = srv.client.list_approvals(run_id=closing)
    assert cancelled.status == "cancelled"
    with pytest.raises(InvalidToken):
        srv.client.decide_approval(inbox.token("bob"), approve=True)
    clock.advance(timedelta(days=2))
    srv.server.sweep()  # no timer or delivery left behind
    assert [i.approver for i in inbox.issued].count("bob") == 1


def test_concurrent_approvals_resolve_once(engine: Engine, sandbox: Sandbox) -> None:
    srv, _, inbox = engine
    names = ["a1", "a2", "a3", "a4", "a5"]
    run_id = _start(engine, sandbox, approvers=names, required=2)
    outcomes: list[object] = []

    def approve(name: str) -> None:
        try:
            outcomes.append(srv.client.decide_approval(inbox.token(name), approve=True))
        except (ApprovalClosed, InvalidToken) as late:  # the approval closed first
            outcomes.append(late)

    threads = [threading.Thread(target=approve, args=(n,)) for n in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(outcomes) == 5
    assert sum(getattr(o, "counted", False) for o in outcomes) >= 2
    resolved = [e for e in srv.client.history(run_id) if e.type is EventType.APPROVAL_RESOLVED]
    assert len(resolved) == 1 and resolved[0].payload["outcome"] == "approved"
    assert _finish(engine, sandbox, run_id)["status"] == "paid"


def test_approvals_are_listed_by_workflow_id_as_by_run_id(engine: Engine, sandbox: Sandbox) -> None:
    srv, _, _ = engine
    policy = {"approvers": ["alice"], "roles": [], "required": 1}
    run_id = srv.client.start_run(
        "expense",
        {"expense_id": "E-9", "policy": policy, "expires_ms": DAY_MS},
        workflow_id="expense-E-9",
    ).run.run_id
    settle(make_worker(srv.client, sandbox))
    by_run = srv.client.list_approvals(run_id=run_id)
    assert len(by_run) == 1
    assert srv.client.list_approvals(run_id="expense-E-9") == by_run
    # A reference that names no run is the caller's mistake, said plainly.
    with pytest.raises(NotFound, match="no-such-order"):
        srv.client.list_approvals(run_id="no-such-order")
