"""The benchmark's Python-guest phases: the same workload with workflows written in Python, and
what a Python guest costs in the sandbox.

Throughput: `abi/samples/chain.py` (workflow `chain_py`, the twin of `chain.c`) built with
`amber build`, uploaded to the same server, and N runs of K `add_one` activities started by the
same starters as the C phase; `python_vs_c_throughput` is the ratio of the two phases'
workflows/s in one bench run.

Sandbox (in this process): compiling the component (CPython in Wasm), loading it from the
artifact cache, a trivial activation (a workflow that completes at once: `chain_py` with
k = 0), fresh each time, and a 20-step run activated step by step from the top and on its live
instance (the `run_step_by_step` figures the C chain has).
"""

from __future__ import annotations

import hashlib
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from amber import abi
from amber.abi import pack
from amber.runtime.client import AmberClient

from ._bench_sandbox import measure_stepwise
from ._build import BuildResult
from ._build_python import build_python_guest

PYTHON_CHAIN_SOURCE: Final = Path(abi.__file__).resolve().parent / "samples" / "chain.py"
PYTHON_CHAIN_TYPE: Final = "chain_py"
PYTHON_PARK_TYPE: Final = "park_py"
"""The parked Python workflow (in `chain.py` too), for the Python idle-cost phase."""

STEPWISE_ACTIVATIONS: Final = 400
"""Live and fresh activations measured step by step, at least (20 runs of 20 steps)."""

RunBatch = Callable[[Sequence[tuple[str, int]]], dict[str, Any]]
"""Start `chain_py` runs `(workflow_id, value)` and wait for them all."""


def build_python_chain(work: Path, artifacts: Path | None) -> tuple[BuildResult, float]:
    """The Python chain component, and the seconds its build took. `artifacts`: the workers'
    artifact cache, where the build's checks leave the compiled component (`compile_s` in the
    sandbox figures is what a cache miss costs)."""
    began = time.perf_counter()
    built = build_python_guest(PYTHON_CHAIN_SOURCE, work / "chain_py.wasm", artifacts=artifacts)
    return built, time.perf_counter() - began


def measure_python_throughput(
    client: AmberClient, built: BuildResult, run_batch: RunBatch, n: int, tag: str
) -> dict[str, Any]:
    """Upload the component, warm the worker up (it compiles the component on first use), then
    run the throughput batch."""
    began = time.perf_counter()
    client.upload_version(built.output.read_bytes(), promote=True)
    upload_s = time.perf_counter() - began
    began = time.perf_counter()
    warm = run_batch([(f"bench-{tag}-py-warm", 0)])
    first_run_s = time.perf_counter() - began
    if warm["errors"]:
        raise RuntimeError(f"Python warm-up run failed: {warm['messages']}")
    batch = run_batch([(f"bench-{tag}-py-{i}", 0) for i in range(n)])
    ok = n - batch["errors"]
    return {
        "n": n,
        "wall_s": batch["wall_s"],
        "workflows_per_s": round(ok / batch["wall_s"], 2),
        "errors": batch["errors"],
        "error_messages": batch["messages"],
        "wf_latency_under_load_ms": batch["server_side_ms"],
        "component_bytes": built.size,
        "upload_s": round(upload_s, 2),
        "first_run_s": round(first_run_s, 2),
        "first_run_note": "the first run on a fresh worker (loading the component, no compile"
        " when the bench started the workers: the build compiled it into their cache)",
    }


def measure_python_sandbox(wasm: bytes, repetitions: int) -> dict[str, Any]:
    """Compile, cache-load and activation costs of the Python chain (its component's bytes),
    in this process."""
    from amber.runtime.model import SystemClock
    from amber.runtime.sandbox import (
        ActivationKind,
        ActivationRequest,
        Sandbox,
        SandboxEngine,
        SandboxLimits,
    )

    digest = hashlib.sha256(wasm).hexdigest()
    with tempfile.TemporaryDirectory(prefix="amber-bench-py-") as tmp:
        engine = SandboxEngine(Path(tmp))
        try:
            began = time.perf_counter()
            engine.load(digest, lambda: wasm)
            compile_s = time.perf_counter() - began
            loads = []
            for _ in range(5):
                fresh = SandboxEngine(Path(tmp))
                try:
                    began = time.perf_counter()
                    fresh.load(digest, lambda: wasm)
                    loads.append(time.perf_counter() - began)
                finally:
                    fresh.close()
            sandbox = Sandbox(engine, SystemClock(), lambda _digest: wasm)
            envelope = abi.encode_workflow_input(
                run_id="bench-py",
                workflow=PYTHON_CHAIN_TYPE,
                input=pack({"k": 0, "value": 1}),
                results=(),
                recorded=0,
            )
            request = ActivationRequest(
                kind=ActivationKind.WORKFLOW,
                digest=digest,
                export=abi.WORKFLOW_EXPORT_PREFIX + PYTHON_CHAIN_TYPE,
                input=envelope,
                run_id="bench-py",
                step=0,
                limits=SandboxLimits(),
            )
            times = []
            for _ in range(repetitions):
                began = time.perf_counter()
                sandbox.run(request)
                times.append(time.perf_counter() - began)
            # At least 20 runs: one run's 20 steps land on whichever CPUs the scheduler picks,
            # and a live step's thread handoff costs 13 or 45 µs by that alone.
            stepwise = measure_stepwise(
                engine, digest, PYTHON_CHAIN_TYPE, max(repetitions, STEPWISE_ACTIVATIONS)
            )
        finally:
            engine.close()
    return {
        "compile_s": round(compile_s, 2),
        "cache_load_ms": round(statistics.median(loads) * 1000, 2),
        "fresh_activation_ms": {
            "median": round(statistics.median(times) * 1000, 3),
            "p99": round(sorted(times)[int(len(times) * 0.99) - 1] * 1000, 3),
            "repetitions": repetitions,
        },
        "sticky_activation_us": stepwise["sticky_us"]["median"],
        "sticky_fuel": stepwise["fuel_median"]["sticky"],
        "sticky_note": "median of a 20-step chain_py run's workflow activations on its live"
        f" instance (fresh from the top: {stepwise['fresh_us']['median']} µs)",
        "run_step_by_step": stepwise,
    }
