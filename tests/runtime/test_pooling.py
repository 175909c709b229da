"""The engine's pooling allocator: slots are reused but every instance starts as a fresh one,
the store's limits still decide, and a full pool is the host's condition, never the guest's
fault.

The guest is `tests/guests/py_guest.py` (`tallies` reports how many calls its instance served;
`hoards_memory` allocates until memory runs out).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from amber.abi import RetryableError
from amber.runtime.client._client import decode
from amber.runtime.model import GuestFault, MemoryLimitExceeded, SandboxBusy
from amber.runtime.model._clock import SystemClock
from amber.runtime.replay import ActivityAttempt, run_activity
from amber.runtime.sandbox import SandboxEngine, SandboxLimits
from amber.runtime.sandbox._pooling import MAX_POOLED_INSTANCES
from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.sandbox._warm import WarmActivities
from tests.conftest import ARTIFACTS

from ._engine_helpers import run_attempt

LIMITS = SandboxLimits(fuel=100_000_000, memory_bytes=48 * 2**20, deadline_s=10.0)


@pytest.fixture
def guest(python_modules: Mapping[str, bytes]) -> bytes:
    return python_modules["py_guest"]


def _attempt(module: bytes, name: str, run_id: str) -> ActivityAttempt:
    return run_attempt(module, name, run_id, LIMITS)


def _served(sandbox: Sandbox, guest: bytes, run_id: str) -> Any:
    report = run_activity(sandbox, _attempt(guest, "tallies", run_id))
    assert report.outcome.result is not None, report.outcome
    return decode(report.outcome.result)


def test_the_engine_pools_instances_and_each_starts_as_a_fresh_one(
    sandbox_engine: SandboxEngine, guest: bytes
) -> None:
    assert sandbox_engine.pooled  # on the pinned wasmtime-py
    sandbox = Sandbox(sandbox_engine, SystemClock(), lambda _digest: guest)
    # Each activation reuses the slot the last one freed, and sees none of its state.
    assert [_served(sandbox, guest, "run-a")["calls"] for _ in range(5)] == [1] * 5


def test_the_store_s_memory_limit_still_decides_in_a_pooled_slot(
    sandbox_engine: SandboxEngine, python_modules: Mapping[str, bytes]
) -> None:
    guest = python_modules["py_guest"]
    sandbox = Sandbox(sandbox_engine, SystemClock(), lambda _digest: guest)
    attempt = _attempt(guest, "hoards_memory", "run-m")
    with pytest.raises(MemoryLimitExceeded):
        run_activity(sandbox, attempt)
    assert _served(sandbox, guest, "run-a")["calls"] == 1  # the slot after it is clean


def test_a_full_pool_gives_back_kept_instances_then_is_a_retryable_host_condition(
    guest: bytes,
) -> None:
    engine = SandboxEngine(ARTIFACTS, instances=1)
    try:
        assert engine.pooled
        warm = WarmActivities()
        keeper = Sandbox(engine, SystemClock(), lambda _digest: guest, warm=warm)
        assert _served(keeper, guest, "run-a")["calls"] == 1
        assert len(warm) == 1  # its instance is kept: the only slot is taken
        # Another sandbox of the process cannot take the slot back: the host is busy.
        other = Sandbox(engine, SystemClock(), lambda _digest: guest)
        with pytest.raises(SandboxBusy) as busy:
            _served(other, guest, "run-b")
        assert isinstance(busy.value, RetryableError)
        assert not isinstance(busy.value, GuestFault)
        assert "no room for another guest instance" in str(busy.value)
        assert _served(keeper, guest, "run-a")["calls"] == 2  # the kept one goes on
        # The keeper's own sandbox gives its kept instances back and runs.
        assert _served(keeper, guest, "run-b")["calls"] == 1
        assert len(warm) == 1  # run-b's now; run-a's was given back
        assert _served(keeper, guest, "run-a")["calls"] == 1
    finally:
        engine.close()


def test_more_instances_than_a_pool_holds_keep_the_default_allocator(guest: bytes) -> None:
    engine = SandboxEngine(ARTIFACTS, instances=MAX_POOLED_INSTANCES + 1)
    try:
        assert not engine.pooled
        sandbox = Sandbox(engine, SystemClock(), lambda _digest: guest)
        assert _served(sandbox, guest, "run-a")["calls"] == 1
    finally:
        engine.close()


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_freed_slots_give_their_memory_back(guest: bytes) -> None:
    """A process's memory follows the instances it holds, not the most it ever held: 20 kept
    Python instances, once dropped, leave the process about where it was (slots that kept
    16 MiB resident each held some 320 MiB more, for good)."""
    runs = 20
    engine = SandboxEngine(ARTIFACTS, instances=runs + 4)
    try:
        assert engine.pooled
        warm = WarmActivities(runs)
        sandbox = Sandbox(engine, SystemClock(), lambda _digest: guest, warm=warm)
        _served(sandbox, guest, "run-warm-up")
        warm.clear()
        before = _rss_mib()
        for i in range(runs):
            assert _served(sandbox, guest, f"run-{i}")["calls"] == 1
        assert len(warm) == runs
        held = _rss_mib() - before
        warm.clear()
        left = _rss_mib() - before
    finally:
        engine.close()
    assert held > runs * 2, f"{runs} kept instances held only {held:.0f} MiB"
    assert left < held / 4, f"{left:.0f} of the {held:.0f} MiB they held stayed resident"
