"""The real runs behind the golden histories of `tests/runtime/goldens` (see test_goldens.py).

Each scenario starts its own in-process server, drives runs through it with in-process workers
and returns the runs to record, one golden each. Together they write every `EventType`; each
scenario covers several. Time moves only with a `ManualClock` (advanced, then swept), except in
the rollout scenario: its checks and migrations wait for a polling worker, so it runs on the real
clock with a background worker, as tests/runtime/test_rollout.py does.

Scenarios look only at event *types* and run states, never at payloads: the payload form is
being retyped, and test_goldens.py keeps that knowledge in one place.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import msgpack

from amber.history import Event, EventType, RunStatus
from amber.runtime.model._approvals import IssuedToken
from amber.runtime.model._clock import ManualClock
from amber.runtime.model._settings import EngineSettings, PoisonPolicy
from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.worker._worker import Worker, WorkerSettings
from tests.conftest import GUEST_SOURCES, ROOT, InProcessServer

from ._engine_helpers import make_worker, run_one_task, settle


@dataclass(frozen=True, slots=True, kw_only=True)
class Kit:
    """What a scenario gets from the regeneration test's fixtures."""

    make_server: Callable[..., InProcessServer]
    modules: dict[str, bytes]
    """Built guests by `GUEST_SOURCES` name."""
    sandbox: Sandbox


@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    """One run's history, as the server returned it, to be written as golden `name`."""

    name: str
    run_id: str
    workflow_type: str
    source: str
    """The guest's C source, relative to the repository root."""
    events: tuple[Event, ...]


def _record(srv: InProcessServer, name: str, run_id: str, module: str) -> Recorded:
    run = srv.client.result(run_id)
    assert run.status.closed, f"{name}: run {run_id} is still {run.status.value}"
    source, _ = GUEST_SOURCES[module]
    return Recorded(
        name=name,
        run_id=run.run_id,
        workflow_type=run.workflow_type,
        source=str(source.relative_to(ROOT)),
        events=tuple(srv.client.history(run.run_id)),
    )


def _types(srv: InProcessServer, run: str) -> list[EventType]:
    return [e.type for e in srv.client.history(run)]


def _advance(srv: InProcessServer, delta: timedelta) -> None:
    assert isinstance(srv.clock, ManualClock)
    srv.clock.advance(delta)
    srv.server.sweep()


def _manual(kit: Kit, *modules: str, **options: object) -> tuple[InProcessServer, Worker]:
    srv = kit.make_server(clock=ManualClock(), **options)
    for module in modules:
        srv.client.upload_version(kit.modules[module], promote=True)
    return srv, make_worker(srv.client, kit.sandbox, clock=srv.clock)


# -- shipment.c: children, timers, signals, termination, cancellation --------------------------

ADDRESS = "1 Main St"


def shipment_batch(kit: Kit) -> list[Recorded]:
    """A batch of two shipments: one is terminated by an operator, the other's deadline passes
    (it escalates), so the batch gets one child result and one child failure and fails."""
    srv, worker = _manual(kit, "shipment")
    batch = {"batch_id": "B-7", "address": ADDRESS, "deadline_days": 2}
    parent = srv.client.start_run("shipment_batch", batch, workflow_id="B-7").run.run_id
    settle(worker)
    late, lost = srv.client.result("B-7-1").run_id, srv.client.result("B-7-2").run_id
    srv.client.terminate(lost, reason="the carrier lost the parcel", operator="ops@example.com")
    settle(worker)
    _advance(srv, timedelta(days=2, seconds=1))
    settle(worker)
    assert srv.client.result(late).status is RunStatus.COMPLETED
    assert srv.client.result(lost).status is RunStatus.TERMINATED
    closed = srv.client.result(parent)
    assert closed.status is RunStatus.FAILED and closed.error_type == "ChildTerminated"
    assert EventType.TIMER_FIRED in _types(srv, late)
    return [
        _record(srv, "shipment_batch_failed", parent, "shipment"),
        _record(srv, "shipment_late", late, "shipment"),
        _record(srv, "shipment_terminated", lost, "shipment"),
    ]


