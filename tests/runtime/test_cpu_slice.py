"""The CPU slice: a sliced activity also ends its first run once its thread has used a slice of
CPU, whatever its fuel, and runs again from the start on its whole budget in the background lane.

What it must keep: the outcome of a run on the whole budget (a heavy activity's result and fuel,
a memory bomb's fault), the deadline, and an activity that waits in a host call (its sleep uses
no CPU) in the foreground. The fuel slices here are as large as the budgets allow, so that only
CPU can move an activity.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from amber.runtime.client._client import decode
from amber.runtime.model import DeadlineExceeded, MemoryLimitExceeded, SliceUsed
from amber.runtime.model._clock import SystemClock
from amber.runtime.replay import ActivityAttempt, activity_request, run_activity
from amber.runtime.sandbox import (
    ActivationRequest,
    IsolatedSandbox,
    ParallelSandbox,
    Sandbox,
    SandboxLimits,
    Slice,
)
from amber.runtime.sandbox._sandbox import LEAVE_SLICE_AFTER_WAIT_S
from tests.conftest import attempt_of, parallel_runner

BUDGET = 2_000_000_000
SLICE_CPU_S = 0.005
"""Used up by the second epoch tick (10 ms apart) of a guest computing all along; more than
a short activity's instantiation and host calls use."""
HEAVY_N = 100_000_000
"""`count_to` up to this takes about ten epoch ticks here and half the budget."""


@pytest.fixture
def lane(tmp_path: Path, modules: dict[str, bytes]) -> Iterator[ParallelSandbox]:
    with parallel_runner(
        tmp_path / "artifacts", modules, slice_fuel=BUDGET - 1, slice_cpu_s=SLICE_CPU_S
    ) as runner:
        yield runner


def _attempt(module: bytes, name: str, args: object, deadline_s: float = 10.0) -> ActivityAttempt:
    limits = SandboxLimits(fuel=BUDGET, deadline_s=deadline_s)
    return attempt_of(module, name, args, run_id="run-cpu", limits=limits)


def _sliced(attempt: ActivityAttempt, slice_cpu_s: float) -> ActivationRequest:
    slice_ = Slice(fuel=attempt.limits.fuel, cpu_s=slice_cpu_s)
    return replace(activity_request(attempt), slice=slice_)


def test_an_activity_past_its_cpu_slice_completes_in_the_background_as_one_whole_run(
    lane: ParallelSandbox, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    attempt = _attempt(modules["heavy"], "count_to", {"n": HEAVY_N})
    moved = run_activity(lane, attempt)
    assert decode(moved.outcome.result) == {"n": HEAVY_N}
    assert lane.in_background == 1
    whole = run_activity(sandbox, attempt)  # in process, unsliced, once
    assert moved.outcome == whole.outcome
    assert moved.stats.fuel_used == whole.stats.fuel_used


def test_a_memory_bomb_fails_as_it_would_on_its_whole_budget(
    lane: ParallelSandbox, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    # Its cost is page faults, not instructions: a few hundred thousand fuel. Whether it ends
    # its first run depends on how fast this machine faults pages in; its outcome must not.
    attempt = _attempt(modules["poison"], "hoard", {"kind": "memory"})
    with pytest.raises(MemoryLimitExceeded) as moved:
        run_activity(lane, attempt)
    with pytest.raises(MemoryLimitExceeded) as whole:
        run_activity(sandbox, attempt)
    assert (moved.value.detail, moved.value.trap_code, moved.value.fuel_used) == (
        whole.value.detail,
        whole.value.trap_code,
        whole.value.fuel_used,
    )
    assert moved.value.memory_bytes == whole.value.memory_bytes


def test_the_slice_counts_cpu_not_time_waiting_in_a_host_call(
    lane: ParallelSandbox, modules: dict[str, bytes]
) -> None:
    # nap_briefly sleeps 3 s in the `sleep` host import, then completes: three hundred epoch
    # ticks pass, and the slice is a few milliseconds of CPU.
    report = run_activity(lane, _attempt(modules["hostile"], "nap_briefly", None))
    assert decode(report.outcome.result) == {"slept": True}
    assert lane.in_background == 0


def test_the_deadline_holds_on_a_watched_store(sandbox: Sandbox, modules: dict[str, bytes]) -> None:
    # Once wasmtime calls the watch at each tick, the watch must end the call at the deadline
    # itself, with the fault a plain run gets.
    attempt = _attempt(modules["heavy"], "count_to", {"n": HEAVY_N}, deadline_s=0.02)
    with pytest.raises(DeadlineExceeded) as watched:
        sandbox.run(_sliced(attempt, slice_cpu_s=60.0))
    with pytest.raises(DeadlineExceeded) as plain:
        run_activity(sandbox, attempt)
    assert watched.value.detail == plain.value.detail
    assert not isinstance(watched.value, SliceUsed)


def test_a_used_slice_ends_the_first_run_in_process_and_in_a_child(
    sandbox: Sandbox, modules: dict[str, bytes], tmp_path: Path
) -> None:
    attempt = _attempt(modules["heavy"], "count_to", {"n": HEAVY_N})
    with pytest.raises(SliceUsed) as inline:
        sandbox.run(_sliced(attempt, SLICE_CPU_S))
    by_digest = {hashlib.sha256(m).hexdigest(): m for m in modules.values()}
    with (
        IsolatedSandbox(
            by_digest.__getitem__,
            SystemClock(),
            artifact_dir=tmp_path / "artifacts",
            keep_spare=False,
        ) as child,
        pytest.raises(SliceUsed) as isolated,
    ):
        child.run(_sliced(attempt, SLICE_CPU_S))
    for fault in (inline.value, isolated.value):
        assert (fault.run_id, fault.step, fault.digest) == ("run-cpu", 0, attempt.digest)
        assert "CPU slice" in fault.detail


def test_a_run_that_waited_leaves_its_slice(
    lane: ParallelSandbox, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    # Run again from the start, it would sleep again, on what is left of its deadline: past
    # waits of `LEAVE_SLICE_AFTER_WAIT_S`, it goes on with its whole budget instead.
    ms = int(LEAVE_SLICE_AFTER_WAIT_S * 1000) + 200
    attempt = _attempt(modules["waits"], "wait_then_count", {"ms": ms, "n": HEAVY_N})
    stayed = run_activity(lane, attempt)
    assert decode(stayed.outcome.result) == {"ms": ms, "n": HEAVY_N}
    assert lane.in_background == 0
    assert stayed.stats.fuel_used == run_activity(sandbox, attempt).stats.fuel_used


def test_a_short_wait_does_not_take_a_guest_out_of_its_slice(
    lane: ParallelSandbox, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    # A millisecond's sleep before a long computation (an attacker's way round the slice):
    # the computation still ends the first run, and the lane's run gives the whole run's outcome.
    attempt = _attempt(modules["waits"], "wait_then_count", {"ms": 1, "n": HEAVY_N})
    moved = run_activity(lane, attempt)
    assert decode(moved.outcome.result) == {"ms": 1, "n": HEAVY_N}
    assert lane.in_background == 1
    assert moved.stats.fuel_used == run_activity(sandbox, attempt).stats.fuel_used
