"""The live-instance keeper's per-step bookkeeping, against the plain definitions it shortens:
which waits keep an instance, whether a new input continues the one a guest read, and the
request a stretch runs on."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest

from amber.abi import pack
from amber.runtime.sandbox import ActivationKind, ActivationRequest, SandboxLimits, Slice
from amber.runtime.sandbox._sticky import _SOON, _Issued, _Seen, _soon_resumed


def _plainly_soon(issued: list[Any], seen: _Seen) -> bool:
    answered = {result[0] for result in seen.results if result}
    return any(c[0] in _SOON and i not in answered for i, c in enumerate(issued))


def _ok(index: int) -> list[Any]:
    return [index, "ok", 0, b"\x80"]


@pytest.mark.parametrize(
    ("issued", "results", "recorded", "expected"),
    [
        # The usual step: the activity it just scheduled is new to history.
        ([["activity", "a"], ["activity", "b"]], [_ok(0)], 1, True),
        # Every activity answered, then a timer of days: nothing comes back soon.
        ([["activity", "a"], ["timer", 86_400_000]], [_ok(0)], 1, False),
        ([["activity", "a"], ["timer", 86_400_000]], [_ok(0)], 2, False),
        # An older activity still running, beside a new timer or signal wait.
        ([["activity", "a"], ["timer", 5]], [], 1, True),
        ([["activity", "a"], ["child", "c"], ["signal", "go"]], [_ok(0)], 2, True),
        ([["activity", "a"], ["child", "c"], ["signal", "go"]], [_ok(0), _ok(1)], 2, False),
        # Only host values and waits of days.
        ([["now", 1], ["random", b"x"], ["signal", "go"]], [_ok(0), _ok(1)], 2, False),
        ([], [], 0, False),
    ],
)
def test_a_wait_keeps_the_instance_only_for_results_that_come_back_soon(
    issued: list[Any], results: list[Any], recorded: int, expected: bool
) -> None:
    seen = _Seen(results=results, cancel=None, recorded=recorded)
    assert _soon_resumed(issued, seen) is expected
    assert _plainly_soon(issued, seen) is expected


def _output(commands: list[Any]) -> bytes:
    return pack({"abi": 1, "status": "suspended", "commands": commands})


def _issued(commands: list[Any]) -> _Issued:
    issued = _Issued.read(_output(commands))
    assert issued is not None
    return issued


def test_an_input_that_changed_a_value_the_guest_took_does_not_continue_it() -> None:
    issued = [["activity", "a"], ["now", 1_700_000_000_000]]
    seen = _Seen(results=[_ok(0)], cancel=None, recorded=2)
    same = _Seen(results=[_ok(0), [1, "ok", 0, 1_700_000_000_000]], cancel=None, recorded=2)
    other = _Seen(results=[_ok(0), [1, "ok", 0, 1_700_000_000_001]], cancel=None, recorded=2)
    assert seen.continued_by(same, _issued(issued))
    assert not seen.continued_by(other, _issued(issued))
    # Without now/random commands the results past the prefix are not read.
    assert seen.continued_by(other, _issued(issued[:1]))


_STEPS: list[list[Any]] = [
    [["activity", "a"]],
    [["activity", "a"], ["now", 5]],
    [["activity", "a"], ["now", 5], ["random", b"r"], ["timer", 9]],
    [["activity", "a"], ["now", 5], ["random", b"r"], ["timer", 9], ["activity", "b"]],
    # A history the last output does not begin: read from the top.
    [["now", 6], ["activity", "a"]],
    [["now", 6], ["activity", "a"], ["random", b"s"]],
]


def test_commands_read_after_the_last_output_s_are_what_reading_all_of_them_gives() -> None:
    before = None
    for commands in _STEPS:
        after = _Issued.read(_output(commands), before)
        assert after == _Issued.read(_output(commands))
        assert after is not None and after.commands == commands
        assert after.host_valued == tuple(
            i for i, c in enumerate(commands) if c[0] in ("now", "random")
        )
        before = after


@pytest.mark.parametrize(
    "bad",
    [[], "activity", [1, "a"], [b"activity"], None],
)
def test_a_malformed_new_command_after_good_ones_is_not_gone_on_with(bad: Any) -> None:
    before = _issued([["activity", "a"]])
    assert _Issued.read(_output([["activity", "a"], bad]), before) is None
    assert _Issued.read(_output([bad]), None) is None
    assert _Issued.read(pack({"commands": "none"}), before) is None
    assert _Issued.read(b"\xc1", before) is None


def test_a_stretch_request_is_the_request_with_its_input_and_budget_replaced() -> None:
    limits = SandboxLimits(
        fuel=7_000, memory_bytes=3 << 20, deadline_s=4.5, table_elements=99, max_output_bytes=77
    )
    observer, activity = object(), object()
    request = ActivationRequest(
        kind=ActivationKind.ACTIVITY,
        digest="d" * 64,
        export="amber_activity.x",
        input=b"whole",
        run_id="run",
        step=3,
        limits=limits,
        query=True,
        fresh=True,
        slice=Slice(fuel=1_000, cpu_s=0.5),
        activity=activity,  # type: ignore[arg-type]
        observer=observer,  # type: ignore[arg-type]
    )
    # Every field is set away from its default, so a field the method forgets shows here.
    defaults = ActivationRequest(
        kind=ActivationKind.WORKFLOW, digest="", export="", input=b"", run_id="", step=None,
        limits=SandboxLimits(),
    )  # fmt: skip
    assert all(getattr(request, f.name) != getattr(defaults, f.name) for f in fields(request))
    assert all(getattr(limits, f.name) != getattr(SandboxLimits(), f.name) for f in fields(limits))
    narrowed = request.narrowed(input=b"delta", fuel=5_000, deadline_s=1.25)
    assert narrowed == replace(
        request, input=b"delta", limits=replace(limits, fuel=5_000, deadline_s=1.25)
    )
