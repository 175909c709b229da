"""Decoding a run's outputs in turn, taking over the commands the last one began with, gives
what decoding each from scratch gives: the same outcome, or the same refusal.

Outputs are built the way guests write them (status, then commands, then result or error) and
also the ways a hostile guest might (other key orders, a key twice, trailing bytes, a command
changed in place, malformed bytes), and each is decoded both ways.
"""

from __future__ import annotations

import random
from typing import Any

import msgpack
import pytest

from amber.abi import (
    NOTHING_KNOWN,
    KnownCommands,
    MalformedEnvelope,
    decode_workflow_output,
    decode_workflow_output_after,
)


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def act(n: int, options: dict[str, Any] | None = None) -> list[Any]:
    command: list[Any] = ["activity", "add_one", pack({"value": n})]
    return command if options is None else [*command, options]


def output(commands: list[Any], status: str = "suspended", **rest: Any) -> bytes:
    return pack({"status": status, "commands": commands, **rest})


def both(raw: bytes, known: KnownCommands) -> KnownCommands:
    """Decode `raw` both ways, check they agree, and return what is known after it."""
    try:
        expected: Any = decode_workflow_output(raw)
    except MalformedEnvelope as exc:
        expected = ("refused", str(exc))
    try:
        got, after = decode_workflow_output_after(raw, known)
    except MalformedEnvelope as exc:
        assert expected == ("refused", str(exc))
        return NOTHING_KNOWN
    assert got == expected
    return after


def test_a_run_s_outputs_decode_as_from_scratch_and_take_over_the_known_commands() -> None:
    known = NOTHING_KNOWN
    commands: list[Any] = []
    for n in range(30):
        commands.append(act(n, {"start_to_close_ms": 1000} if n % 3 else None))
        before = known.commands
        known = both(output(commands), known)
        assert len(known.commands) == n + 1
        assert known.commands[: len(before)] == before
        # taken over, not parsed again: the very same command objects
        assert all(a is b for a, b in zip(before, known.commands, strict=False))
    final = output(commands, "completed", result=pack("done"))
    assert both(final, known).commands == known.commands


@pytest.mark.parametrize(
    "raw",
    [
        pack({"commands": [act(0), act(1)], "status": "suspended"}),  # another key order
        pack({"status": "completed", "commands": [act(0)], "result": b"\xc0", "extra": 1}),
        output([act(0), act(1)]) + b"\xc0",  # trailing bytes
        output([act(0), ["activity", "add_one", "not bin"]]),  # a refused new command
        output([act(0), act(1)], "sleeping"),  # an unknown status
        output([act(0), act(1)], "completed"),  # completed without a result
        output([act(5), act(1)]),  # the first command changed in place
        b"\x82\xa6status\xa9suspended\xa8commands\x92" + pack(act(0)),  # truncated
        b"\x83\xa6status\xa9suspended\xa8commands\x91" + pack(act(0)) + b"\xa6status\xa4done",
        b"\xc1",
        pack([1, 2]),
        pack({"status": "suspended", "commands": "no list"}),
        pack({"status": "suspended", "commands": [act(0), act(1)], 1: 2}),
    ],
)
def test_an_unusual_or_broken_output_gets_the_plain_decoder_s_answer(raw: bytes) -> None:
    known = both(output([act(0)]), NOTHING_KNOWN)
    assert len(known.commands) == 1
    both(raw, known)


def test_random_runs_of_outputs_agree_with_the_plain_decoder() -> None:
    rng = random.Random(7)
    for _ in range(200):
        known, commands = NOTHING_KNOWN, []
        for _ in range(rng.randint(1, 12)):
            roll = rng.random()
            if roll < 0.6:
                commands.append(act(rng.randint(0, 300)))
            elif roll < 0.7:
                commands.append(["timer", rng.choice([5, 5.0, -1, "x"])])
            elif roll < 0.8 and commands:
                commands[rng.randrange(len(commands))] = act(rng.randint(0, 300))
            elif roll < 0.9 and commands:
                commands.pop()
            raw = output(list(commands), rng.choice(["suspended", "suspended", "completed"]))
            if rng.random() < 0.1:
                raw = raw[: rng.randrange(len(raw))]
            known = both(raw, known)
