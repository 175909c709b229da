"""Long polls are woken by what other servers commit (NOTIFY), while a server's own commits wake
its pollers in process and their NOTIFY echo is ignored."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from history import Database
from runtime import AmberClient, AmberServer, LeasedTask
from tests.conftest import InProcessServer

POLL_S = 3.0
"""Shorter than a poller's idle recheck (5 s): a task can only reach it through a wake-up."""


def test_a_task_enqueued_through_another_server_wakes_this_server_s_poller(
    make_server: Callable[..., InProcessServer], database_url: str, modules: dict[str, bytes]
) -> None:
    a = make_server()
    a.client.upload_version(modules["chain"], promote=True)
    with Database(database_url) as db:  # another server: its own pool, as its own process has
        b = AmberServer(db, listen="127.0.0.1:0")
        port = b.start()
        try:
            with AmberClient(f"127.0.0.1:{port}", timeout_s=20) as client:
                got: dict[str, LeasedTask | None] = {}
                polling = threading.Thread(
                    target=lambda: got.update(task=client.poll_task(worker_id="w", wait_s=POLL_S))
                )
                polling.start()
                time.sleep(0.5)  # let the poll start waiting on b
                run_id = a.client.start_run("chain", {"k": 1, "value": 1}).run.run_id
                polling.join(timeout=POLL_S + 10)
        finally:
            b.stop(grace_s=0.5)
    task = got["task"]
    assert task is not None and task.run_id == run_id


def test_own_backends_are_recognised(db: Database, database_url: str) -> None:
    own: list[Any] = []
    db.run(lambda cur: own.append(cur.connection.info.backend_pid))
    assert db.is_own_backend(own[0])
    with Database(database_url) as other:
        theirs: list[Any] = []
        other.run(lambda cur: theirs.append(cur.connection.info.backend_pid))
        assert not db.is_own_backend(theirs[0]) and other.is_own_backend(theirs[0])
