"""Handovers between a live instance's caller and its thread on one CPU: `pull` ties both to the
caller's CPU, `let_go` gives each its CPUs back, and nothing stays tied."""

from __future__ import annotations

import os
import threading

import pytest

from amber.runtime.sandbox import _samecpu

pytestmark = pytest.mark.skipif(
    not _samecpu.enabled(), reason="needs Linux and more than one CPU for the process"
)


def test_a_pull_ties_both_threads_to_the_caller_s_cpu_until_each_lets_go() -> None:
    allowed = os.sched_getaffinity(0)
    parked = threading.Event()
    turn = threading.Event()
    seen: dict[str, set[int]] = {}
    native: list[int] = []

    def guest() -> None:
        native.append(threading.get_native_id())
        parked.set()
        turn.wait(10)
        seen["guest_woken"] = os.sched_getaffinity(0)
        _samecpu.let_go()
        seen["guest_after"] = os.sched_getaffinity(0)

    thread = threading.Thread(target=guest)
    thread.start()
    try:
        assert parked.wait(10)
        _samecpu.pull(native[0])
        seen["caller_pulled"] = os.sched_getaffinity(0)
        turn.set()
        thread.join(10)
    finally:
        turn.set()
        _samecpu.let_go()
    assert len(seen["caller_pulled"]) == 1
    assert seen["guest_woken"] == seen["caller_pulled"]
    assert seen["guest_after"] == allowed
    assert os.sched_getaffinity(0) == allowed
    assert _samecpu.enabled()


def test_a_thread_that_is_gone_is_no_reason_to_stop_handing_over() -> None:
    with open("/proc/sys/kernel/pid_max") as limit:
        nobody = int(limit.read()) + 1  # above every thread id the kernel hands out
    try:
        _samecpu.pull(nobody)
    finally:
        _samecpu.let_go()
    assert _samecpu.enabled()
    assert os.sched_getaffinity(0) == set(_samecpu._ALLOWED)


def test_after_a_refused_pull_threads_tied_before_are_still_untied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    allowed = os.sched_getaffinity(0)
    monkeypatch.setattr(_samecpu, "_pulling", True)  # restored after the test
    monkeypatch.setattr(_samecpu, "_restoring", True)
    os.sched_setaffinity(0, {min(allowed)})  # as an earlier pull left this thread
    monkeypatch.setattr(_samecpu, "_GETCPU", lambda: -1)  # sched_getcpu failing
    try:
        _samecpu.pull(threading.get_native_id())
        assert not _samecpu.enabled()
        _samecpu.let_go()
        assert os.sched_getaffinity(0) == allowed
    finally:
        os.sched_setaffinity(0, allowed)
