"""`Wakeup`, the handoff a live instance's thread and its caller (and a stream item's caller)
wait on: a wake is never lost, wakes before a wait coalesce into one, a timeout says so."""

from __future__ import annotations

import threading

from amber.runtime.model import Wakeup


def test_a_wake_before_the_wait_is_kept() -> None:
    wakeup = Wakeup()
    wakeup.wake()
    assert wakeup.wait(0.0)


def test_wakes_before_a_wait_coalesce_into_one() -> None:
    wakeup = Wakeup()
    wakeup.wake()
    wakeup.wake()
    assert wakeup.wait(0.0)
    assert not wakeup.wait(0.0)


def test_a_wait_without_a_wake_times_out() -> None:
    wakeup = Wakeup()
    assert not wakeup.wait(0.01)
    assert not wakeup.wait(-1.0)  # a deadline already past: no wait, no wake consumed


def test_turns_alternate_between_two_threads_without_losing_one() -> None:
    """The live-instance pattern: each side writes its state, then wakes the other; 2,000
    round trips, every one answered with the request it was given."""
    to_guest, to_caller = Wakeup(), Wakeup()
    box: dict[str, int | None] = {"request": None, "answer": None}
    rounds = 2000

    def guest() -> None:
        for _ in range(rounds):
            while box["request"] is None:
                to_guest.wait()
            request, box["request"] = box["request"], None
            box["answer"] = request
            to_caller.wake()

    thread = threading.Thread(target=guest, daemon=True)
    thread.start()
    answers = []
    for i in range(rounds):
        box["request"] = i
        to_guest.wake()
        while box["answer"] is None:
            assert to_caller.wait(30.0), f"round {i} was never answered"
        answers.append(box["answer"])
        box["answer"] = None
    thread.join(timeout=30.0)
    assert answers == list(range(rounds))
