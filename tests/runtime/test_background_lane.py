"""The background lane: an activity that uses up its fuel slice runs again from the start, on its
whole budget, in a child process at the lowest CPU priority whose deadlines count CPU time.

What it must keep: the outcome, the failure reason and the fuel of a run on the whole budget
(fuel use is deterministic), so neither a heavy activity nor a fuel bomb's diagnosis depends on
the lane. What it must give: long guests in a session of their own at low priority, held back
while foreground guests run, never for good, and never past their wall deadline.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from amber.history import RunStatus
from amber.runtime.client._client import decode
from amber.runtime.model import DeadlineExceeded, OutOfFuel
from amber.runtime.model._clock import SystemClock
from amber.runtime.replay import ActivityAttempt, run_activity
from amber.runtime.sandbox import (
    ActivationRequest,
    IsolatedSandbox,
    ParallelSandbox,
    RawOutput,
    Sandbox,
    SandboxLimits,
)
from amber.runtime.sandbox._background import BackgroundLane
from amber.runtime.sandbox._parallel import BACKGROUND_NICENESS
from amber.runtime.worker._worker import Worker, WorkerSettings
from tests.conftest import InProcessServer, attempt_of, parallel_runner, wait_for

SLICE = 2_000_000
BUDGET = 200_000_000
HEAVY_N = 1_000_000
"""`count_to` up to this takes several slices and a small part of the budget."""


@pytest.fixture
def lane(tmp_path: Path, modules: dict[str, bytes]) -> Iterator[ParallelSandbox]:
    with parallel_runner(tmp_path / "artifacts", modules, slice_fuel=SLICE) as runner:
        yield runner


def _attempt(
    module: bytes, name: str, args: object, deadline_s: float = 10.0, fuel: int = BUDGET
) -> ActivityAttempt:
    limits = SandboxLimits(fuel=fuel, deadline_s=deadline_s)
    return attempt_of(module, name, args, run_id="run-bg", limits=limits)


def test_a_heavy_activity_completes_in_the_background_with_the_fuel_of_one_whole_run(
    lane: ParallelSandbox, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    attempt = _attempt(modules["heavy"], "count_to", {"n": HEAVY_N})
    moved = run_activity(lane, attempt)
    assert decode(moved.outcome.result) == {"n": HEAVY_N}
    assert lane.in_background == 1
    whole = run_activity(sandbox, attempt)  # in process, on the whole budget, once
    assert moved.outcome == whole.outcome
    assert moved.stats.fuel_used == whole.stats.fuel_used > SLICE


def test_a_light_activity_never_leaves_the_foreground(
    lane: ParallelSandbox, modules: dict[str, bytes]
) -> None:
    for n in (0, 10, 1000):
        report = run_activity(lane, _attempt(modules["heavy"], "count_to", {"n": n}))
        assert decode(report.outcome.result) == {"n": n}
    assert lane.in_background == 0


def test_a_fuel_bomb_fails_as_it_would_on_its_whole_budget(
    lane: ParallelSandbox, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    attempt = _attempt(modules["poison"], "burn", {"kind": "fuel"})
    with pytest.raises(OutOfFuel) as moved:
        run_activity(lane, attempt)
    with pytest.raises(OutOfFuel) as whole:
        run_activity(sandbox, attempt)
    assert moved.value.fuel_used == whole.value.fuel_used == BUDGET
    assert (moved.value.detail, moved.value.trap_code) == (
        whole.value.detail,
        whole.value.trap_code,
    )
    assert (moved.value.run_id, moved.value.step) == (whole.value.run_id, whole.value.step)
    assert lane.in_background == 1


def test_activities_of_a_module_that_may_send_http_requests_run_once(
    lane: ParallelSandbox, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    # A slice of one unit would send any other activity to the background: a request sent in
    # the first run would be sent again by the second.
    attempt = _attempt(modules["payments"], "charge", {"no": "payment"})
    report = run_activity(lane, attempt)
    assert lane.in_background == 0
    assert report.outcome == run_activity(sandbox, attempt).outcome


def test_the_background_child_yields_the_cpu(
    lane: ParallelSandbox, modules: dict[str, bytes]
) -> None:
    run_activity(lane, _attempt(modules["heavy"], "count_to", {"n": HEAVY_N}))
    children = _lane_children()
    assert len(children) == 1  # kept for the next heavy activity
    (pid,) = children
    assert os.getsid(pid) == pid  # a session of its own: its own autogroup
    assert int(_stat(pid)[16]) == BACKGROUND_NICENESS
    assert os.sched_getscheduler(pid) == os.SCHED_OTHER  # the idle class could starve it
    autogroup = Path(f"/proc/{pid}/autogroup")
    if autogroup.exists():
        assert autogroup.read_text().split()[-1] == str(BACKGROUND_NICENESS)


def test_a_heavy_run_completes_through_the_worker(
    make_server, modules: dict[str, bytes], lane: ParallelSandbox
) -> None:
    srv: InProcessServer = make_server()
    srv.client.upload_version(modules["heavy"], promote=True)
    worker = Worker(srv.client, lane, WorkerSettings(worker_id="lane", poll_wait_s=0.2, slots=2))
    serving = threading.Thread(target=worker.run, daemon=True)
    serving.start()
    try:
        run = srv.client.start_run("heavy_wf", {"n": HEAVY_N}).run.run_id
        done = srv.client.result(run, wait_s=30)
        assert done.status is RunStatus.COMPLETED and decode(done.result) == {"n": HEAVY_N}
        assert lane.in_background == 1
    finally:
        worker.stop()
        serving.join(timeout=10)


def _lane(tmp_path: Path, modules: dict[str, bytes], patience_s: float) -> BackgroundLane:
    by_digest = {hashlib.sha256(m).hexdigest(): m for m in modules.values()}
    children = IsolatedSandbox(
        by_digest.__getitem__,
        SystemClock(),
        artifact_dir=tmp_path / "artifacts",
        keep_spare=False,
        reuse=1,
        niceness=BACKGROUND_NICENESS,
    )
    return BackgroundLane(children, slots=1, patience_s=patience_s)


def _bomb_in(
    lane: BackgroundLane, modules: dict[str, bytes], deadline_s: float
) -> threading.Thread:
    attempt = _attempt(modules["poison"], "burn", {"kind": "fuel"})

    def bomb() -> None:
        with pytest.raises(OutOfFuel):
            run_activity(_Lane(lane, time.monotonic() + deadline_s), attempt)

    thread = threading.Thread(target=bomb, daemon=True)
    thread.start()
    return thread


class _Lane:
    """The lane as a `SandboxRunner`, with one deadline for what it runs."""

    def __init__(self, lane: BackgroundLane, deadline_at: float) -> None:
        self._lane, self._deadline_at = lane, deadline_at

    def run(self, request: ActivationRequest) -> RawOutput:
        return self._lane.run(request, self._deadline_at)


def test_the_lane_holds_its_guests_while_foreground_guests_run(
    tmp_path: Path, modules: dict[str, bytes]
) -> None:
    lane = _lane(tmp_path, modules, patience_s=600.0)
    try:
        lane.foreground_started()  # a healthy guest is running
        bomb = _bomb_in(lane, modules, deadline_s=600.0)
        wait_for(lambda: lane.activities() == 1, 30, "the bomb in the lane")
        bomb.join(timeout=2.0)
        assert bomb.is_alive()  # waiting: 2·10⁸ fuel takes a fraction of that
        assert not _lane_children()  # not even started
        lane.foreground_ended()  # quiet: the lane goes on
        bomb.join(timeout=60)
        assert not bomb.is_alive()
        assert lane.activities() == 0
    finally:
        lane.close()


def test_a_held_guest_starts_once_its_patience_is_spent(
    tmp_path: Path, modules: dict[str, bytes]
) -> None:
    lane = _lane(tmp_path, modules, patience_s=0.5)
    try:
        lane.foreground_started()  # and never ends
        bomb = _bomb_in(lane, modules, deadline_s=600.0)
        bomb.join(timeout=60)
        assert not bomb.is_alive()
    finally:
        lane.close()


def test_a_held_guest_waits_at_most_half_its_deadline_and_runs_on_what_is_left(
    tmp_path: Path, modules: dict[str, bytes]
) -> None:
    lane = _lane(tmp_path, modules, patience_s=600.0)
    try:
        lane.foreground_started()  # and never ends
        napping = _attempt(modules["hostile"], "nap_briefly", None)  # sleeps 3 s
        with pytest.raises(DeadlineExceeded):  # 1 s of 2 s waited, 3 s of sleep do not fit
            run_activity(_Lane(lane, time.monotonic() + 2.0), napping)
        past = _Lane(lane, time.monotonic() - 1.0)
        with pytest.raises(DeadlineExceeded):  # nothing left: it never starts
            run_activity(past, napping)
    finally:
        lane.close()


def _lane_children() -> list[int]:
    """Sandbox children in a session of their own: the background lane's."""
    return [
        pid
        for pid in _children()
        if "amber.runtime.sandbox._child" in _argv(pid) and os.getsid(pid) == pid
    ]


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat after the command name: state, ppid, ... (field 3 onwards)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _children() -> list[int]:
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            found.append(int(entry.name))
    return found


