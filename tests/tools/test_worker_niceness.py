"""`amber worker` CPU priority: the surgical pool yields the CPU to healthy work."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from amber.surgical_pool import SURGICAL_NICENESS
from tests.conftest import Process, wait_for


def _niceness(pid: int) -> int | None:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[16])  # field 19 of proc(5), counted after the command name


def _worker(amber_process: Callable[..., Process], *args: str) -> Process:
    # No server answers on port 9: the worker sets its priority, then waits to connect.
    return amber_process("--server", "127.0.0.1:9", "worker", "--connect-timeout", "30", *args)


def _settles_at(proc: Process, niceness: int) -> None:
    wait_for(
        lambda: proc.popen.poll() is None and _niceness(proc.popen.pid) == niceness,
        30,
        f"the worker at niceness {niceness}\n{proc.output()}",
    )


def test_a_surgical_worker_runs_at_a_lower_priority_and_a_main_one_does_not(
    amber_process: Callable[..., Process],
) -> None:
    surgical = _worker(amber_process, "--pool", "surgical")
    main = _worker(amber_process, "--nice", "3")
    _settles_at(surgical, SURGICAL_NICENESS)
    _settles_at(main, 3)


def test_a_niceness_out_of_range_is_refused(amber_process: Callable[..., Process]) -> None:
    proc = _worker(amber_process, "--nice", "25")
    assert proc.popen.wait(timeout=60) != 0
    assert "--nice must be between 0 and 19" in proc.output()
