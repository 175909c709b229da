"""A real server with the console mounted on its approval page, and real runs in every state the
console shows: completed, running (waiting on a signal, on an approval), cancelled, terminated,
poisoned — made by a real worker running the sample modules."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from amber.runtime.client._client import AmberClient
from amber.runtime.model._approvals import IssuedToken
from amber.runtime.model._clock import ManualClock
from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.server import Operators, token_hash
from amber.runtime.server._server import ApprovalPageOptions
from amber.runtime.worker._worker import Worker
from tests.conftest import ROOT, InProcessServer
from tests.runtime._engine_helpers import make_worker, settle

OPERATOR_TOKEN = "carol-" + "7" * 40
"""Carol's operator token, listed (as its hash) in the server's operator token file."""
SCREENSHOTS = ROOT / "tests" / "output" / "console"
"""Where the browser tests leave a screenshot of every page, for people to look at."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """The runs the console is expected to show."""

    completed: tuple[str, ...]
    """`chain` runs with workflow ids chain-1..3, completed."""
    order: str
    shipping: str
    """A `shipment` run (workflow id ship-1) waiting for its "delivered" signal: it answers the
    "status" query."""
    cancelled: str
    terminated: str
    expense: str
    """Waits for alice's approval."""
    poisoned: str
    """A `diverge` run whose workflow task is poisoned (non-determinism)."""
    onboard_v2: str
    """The digest of `rollout_v2`, labelled onboard@2, uploaded but not ramped."""


class Inbox:
    """An approval sink that keeps the links it is given (so the sweeper mints them)."""

    def __init__(self) -> None:
        self.issued: list[IssuedToken] = []
        self._lock = threading.Lock()

    def deliver(self, issued: IssuedToken) -> None:
        with self._lock:
            self.issued.append(issued)


def operators_with_carol() -> Operators:
    return Operators(by_hash={token_hash(OPERATOR_TOKEN): "carol"})


@pytest.fixture
def console_server(
    make_server: Callable[..., InProcessServer],
) -> Callable[..., InProcessServer]:
    """A server serving the approval page and the console (pass `operators=` for a token file,
    `clock=` for a manual clock)."""

    def start(
        *, operators: Operators | None = None, clock: ManualClock | None = None
    ) -> InProcessServer:
        return make_server(
            approval_sink=Inbox(),
            approval_page=ApprovalPageOptions(secret_key=secrets.token_bytes(32)),
            operators=operators or Operators(),
            clock=clock,
        )

    return start


def populate(srv: InProcessServer, modules: dict[str, bytes], sandbox: Sandbox) -> Scenario:
    """Upload the samples and leave runs in every state the console shows."""
    client = srv.client
    # Uploading is an operator command where the server checks operator tokens.
    with AmberClient(srv.target, operator_token=OPERATOR_TOKEN) as operator:
        for name in ("chain", "orders", "shipment", "expense", "hostile", "rollout_v1"):
            operator.upload_version(modules[name], promote=True)
        v2 = operator.upload_version(modules["rollout_v2"], label="onboard@2").version.digest
    completed = tuple(
        client.start_run("chain", {"k": 2, "value": i}, workflow_id=f"chain-{i}").run.run_id
        for i in (1, 2, 3)
    )
    order = client.start_run(
        "orders",
        {"order_id": "A-1", "sku": "BOOK-42", "quantity": 1, "amount_cents": 500},
        workflow_id="order-A-1",
    ).run.run_id
    shipment = {"address": "1 Main St", "deadline_days": 5}
    shipping = client.start_run(
        "shipment", {"shipment_id": "S-1", **shipment}, workflow_id="ship-1"
    ).run.run_id
    cancelled = client.start_run(
        "shipment", {"shipment_id": "S-2", **shipment}, workflow_id="ship-2"
    ).run.run_id
    expense = client.start_run(
        "expense",
        {
            "expense_id": "E-1",
            "policy": {"approvers": ["alice"], "roles": [], "required": 1},
            "expires_ms": 3_600_000,
        },
        workflow_id="expense-E-1",
    ).run.run_id
    poisoned = client.start_run("diverge", {"x": 1}, workflow_id="diverge-1").run.run_id
    terminated = client.start_run("chain", {"k": 50, "value": 0}, workflow_id="chain-stop")
    # The setup's own operator commands carry Carol's token where the server checks tokens.
    with AmberClient(srv.target, operator_token=OPERATOR_TOKEN) as operator:
        operator.terminate(terminated.run.run_id, reason="started by mistake", operator="")
        worker = make_worker(client, sandbox)
        settle(worker)
        operator.cancel(cancelled, reason="customer changed their mind", operator="")
        settle(worker)
    return Scenario(
        completed=completed,
        order=order,
        shipping=shipping,
        cancelled=cancelled,
        terminated=terminated.run.run_id,
        expense=expense,
        poisoned=poisoned,
        onboard_v2=v2,
    )


@contextmanager
def serving(worker: Worker) -> Iterator[None]:
    """A worker answering in a thread (queries are tasks for workers)."""
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        worker.stop()
        thread.join(timeout=30)


def screenshot_path(name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"{name}.png"