def _argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    except OSError:
        return []


@pytest.mark.parametrize(
    ("slots", "bombs", "fuel"),
    [
        (1, 1, 10**10),
        # The lane runs two at once (`guests`); a poisoned batch leaves more waiting, and with
        # three slots and five bombs there a light run must still find a slot.
        (3, 5, 2 * 10**10),
    ],
)
def test_tasks_in_the_background_lane_do_not_take_worker_slots(
    make_server, modules: dict[str, bytes], lane: ParallelSandbox, slots: int, bombs: int, fuel: int
) -> None:
    srv: InProcessServer = make_server()
    srv.client.upload_version(modules["poison"], promote=True)
    srv.client.upload_version(modules["heavy"], promote=True)
    long_bomb = SandboxLimits(fuel=fuel, deadline_s=60.0)  # seconds of CPU each in the lane
    settings = WorkerSettings(
        worker_id=f"{slots}-slots", poll_wait_s=0.2, slots=slots, activity_limits=long_bomb
    )
    worker = Worker(srv.client, lane, settings)
    serving = threading.Thread(target=worker.run, daemon=True)
    serving.start()
    runs = [srv.client.start_run("poisoned", {"kind": "fuel"}).run.run_id for _ in range(bombs)]
    try:
        wait_for(lambda: lane.in_background_now() == bombs, 60, "the bombs in the lane")
        light = srv.client.start_run("heavy_wf", {"n": 10}).run.run_id
        done = srv.client.result(light, wait_s=30)
        assert done.status is RunStatus.COMPLETED
        assert lane.in_background_now() == bombs  # none was done: each had left its slot
    finally:
        for run_id in runs:
            srv.client.terminate(run_id, reason="test over", operator="test")
        worker.stop()
        serving.join(timeout=60)
