"""A reduced `amber bench` in the suite, so the benchmark cannot break unnoticed.

It starts its own server and worker processes and a fresh database on the session's PostgreSQL
server, exactly as a full run does. It asserts shape and counts, never timings.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from amber.tools._bench import BenchOptions, format_summary, run_bench

N, K, W, LATENCY_RUNS = 6, 2, 3, 3
KEYS = (
    "engine",
    "config",
    "throughput",
    "latency_ms",
    "latency",
    "cpu_ms_per_workflow",
    "cpu_s",
    "db_commits_per_workflow",
    "peak_rss_mb",
    "machine",
    "timestamp",
)


@pytest.mark.slow
def test_a_small_bench_runs_end_to_end(server_url: str, tmp_path: Path) -> None:
    output = tmp_path / "results" / "amber.json"
    options = BenchOptions(
        n=N,
        k=K,
        w=W,
        latency_runs=LATENCY_RUNS,
        database_url=server_url,
        output=output,
        timeout_s=40.0,
        stats_settle_s=1.5,
        idle_runs=0,  # the idle, recovery and sandbox phases: tests/tools/test_bench_smoke.py
        recovery_runs=0,
        sandbox_repetitions=0,
        python_runs=0,  # the Python guests' phase: tests/tools/test_bench_smoke.py
        isolation_runs=0,  # and the isolation, auth-cost and commit-rate phases, there too
        auth_calls=0,
        commit_probe_s=0,
    )

    returned = run_bench(options)

    result = json.loads(output.read_text())
    assert result == returned
    assert result["engine"] == "amber"
    assert set(KEYS) <= set(result), set(KEYS) - set(result)
    config = result["config"]
    assert (config["n"], config["k"], config["w"], config["workers"]) == (N, K, W, 1)
    assert config["db"].startswith("fresh database amber_bench_")

    throughput = result["throughput"]
    assert throughput["errors"] == 0, throughput["error_messages"]
    assert throughput["workflows_per_s"] > 0 and throughput["wall_s"] > 0
    assert throughput["activities_per_s"] == pytest.approx(
        K * throughput["workflows_per_s"], abs=0.1
    )
    latency = result["latency_ms"]
    assert (latency["runs"], latency["errors"], latency["k"]) == (LATENCY_RUNS, 0, 5)
    assert 0 < latency["p50"] <= latency["p99"]

    cpu = result["cpu_ms_per_workflow"]
    for part in ("server", "workers", "postgres", "total"):
        assert cpu[part] is not None and cpu[part] > 0, (part, cpu)
    assert cpu["total"] == pytest.approx(cpu["server"] + cpu["workers"] + cpu["postgres"], abs=0.1)
    assert result["db_commits_per_workflow"] > 0
    assert result["peak_rss_mb"]["server"] > 0 and result["peak_rss_mb"]["workers"] > 0
    assert result["machine"]["cpu_count"] >= 1
    assert "throughput" in format_summary(result)

    with psycopg.connect(server_url, autocommit=True) as conn:
        left = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'amber_bench_%'"
        ).fetchall()
    assert config["db"].split()[2] not in {name for (name,) in left}, "bench database not dropped"
