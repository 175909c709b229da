"""`amber bench --scaling`: how throughput and cost move with worker processes, concurrent
starters and workflow length, and with the worker's stream against a unary call per report.

Each configuration is a whole `run_bench` (its own server, workers and fresh database) with
only the throughput phase, run one after another in the same invocation: compare its rows with
each other, not with another day's.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from ._bench import BenchOptions, progress, run_bench

MATRIX: Final = (
    # (label, worker processes, concurrent starters, activities per workflow, worker options)
    ("1 worker, W=16, K=5", 1, 16, 5, ()),
    ("1 worker, W=16, K=5, one stream", 1, 16, 5, ("--streams", "1")),
    ("1 worker, W=16, K=5, unary reports", 1, 16, 5, ("--unary",)),
    ("2 workers, W=16, K=5", 2, 16, 5, ()),
    ("4 workers, W=16, K=5", 4, 16, 5, ()),
    ("1 worker, W=1, K=5", 1, 1, 5, ()),
    ("1 worker, W=64, K=5", 1, 64, 5, ()),
    ("1 worker, W=16, K=20", 1, 16, 20, ()),
)


def run_scaling(base: BenchOptions, scratch: Path) -> dict[str, Any]:
    """Run every configuration of `MATRIX` at `base.n` workflows; the rows and their figures."""
    rows: list[dict[str, Any]] = []
    for label, workers, w, k, worker_args in MATRIX:
        progress(f"scaling: {label}")
        options = replace(
            base,
            workers=workers,
            w=w,
            k=k,
            worker_args=worker_args,
            skip_latency=True,
            idle_runs=0,
            recovery_runs=0,
            isolation_runs=0,
            auth_calls=0,
            commit_probe_s=0.0,
            sandbox_repetitions=0,
            output=scratch / f"scaling-{len(rows)}.json",
        )
        result = run_bench(options)
        cpu = result["cpu_ms_per_workflow"]
        counted = (result.get("server_metrics") or {}).get("throughput_phase") or {}
        batches = counted.get("stream_batches") or 0
        rows.append(
            {
                "label": label,
                "workers": workers,
                "w": w,
                "k": k,
                "worker_options": " ".join(worker_args),
                "workflows_per_s": result["throughput"]["workflows_per_s"],
                "activities_per_s": result["throughput"]["activities_per_s"],
                "errors": result["throughput"]["errors"],
                "cpu_ms_per_workflow": cpu,
                "db_commits_per_workflow": result["db_commits_per_workflow"],
                "items_per_batch": round(counted["stream_items"] / batches, 2) if batches else None,
            }
        )
    return {"n": base.n, "rows": rows}


def format_scaling(scaling: dict[str, Any]) -> str:
    """The rows as a table."""

    def f(value: object, digits: int = 1) -> str:
        return "-" if not isinstance(value, int | float) else f"{value:.{digits}f}"

    head = (
        f"{'configuration':<36} {'wf/s':>6} {'CPU ms/wf':>9} {'server':>6} {'workers':>7}"
        f" {'pg':>5} {'commits/wf':>10} {'items/batch':>11}"
    )
    lines = [f"scaling, N={scaling['n']} per configuration", head, "-" * len(head)]
    for row in scaling["rows"]:
        cpu = row["cpu_ms_per_workflow"]
        lines.append(
            f"{row['label']:<36} {f(row['workflows_per_s']):>6} {f(cpu['total']):>9}"
            f" {f(cpu['server']):>6} {f(cpu['workers']):>7} {f(cpu['postgres']):>5}"
            f" {f(row['db_commits_per_workflow'], 2):>10} {f(row['items_per_batch'], 2):>11}"
        )
    return "\n".join(lines)
