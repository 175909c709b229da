"""Long polls are woken by what other servers commit (NOTIFY), while a server's own commits wake
its pollers in process and their NOTIFY echo is ignored; a wake never ends with a poller that
cannot use it.

Each test waits for a long poll (30 s) to return within `WAKE_BOUND_S`, well under a poller's
5 s idle recheck: a task can arrive that soon only through a wake-up (a liveness bound, not a
speed measurement).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import grpc

from amber.abi import AmberError
from amber.history import Database
from amber.runtime.api import amber_pb2 as pb
from amber.runtime.api import amber_pb2_grpc as pb_grpc
from amber.runtime.client._client import AmberClient
from amber.runtime.model._tasks import LeasedTask
from amber.runtime.server._server import AmberServer
from tests.conftest import InProcessServer

POLL_S = 30.0
WAKE_BOUND_S = 3.0


class _Poll:
    """A long poll in a thread."""

    def __init__(self, client: AmberClient, worker: str, pool: str = "") -> None:
        self.task: LeasedTask | None = None
        self._thread = threading.Thread(target=self._poll, args=(client, worker, pool))
        self._thread.start()
        time.sleep(0.5)  # let it start waiting on the server

    def _poll(self, client: AmberClient, worker: str, pool: str) -> None:
        try:
            self.task = client.poll_task(worker_id=worker, wait_s=POLL_S, pool=pool)
        except AmberError:  # the server stopped under it
            self.task = None

    def woken(self) -> bool:
        self._thread.join(timeout=WAKE_BOUND_S)
        return not self._thread.is_alive() and self.task is not None

    def abandon(self) -> None:
        self._thread.join(timeout=POLL_S + 10)


def _start(srv: InProcessServer, modules: dict[str, bytes]) -> str:
    srv.client.upload_version(modules["chain"], promote=True)
    return srv.client.start_run("chain", {"k": 1, "value": 1}).run.run_id


def test_a_task_enqueued_through_another_server_wakes_this_server_s_poller(
    make_server: Callable[..., InProcessServer], database_url: str, modules: dict[str, bytes]
) -> None:
    a = make_server()
    with Database(database_url) as db:  # another server: its own pool, as its own process has
        b = AmberServer(db, listen="127.0.0.1:0")
        port = b.start()
        try:
            with AmberClient(f"127.0.0.1:{port}", timeout_s=60) as client:
                poll = _Poll(client, "w")
                run_id = _start(a, modules)
                woken = poll.woken()
                poll.abandon()
        finally:
            b.stop(grace_s=0.5)
    assert woken and poll.task is not None and poll.task.run_id == run_id


def test_a_surgical_poller_does_not_take_the_wake_of_a_main_task(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes]
) -> None:
    srv = make_server()
    surgeon = _Poll(srv.client, "surgeon", pool="surgical")  # the oldest waiter
    main = _Poll(srv.client, "main")
    run_id = _start(srv, modules)
    try:
        assert main.woken() and main.task is not None and main.task.run_id == run_id
    finally:
        main.abandon()
        srv.server.stop(grace_s=0.5)  # ends the surgical poll
        surgeon.abandon()
    assert surgeon.task is None


def test_a_poll_abandoned_by_its_worker_passes_the_wake_on(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes]
) -> None:
    srv = make_server()
    with grpc.insecure_channel(srv.target) as channel:
        stub = pb_grpc.AmberStub(channel)  # type: ignore[no-untyped-call]
        gone = stub.PollTask.future(
            pb.PollTaskRequest(worker_id="gone", wait_ms=int(POLL_S * 1000))
        )
        time.sleep(0.5)
        gone.cancel()  # the worker went away; the server's handler still waits, oldest first
        live = _Poll(srv.client, "live")
        run_id = _start(srv, modules)
        try:
            assert live.woken() and live.task is not None and live.task.run_id == run_id
        finally:
            live.abandon()


def test_own_backends_are_recognised(db: Database, database_url: str) -> None:
    own: list[Any] = []
    db.run(lambda cur: own.append(cur.connection.info.backend_pid))
    assert db.is_own_backend(own[0])
    with Database(database_url) as other:
        theirs: list[Any] = []
        other.run(lambda cur: theirs.append(cur.connection.info.backend_pid))
        assert not db.is_own_backend(theirs[0]) and other.is_own_backend(theirs[0])
