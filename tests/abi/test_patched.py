"""Patch markers (`amber_patched`) and the `recorded` count of the workflow input, through the
scripted probe (tests/abi/durable_probe.c) with hand-fed histories.

The three rules (abi/README.md, "Patch markers"), at the next command index i:
  1. history recorded a `patched` marker with this change id at i → consume it, true;
  2. else i < recorded → false, nothing issued;
  3. else → issue ["patched", change_id], true.
"""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
import wasmtime

from tests.abi._harness import Call, Guest, first_divergence, wf_envelope

pack = msgpack.packb
A: list[Any] = ["activity", "a", b"\xc0"]


@pytest.fixture(scope="module")
def probe(guests: dict[str, Guest]) -> Guest:
    return guests["durable_probe"]


def script(
    probe: Guest,
    steps: list[Any],
    results: list[list[Any]] | None = None,
    *,
    recorded: int | None,
    cancel: tuple[int, str] | None = None,
) -> Call:
    envelope = wf_envelope("script", {"steps": steps}, results, recorded=recorded, cancel=cancel)
    return probe.call("amber_workflow.script", envelope)


def marker(cmd: int, seq: int, change_id: str) -> list[Any]:
    """A recorded `patched` result: its value is the change id, a msgpack str."""
    return [cmd, seq, 0, change_id]


def ok(cmd: int, seq: int, value: Any) -> list[Any]:
    return [cmd, seq, 0, pack(value)]


# --- the three rules -------------------------------------------------------------------------


@pytest.mark.parametrize("recorded", [0, None])
def test_new_ground_issues_the_marker_and_returns_true(probe: Guest, recorded: int | None) -> None:
    call = script(probe, [["patched", "add-audit"], ["activity", "a", b"\xc0"]], recorded=recorded)
    assert call.output["commands"] == [["patched", "add-audit"], A]
    assert call.result == [[True]]


def test_a_recorded_marker_is_consumed_and_returns_true(probe: Guest) -> None:
    steps = [["patched", "add-audit"], ["activity", "a", b"\xc0"]]
    call = script(probe, steps, [marker(0, 1, "add-audit")], recorded=2)
    assert call.output["commands"] == [["patched", "add-audit"], A]  # the same list again
    assert call.result == [[True]]


@pytest.mark.parametrize(
    "results",
    [
        [ok(0, 1, "done")],  # an activity with its result
        [],  # a command still pending (a signal, say)
        [[0, 1, 0, b"add-audit"]],  # a bin, not a str: not a marker
        [[0, 1, 1, ["add-audit", ""]]],  # an error
        [marker(0, 1, "other")],  # a marker of another change
    ],
)
def test_history_without_this_marker_returns_false_and_issues_nothing(
    probe: Guest, results: list[list[Any]]
) -> None:
    call = script(
        probe, [["patched", "add-audit"], ["activity", "a", b"\xc0"]], results, recorded=1
    )
    assert call.result == [[False]]
    assert call.output["commands"] == [A]  # position 0 is the activity, as in history


def test_a_marker_of_another_change_is_left_for_its_own_call(probe: Guest) -> None:
    steps = [["patched", "x"], ["patched", "y"]]
    call = script(probe, steps, [marker(0, 1, "y")], recorded=1)
    assert call.result == [[False], [True]]
    assert call.output["commands"] == [["patched", "y"]]


@pytest.mark.parametrize(
    ("history", "answers"),
    [
        ([], [True, True]),  # a new run: both markers issued
        ([["patched", "a"], ["patched", "b"], A], [True, True]),  # written by this code
        ([["patched", "a"], A], [True, False]),  # written by code with only patch a
        ([A], [False, False]),  # written by code with neither
        ([["patched", "a"]], [True, True]),  # b comes after the end of history: new ground
    ],
)
def test_two_patches_in_sequence(
    probe: Guest, history: list[list[Any]], answers: list[bool]
) -> None:
    steps = [["patched", "a"], ["patched", "b"], ["activity", "a", b"\xc0"]]
    results = [marker(i, 10 + i, c[1]) for i, c in enumerate(history) if c[0] == "patched"]
    call = script(probe, steps, results, recorded=len(history))
    assert call.result == [[answer] for answer in answers]
    issued = call.output["commands"]
    assert first_divergence(history, issued) is None  # what the host checks
    expected = [["patched", c] for c, yes in zip("ab", answers, strict=True) if yes] + [A]
    assert issued == expected


