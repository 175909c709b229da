"""The Python ports of the C samples (`abi/samples/orders.py`, `expense.py`, `rollout_v1.py`,
`rollout_v2.py`) on the real stack: server, PostgreSQL, worker and the wasmtime sandbox.

Each port claims to be a drop-in for its C sample, so the tests hold it to the C sample's tests
(test_engine.py, test_approvals.py, test_rollout.py) and compare it with the C module itself:
the same results for the same input, the same activity arguments byte for byte, and C histories
that replay on the Python version. Both kinds of module declare the same workflow types, so they
share a server only with every run pinned to a version.

`rollout_v3.py` is not built by the suite (to save a build); it is checked by hand.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import Any

import pytest

from amber.history import Event, EventType, Run, RunStatus
from amber.runtime.client._client import decode
from amber.runtime.model import Bundle
from amber.runtime.model._clock import ManualClock, to_ms
from amber.runtime.model._settings import EngineSettings, RetryPolicy
from amber.runtime.model._tasks import idempotency_key
from amber.runtime.sandbox._engine import SandboxEngine
from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.worker._worker import Worker
from amber.surgical_pool import replay_history
from amber.tools._build import BuildResult
from tests.conftest import InProcessServer
from tests.runtime.test_approvals import Inbox

from ._engine_helpers import drive, make_worker, query, run_one_task, serving, settle

MakeServer = Callable[..., InProcessServer]
ORDER = {"order_id": "A-7", "sku": "BOOK-1", "quantity": 2, "amount_cents": 2500}
DAY_MS = 24 * 3600 * 1000
ONBOARD = "onboard"


def _scheduled(srv: InProcessServer, run_id: str) -> list[str]:
    return [
        e.payload["name"]
        for e in srv.client.history(run_id)
        if e.type is EventType.ACTIVITY_SCHEDULED
    ]


def _activity_calls(events: list[Event]) -> list[tuple[str, bytes]]:
    """Every activity the run scheduled, with its arguments as they were recorded (msgpack)."""
    return [
        (e.payload["name"], e.payload["args"])
        for e in events
        if e.type is EventType.ACTIVITY_SCHEDULED
    ]


def _markers(srv: InProcessServer, run_id: str, kind: str) -> list[Any]:
    return [
        e.payload["value"]
        for e in srv.client.history(run_id)
        if e.type is EventType.MARKER_RECORDED and e.payload["kind"] == kind
    ]


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# ---- orders --------------------------------------------------------------------------------


@pytest.fixture
def py_orders(make_server: MakeServer, python_modules: Mapping[str, bytes]) -> InProcessServer:
    srv = make_server()
    srv.client.upload_version(python_modules["py_orders"], promote=True)
    return srv


def test_a_python_order_ships_with_the_c_sample_s_result_and_history(
    py_orders: InProcessServer, py_sandbox: Sandbox, python_built: Mapping[str, BuildResult]
) -> None:
    srv = py_orders
    run_id = srv.client.start_run("orders", ORDER, workflow_id="order-A-7").run.run_id
    run = drive(make_worker(srv.client, py_sandbox), srv.client, run_id)

    assert run.status is RunStatus.COMPLETED
    (placed_at,) = _markers(srv, run_id, "now")
    assert decode(run.result) == {
        "order_id": "A-7",
        "status": "shipped",
        "reservation": "rsv-A-7",
        "charge": f"ch-A-7-{idempotency_key(run_id, 2)}",
        "tracking": "trk-A-7",
        "placed_at": placed_at,
    }
    events = srv.client.history(run_id)
    assert {e.digest for e in events} == {python_built["py_orders"].sha256}
    assert _scheduled(srv, run_id) == [
        "reserve_inventory",
        "charge_payment",
        "ship_order",
        "send_confirmation",
    ]
    types = [e.type for e in events]
    assert types.count(EventType.ACTIVITY_COMPLETED) == 4 and types[-1] is EventType.RUN_COMPLETED


def test_a_python_order_replays_offline_from_its_triage_bundle(
    py_orders: InProcessServer, py_sandbox: Sandbox
) -> None:
    """Built, uploaded, run through the server and worker, then exported and replayed offline
    (no server, no database) to the same result: what `triage replay` does with the bundle
    (its CLI runs in test_python_guests.py)."""
    srv = py_orders
    run_id = srv.client.start_run("orders", ORDER, workflow_id="order-A-9").run.run_id
    drive(make_worker(srv.client, py_sandbox), srv.client, run_id)
    bundle = Bundle.decode(srv.client.export_run(run_id, operator="ops"))
    result = replay_history(
        bundle, lambda source, clock: Sandbox(py_sandbox._engine, clock, source)
    )
    assert result.reproduced, result.message
    assert (result.recorded_status, result.replayed_status) == ("completed", "completed")
    assert result.result_matches and result.new_commands == 0


def test_a_declined_payment_is_compensated_by_releasing_the_inventory(
    py_orders: InProcessServer, py_sandbox: Sandbox
) -> None:
    srv = py_orders
    run_id = srv.client.start_run("orders", {**ORDER, "card": "declined"}).run.run_id
    run = drive(make_worker(srv.client, py_sandbox), srv.client, run_id)

    assert run.status is RunStatus.COMPLETED
    (placed_at,) = _markers(srv, run_id, "now")
    assert decode(run.result) == {
        "order_id": "A-7",
        "status": "payment_declined",
        "reservation": "rsv-A-7",
        "placed_at": placed_at,
    }
    assert _scheduled(srv, run_id) == ["reserve_inventory", "charge_payment", "release_inventory"]
    (declined,) = [e for e in srv.client.history(run_id) if e.type is EventType.ACTIVITY_FAILED]
    assert (declined.payload["error_type"], declined.payload["attempt"]) == ("PaymentDeclined", 1)


def test_a_flaky_gateway_is_retried_and_bad_orders_fail(
    make_server: MakeServer, python_modules: Mapping[str, bytes], py_sandbox: Sandbox
) -> None:
    fast = RetryPolicy(initial=timedelta(milliseconds=10), max_attempts=3)
    srv = make_server(settings=EngineSettings(activity_retry=fast))
    srv.client.upload_version(python_modules["py_orders"], promote=True)
    worker = make_worker(srv.client, py_sandbox)

    flaky = srv.client.start_run("orders", {**ORDER, "card": "flaky"}).run.run_id
    assert decode(drive(worker, srv.client, flaky).result)["status"] == "shipped"
    completed = [e for e in srv.client.history(flaky) if e.type is EventType.ACTIVITY_COMPLETED]
    assert [e.payload["attempt"] for e in completed] == [1, 2, 1, 1]
    failures = srv.client.describe(flaky).recent_failures
    assert [(f.reason, f.attempt) for f in failures] == [("application_error", 1)]

    bad = drive(worker, srv.client, srv.client.start_run("orders", {"sku": 1}).run.run_id)
    assert (bad.status, bad.error_type) == (RunStatus.FAILED, "BadInput")
    no_quantity = drive(
        worker, srv.client, srv.client.start_run("orders", {**ORDER, "quantity": 0}).run.run_id
    )
    assert (no_quantity.status, no_quantity.error_type, no_quantity.error_message) == (
        RunStatus.FAILED,
        "InvalidQuantity",
        "quantity must be > 0",
    )


# ---- orders: the Python module against the C one ------------------------------------------


@pytest.fixture
def both_orders(
    make_server: MakeServer,
    modules: dict[str, bytes],
    python_modules: Mapping[str, bytes],
    sandbox_engine: SandboxEngine,
) -> tuple[InProcessServer, Worker, dict[str, str]]:
    """One server holding the C and the Python `orders` (the C one current), and a worker
    whose sandbox clock stands still, so both record the same `now`."""
    srv = make_server()
    digests = {
        "c": srv.client.upload_version(modules["orders"], promote=True).version.digest,
        "py": srv.client.upload_version(python_modules["py_orders"]).version.digest,
    }
    frozen = Sandbox(sandbox_engine, ManualClock(), srv.client.get_module)
    return srv, make_worker(srv.client, frozen), digests


def _closed(run: Run) -> tuple[RunStatus, str | None, str | None, Any]:
    """What a test of the sample sees: status, error and result (the run's own id, which the
    charge id embeds, replaced by a placeholder)."""
    result = decode(run.result) if run.result is not None else None
    if isinstance(result, dict) and "charge" in result:
        assert run.run_id in result["charge"]
        result["charge"] = result["charge"].replace(run.run_id, "<run>")
    return run.status, run.error_type, run.error_message, result


@pytest.mark.parametrize(
    "order",
    [
        ORDER,
        {**ORDER, "card": "declined"},
        {**ORDER, "card": "mastercard", "quantity": 1},
        {**ORDER, "quantity": 0},
        {**ORDER, "amount_cents": -5},
        {"order_id": "A-7"},
    ],
    ids=["shipped", "declined", "card", "no-quantity", "bad-amount", "bad-input"],
)
def test_the_python_orders_answers_as_the_c_orders_does(
    both_orders: tuple[InProcessServer, Worker, dict[str, str]], order: dict[str, Any]
) -> None:
    srv, worker, digests = both_orders
    runs = {
        kind: drive(
            worker, srv.client, srv.client.start_run("orders", order, version=digest).run.run_id
        )
        for kind, digest in digests.items()
    }
    assert {kind: run.digest for kind, run in runs.items()} == digests  # pinned, both
    assert _closed(runs["py"]) == _closed(runs["c"])
    histories = {kind: srv.client.history(run.run_id) for kind, run in runs.items()}
    assert _activity_calls(histories["py"]) == _activity_calls(histories["c"])
    assert [e.type for e in histories["py"]] == [e.type for e in histories["c"]]


def test_a_cancelled_order_fails_with_cancelled_as_the_c_sample_s_does(
    both_orders: tuple[InProcessServer, Worker, dict[str, str]], py_sandbox: Sandbox
) -> None:
    srv, worker, digests = both_orders
    closed: dict[str, tuple[RunStatus, str | None, str | None]] = {}
    for kind, digest in digests.items():
        run_id = srv.client.start_run("orders", ORDER, version=digest).run.run_id
        run_one_task(srv.client, py_sandbox)  # schedules reserve_inventory; nobody runs it
        assert srv.client.cancel(run_id, reason="customer changed their mind")
        run = drive(worker, srv.client, run_id)
        closed[kind] = (run.status, run.error_type, run.error_message)
        assert _scheduled(srv, run_id) == ["reserve_inventory"]  # and no compensation
    assert (
        closed["py"]
        == closed["c"]
        == (
            RunStatus.FAILED,
            "Cancelled",
            "customer changed their mind",
        )
    )


# ---- expense -------------------------------------------------------------------------------

Expense = tuple[InProcessServer, ManualClock, Inbox]


@pytest.fixture(params=["py_expense", "expense"], ids=["python", "c"])
def expense(
    request: pytest.FixtureRequest,
    make_server: MakeServer,
    modules: dict[str, bytes],
    python_modules: Mapping[str, bytes],
) -> Expense:
    """A server with a manual clock and an approval inbox, running the Python `expense` or, to
    show that the same test holds for both, the C one."""
    clock, inbox = ManualClock(), Inbox()
    srv = make_server(clock=clock, approval_sink=inbox)
    name: str = request.param
    wasm = python_modules[name] if name.startswith("py_") else modules[name]
    srv.client.upload_version(wasm, promote=True)
    return srv, clock, inbox


def _start_expense(
    engine: Expense,
    sandbox: Sandbox,
    *,
    approvers: list[str],
    required: int = 1,
    expires_ms: int = DAY_MS,
) -> str:
    srv, _, _ = engine
    policy = {"approvers": approvers, "roles": [], "required": required}
    run_id = srv.client.start_run(
        "expense", {"expense_id": "E-1", "policy": policy, "expires_ms": expires_ms}
    ).run.run_id
    settle(make_worker(srv.client, sandbox))  # requests the approval and waits
    srv.server.sweep()  # mints and delivers the tokens
    assert srv.client.result(run_id).status is RunStatus.RUNNING
    return run_id


def _finish_expense(engine: Expense, sandbox: Sandbox, run_id: str) -> dict[str, Any]:
    srv, _, _ = engine
    settle(make_worker(srv.client, sandbox))
    run = srv.client.result(run_id)
    assert run.status is RunStatus.COMPLETED, srv.client.describe(run_id)
    result: dict[str, Any] = decode(run.result)
    return result


def test_an_approved_expense_is_paid(expense: Expense, py_sandbox: Sandbox) -> None:
    srv, clock, inbox = expense
    run_id = _start_expense(expense, py_sandbox, approvers=["alice"])
    (issued,) = inbox.issued
    assert issued.approver == "alice"
    srv.client.decide_approval(issued.token, approve=True, comment="ok")
    result = _finish_expense(expense, py_sandbox, run_id)
    assert result == {
        "expense_id": "E-1",
        "status": "paid",
        "outcome": "approved",
        "decisions": [
            {
                "approver": "alice",
                "approve": True,
                "comment": "ok",
                "at_ms": to_ms(clock.now()),
            }
        ],
    }
    assert _scheduled(srv, run_id) == ["pay"]
    (approval,) = srv.client.list_approvals(run_id=run_id)
    assert approval.status == "approved" and approval.action == "pay expense E-1"


def test_a_rejected_expense_is_not_paid(expense: Expense, py_sandbox: Sandbox) -> None:
    srv, _, inbox = expense
    run_id = _start_expense(expense, py_sandbox, approvers=["alice", "bob"], required=2)
    srv.client.decide_approval(inbox.token("bob"), approve=False, comment="too much")
    result = _finish_expense(expense, py_sandbox, run_id)
    assert (result["status"], result["outcome"]) == ("rejected", "rejected")
    assert [(d["approver"], d["approve"], d["comment"]) for d in result["decisions"]] == [
        ("bob", False, "too much")
    ]
    assert _scheduled(srv, run_id) == []


def test_an_expired_expense_takes_the_timeout_path(expense: Expense, py_sandbox: Sandbox) -> None:
    srv, clock, _ = expense
    run_id = _start_expense(expense, py_sandbox, approvers=["alice"], expires_ms=3 * DAY_MS)
    clock.advance(timedelta(days=3) - timedelta(seconds=1))
    srv.server.sweep()
    assert srv.client.result(run_id).status is RunStatus.RUNNING  # not yet
    clock.advance(timedelta(seconds=2))  # three days pass: no worker holds the run
    srv.server.sweep()
    result = _finish_expense(expense, py_sandbox, run_id)
    assert result == {
        "expense_id": "E-1",
        "status": "escalated",
        "outcome": "expired",
        "decisions": [],
    }
    assert _scheduled(srv, run_id) == ["escalate"]


def test_a_decision_before_the_workflow_waits_is_kept(
    expense: Expense, py_sandbox: Sandbox
) -> None:
    srv, _, inbox = expense
    policy = {"approvers": ["alice"], "roles": [], "required": 1}
    run_id = srv.client.start_run(
        "expense",
        {"expense_id": "E-2", "policy": policy, "expires_ms": DAY_MS, "prepare_first": True},
    ).run.run_id
    run_one_task(srv.client, py_sandbox)  # the activation only: `prepare` is not run yet
    srv.server.sweep()
    srv.client.decide_approval(inbox.token("alice"), approve=True)
    types = [e.type for e in srv.client.history(run_id)]
    assert EventType.APPROVAL_RESOLVED in types and EventType.ACTIVITY_COMPLETED not in types
    assert _finish_expense(expense, py_sandbox, run_id)["status"] == "paid"
    assert _scheduled(srv, run_id) == ["prepare", "pay"]


# ---- rollout -------------------------------------------------------------------------------


@pytest.fixture
def rollout(make_server: MakeServer, python_modules: Mapping[str, bytes]) -> InProcessServer:
    srv = make_server()
    srv.client.upload_version(python_modules["py_rollout_v1"], promote=True, label="onboard@1")
    return srv


@pytest.fixture
def background(rollout: InProcessServer, py_sandbox: Sandbox) -> Iterator[Worker]:
    """A worker polling in a thread: version checks and migrations wait for workers."""
    with serving(make_worker(rollout.client, py_sandbox, worker_id="background")) as worker:
        yield worker


def _onboarded(user: str, *, audited: bool) -> dict[str, Any]:
    return {"user": user, "account": f"acct-{user}", "welcomed": True, "audited": audited}


def _waits_for_go(srv: InProcessServer, run_id: str) -> bool:
    return any(e.type is EventType.SIGNAL_AWAITED for e in srv.client.history(run_id))


def _park(srv: InProcessServer, users: list[str], version: str = "") -> dict[str, str]:
    """Start runs (a background worker serves them) and wait until each waits for "go"."""
    runs = {
        user: srv.client.start_run(
            ONBOARD, {"user": user}, workflow_id=user, version=version
        ).run.run_id
        for user in users
    }
    for run_id in runs.values():
        _wait_for(functools.partial(_waits_for_go, srv, run_id), "the signal wait")
    return runs


def _go(srv: InProcessServer, run_ids: list[str]) -> None:
    for run_id in run_ids:
        srv.client.signal(run_id, "go", {})
    for run_id in run_ids:
        assert srv.client.result(run_id, wait_s=60).status.closed, run_id


def test_a_run_parked_on_v1_finishes_on_v1_while_new_runs_start_on_v2(
    rollout: InProcessServer,
    py_sandbox: Sandbox,
    python_modules: Mapping[str, bytes],
    python_built: Mapping[str, BuildResult],
) -> None:
    srv, v1 = rollout, python_built["py_rollout_v1"].sha256
    worker = make_worker(srv.client, py_sandbox)
    old = srv.client.start_run(ONBOARD, {"user": "old"}, workflow_id="old").run.run_id
    settle(worker)
    assert _waits_for_go(srv, old) and srv.client.result(old).status is RunStatus.RUNNING
    assert query(worker, srv.client, old, "status") == "waiting"

    v2 = srv.client.upload_version(
        python_modules["py_rollout_v2"], promote=True, label="onboard@2"
    ).version.digest
    assert v2 == python_built["py_rollout_v2"].sha256
    new = srv.client.start_run(ONBOARD, {"user": "new"}, workflow_id="new").run.run_id
    settle(worker)
    assert srv.client.result(new).digest == v2 and srv.client.result(old).digest == v1

    for run_id in (old, new):
        srv.client.signal(run_id, "go", {"by": "ops"})
    settle(worker)
    finished_old, finished_new = srv.client.result(old), srv.client.result(new)
    assert finished_old.status is RunStatus.COMPLETED
    assert decode(finished_old.result) == _onboarded("old", audited=False)
    assert {e.digest for e in srv.client.history(old)} == {v1}  # every event came from v1
    assert _markers(srv, old, "patched") == []
    assert _scheduled(srv, old) == ["create_account", "send_welcome"]
    assert finished_new.status is RunStatus.COMPLETED
    assert decode(finished_new.result) == _onboarded("new", audited=True)
    assert _markers(srv, new, "patched") == ["add-audit"]
    assert _scheduled(srv, new) == ["create_account", "audit_log", "send_welcome"]


def test_v1_histories_replay_on_v2_and_migrated_runs_take_the_patch(
    rollout: InProcessServer,
    background: Worker,
    python_modules: Mapping[str, bytes],
    python_built: Mapping[str, BuildResult],
) -> None:
    srv, v1 = rollout, python_built["py_rollout_v1"].sha256
    done = _park(srv, ["done"])["done"]
    _go(srv, [done])  # a closed v1 history too
    runs = list(_park(srv, [f"m-{i}" for i in range(3)]).values())
    v2 = srv.client.upload_version(python_modules["py_rollout_v2"], label="onboard@2")
    candidate = v2.version.digest

    checked, checks = srv.client.check_version("onboard@2", ONBOARD, closed_sample=5, wait_s=60)
    assert checked == candidate
    assert {c.run_id: c.verdict for c in checks} == dict.fromkeys([*runs, done], "compatible")
    _, moved = srv.client.migrate_runs(
        candidate, ONBOARD, run_ids=runs[:2], reason="ship the audit", operator="ops", wait_s=60
    )
    assert {c.run_id: c.outcome for c in moved} == dict.fromkeys(runs[:2], "migrated")

    _go(srv, runs)
    for run_id in runs[:2]:
        closed = srv.client.result(run_id)
        assert closed.digest == candidate and decode(closed.result)["audited"] is True
        (event,) = [e for e in srv.client.history(run_id) if e.type is EventType.RUN_MIGRATED]
        assert (event.payload["from"], event.payload["to"]) == (v1, candidate)
    closed = srv.client.result(runs[2])
    assert closed.digest == v1 and decode(closed.result)["audited"] is False
    assert decode(srv.client.result(done).result) == _onboarded("done", audited=False)


def test_a_python_v3_that_reorders_the_steps_is_caught_by_the_check_and_not_migrated(
    rollout: InProcessServer,
    background: Worker,
    python_modules: Mapping[str, bytes],
    python_built: Mapping[str, BuildResult],
) -> None:
    srv, v1 = rollout, python_built["py_rollout_v1"].sha256
    runs = list(_park(srv, ["r-1", "r-2"]).values())
    v3 = srv.client.upload_version(python_modules["py_rollout_v3"]).version.digest

    _, checks = srv.client.check_version(v3, ONBOARD, run_ids=runs, wait_s=60)
    # v3 welcomes before it waits: each v1 history diverges where it awaited the signal.
    for check in checks:
        assert (check.verdict, check.position) == ("incompatible", 1)
        assert "signal" in check.recorded and "send_welcome" in check.issued
    _, moved = srv.client.migrate_runs(v3, ONBOARD, run_ids=runs, reason="try", wait_s=60)
    assert [c.outcome for c in moved] == ["refused", "refused"]
    _go(srv, runs)
    for run_id in runs:
        closed = srv.client.result(run_id)
        assert closed.digest == v1 and decode(closed.result)["audited"] is False


def test_c_v1_histories_replay_on_the_python_v2(
    rollout: InProcessServer,
    background: Worker,
    modules: dict[str, bytes],
    python_modules: Mapping[str, bytes],
) -> None:
    srv = rollout
    c_v1 = srv.client.upload_version(modules["rollout_v1"]).version.digest
    runs = list(_park(srv, ["c-1", "c-2"], version=c_v1).values())
    py_v2 = srv.client.upload_version(python_modules["py_rollout_v2"]).version.digest

    _, checks = srv.client.check_version(py_v2, ONBOARD, run_ids=runs, wait_s=60)
    assert [c.verdict for c in checks] == ["compatible", "compatible"]
    _, moved = srv.client.migrate_runs(py_v2, ONBOARD, run_ids=runs, reason="to Python", wait_s=60)
    assert [c.outcome for c in moved] == ["migrated", "migrated"]
    _go(srv, runs)
    for user, run_id in zip(["c-1", "c-2"], runs, strict=True):
        closed = srv.client.result(run_id)
        assert closed.digest == py_v2
        assert decode(closed.result) == _onboarded(user, audited=True)
        assert {e.digest for e in srv.client.history(run_id)} == {c_v1, py_v2}


def test_a_parked_run_cancelled_closes_as_cancelled(
    rollout: InProcessServer, py_sandbox: Sandbox
) -> None:
    srv = rollout
    worker = make_worker(srv.client, py_sandbox)
    run_id = srv.client.start_run(ONBOARD, {"user": "quitter"}).run.run_id
    settle(worker)
    assert srv.client.cancel(run_id, reason="changed my mind")
    settle(worker)
    closed = srv.client.result(run_id)
    assert (closed.status, closed.error_type, closed.error_message) == (
        RunStatus.CANCELLED,
        "Cancelled",
        "changed my mind",
    )
    assert _scheduled(srv, run_id) == ["create_account"]