def shipment_signals(kit: Kit) -> list[Recorded]:
    """A shipment delivered before its deadline (the signal wins the race, the timer is
    cancelled) and one cancelled before any worker started its booking."""
    srv, worker = _manual(kit, "shipment")
    order = {"shipment_id": "S-1", "address": ADDRESS, "deadline_days": 3}
    delivered = srv.client.start_run("shipment", order, workflow_id="S-1").run.run_id
    settle(worker)
    assert srv.client.signal("S-1", "delivered", {"signed_by": "Ann"}, request_id="courier-1")
    settle(worker)
    assert srv.client.result(delivered).status is RunStatus.COMPLETED
    assert EventType.TIMER_CANCELLED in _types(srv, delivered)

    order = {"shipment_id": "S-2", "address": ADDRESS, "deadline_days": 3}
    cancelled = srv.client.start_run("shipment", order, workflow_id="S-2").run.run_id
    run_one_task(srv.client, kit.sandbox)  # schedules book_carrier; nobody runs it
    assert srv.client.cancel(cancelled, reason="the customer withdrew", operator="ops@example.com")
    settle(worker)
    assert srv.client.result(cancelled).status is RunStatus.CANCELLED
    assert EventType.ACTIVITY_CANCELLED in _types(srv, cancelled)
    return [
        _record(srv, "shipment_delivered", delivered, "shipment"),
        _record(srv, "shipment_cancelled", cancelled, "shipment"),
    ]


def shipment_timed_out(kit: Kit) -> list[Recorded]:
    """A shipment whose workflow execution timeout passes while it waits for its signal."""
    srv, worker = _manual(kit, "shipment")
    order = {"shipment_id": "S-3", "address": ADDRESS, "deadline_days": 30}
    run = srv.client.start_run("shipment", order, execution_timeout_s=3600).run.run_id
    settle(worker)
    _advance(srv, timedelta(hours=1, minutes=1))
    assert srv.client.result(run).status is RunStatus.TIMED_OUT
    return [_record(srv, "shipment_timed_out", run, "shipment")]


# -- orders.c and payments.c: markers, failures, reset, an activity timeout --------------------


def orders_reset(kit: Kit) -> list[Recorded]:
    """A declined order, reset by an operator to just after its reservation: the new run replays
    the copied prefix and runs the rest again (and is declined again)."""
    srv, worker = _manual(kit, "orders")
    order = {"order_id": "R-1", "sku": "LAMP-2", "quantity": 1, "amount_cents": 2500,
             "card": "declined"}  # fmt: skip
    old = srv.client.start_run("orders", order, workflow_id="order-R-1").run.run_id
    settle(worker)
    assert _types(srv, old)[3] is EventType.ACTIVITY_COMPLETED  # reserve_inventory
    new = srv.client.reset(old, to_event=4, reason="retry the charge", operator="ops@example.com")
    settle(worker)
    assert srv.client.result(new.run_id).status is RunStatus.COMPLETED
    assert _types(srv, old)[-1] is EventType.RUN_RESET
    return [
        _record(srv, "orders_reset_old", old, "orders"),
        _record(srv, "orders_reset_new", new.run_id, "orders"),
    ]


def pay_timed_out(kit: Kit) -> list[Recorded]:
    """A charge no worker picks up within its schedule-to-start timeout; the workflow fails
    with the timeout."""
    srv, worker = _manual(kit, "payments")
    pay = {"order_id": "P-1", "amount_cents": 100, "service": "http://127.0.0.1:9",
           "options": {"schedule_to_start_ms": 1000}}  # fmt: skip
    run = srv.client.start_run("pay", pay).run.run_id
    run_one_task(srv.client, kit.sandbox)  # schedules the charge; nobody runs it
    _advance(srv, timedelta(milliseconds=1100))
    settle(worker)
    closed = srv.client.result(run)
    assert closed.status is RunStatus.FAILED
    assert closed.error_type == "amber.timeout.schedule_to_start"
    return [_record(srv, "pay_timed_out", run, "payments")]


# -- expense.c: approvals ----------------------------------------------------------------------


class _Inbox:
    """An approval sink that keeps the tokens it is given."""

    def __init__(self) -> None:
        self.issued: list[IssuedToken] = []
        self._lock = threading.Lock()

    def deliver(self, issued: IssuedToken) -> None:
        with self._lock:
            self.issued.append(issued)


