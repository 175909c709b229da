"""The benchmark's isolation phase: how much healthy throughput survives poison pills.

Batches of healthy `chain` runs alternate with the same batches started beside a few poison
runs (`abi/samples/poison.c`: traps, fuel bombs, memory bombs, in turn). The ratio of healthy
workflows/s with poison to without is the isolation ratio; each poison run's time from start to
its task being poisoned (handed to the surgical pool) is its time to diagnosis.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from amber import abi
from amber.runtime.client import AmberClient

from ._build import build_module

POISON_SOURCE: Final = Path(abi.__file__).resolve().parent / "samples" / "poison.c"
KINDS: Final = ("trap", "fuel", "memory")
ISOLATION_ROUNDS: Final = 6
"""Rounds by default: a batch's throughput varies by about a tenth here, so four rounds left
the ratio good to about ±0.05."""

RunBatch = Callable[[Sequence[tuple[str, int]]], dict[str, Any]]
"""Start healthy runs `(workflow_id, value)` and wait for them all (the bench's `_run_batch`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IsolationOptions:
    runs: int
    """Healthy runs per batch."""
    poison_percent: int = 10
    """Poison runs started with a poisoned batch, as a share of its healthy runs."""
    rounds: int = ISOLATION_ROUNDS
    """Clean and poisoned batches, interleaved, in alternating order (a batch takes seconds, and
    this machine's throughput drifts by a tenth between two of them: fewer rounds, or the same
    order in every round, measured the drift)."""
    diagnose_timeout_s: float = 120.0
    kinds: tuple[str, ...] = KINDS
    """The poison kinds started in turn (one kind alone shows what that kind costs)."""
    tag: str


def measure_isolation(
    client: AmberClient, run_batch: RunBatch, options: IsolationOptions, work: Path
) -> dict[str, Any]:
    """Run the phase; its figures for the bench's JSON."""
    built = build_module(POISON_SOURCE, work / "poison.wasm")
    client.upload_version(built.output.read_bytes(), promote=True)
    clean: list[float] = []
    poisoned: list[float] = []
    diagnosed: list[float] = []
    errors: list[str] = []
    count = max(1, options.runs * options.poison_percent // 100)

    def clean_batch(round_: int) -> None:
        jobs = [(f"{options.tag}-clean-{round_}-{i}", i) for i in range(options.runs)]
        clean.append(_rate(run_batch(jobs), options.runs, errors))

    def poisoned_batch(round_: int) -> None:
        started = [
            client.start_run("poisoned", {"kind": options.kinds[i % len(options.kinds)]}).run.run_id
            for i in range(count)
        ]
        jobs = [(f"{options.tag}-poison-{round_}-{i}", i) for i in range(options.runs)]
        poisoned.append(_rate(run_batch(jobs), options.runs, errors))
        diagnosed.extend(_wait_diagnosed(client, started, options.diagnose_timeout_s, errors))

    # Not counted: a warm-up (in one run here the phase's first batch was its slowest, 66.5
    # wf/s against 79-91 for the next clean ones).
    warmup = _rate(
        run_batch([(f"{options.tag}-warmup-{i}", i) for i in range(options.runs)]),
        options.runs,
        errors,
    )
    for round_ in range(options.rounds):
        # Clean first in even rounds, poisoned first in odd ones: a drift of the machine's
        # speed over the phase then weighs on both kinds of batch alike.
        pair = (clean_batch, poisoned_batch)
        for batch in pair if round_ % 2 == 0 else reversed(pair):
            batch(round_)
    ratio = statistics.mean(poisoned) / statistics.mean(clean) if min(clean) > 0 else None
    return {
        "healthy_runs_per_batch": options.runs,
        "poison_runs_per_batch": count,
        "order": "clean batch first in even rounds, poisoned batch first in odd rounds",
        "rounds": options.rounds,
        "warmup_workflows_per_s": round(warmup, 2),
        "poison_kinds": list(options.kinds),
        "clean_workflows_per_s": [round(r, 2) for r in clean],
        "poisoned_workflows_per_s": [round(r, 2) for r in poisoned],
        "isolation_ratio": None if ratio is None else round(ratio, 3),
        "round_ratios": [
            round(p / c, 3) if c else None for p, c in zip(poisoned, clean, strict=True)
        ],
        "round_ratios_note": "each round's poisoned over clean batch: how far one round's"
        " ratio strays from the phase's (the ratio of the means)",
        "time_to_diagnosis_s": {
            "p50": round(statistics.median(diagnosed), 2) if diagnosed else None,
            "max": round(max(diagnosed), 2) if diagnosed else None,
            "runs": len(diagnosed),
        },
        "errors": errors[:20],
    }


def _rate(batch: dict[str, Any], runs: int, errors: list[str]) -> float:
    errors += batch["messages"]
    ok = runs - batch["errors"]
    return float(ok / batch["wall_s"]) if batch["wall_s"] else 0.0


def _wait_diagnosed(
    client: AmberClient, started: Sequence[str], timeout_s: float, errors: list[str]
) -> list[float]:
    """Seconds from each poison run's start to its task leaving the healthy pool (as the
    server recorded both), then the runs are terminated."""
    seen: dict[str, float] = {}
    deadline = time.monotonic() + timeout_s
    while len(seen) < len(started) and time.monotonic() < deadline:
        for run_id in started:
            if run_id in seen:
                continue
            desc = client.describe(run_id)
            task = next((t for t in desc.tasks if t.poisoned_at is not None), None)
            if task is not None and task.poisoned_at is not None:
                seen[run_id] = max(0.0, (task.poisoned_at - desc.run.created_at).total_seconds())
        time.sleep(0.2)
    missing = len(started) - len(seen)
    if missing:
        errors.append(f"{missing} poison run(s) not poisoned within {timeout_s:g} s")
    for run_id in started:  # they would hold surgical capacity and the database for nothing
        client.terminate(run_id, reason="bench isolation phase over", operator="bench")
    return list(seen.values())
