"""`amber bench` as a user types it, and its peers' side, in a reduced form.

The command runs once for the module (a few workflows, real server and worker processes, a fresh
database on the session's PostgreSQL server) and the tests check what it wrote and printed —
shape and counts, never timings. The peers' real harness takes a quarter of an hour and PyPI, so
its contract (environment knobs in, `results.json` out, a process group to stop) is exercised with
small scripts that speak it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from amber.tools._bench_compare import compare, format_table
from amber.tools._bench_peers import (
    DBOS_CONFIGS,
    DEFAULT_SCRIPT,
    HEADLINE_TEMPORAL,
    PeersOptions,
    parse_configs,
    run_peers,
)
from tests.conftest import ROOT

N, K, W, LATENCY_RUNS = 5, 2, 2, 2
IDLE_RUNS, RECOVERY_RUNS, ISOLATION_RUNS = 20, 10, 10
PYTHON_RUNS, PYTHON_IDLE_RUNS = 4, 6
TARGETS = (
    "throughput_vs_dbos",
    "throughput_vs_temporal",
    "cpu_ms_per_workflow",
    "idle_p50_vs_dbos_best_p50",
    "idle_p99_vs_dbos_best_p50",
    "db_commits_per_workflow",
    "fraction_of_raw_commit_rate",
    "sandbox_activation_us",
    "replay_20_steps_ms",
    "sticky_over_fresh",
    "python_vs_c_throughput",
    "python_fresh_activation_ms",
    "python_sticky_activation_us",
    "python_idle_worker_rss_ratio",
    "idle_worker_rss_ratio",
    "idle_db_bytes_per_run",
    "recovery_drain_s",
    "server_kill_drain_s",
    "isolation_ratio",
)

# Speaks run_all.sh's interface: knobs from the environment, summarize.py's results.json out.
# It leaves d_queue_tuned out, as the real one does when a configuration fails.
FAKE_HARNESS = """#!/usr/bin/env bash
set -eu
echo "fake harness N=$N K=$K W=$W LAT_RUNS=$LAT_RUNS REPEAT=$REPEAT ONLY=$ONLY"
mkdir -p "$RES_DIR" "$LOGS_DIR"
row() {  # config engine wf/s p50 p99 cpu
  printf '{"config": "%s", "engine": "%s", "workflows_per_s": %s, "activities_per_s": %s,
    "idle_latency_p50_ms": %s, "idle_latency_p99_ms": %s, "cpu_ms_per_workflow": %s,
    "wrong_results": 0}' "$1" "$2" "$3" "$(($3 * K))" "$4" "$5" "$6"
}
cat > "$OUT_JSON" <<JSON
{"meta": {"params": {"N": $N, "K": $K, "W": $W, "LAT_RUNS": $LAT_RUNS, "REPEAT": $REPEAT},
          "env": {"PEERS_WORK": "$PEERS_WORK", "SKIP_INSTALL": "$SKIP_INSTALL",
                  "TEMPORAL_CONFIGS": "$TEMPORAL_CONFIGS", "DBOS_CONFIGS": "$DBOS_CONFIGS"}},
 "summary": [$(row t_file_sandbox temporal 6 300 350 200), $(row d_inproc_sync dbos 30 58 99 42),
             $(row d_inproc_async dbos 25 26 33 49)]}
JSON
"""


@pytest.fixture(scope="module")
def bench(server_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One `amber bench` run without the peers (it must exit 0): its JSON and its stdout."""
    output = tmp_path_factory.mktemp("bench") / "amber.json"
    command = [
        *(sys.executable, "-m", "amber.tools.cli", "bench", "--database-url", server_url),
        *("--n", str(N), "--k", str(K), "--w", str(W), "--latency-runs", str(LATENCY_RUNS)),
        *("--stats-settle", "1.5", "--commit-probe", "0.5", "--output", str(output)),
        *("--idle-runs", str(IDLE_RUNS), "--recovery-runs", str(RECOVERY_RUNS)),
        *("--sandbox-repetitions", "20", "--isolation-runs", str(ISOLATION_RUNS)),
        *("--isolation-rounds", "2"),
        *("--python-runs", str(PYTHON_RUNS), "--python-idle-runs", str(PYTHON_IDLE_RUNS)),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=420)
    assert done.returncode == 0, done.stdout + done.stderr
    return {"json": json.loads(output.read_text()), "stdout": done.stdout}