def test_a_second_call_with_the_same_id_is_a_position_of_its_own(probe: Guest) -> None:
    # Documented: call amber_patched once per change id and keep the answer.
    steps = [["patched", "x"], ["patched", "x"], ["activity", "a", b"\xc0"]]
    assert script(probe, steps, recorded=0).output["commands"] == [["patched", "x"]] * 2 + [A]
    # On a history written by code that called it once, the second call says false.
    once = script(probe, steps, [marker(0, 1, "x")], recorded=2)
    assert once.result == [[True], [False]]
    assert once.output["commands"] == [["patched", "x"], A]


def test_removing_a_patch_is_caught_at_its_position(probe: Guest) -> None:
    # History written by code with the patch; the code without it issues the activity there.
    history: list[list[Any]] = [["patched", "x"], A]
    call = script(probe, [["activity", "a", b"\xc0"]], [marker(0, 1, "x")], recorded=2)
    issued = call.output["commands"]
    assert issued == [A]
    assert first_divergence(history, issued) == 0  # recorded patched 'x', issued the activity


def test_without_recorded_rule_2_never_applies(probe: Guest) -> None:
    # A host from before patch markers sends no `recorded`: the SDK cannot tell that history
    # holds another command at i, so it issues a marker (which such a host refuses anyway).
    steps = [["patched", "x"], ["activity", "a", b"\xc0"]]
    call = script(probe, steps, [ok(0, 1, "done")], recorded=None)
    assert call.result == [[True]]
    assert call.output["commands"] == [["patched", "x"], A]
    assert first_divergence([A], call.output["commands"]) == 0


def test_a_consumed_marker_counts_for_replaying(probe: Guest) -> None:
    steps = [["replaying"], ["patched", "x"], ["replaying"]]
    call = script(probe, steps, [marker(0, 1, "x")], recorded=1)
    assert call.result == [[True], [True], [False]]


# --- the `recorded` field --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recorded", "results"),
    [
        (-1, []),
        ("1", []),
        (1.0, []),
        (2**24 + 1, []),
        (2, [ok(2, 5, "x")]),  # a result for a command history does not hold
    ],
)
def test_malformed_recorded_traps(probe: Guest, recorded: Any, results: list[list[Any]]) -> None:
    with pytest.raises(wasmtime.Trap):
        script(probe, [], results, recorded=recorded)


def test_replaying_ends_at_the_first_new_command(probe: Guest) -> None:
    # A fire-and-forget activity: its result (the newest entry) is never consumed.
    steps = [["activity", "a", b"\xc0"], ["replaying"], ["timer", 5], ["replaying"], ["log", "x"]]
    exact = script(probe, steps, [ok(0, 1, "a")], recorded=1)
    assert exact.result == [[True], [False]]
    assert exact.logs == [(1, "x")]
    # Without `recorded` the SDK cannot tell: replaying to the end, the line is lost.
    old = script(probe, steps, [ok(0, 1, "a")], recorded=None)
    assert old.result == [[True], [True]]
    assert old.logs == []


def test_code_before_the_last_recorded_command_is_replay(probe: Guest) -> None:
    # An earlier activation issued b after a's result (the newest entry) arrived, so it ran the
    # log line too: this activation (a query, a retry) is replaying until b is re-issued.
    steps = [["activity", "a", b"\xc0"], ["await", 0], ["replaying"], ["log", "x"]]
    steps += [["timer", 5], ["replaying"]]
    entry = [0, True, "", "", pack("a")]
    exact = script(probe, steps, [ok(0, 1, "a")], recorded=2)
    assert exact.result == [entry, [True], [False]]
    assert exact.logs == []
    old = script(probe, steps, [ok(0, 1, "a")], recorded=None)
    assert old.result == [entry, [False], [False]]
    assert old.logs == [(1, "x")]


@pytest.mark.parametrize(
    ("steps", "results", "recorded", "expected"),
    [
        ([["replaying"], ["timer", 5]], [], 0, [[False]]),  # a new run
        ([["replaying"], ["signal", "go"], ["replaying"]], [], 1, [[True], [False]]),
        # At exactly `recorded`: replaying until the newest entry (a, seq 4) is consumed.
        (
            [["activity", "a", b"\xc0"], ["timer", 5], ["await", 1], ["replaying"]],
            [[1, 3, 0, None], ok(0, 4, "a")],
            2,
            [[1, True, "", "", b""], [True]],
        ),
    ],
)
def test_replaying_with_recorded(
    probe: Guest, steps: list[Any], results: list[list[Any]], recorded: int, expected: list[Any]
) -> None:
    assert script(probe, steps, results, recorded=recorded).result == expected