DAY_MS = 24 * 3600 * 1000


def expense_approvals(kit: Kit) -> list[Recorded]:
    """An expense approved by its approver, and one whose approval expires (the timeout path):
    the two writers of ApprovalResolved (a decision, the expiry timer)."""
    inbox = _Inbox()
    srv, worker = _manual(kit, "expense", approval_sink=inbox)

    def start(expense_id: str, approvers: list[str], expires_ms: int) -> str:
        policy = {"approvers": approvers, "roles": [], "required": 1}
        doc = {"expense_id": expense_id, "amount_cents": 4200, "policy": policy,
               "expires_ms": expires_ms}  # fmt: skip
        run_id = srv.client.start_run("expense", doc).run.run_id
        settle(worker)  # requests the approval and waits
        srv.server.sweep()  # mints and delivers the tokens
        return run_id

    approved = start("E-1", ["alice"], 3 * DAY_MS)
    (token,) = [i.token for i in inbox.issued if i.run_id == approved]
    srv.client.decide_approval(token, approve=True, comment="within budget")
    settle(worker)
    expired = start("E-2", ["bob"], DAY_MS)
    _advance(srv, timedelta(days=1, seconds=1))
    settle(worker)
    for run_id in (approved, expired):
        assert srv.client.result(run_id).status is RunStatus.COMPLETED
        assert EventType.APPROVAL_RESOLVED in _types(srv, run_id)
    return [
        _record(srv, "expense_approved", approved, "expense"),
        _record(srv, "expense_expired", expired, "expense"),
    ]


# -- rollout.c: migration and a failed automatic upgrade ---------------------------------------

ONBOARD = "onboard"


@contextmanager
def _background(worker: Worker) -> Iterator[None]:
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        worker.stop()
        thread.join(timeout=30)


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _parked(srv: InProcessServer, user: str) -> str:
    """Start an onboarding run and wait until it waits for the signal "go"."""
    run_id = srv.client.start_run(ONBOARD, {"user": user}, workflow_id=user).run.run_id
    _wait_for(lambda: EventType.SIGNAL_AWAITED in _types(srv, run_id), f"{user} to park")
    return run_id


def _go(srv: InProcessServer, run_id: str) -> None:
    srv.client.signal(run_id, "go", {})
    _wait_for(lambda: srv.client.result(run_id).status.closed, f"{run_id} to close")


def rollout(kit: Kit) -> list[Recorded]:
    """A run that an automatic upgrade to an incompatible v3 could not replay (it stays on v1),
    and a run an operator migrated from v1 to v2 (it finishes on v2, behind the patch)."""
    srv = kit.make_server()
    srv.client.upload_version(kit.modules["rollout_v1"], promote=True, label="onboard@1")
    v2 = srv.client.upload_version(kit.modules["rollout_v2"], label="onboard@2").version.digest
    v3 = srv.client.upload_version(kit.modules["rollout_v3"], label="onboard@3").version.digest
    worker = make_worker(srv.client, kit.sandbox, worker_id="background")
    with _background(worker):
        _, checks = srv.client.check_version(v3, ONBOARD, wait_s=30)
        assert checks == []  # no run to disagree with yet: a passing, soon stale, check
        stale = _parked(srv, "stale")
        srv.client.change_rollout(ONBOARD, "auto_upgrade", v3, operator="ops@example.com")
        _go(srv, stale)
        assert EventType.UPGRADE_FAILED in _types(srv, stale)
        srv.client.change_rollout(ONBOARD, "stop_auto_upgrade", operator="ops@example.com")

        moved = _parked(srv, "moved")
        _, outcomes = srv.client.migrate_runs(
            v2, ONBOARD, run_ids=[moved], reason="ship the audit", operator="ops@example.com",
            wait_s=30,
        )  # fmt: skip
        assert [c.outcome for c in outcomes] == ["migrated"]
        _go(srv, moved)
    assert srv.client.result(stale).status is RunStatus.COMPLETED
    assert srv.client.result(moved).status is RunStatus.COMPLETED
    assert srv.client.result(moved).digest == v2
    return [
        _record(srv, "onboard_upgrade_failed", stale, "rollout_v1"),
        _record(srv, "onboard_migrated", moved, "rollout_v1"),
    ]