@pytest.mark.slow
def test_the_command_completes_and_writes_every_key(bench: dict[str, Any]) -> None:
    result = bench["json"]
    throughput, latency = result["throughput"], result["latency_ms"]
    assert throughput["errors"] == 0, throughput["error_messages"]
    assert (latency["runs"], latency["errors"]) == (LATENCY_RUNS, 0)
    assert (result["config"]["n"], result["config"]["k"], result["config"]["w"]) == (N, K, W)
    assert result["db_commits_per_workflow"] > 0
    # The server's /metrics moved with the phase (what `curl` during a bench run shows).
    moved = result["server_metrics"]["throughput_phase"]
    assert result["server_metrics"]["url"].endswith("/metrics")
    assert moved["runs_closed"] == N and moved["tasks_finished"] >= N * (K + 1)
    assert moved["rpcs"] > 0 and moved["transactions"] > 0

    raw = result["raw_commit_rate"]
    assert raw["commits"] > 0 and raw["commits_per_s"] > 0
    assert raw["floor_commits_per_workflow"] == K + 2
    assert raw["amber_fraction_of_ceiling"] > 0
    assert raw["settings"]["synchronous_commit"]

    assert result["peers"] is None
    assert result["ratio_vs_dbos"] is None and result["ratio_vs_temporal"] is None
    [amber, python] = result["engines"]
    assert amber["engine"] == "amber" and amber["errors"] == 0
    assert amber["workflows_per_s"] == throughput["workflows_per_s"]
    # The same workload with Python guests, on the same server and workers.
    assert (python["config"], python["errors"]) == ("python", 0)
    assert python["workflows_per_s"] == result["python"]["workflows_per_s"] > 0
    assert result["python"]["n"] == PYTHON_RUNS and result["python"]["component_bytes"] > 10**6
    ratio = result["targets"]["python_vs_c_throughput"]["measured"]
    assert ratio == pytest.approx(python["workflows_per_s"] / amber["workflows_per_s"], abs=1e-3)
    py_sandbox = result["python"]["sandbox"]
    assert py_sandbox["compile_s"] > py_sandbox["cache_load_ms"] / 1000 > 0
    assert result["targets"]["python_fresh_activation_ms"]["measured"] > 0
    # Parked Python runs (`park_py`, beside `chain_py` in one component), on the worker that
    # replaced the one the recovery phase killed; a few woken by their signal complete.
    py_idle = result["python"]["idle"]
    assert (py_idle["workflow"], py_idle["parked"], py_idle["errors"]) == (
        "park_py",
        PYTHON_IDLE_RUNS,
        [],
    )
    assert py_idle["woken_by_signal"] == min(PYTHON_IDLE_RUNS, 20)
    assert all(r > 0 for r in py_idle["rss_mb_after"]["workers"])
    py_rss = result["targets"]["python_idle_worker_rss_ratio"]
    assert py_rss["measured"] > 0 and py_rss["met"] is None  # not 1,000 runs: no verdict
    assert set(TARGETS) <= set(result["targets"])
    for name, target in result["targets"].items():
        assert set(target) >= {"target", "measured", "met"}, name
    assert result["targets"]["db_commits_per_workflow"]["measured"] > 0
    for measured in ("sandbox_activation_us", "replay_20_steps_ms", "sticky_over_fresh"):
        assert result["targets"][measured]["measured"] > 0, measured
    # 20 parked runs may fit in pages the tables already had: growth can be 0 at this size.
    assert result["targets"]["idle_db_bytes_per_run"]["measured"] >= 0
    assert result["targets"]["idle_db_bytes_per_run"]["met"] is None  # not 10,000 runs
    assert result["targets"]["recovery_drain_s"]["met"] is True
    assert result["sandbox"]["activation_us"]["n"] == 20
    stepwise = result["sandbox"]["run_step_by_step"]
    assert stepwise["sticky_hits"] > stepwise["sticky_misses"] > 0  # the live instances went on
    assert result["timing_s"]["amber"] > 0 and result["timing_s"]["peers"] is None

    assert "idle p50 ms" in bench["stdout"] and "server+1w" in bench["stdout"]


