"""Where a version's replay of a run that faulted first left the run's history.

A replay check hands a candidate version the run's recorded results by position. A Python v2
that swaps two activities gets the flight's result where it awaits the hotel's, and usually
raises on it (`KeyError: 'hotel'`) before the host can compare the commands it issued with the
recorded ones: `versions check` said "failed: trap" where, for a C module that read the result
loosely, it said "incompatible at command 0: history has activity 'book_flight', the candidate
issued activity 'book_hotel'". `first_divergence` finds that answer for any guest: it replays
growing prefixes of the history, each cut just before a result arrives, and compares what the
guest issues after each prefix with what history recorded there. The first mismatch is the
divergence; a fault with no mismatch before it is the candidate's own failure.

It costs one fresh activation per result in the history (up to `MAX_PREFIXES`), and runs only
after a replay faulted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from amber.runtime.model import GuestFault, NonDeterminism, project
from amber.runtime.sandbox import SandboxRunner

from ._replay import WorkflowActivation, _describe_issued, activate_workflow

__all__ = ["MAX_PREFIXES", "first_divergence"]

MAX_PREFIXES: Final = 200
"""Prefixes replayed at most: past them, the fault is reported as it is."""


def first_divergence(
    sandbox: SandboxRunner, activation: WorkflowActivation
) -> NonDeterminism | None:
    """The first position where the activation's guest issues another command than its history
    recorded, found by replaying growing prefixes of the history; None if none is found before
    the guest faults on a prefix too (or past `MAX_PREFIXES`)."""
    events = activation.events
    recorded = project(events).commands
    command_seqs = {c.seq for c in recorded}
    cuts = [n for n in range(1, len(events)) if events[n].seq not in command_seqs]
    for n in cuts[:MAX_PREFIXES]:
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
            if recorded[position].command != issued:
                return NonDeterminism(
                    run_id=activation.run_id,
                    digest=activation.digest,
                    position=position,
                    seq=recorded[position].seq,
                    recorded=_describe_issued(recorded[position].command),
                    issued=_describe_issued(issued),
                )
    return None