# -- tests/guests/hostile.c: continue-as-new, history limits, poison pills ---------------------

POISON = PoisonPolicy(
    crashes_to_poison=3,
    surgical_delays=(timedelta(minutes=1),),
    suspend_after=timedelta(hours=1),
    crash_backoff=timedelta(seconds=1),
)


def hostile_engine(kit: Kit) -> list[Recorded]:
    """The engine's own events, driven with the test guest (no sample continues as new, grows a
    long history or crashes): a countdown that continues as new, a chatty run past the history
    warning, and a crashing activity poisoned, suspended and skipped by an operator."""
    settings = EngineSettings(history_warn_events=20, poison=POISON)
    srv, worker = _manual(kit, "hostile", settings=settings)

    first = srv.client.start_run("countdown", {"n": 1, "linger_ms": 60_000}, workflow_id="cd")
    settle(worker)
    last = srv.client.result("cd").run_id
    assert last != first.run.run_id
    _advance(srv, timedelta(minutes=1, seconds=1))
    settle(worker)

    chatty = srv.client.start_run("chatty", {"n": 25}).run.run_id
    settle(worker)
    assert srv.client.signal(chatty, "stop", {"by": "ops"})
    settle(worker)
    assert EventType.HISTORY_WARNING in _types(srv, chatty)

    poisoned = srv.client.start_run("good", {"crash": True}, workflow_id="poisoned").run.run_id
    for _ in range(10):  # crash after crash, with backoff, until the task is poisoned
        settle(worker)
        (task,) = srv.client.describe(poisoned).tasks
        if task.pool == "surgical":
            break
        _advance(srv, timedelta(seconds=10))
    else:
        raise AssertionError("the crashing activity was never poisoned")
    _advance(srv, POISON.suspend_after)
    surgeon = Worker(
        srv.client,
        kit.sandbox,
        WorkerSettings(worker_id="surgeon", pool="surgical", poll_wait_s=0.2),
        srv.clock,
    )
    assert surgeon.run_once(wait_s=2)  # still crashing an hour after it was poisoned
    surgeon.stop()
    assert srv.client.describe(poisoned).run.suspension is not None
    srv.client.triage(
        "skip", run_ids=[poisoned], step=0, result=msgpack.packb({"crash": "handled by hand"}),
        reason="shipped by hand", operator="ops@example.com",
    )  # fmt: skip
    settle(worker)
    for run_id in (last, chatty, poisoned):
        assert srv.client.result(run_id).status is RunStatus.COMPLETED
    return [
        _record(srv, "countdown_continued", first.run.run_id, "hostile"),
        _record(srv, "countdown_completed", last, "hostile"),
        _record(srv, "chatty_warned", chatty, "hostile"),
        _record(srv, "poisoned_skipped", poisoned, "hostile"),
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A scenario and the goldens it records (named here so tests know them without a run)."""

    record: Callable[[Kit], list[Recorded]]
    goldens: tuple[str, ...]


SCENARIOS: dict[str, Scenario] = {
    "shipment_batch": Scenario(
        record=shipment_batch,
        goldens=("shipment_batch_failed", "shipment_late", "shipment_terminated"),
    ),
    "shipment_signals": Scenario(
        record=shipment_signals, goldens=("shipment_delivered", "shipment_cancelled")
    ),
    "shipment_timed_out": Scenario(record=shipment_timed_out, goldens=("shipment_timed_out",)),
    "orders_reset": Scenario(record=orders_reset, goldens=("orders_reset_old", "orders_reset_new")),
    "pay_timed_out": Scenario(record=pay_timed_out, goldens=("pay_timed_out",)),
    "expense_approvals": Scenario(
        record=expense_approvals, goldens=("expense_approved", "expense_expired")
    ),
    "rollout": Scenario(record=rollout, goldens=("onboard_upgrade_failed", "onboard_migrated")),
    "hostile_engine": Scenario(
        record=hostile_engine,
        goldens=(
            "countdown_continued",
            "countdown_completed",
            "chatty_warned",
            "poisoned_skipped",
        ),
    ),
}
"""Every scenario by name; test_goldens.py regenerates one golden file per recorded run."""