@pytest.mark.slow
def test_parked_runs_are_measured_and_woken(bench: dict[str, Any]) -> None:
    idle = bench["json"]["idle_cost"]
    assert idle["errors"] == []
    assert idle["started"] == idle["parked"] == IDLE_RUNS
    assert idle["woken_by_signal"] == IDLE_RUNS  # all of them (20 are woken)
    assert idle["timers_per_run"] == 1.0 and idle["events_per_run"] > 0
    assert idle["db_bytes_per_run"] >= 0
    assert all(r > 0 for r in idle["worker_rss_ratio"])


@pytest.mark.slow
def test_the_isolation_phase_measures_healthy_throughput_beside_poison_runs(
    bench: dict[str, Any],
) -> None:
    isolation = bench["json"]["isolation"]
    assert isolation["errors"] == []
    assert isolation["healthy_runs_per_batch"] == ISOLATION_RUNS
    assert isolation["poison_kinds"] == ["trap", "fuel", "memory"]  # all three by default
    assert isolation["rounds"] == 2 and isolation["warmup_workflows_per_s"] > 0
    assert (
        len(isolation["clean_workflows_per_s"]) == len(isolation["poisoned_workflows_per_s"]) == 2
    )
    assert all(r > 0 for r in isolation["clean_workflows_per_s"])
    assert isolation["isolation_ratio"] > 0
    diagnosis = isolation["time_to_diagnosis_s"]
    assert diagnosis["runs"] == isolation["rounds"] * isolation["poison_runs_per_batch"]
    assert bench["json"]["targets"]["isolation_ratio"]["measured"] == isolation["isolation_ratio"]


@pytest.mark.slow
def test_a_killed_worker_s_runs_all_complete_within_the_at_least_once_bound(
    bench: dict[str, Any],
) -> None:
    recovery = bench["json"]["recovery"]
    assert recovery["errors"] == [] and recovery["all_completed"]
    assert (recovery["runs"], recovery["k"]) == (RECOVERY_RUNS, K)
    assert recovery["steps_missing"] == recovery["completions_recorded_twice"] == 0
    assert recovery["within_bound"], recovery
    assert recovery["activities_rerun"] <= recovery["at_least_once_bound"], recovery
    assert bench["json"]["log_problems"] == {}, bench["json"]["log_problems"]


@pytest.mark.slow
def test_a_killed_server_s_runs_all_complete_and_no_attempt_counts_as_lost(
    bench: dict[str, Any],
) -> None:
    killed = bench["json"]["recovery_server_kill"]
    assert killed["killed"] == "server"
    assert killed["errors"] == [] and killed["all_completed"], killed
    assert killed["steps_missing"] == killed["completions_recorded_twice"] == 0
    # Tasks the dead server had granted go back to their queue uncounted, not as crashes.
    assert killed["at_least_once_bound"] == 0, killed
    assert bench["json"]["targets"]["server_kill_drain_s"]["met"] is True


@pytest.mark.slow
def test_the_peers_figures_are_read_and_set_beside_ambers(
    bench: dict[str, Any], tmp_path: Path
) -> None:
    script = tmp_path / "run_all.sh"
    script.write_text(FAKE_HARNESS)
    dbos = ("d_inproc_sync", "d_inproc_async", "d_queue_tuned")
    options = PeersOptions(
        n=N, k=K, w=W, latency_runs=LATENCY_RUNS, dbos=dbos, script=script, work=tmp_path / "w"
    )
    lines: list[str] = []

    outcome = run_peers(options, echo=lines.append)

    assert f"[peers] fake harness N={N} K={K} W={W} LAT_RUNS={LATENCY_RUNS}" in lines[1]
    assert lines[1].endswith("REPEAT=1 ONLY=temporal dbos")
    env = outcome.meta["env"]
    assert env["PEERS_WORK"] == str(tmp_path / "w") and env["SKIP_INSTALL"] == "0"
    assert (env["TEMPORAL_CONFIGS"], env["DBOS_CONFIGS"]) == (
        " ".join(HEADLINE_TEMPORAL),
        " ".join(dbos),
    )
    assert outcome.returncode == 0 and not outcome.ok
    assert outcome.missing == ("t_file_local", "d_queue_tuned")
    assert "t_file_local" in (outcome.error or "")

    amber = bench["json"]
    comparison = compare(amber, outcome)
    wfs = amber["throughput"]["workflows_per_s"]
    assert comparison["ratio_vs_dbos"] == pytest.approx(wfs / 30, abs=1e-3)
    assert comparison["ratio_vs_temporal"] == pytest.approx(wfs / 6, abs=1e-3)
    p50 = comparison["ratios"]["idle_p50_vs_dbos_best_p50"]
    assert (p50["best_config"], p50["best"]) == ("d_inproc_async", 26)
    configs = [row["config"] for row in comparison["engines"]]
    assert configs == ["server+1w", "python", "t_file_sandbox", "d_inproc_sync", "d_inproc_async"]
    target = comparison["targets"]["throughput_vs_dbos"]
    assert target["met"] is (target["measured"] >= 10)
    table = format_table(comparison, amber)
    assert "peers: FAILED" in table and "throughput, Amber / DBOS best" in table


