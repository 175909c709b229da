"""A second server on a port already in use fails at start with a clear message (gRPC's default
SO_REUSEPORT would let both listen and spread calls between two databases at random)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from amber.history import Database
from amber.runtime.server import AmberServer
from tests.conftest import InProcessServer, Process


def test_a_second_server_on_a_used_port_is_refused(
    make_server: Callable[..., InProcessServer], database_url: str, db: Database
) -> None:
    first = make_server()
    port = first.server.port
    other_db = Database(database_url).open()
    try:
        second = AmberServer(other_db, listen=f"127.0.0.1:{port}")
        with pytest.raises(OSError, match="in use"):
            second.start()
    finally:
        other_db.close()
    assert first.client.list_runs() is not None  # the first one still serves


def test_the_cli_says_why_and_exits_non_zero(
    make_server: Callable[..., InProcessServer], amber_process: Callable[..., Process]
) -> None:
    first = make_server()
    proc = amber_process("server", "--listen", f"127.0.0.1:{first.server.port}")
    assert proc.popen.wait(timeout=60) != 0
    output = proc.output()
    assert "error: cannot listen on" in output and "address is in use" in output
    assert "Traceback" not in output
