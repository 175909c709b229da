"""Principals and roles on every RPC, against a real server that checks credentials: what each
role may call, the tenants it is bound to, a rogue worker refused with nothing recorded, and the
credentials themselves (grant, rotate, revoke, the last admin) audited."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from amber.abi import Conflict, InvalidInput
from amber.history import Database, LeaseLost, RunStatus
from amber.runtime.client import AmberClient
from amber.runtime.model import FailureReport, NotAuthenticated, NotAuthorised, PrincipalNotFound
from amber.runtime.sandbox import Sandbox
from amber.runtime.server import AmberServer
from amber.runtime.worker import Worker, WorkerSettings
from tests.conftest import InProcessServer

ORDER = {"order_id": "A-1", "sku": "X", "quantity": 1, "amount_cents": 99_999}


@dataclass
class Secured:
    """A server that checks credentials, an admin, and a client per principal."""

    srv: InProcessServer
    admin: AmberClient
    opened: list[AmberClient]

    def client(self, token: str | None = "") -> AmberClient:
        """A client with `token` ("": none; None: found as the CLI finds it)."""
        c = AmberClient(self.srv.target, timeout_s=20, token=token)
        self.opened.append(c)
        return c

    def grant(self, name: str, role: str, **scope: list[str]) -> AmberClient:
        _, token = self.admin.change_credential("grant", name, role=role, reason="test", **scope)
        return self.client(token)

    @property
    def server(self) -> AmberServer:
        return self.srv.server


@pytest.fixture
def secured(make_server: Callable[..., InProcessServer]) -> Iterator[Secured]:
    srv = make_server(check_credentials=True)
    issued = srv.server.credentials.grant("root", "admin", by="test", reason="first admin")
    s = Secured(srv=srv, admin=AmberClient(srv.target, timeout_s=20, token=issued.token), opened=[])
    yield s
    for c in [s.admin, *s.opened]:
        c.close()


def _tasks(db: Database) -> list[tuple[str, str, str | None]]:
    return db.run(
        lambda cur: cur.execute("SELECT kind, state, lease_owner FROM amber_tasks").fetchall()
    )


def test_a_rogue_worker_is_refused_and_nothing_is_recorded(
    secured: Secured, modules: dict[str, bytes], db: Database, sandbox: Sandbox
) -> None:
    secured.admin.upload_version(modules["orders"], promote=True)
    app = secured.grant("shop", "application")
    run = app.start_run("orders", ORDER, workflow_id="o-1").run.run_id
    before = app.history(run)

    anonymous = secured.client()
    with pytest.raises(NotAuthenticated, match="needs a credential"):
        anonymous.poll_task(worker_id="rogue", wait_s=0)
    with pytest.raises(NotAuthenticated, match="unknown, rotated or revoked"):
        secured.client("amb_" + "A" * 43).poll_task(worker_id="rogue", wait_s=0)
    with pytest.raises(NotAuthorised, match=r"shop \(application\) may not call PollTask"):
        app.poll_task(worker_id="rogue", wait_s=0)
    elsewhere = secured.grant("other-fleet", "worker", queues=["other"])
    with pytest.raises(NotAuthorised, match="may not serve queue 'main'"):
        elsewhere.poll_task(worker_id="rogue", wait_s=0)
    healthy_only = secured.grant("main-fleet", "worker", pools=["main"])
    with pytest.raises(NotAuthorised, match="may not serve the surgical pool"):
        healthy_only.poll_task(worker_id="rogue", wait_s=0, pool="surgical")
    assert app.history(run) == before
    assert _tasks(db) == [("workflow", "pending", None)]

    # The fleet's own credential runs it.
    fleet = secured.grant("fleet", "worker", queues=["main"])
    worker = Worker(fleet, sandbox, WorkerSettings(worker_id="w", poll_wait_s=0.2))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert app.result(run, wait_s=30).status is RunStatus.COMPLETED
    finally:
        worker.stop()
        thread.join(timeout=10)


def test_a_refused_call_by_a_known_principal_is_logged_for_operators(
    secured: Secured, caplog: pytest.LogCaptureFixture
) -> None:
    app = secured.grant("shop", "application")
    run = "no-such-run"  # refused before anything is looked up
    with caplog.at_level(logging.WARNING, logger="amber.access"), pytest.raises(NotAuthorised):
        app.terminate(run, reason="mine")
    (line,) = [r.getMessage() for r in caplog.records if r.name == "amber.access"]
    assert "refused TerminateRun from shop" in line and "may not call TerminateRun" in line


def test_each_role_reaches_only_its_methods(secured: Secured, modules: dict[str, bytes]) -> None:
    app = secured.grant("shop", "application")
    ops = secured.grant("ops", "operator", tenants=["*"])
    fleet = secured.grant("fleet", "worker")
    anonymous = secured.client()

    # Code: uploading and promoting is an operator's, and the record names who did it.
    for caller, error in ((anonymous, NotAuthenticated), (app, NotAuthorised),
                          (fleet, NotAuthorised)):  # fmt: skip
        with pytest.raises(error):
            caller.upload_version(modules["orders"], promote=True)
    assert secured.admin.list_versions() == []
    digest = ops.upload_version(modules["orders"], promote=True).version.digest
    uploads = [(r.action, r.actor) for r in ops.list_audit() if r.action.startswith("version.")]
    assert uploads == [("version.upload", "ops")]
    assert fleet.get_module(digest) == modules["orders"]
    with pytest.raises(NotAuthorised):
        app.get_module(digest)

    # The audit log: operators bound to every tenant, and admins.
    for caller in (anonymous, app, fleet):
        with pytest.raises((NotAuthenticated, NotAuthorised)):
            caller.list_audit()
        with pytest.raises((NotAuthenticated, NotAuthorised)):
            caller.verify_audit()
    assert secured.admin.verify_audit().ok

    # Runs: an application starts and reads; cancelling and terminating are an operator's.
    run = app.start_run("orders", ORDER, workflow_id="o-1").run.run_id
    assert app.describe(run).run.run_id == run
    with pytest.raises(NotAuthorised, match="may not call TerminateRun"):
        app.terminate(run, reason="mine")
    with pytest.raises(NotAuthorised, match="may not call StartRun"):
        fleet.start_run("orders", ORDER)
    ops.terminate(run, reason="duplicate")
    (record,) = [r for r in ops.list_audit() if r.action == "run.terminate"]
    assert record.actor == "ops"
    with pytest.raises(NotAuthorised, match="belongs to 'ops', not 'alice'"):
        ops.cancel(run, reason="x", operator="alice")

    # Credentials are an admin's.
    for caller in (anonymous, app, ops, fleet):
        with pytest.raises((NotAuthenticated, NotAuthorised)):
            caller.change_credential("grant", "eve", role="admin", reason="me")
        with pytest.raises((NotAuthenticated, NotAuthorised)):
            caller.list_credentials()


def test_tenants_are_walls(secured: Secured, modules: dict[str, bytes]) -> None:
    secured.admin.upload_version(modules["orders"], promote=True)
    acme = secured.grant("acme-app", "application", tenants=["acme"])
    globex = secured.grant("globex-app", "application", tenants=["globex"])
    acme_ops = secured.grant("acme-ops", "operator", tenants=["acme"])
    globex_ops = secured.grant("globex-ops", "operator", tenants=["globex"])
    run = acme.start_run("orders", ORDER, workflow_id="o-1", tenant="acme").run.run_id

    refusals: list[Callable[[], object]] = [
        lambda: globex.describe(run, tenant="acme"),
        lambda: globex.history(run, tenant="acme"),
        lambda: globex.result(run, tenant="acme"),
        lambda: globex.list_runs(tenant="acme"),
        lambda: globex.signal(run, "go", None, tenant="acme"),
        lambda: globex.query(run, "status", tenant="acme"),
        lambda: globex.start_run("orders", ORDER, tenant="acme"),
        lambda: acme.list_runs(),  # the default tenant is not acme's
        lambda: acme_ops.list_approvals(tenant="globex"),
        # Another tenant's operator can neither change nor read acme's runs.
        lambda: globex_ops.terminate(run, reason="x", tenant="acme"),
        lambda: globex_ops.cancel(run, reason="x", tenant="acme"),
        lambda: globex_ops.reset(run, to_event=1, reason="x", tenant="acme"),
        lambda: globex_ops.export_run(run, tenant="acme"),
        lambda: globex_ops.triage("terminate", run_ids=[run], reason="x", tenant="acme"),
        lambda: globex_ops.issue_approval_token("a", "bob", reason="x", tenant="acme"),
        lambda: globex_ops.change_approver_role(
            grant=True, role="finance", approver="eve", reason="x", tenant="acme"
        ),
        lambda: acme_ops.list_troubled(tenant="globex"),
        # Versions and the audit log are shared by every tenant: not for a one-tenant operator.
        lambda: acme_ops.list_versions(),
        lambda: acme_ops.list_audit(),
        lambda: acme_ops.upload_version(modules["orders"]),
    ]
    for refused in refusals:
        with pytest.raises(NotAuthorised):
            refused()
    # Asking in one's own tenant for another tenant's run finds nothing: ids do not cross.
    with pytest.raises(Exception, match="not found"):
        globex.describe(run, tenant="globex")
    assert [r.run_id for r in acme.list_runs(tenant="acme")[0]] == [run]
    acme_ops.terminate(run, reason="test", tenant="acme")
    assert acme.result(run, tenant="acme").status is RunStatus.TERMINATED


def test_credentials_are_granted_rotated_revoked_and_audited(secured: Secured) -> None:
    admin = secured.admin
    principal, token = admin.change_credential(
        "grant", "shop", role="application", tenants=["acme"], reason="new service"
    )
    assert token.startswith("amb_") and principal.tenants == ("acme",)
    shop = secured.client(token)
    assert shop.list_runs(tenant="acme")[0] == []

    _, rotated = admin.change_credential("rotate", "shop", reason="leaked in a log")
    with pytest.raises(NotAuthenticated):
        shop.list_runs(tenant="acme")
    shop = secured.client(rotated)
    assert shop.list_runs(tenant="acme")[0] == []

    admin.change_credential("revoke", "shop", reason="retired")
    with pytest.raises(NotAuthenticated):
        shop.list_runs(tenant="acme")
    with pytest.raises(PrincipalNotFound):
        admin.change_credential("rotate", "shop", reason="again")

    listed = {p.name: p for p in admin.list_credentials()}
    assert listed["shop"].revoked_at is not None and listed["root"].revoked_at is None
    actions = [(r.action, r.actor, r.target) for r in admin.list_audit()]
    assert actions == [
        ("auth.grant", "test", "principal:root"),
        ("auth.grant", "root", "principal:shop"),
        ("auth.rotate", "root", "principal:shop"),
        ("auth.revoke", "root", "principal:shop"),
    ]
    # No token or hash is ever listed or audited.
    assert token not in repr(admin.list_audit()) and rotated not in repr(listed)

    # The last admin stays.
    with pytest.raises(Conflict, match="last admin"):
        admin.change_credential("revoke", "root", reason="oops")
    with pytest.raises(Conflict, match="last admin"):
        admin.change_credential("grant", "root", role="operator", reason="oops")
    _, second = admin.change_credential("grant", "root2", role="admin", reason="a second")
    secured.client(second).change_credential("revoke", "root", reason="handed over")
    with pytest.raises(NotAuthenticated):
        admin.list_credentials()

    with pytest.raises(InvalidInput, match="role must be one of"):
        secured.client(second).change_credential("grant", "x", role="god", reason="r")
    with pytest.raises(InvalidInput, match="serves queues, not tenants"):
        secured.client(second).change_credential(
            "grant", "x", role="worker", tenants=["acme"], reason="r"
        )


def test_a_server_that_does_not_check_refuses_to_manage_credentials(
    make_server: Callable[..., InProcessServer],
) -> None:
    open_server = make_server()
    with pytest.raises(NotAuthorised, match="does not check credentials"):
        open_server.client.change_credential("grant", "me", role="admin", reason="mine")
    assert open_server.server.credentials.list() == []


def test_approval_decisions_need_no_api_credential(secured: Secured) -> None:
    anonymous = secured.client()
    # The approval token is the credential: a forged one is refused by the approvals service,
    # not by the API's door.
    with pytest.raises(Exception, match="approval link is invalid") as refused:
        anonymous.decide_approval("apv_forged", approve=True)
    assert not isinstance(refused.value, NotAuthenticated)


def test_a_worker_credential_cannot_touch_another_fleets_leases(
    secured: Secured, modules: dict[str, bytes], db: Database
) -> None:
    secured.admin.upload_version(modules["orders"], promote=True)
    app = secured.grant("shop", "application")
    run = app.start_run("orders", ORDER, workflow_id="o-1").run.run_id
    ours = secured.grant("fleet-a", "worker")
    theirs = secured.grant("fleet-b", "worker", queues=["other"])
    task = ours.poll_task(worker_id="w-1", wait_s=5)
    assert task is not None and task.run_id == run
    assert _tasks(db) == [("workflow", "leased", "fleet-a/w-1")]

    # Knowing the task, its fencing token and the worker's id is not enough.
    with pytest.raises(LeaseLost):
        theirs.heartbeat(task, worker_id="w-1")
    with pytest.raises(LeaseLost):
        theirs.fail_task(task, FailureReport(reason="trap", message="forged"), worker_id="w-1")
    assert theirs.release_leases("w-1") == 0
    assert _tasks(db) == [("workflow", "leased", "fleet-a/w-1")]
    assert ours.heartbeat(task, worker_id="w-1") is not None
    assert ours.release_leases("w-1") == 1


def test_a_client_finds_its_credential_like_the_cli(
    secured: Secured, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, token = secured.admin.change_credential("grant", "app", role="application", reason="t")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AMBER_TOKEN", raising=False)
    monkeypatch.setenv("AMBER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(NotAuthenticated, match="needs a credential"):
        secured.client(None).list_runs()
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "token").write_text(token + "\n")
    assert secured.client(None).list_runs()[0] == []
    monkeypatch.setenv("AMBER_TOKEN", "amb_from_the_environment")
    with pytest.raises(NotAuthenticated, match="unknown, rotated or revoked"):
        secured.client(None).list_runs()


def test_the_workers_stream_is_checked_item_by_item(
    secured: Secured, modules: dict[str, bytes], db: Database
) -> None:
    secured.admin.upload_version(modules["orders"], promote=True)
    app = secured.grant("shop", "application")
    app.start_run("orders", ORDER, workflow_id="o-1")
    ours = secured.grant("fleet-a", "worker")
    theirs = secured.grant("fleet-b", "worker", queues=["other"])
    task = ours.poll_task(worker_id="w-1", wait_s=5)
    assert task is not None

    streams = [c.work_stream() for c in (secured.client(), app, theirs, ours)]
    anonymous, application, other_fleet, own = streams
    try:
        with pytest.raises(NotAuthenticated, match="needs a credential"):
            anonymous.heartbeat(task, worker_id="w-1")
        with pytest.raises(NotAuthorised, match=r"shop \(application\) may not call Work"):
            application.heartbeat(task, worker_id="w-1")
        # Another fleet's items name its own holder: the lease is not theirs.
        with pytest.raises(LeaseLost):
            other_fleet.heartbeat(task, worker_id="w-1")
        failure = FailureReport(reason="trap", message="forged")
        with pytest.raises(LeaseLost):
            other_fleet.fail_task(task, failure, worker_id="w-1")
        with pytest.raises(NotAuthorised, match="may not serve queue 'main'"):
            other_fleet.fail_task(task, failure, worker_id="w-1", next_queue="main")
        assert _tasks(db) == [("workflow", "leased", "fleet-a/w-1")]
        assert own.heartbeat(task, worker_id="w-1").cancel_requested is False
    finally:
        for stream in streams:
            stream.close()