def test_a_failing_harness_is_reported_not_raised(tmp_path: Path) -> None:
    script = tmp_path / "run_all.sh"
    script.write_text("echo 'pip: no network'\nexit 3\n")
    options = PeersOptions(n=N, k=K, w=W, latency_runs=1, script=script, work=tmp_path / "w")

    outcome = run_peers(options, echo=lambda line: None)

    assert (outcome.ok, outcome.returncode) == (False, 3)
    assert "status 3" in (outcome.error or "")
    assert outcome.to_json()["output_tail"] == ["pip: no network"]
    assert outcome.missing == options.temporal + options.dbos


def test_a_hung_harness_is_stopped_with_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = tmp_path / "run_all.sh"
    # Like run_all.sh, it traps TERM and carries on; its child must go with it.
    script.write_text(
        f"trap 'echo cleaning up' TERM\nsleep 300 &\necho $$ $! > {pids}\n"
        "while true; do sleep 0.1; done\n"
    )
    options = PeersOptions(
        n=N, k=K, w=W, latency_runs=1, script=script, work=tmp_path / "w",
        timeout_s=1.0, stop_grace_s=1.0,
    )  # fmt: skip

    outcome = run_peers(options, echo=lambda line: None)

    assert not outcome.ok and "timed out" in (outcome.error or "")
    for pid in pids.read_text().split():
        deadline = time.monotonic() + 5
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(pid), f"pid {pid} still runs"


def test_a_harness_that_dies_midway_keeps_the_configs_it_finished(tmp_path: Path) -> None:
    summarize = DEFAULT_SCRIPT.parent / "summarize.py"
    if not summarize.is_file():
        pytest.skip(f"no peers' harness at {DEFAULT_SCRIPT.parent}")
    script = tmp_path / "run_all.sh"
    result = '{"engine": "dbos", "throughput": {"workflows_per_s": 30.0, "n": 5, "k": 2}}'
    script.write_text(
        f'cp {summarize} "$PEERS_WORK"/\nmkdir -p "$RES_DIR"\n'
        f"echo '{result}' > \"$RES_DIR/d_inproc_sync.r1.json\"\nexit 1\n"
    )
    options = PeersOptions(
        n=N, k=K, w=W, latency_runs=1, temporal=(), script=script, work=tmp_path / "w"
    )

    outcome = run_peers(options, echo=lambda line: None)

    assert not outcome.ok and outcome.returncode == 1
    assert [row["config"] for row in outcome.summary] == ["d_inproc_sync"]
    assert outcome.summary[0]["workflows_per_s"] == 30.0
    assert outcome.missing == ("d_inproc_async", "d_queue_tuned")


def _running(pid: str) -> bool:
    """Alive and not a zombie (a container's init may be slow to reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_config_names_are_checked_before_anything_runs() -> None:
    assert parse_configs("all", "dbos") == DBOS_CONFIGS
    assert parse_configs("none", "temporal") == parse_configs("", "temporal") == ()
    assert parse_configs("d_inproc_sync, d_queue_tuned d_inproc_sync", "dbos") == (
        "d_inproc_sync",
        "d_queue_tuned",
    )
    with pytest.raises(ValueError, match="d_inproc_snyc"):
        parse_configs("d_inproc_snyc", "dbos")
