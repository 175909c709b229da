"""Exactly-once effects through idempotency keys, and timers that survive server restarts.

Real processes where the acceptance is about processes: the worker that charges is SIGKILLed
after the payment service answered and before it could report.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from amber.history import Database, EventType, RunStatus
from amber.runtime.client._client import AmberClient, decode
from amber.runtime.model._clock import ManualClock
from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.server._server import AmberServer
from tests.conftest import Process, wait_for
from tests.payment_service import ChargeResponse, PaymentService

from ._engine_helpers import make_worker, settle


@pytest.mark.slow
def test_a_charge_whose_report_was_lost_is_retried_and_charged_once(
    server_process: Callable[..., tuple[Process, str]],
    amber_process: Callable[..., Process],
    modules: dict[str, bytes],
) -> None:
    _, target = server_process("--lease-seconds", "2")
    client = AmberClient(target, timeout_s=30)
    client.upload_version(modules["payments"], promote=True)
    worker_args = ("--server", target, "worker", "--poll-wait", "1", "--slots", "1")
    doomed = amber_process(*worker_args)
    killed = threading.Event()

    def freeze(_: object) -> None:  # the charge is recorded: stop the worker before it hears back
        if not killed.is_set():
            os.kill(doomed.popen.pid, signal.SIGSTOP)

    def kill(_: ChargeResponse) -> None:  # the answer went out: the worker never reads it
        if not killed.is_set():
            os.kill(doomed.popen.pid, signal.SIGKILL)
            killed.set()

    with PaymentService() as pay:
        pay.on_charge(freeze)
        pay.after_response(kill)
        run = client.start_run(
            "pay", {"order_id": "EO-1", "amount_cents": 4200, "service": pay.url("")}
        ).run.run_id
        wait_for(killed.is_set, 60, "the worker to charge and die")
        doomed.popen.wait(timeout=10)
        amber_process(*worker_args)
        wait_for(lambda: client.result(run).status.closed, 60, "the run to finish")

        closed = client.result(run)
        assert closed.status is RunStatus.COMPLETED
        assert decode(closed.result)["charge_id"] == "ch_1"
        assert pay.charges == pay.charges_for("EO-1") == 1
        (key,) = pay.key_counts
        assert pay.key_count(key) == 2  # the retry carried the same idempotency key
        assert key == f"{run}/0"
        completed = [e for e in client.history(run) if e.type is EventType.ACTIVITY_COMPLETED]
        assert [e.payload["attempt"] for e in completed] == [2]
        reasons = [f.reason for f in client.describe(run).recent_failures]
        assert reasons == ["worker_lost"]
    client.close()


@pytest.mark.slow
def test_a_thousand_pending_timers_survive_a_server_restart(
    database_url: str, db: Database, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    clock = ManualClock()

    def server() -> AmberServer:
        return AmberServer(db, listen="127.0.0.1:0", clock=clock)

    first = server()
    client = AmberClient(f"127.0.0.1:{first.start()}", timeout_s=60)
    client.upload_version(modules["hostile"], promote=True)
    with ThreadPoolExecutor(8) as pool:
        runs = list(pool.map(lambda i: client.start_run("sleeper", {"ms": 60_000}).run.run_id,
                             range(1000)))  # fmt: skip
    settle(make_worker(client, sandbox, clock=clock), rounds=5000)
    first.stop(grace_s=0.5)  # restart: nothing of the timers lived in this process
    client.close()

    second, third = server(), server()
    client = AmberClient(f"127.0.0.1:{second.start()}", timeout_s=60)
    third.start()
    clock.advance(timedelta(minutes=2))
    sweeps = [threading.Thread(target=s.sweep) for s in (second, third, second, third)]
    for sweep in sweeps:
        sweep.start()
    for sweep in sweeps:
        sweep.join()
    second.sweep()  # whatever a concurrent sweep left behind
    settle(make_worker(client, sandbox, clock=clock), rounds=5000)
    fired = 0
    for run in runs:
        events = client.history(run)
        assert client.result(run).status is RunStatus.COMPLETED
        count = sum(e.type is EventType.TIMER_FIRED for e in events)
        assert count == 1, run
        fired += count
    assert fired == 1000
    client.close()
    second.stop(grace_s=0.5)
    third.stop(grace_s=0.5)
