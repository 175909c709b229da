"""Where a version's replay of a run that faulted first left the run's history.

A replay check hands a candidate version the run's recorded results by position. A Python v2
that swaps two activities gets the flight's result where it awaits the hotel's, and usually
raises on it (`KeyError: 'hotel'`) before the host can compare the commands it issued with the
recorded ones: `versions check` said "failed: trap" where, for a C module that read the result
loosely, it said "incompatible at command 0: history has activity 'book_flight', the candidate
issued activity 'book_hotel'". `first_divergence` finds that answer for any guest: it replays
prefixes of the history, each cut just before a result arrives, and compares what the guest
issues after a prefix with what history recorded there.

A prefix that replays cleanly (no fault, every command as recorded) means every shorter one
does too, so the first prefix that does not is found by bisection: about log2(results)
activations, each fresh. If that prefix shows a mismatch, it is the divergence; if it faults,
the candidate's own failure stands. Only faults a wrong result can cause are looked into
(traps, ABI violations, malformed output): running out of fuel, memory or time says nothing of
where the code went, and each probe would pay it again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from amber.abi import Command, RecordNow, RecordRandom
from amber.runtime.model import (
    AbiViolation,
    GuestFault,
    GuestTrap,
    MalformedOutput,
    NonDeterminism,
    RecordedCommand,
    StackOverflow,
    project,
)
from amber.runtime.sandbox import SandboxRunner

from ._replay import WorkflowActivation, activate_workflow, diverged

__all__ = ["WRONG_RESULT_FAULTS", "first_divergence"]

WRONG_RESULT_FAULTS: Final = (GuestTrap, StackOverflow, AbiViolation, MalformedOutput)
"""Faults a guest handed another command's result may end in: worth looking for a divergence."""

_CLEAN: Final = "clean"


def first_divergence(
    sandbox: SandboxRunner, activation: WorkflowActivation
) -> NonDeterminism | None:
    """The first position where the activation's guest issues another command than its history
    recorded, found by replaying prefixes of the history; None if the guest faults before it
    issues one (its fault is its own)."""
    events = activation.events
    recorded = project(events).commands
    command_seqs = {c.seq for c in recorded}
    cuts = [n for n in range(1, len(events)) if events[n].seq not in command_seqs]

    def probe(n: int) -> NonDeterminism | str | None:
        """`_CLEAN`, the divergence this prefix shows, or None (it faulted)."""
        try:
            step = activate_workflow(sandbox, replace(activation, events=events[:n]), fresh=True)
        except NonDeterminism as found:
            return found
        except GuestFault:
            return None
        for offset, issued in enumerate(step.new_commands):
            position = step.first_new_cmd + offset
            if position >= len(recorded):
                break
            if not _agrees(recorded[position], issued):
                return diverged(activation, recorded[position], position, issued)
        return _CLEAN

    low, high = 0, len(cuts)  # cuts[:low] replay cleanly; cuts[high:] do not
    first: NonDeterminism | str | None = _CLEAN
    while low < high:
        middle = (low + high) // 2
        outcome = probe(cuts[middle])
        if outcome == _CLEAN:
            low = middle + 1
        else:
            high, first = middle, outcome
    return first if isinstance(first, NonDeterminism) else None


def _agrees(recorded: RecordedCommand, issued: Command) -> bool:
    """Whether a command issued past the prefix is the recorded one. A `now` or `random` there
    holds a value the host handed out just now, never the recorded one: its kind is what the
    code decided."""
    was = recorded.command
    if isinstance(was, RecordNow):
        return isinstance(issued, RecordNow)
    if isinstance(was, RecordRandom):
        return isinstance(issued, RecordRandom) and len(issued.value) == len(was.value)
    return was == issued
