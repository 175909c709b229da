"""The audit service end to end: run commands sent over gRPC (cancel, terminate, reset) leave
audit records in their own transactions, beside the version commands' records, in one chain
that verifies; listing pages in chain order; bad arguments are refused."""

from __future__ import annotations

import pytest

from amber.abi import InvalidInput
from amber.history import AUDIT_GENESIS_HASH, Cursor, Database
from amber.runtime.services._audit import AuditService
from tests.conftest import InProcessServer

ORDER = {"order_id": "A-1", "sku": "BOOK-1", "quantity": 1, "amount_cents": 100}


@pytest.fixture
def audit(db: Database) -> AuditService:
    """The service over an empty log with no head yet (the shared fixture empties only
    `amber_audit`)."""
    db.run(lambda cur: cur.execute("TRUNCATE amber_audit, amber_audit_head"))
    return AuditService(db)


@pytest.fixture
def srv(audit: AuditService, make_server, modules: dict[str, bytes]) -> InProcessServer:
    server: InProcessServer = make_server()
    server.client.upload_version(modules["orders"], promote=True)
    return server


def _start(srv: InProcessServer, workflow_id: str) -> str:
    return srv.client.start_run("orders", ORDER, workflow_id=workflow_id).run.run_id


def test_run_commands_are_audited_in_one_chain_with_the_others(
    srv: InProcessServer, audit: AuditService
) -> None:
    digest = srv.client.list_versions()[0].digest
    srv.client.label_version(digest, "orders@1", operator="release@x")
    cancelled, terminated, reset = (_start(srv, f"wf-{n}") for n in range(3))

    srv.client.cancel(cancelled, reason="customer changed their mind", operator="ops@x")
    srv.client.cancel(cancelled, reason="again", operator="ops@x")
    srv.client.terminate(terminated, reason="fraud suspected", operator="sec@x")
    new = srv.client.reset(reset, to_event=1, reason="start over", operator="ops@y")
    srv.client.signal(new.run_id, "go", {})  # not an operator command: not audited

    cancels = audit.list(cancelled, 10)
    assert [(e.action, e.actor, e.reason) for e in cancels] == [
        ("run.cancel", "ops@x", "customer changed their mind"),
        ("run.cancel", "ops@x", "again"),
    ]
    assert [e.detail["already_requested"] for e in cancels] == [False, True]
    [terminate] = audit.list(terminated, 10)
    assert (terminate.action, terminate.actor, terminate.reason) == (
        "run.terminate",
        "sec@x",
        "fraud suspected",
    )
    assert terminate.detail == {"tenant": "default", "was": "running"}
    [reset_entry] = audit.list(reset, 10)
    assert (reset_entry.action, reset_entry.actor, reset_entry.reason) == (
        "run.reset",
        "ops@y",
        "start over",
    )
    assert reset_entry.detail == {
        "tenant": "default",
        "new_run_id": new.run_id,
        "to_event": 1,
        "was": "running",
        "workflow_id": "wf-2",
    }
    assert audit.list(new.run_id, 10) == []

    everything = audit.list(None, 100)
    assert [e.action for e in everything] == [
        "version.upload",
        "version.label",
        "run.cancel",
        "run.cancel",
        "run.terminate",
        "run.reset",
    ]
    assert [e.seq for e in everything] == list(range(1, len(everything) + 1))
    result = audit.verify()
    assert result.ok and result.checked == len(everything)
    assert (
        audit.head()
        == (len(everything), everything[-1].hash)
        == (
            result.head_seq,
            result.head_hash,
        )
    )


def test_a_refused_command_leaves_no_audit_record(
    srv: InProcessServer, audit: AuditService
) -> None:
    run = _start(srv, "wf-closed")
    srv.client.terminate(run, reason="first", operator="ops@x")
    before = audit.head()

    with pytest.raises(Exception, match="already terminated"):
        srv.client.terminate(run, reason="second", operator="ops@x")
    with pytest.raises(InvalidInput):
        srv.client.reset(run, to_event=99, reason="nowhere", operator="ops@x")

    assert audit.head() == before
    assert audit.verify().ok


def test_listing_pages_in_chain_order(srv: InProcessServer, audit: AuditService) -> None:
    runs = [_start(srv, f"page-{n}") for n in range(5)]
    for run in runs:
        srv.client.terminate(run, reason="tidy up", operator="ops@x")

    first = audit.list(None, 3)
    second = audit.list(None, 3, after_seq=first[-1].seq)
    assert [e.seq for e in first + second] == [1, 2, 3, 4, 5, 6]  # the upload, then 5 runs
    assert [e.target for e in audit.list(None, 100) if e.action == "run.terminate"] == runs
    assert audit.list(runs[2], 10, after_seq=audit.list(runs[2], 1)[0].seq) == []


def test_an_anchor_is_checked_and_bad_arguments_are_refused(
    srv: InProcessServer, audit: AuditService, db: Database
) -> None:
    srv.client.terminate(_start(srv, "anchored"), reason="done", operator="ops@x")
    seq, anchor = audit.head()  # the upload, then the termination
    assert seq == 2 and audit.verify(anchor).ok and audit.verify(AUDIT_GENESIS_HASH).ok

    failed = audit.verify(bytes(range(32)))
    assert not failed.ok and "is not in the chain" in failed.problem

    def tamper(cur: Cursor) -> None:  # as a superuser could: with the append-only trigger off
        cur.execute("SET LOCAL session_replication_role = replica")
        cur.execute("UPDATE amber_audit SET actor = 'someone' WHERE seq = 2")

    db.run(tamper)
    edited = audit.verify(anchor, batch=1)
    assert (edited.ok, edited.first_bad_seq, edited.checked) == (False, 2, 1)

    for bad in (
        lambda: audit.verify(b"short"),
        lambda: audit.verify(batch=0),
        lambda: audit.list(None, 0),
        lambda: audit.list(None, 1001),
        lambda: audit.list(None, 10, after_seq=-1),
    ):
        with pytest.raises(InvalidInput):
            bad()
