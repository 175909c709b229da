"""Amber beside the peers: one row per engine configuration, the ratios, and the performance
targets.

Use `compare` once Amber's run (and, with `--peers`, the peers' harness) is done: it turns both
into the JSON keys `engines`, `ratios`, `ratio_vs_dbos`, `ratio_vs_temporal` and `targets`, and
`format_table` prints them. A ratio is always against the *best* configuration of that engine
measured in the same invocation (highest workflows/s, lowest latency or CPU), never against a
figure remembered from another day: these machines are shared and only same-run ratios compare.

Amber's CPU figure here is `cpu_ms_per_workflow.total_with_client` (server, workers, PostgreSQL
and the starting client), because the peers' "CPU ms per workflow" also sums every process,
their client included.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

from ._bench_peers import PeersOutcome


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineRow:
    """One engine configuration's headline figures, as the table shows them."""

    engine: str
    """`amber`, `temporal` or `dbos`."""
    config: str
    description: str
    workflows_per_s: float | None
    activities_per_s: float | None
    idle_p50_ms: float | None
    """Idle latency of one workflow (K=5 at the default workload), median."""
    idle_p99_ms: float | None
    cpu_ms_per_workflow: float | None
    """CPU of every process involved over the throughput phase ÷ N."""
    errors: int
    """Failed or wrong runs (the peers count wrong results only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Target:
    name: str
    text: str
    measured: float | None
    at_least: float | None = None
    at_most: float | None = None
    note: str = ""
    verdict: bool | None = None
    """Met or not, for a target that is not a bound on `measured`."""

    def to_json(self) -> dict[str, Any]:
        bounded = self.at_least is not None or self.at_most is not None
        met = self.verdict
        if bounded and self.measured is not None:
            met = (self.at_least is None or self.measured >= self.at_least) and (
                self.at_most is None or self.measured <= self.at_most
            )
        out: dict[str, Any] = {"target": self.text, "measured": self.measured, "met": met}
        return out | ({"note": self.note} if self.note else {})


PYTHON_IDLE_RUNS: Final = 1000
"""Parked Python runs the worker-memory target is stated for (fewer: figures, no verdict)."""

_PEER_KEYS: Final = {
    "workflows_per_s": "workflows_per_s",
    "activities_per_s": "activities_per_s",
    "idle_p50_ms": "idle_latency_p50_ms",
    "idle_p99_ms": "idle_latency_p99_ms",
    "cpu_ms_per_workflow": "cpu_ms_per_workflow",
}


def amber_row(result: dict[str, Any]) -> EngineRow:
    """Amber's row from `run_bench`'s result."""
    config, throughput, latency = result["config"], result["throughput"], result["latency_ms"]
    workers = config["workers"]
    return EngineRow(
        engine="amber",
        config=f"server+{workers}w" if workers else "target",
        description=f"Amber: server and {workers or '?'} worker process(es) over gRPC, every"
        f" workflow and activity in a Wasm sandbox; {config['db']}",
        workflows_per_s=throughput["workflows_per_s"],
        activities_per_s=throughput["activities_per_s"],
        idle_p50_ms=latency.get("p50"),
        idle_p99_ms=latency.get("p99"),
        cpu_ms_per_workflow=result["cpu_ms_per_workflow"]["total_with_client"],
        errors=throughput["errors"] + latency["errors"],
    )


def amber_python_row(result: dict[str, Any]) -> EngineRow | None:
    """The Python guests' row (the same server and workers, workflows in Python), if run."""
    python = result.get("python")
    if not python:
        return None
    k = result["config"]["k"]
    return EngineRow(
        engine="amber",
        config="python",
        description="Amber, Python guests: the same workload as a componentize-py component"
        " (abi/samples/chain.py), on the same server and workers",
        workflows_per_s=python["workflows_per_s"],
        activities_per_s=round(python["workflows_per_s"] * k, 2),
        idle_p50_ms=None,
        idle_p99_ms=None,
        cpu_ms_per_workflow=None,
        errors=python["errors"],
    )


def peer_rows(outcome: PeersOutcome | None) -> list[EngineRow]:
    """The rows of the peers' harness summary, in its order."""
    rows = []
    for row in outcome.summary if outcome else ():
        figures = {mine: _number(row.get(theirs)) for mine, theirs in _PEER_KEYS.items()}
        rows.append(
            EngineRow(
                engine=str(row.get("engine") or row["config"].split("_", 1)[0]),
                config=str(row["config"]),
                description=str(row.get("description") or ""),
                errors=int(row.get("wrong_results") or 0),
                **figures,
            )
        )
    return rows


def compare(result: dict[str, Any], outcome: PeersOutcome | None) -> dict[str, Any]:
    """The comparison keys of the bench JSON (merge them into Amber's result).

    `outcome` is None when the peers were not asked for: the rows are Amber's alone and every
    ratio is None.
    """
    amber = amber_row(result)
    peers = peer_rows(outcome)
    dbos = [r for r in peers if r.engine == "dbos"]
    temporal = [r for r in peers if r.engine == "temporal"]
    most, least = max, min
    ratios = {
        "throughput_vs_dbos": _ratio(amber, dbos, "workflows_per_s", most),
        "throughput_vs_temporal": _ratio(amber, temporal, "workflows_per_s", most),
        "idle_p50_vs_dbos_best_p50": _ratio(amber, dbos, "idle_p50_ms", least),
        "idle_p99_vs_dbos_best_p50": _ratio(amber, dbos, "idle_p50_ms", least, "idle_p99_ms"),
        "cpu_vs_dbos_best": _ratio(amber, dbos, "cpu_ms_per_workflow", least),
        "cpu_vs_temporal_best": _ratio(amber, temporal, "cpu_ms_per_workflow", least),
    }
    python = amber_python_row(result)
    mine = (amber,) if python is None else (amber, python)
    return {
        "engines": [asdict(row) for row in (*mine, *peers)],
        "peers": outcome.to_json() if outcome else None,
        "ratio_vs_dbos": ratios["throughput_vs_dbos"]["ratio"],
        "ratio_vs_temporal": ratios["throughput_vs_temporal"]["ratio"],
        "ratios": ratios,
        "targets": {t.name: t.to_json() for t in _targets(result, amber, ratios)},
    }


def _ratio(
    amber: EngineRow,
    rows: Sequence[EngineRow],
    key: str,
    best: Callable[..., EngineRow],
    amber_key: str | None = None,
) -> dict[str, Any]:
    """Amber's `amber_key` (default `key`) over the best row's `key`."""
    mine = getattr(amber, amber_key or key)
    measured = [r for r in rows if getattr(r, key) is not None]
    if not measured:
        return {"amber": mine, "best_config": None, "best": None, "ratio": None}
    top = best(measured, key=lambda r: getattr(r, key))
    theirs = getattr(top, key)
    ratio = None if mine is None or not theirs else round(mine / theirs, 3)
    return {"amber": mine, "best_config": top.config, "best": theirs, "ratio": ratio}


def _targets(
    result: dict[str, Any], amber: EngineRow, ratios: dict[str, dict[str, Any]]
) -> list[_Target]:
    """The performance targets; those this command does not measure say so (measured None)."""
    k = result["config"]["k"]
    raw = result.get("raw_commit_rate") or {}
    elsewhere = "not measured in this run"
    sandbox = result.get("sandbox")
    idle = result.get("idle_cost") or {}
    recovery = result.get("recovery") or {}
    server_kill = result.get("recovery_server_kill") or {}
    isolation = result.get("isolation") or {}
    diagnosis = isolation.get("time_to_diagnosis_s") or {}
    rss_ratios = [r for r in idle.get("worker_rss_ratio", []) if r is not None]
    idle_note = f"{idle['parked']} runs parked" if idle else elsewhere
    full = bool(idle) and idle["parked"] >= 10_000
    if idle and not full:
        idle_note += "; the target is for 10,000: no verdict"
    py_idle = (result.get("python") or {}).get("idle") or {}
    py_ratios = [r for r in py_idle.get("worker_rss_ratio", []) if r is not None]
    py_full = bool(py_idle) and py_idle["parked"] >= PYTHON_IDLE_RUNS
    py_idle_note = _python_idle_note(py_idle, py_full) if py_idle else elsewhere
    return [
        _Target(name="throughput_vs_dbos", text="≥ 10× the best DBOS workflows/s",
                measured=ratios["throughput_vs_dbos"]["ratio"], at_least=10.0),
        _Target(name="throughput_vs_temporal", text="≥ 50× the best Temporal workflows/s",
                measured=ratios["throughput_vs_temporal"]["ratio"], at_least=50.0),
        _Target(name="cpu_ms_per_workflow", text="≤ 4 CPU-ms per workflow, every process",
                measured=amber.cpu_ms_per_workflow, at_most=4.0,
                note="server + workers + PostgreSQL + the starting client, as the peers sum it;"
                f" without the client: {result['cpu_ms_per_workflow']['total']}"),
        _Target(name="idle_p50_vs_dbos_best_p50", text="idle p50 ≤ ⅓ of DBOS's best p50",
                measured=ratios["idle_p50_vs_dbos_best_p50"]["ratio"], at_most=1 / 3),
        _Target(name="idle_p99_vs_dbos_best_p50", text="idle p99 ≤ DBOS's best p50",
                measured=ratios["idle_p99_vs_dbos_best_p50"]["ratio"], at_most=1.0),
        _Target(name="db_commits_per_workflow", text=f"report it; the floor is about K+2 = {k + 2}",
                measured=result.get("db_commits_per_workflow")),
        _Target(name="fraction_of_raw_commit_rate",
                text="report workflows/s ÷ (raw commits/s ÷ (K+2))",
                measured=raw.get("amber_fraction_of_ceiling")),
        _Target(name="sandbox_activation_us", text="≤ 150 µs median",
                measured=_at(sandbox, "activation_us", "median"), at_most=150.0,
                note="" if sandbox else elsewhere),
        _Target(name="replay_20_steps_ms", text="≤ 2 ms",
                measured=_at(sandbox, "replay_20_steps_ms", "median"), at_most=2.0,
                note="" if sandbox else elsewhere),
        _Target(name="sticky_over_fresh",
                text="report it: a workflow activation on its live instance ÷ from the top",
                measured=_at(sandbox, "run_step_by_step", "sticky_over_fresh"),
                note="20-step chain run, per activation" if sandbox else elsewhere),
        _Target(name="idle_worker_rss_ratio",
                text="10,000 waiting runs leave the worker's RSS unchanged (±10 %)",
                measured=max(rss_ratios, key=lambda r: abs(r - 1), default=None),
                at_least=0.9 if full else None, at_most=1.1 if full else None, note=idle_note),
        _Target(name="idle_db_bytes_per_run", text="≤ 4 KiB of database per waiting run",
                measured=idle.get("db_bytes_per_run"), at_most=4096.0 if full else None,
                note=idle_note),
        _Target(name="recovery_drain_s",
                text="SIGKILL the worker with 100 runs in flight: all complete, duplicates only"
                " within the at-least-once bound; report the time to drain",
                measured=recovery.get("time_kill_to_all_done_s"),
                verdict=recovery.get("within_bound") and recovery.get("all_completed")
                if recovery else None,
                note=f"{recovery['runs']} runs, {recovery['activities_rerun']} activities re-run"
                f" (bound {recovery['at_least_once_bound']})" if recovery else elsewhere),
        _Target(name="server_kill_drain_s",
                text="SIGKILL the server with 100 runs in flight, restart it: all complete, no"
                " attempt counted as lost with its worker; report the time to drain",
                measured=server_kill.get("time_kill_to_all_done_s"),
                verdict=server_kill.get("all_completed") and server_kill["at_least_once_bound"] == 0
                if server_kill else None,
                note=f"{server_kill['runs']} runs, {server_kill['at_least_once_bound']} attempts"
                " counted as lost" if server_kill else elsewhere),
        _Target(name="python_vs_c_throughput",
                text="Python guests' workflows/s ÷ C guests', same workload, same run ≥ 0.5",
                measured=result.get("python_vs_c_throughput"), at_least=0.5,
                note="" if result.get("python") else elsewhere),
        _Target(name="python_fresh_activation_ms",
                text="a trivial Python workflow's fresh activation ≤ 2 ms median",
                measured=_at(result.get("python"), "sandbox", "fresh_activation_ms", "median"),
                at_most=2.0, note=_python_note(result.get("python"))),
        _Target(name="python_sticky_activation_us",
                text="on a reused (sticky) instance ≤ 250 µs median",
                measured=_at(result.get("python"), "sandbox", "sticky_activation_us"),
                at_most=250.0,
                note=str(_at_text(result.get("python"), "sandbox", "sticky_note") or elsewhere)),
        _Target(name="python_idle_worker_rss_ratio",
                text=f"{PYTHON_IDLE_RUNS:,} parked Python runs: no worker memory growth beyond the"
                " instance caches' bound (RSS after / before ±10 %)",
                measured=max(py_ratios, key=lambda r: abs(r - 1), default=None),
                at_least=0.9 if py_full else None, at_most=1.1 if py_full else None,
                note=py_idle_note),
        _Target(name="isolation_ratio",
                text="healthy workflows/s beside 10 % poison runs ≥ 0.95 × without",
                measured=isolation.get("isolation_ratio"), at_least=0.95,
                note=f"time to diagnosis p50 {diagnosis.get('p50')} s, max {diagnosis.get('max')} s"
                if isolation else elsewhere),
    ]  # fmt: skip


def _python_idle_note(idle: dict[str, Any], full: bool) -> str:
    before, after = idle["rss_mb_before"]["workers"], idle["rss_mb_after"]["workers"]
    note = f"{idle['parked']} runs parked; worker RSS MiB {before} → {after}"
    return note if full else f"{note}; the target is for {PYTHON_IDLE_RUNS:,}: no verdict"


def _python_note(python: dict[str, Any] | None) -> str:
    sandbox = (python or {}).get("sandbox")
    if not sandbox:
        return "not measured in this run"
    return (
        f"component compile {sandbox['compile_s']} s (once per version and machine), cache"
        f" load {sandbox['cache_load_ms']} ms"
    )


def _at_text(doc: dict[str, Any] | None, *keys: str) -> object:
    for key in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def _at(doc: dict[str, Any] | None, *keys: str) -> float | None:
    for key in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return _number(doc)


def format_table(comparison: dict[str, Any], result: dict[str, Any]) -> str:
    """The side-by-side table, the ratios and the targets, for a terminal."""
    head = (
        "engine",
        "config",
        "wf/s",
        "act/s",
        "idle p50 ms",
        "idle p99 ms",
        "CPU ms/wf",
        "errors",
    )
    body = [
        (r["engine"], r["config"], _f(r["workflows_per_s"]), _f(r["activities_per_s"]),
         _f(r["idle_p50_ms"]), _f(r["idle_p99_ms"]), _f(r["cpu_ms_per_workflow"]), str(r["errors"]))
        for r in comparison["engines"]
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in (head, *body)) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    c = result["config"]
    lines = [
        f"N={c['n']} x K={c['k']}, W={c['w']}; idle latency over {c['latency_runs']} sequential"
        " runs; CPU ms/wf sums every process (Amber: server, workers, PostgreSQL, client)",
        line(head),
        line(["-" * w for w in widths]),
        *(line(row) for row in body),
        "",
    ]
    peers = comparison["peers"]
    if peers is None:
        lines.append("peers: not run (--peers runs them, and the ratios, in the same invocation)")
    elif not peers["ok"]:
        lines.append(f"peers: FAILED — {peers['error']} (log: {peers['run_dir']}/harness.log)")
    r = comparison["ratios"]
    texts = {
        "throughput_vs_dbos": "throughput, Amber / DBOS best",
        "throughput_vs_temporal": "throughput, Amber / Temporal best",
        "idle_p50_vs_dbos_best_p50": "idle p50, Amber / DBOS best p50",
        "idle_p99_vs_dbos_best_p50": "idle p99, Amber / DBOS best p50",
        "cpu_vs_dbos_best": "CPU ms/wf, Amber / DBOS best",
        "cpu_vs_temporal_best": "CPU ms/wf, Amber / Temporal best",
    }
    targets = comparison["targets"]
    for key, text in texts.items():
        x = r[key]
        verdict = ""
        if key in targets:
            met = targets[key]["met"]
            verdict = f"   target {targets[key]['target']}: {_verdict(met)}"
        if x["ratio"] is None:
            if peers is not None:
                lines.append(f"{text:<34} -")
            continue
        lines.append(
            f"{text:<34} {x['ratio']:>6.2f}×  ({_f(x['amber'])} vs {_f(x['best'])},"
            f" {x['best_config']}){verdict}"
        )
    cpu = targets["cpu_ms_per_workflow"]
    lines.append(
        f"{'CPU ms/wf, Amber':<34} {_f(cpu['measured']):>6}   target {cpu['target']}:"
        f" {_verdict(cpu['met'])}"
    )
    commits = result.get("db_commits_per_workflow")
    floor = f"(floor ≈ K+2 = {c['k'] + 2})"
    lines.append(f"{'DB commits per workflow':<34} {_f(commits, 2):>6}   {floor}")
    raw = result.get("raw_commit_rate")
    if raw:
        share = raw["amber_fraction_of_ceiling"]
        lines.append(
            f"{'raw single-row commits/s':<34} {_f(raw['commits_per_s'], 0):>6} on the same"
            f" PostgreSQL → ceiling {_f(raw['ceiling_workflows_per_s'])} wf/s at K+2 commits;"
            f" Amber reaches {_f(None if share is None else 100 * share)} %"
        )
    extra = {
        "sandbox_activation_us": "sandbox activation µs, median",
        "replay_20_steps_ms": "20-step replay ms, median",
        "sticky_over_fresh": "live instance ÷ from the top",
        "idle_worker_rss_ratio": "worker RSS after / before parking",
        "idle_db_bytes_per_run": "database bytes per parked run",
        "recovery_drain_s": "SIGKILL → all done, s",
        "server_kill_drain_s": "server SIGKILL → all done, s",
        "isolation_ratio": "isolation (with / without poison)",
        "python_vs_c_throughput": "Python guests wf/s ÷ C guests",
        "python_fresh_activation_ms": "Python fresh activation, ms",
        "python_sticky_activation_us": "Python live-instance activation µs",
        "python_idle_worker_rss_ratio": "worker RSS, parked Python runs",
    }
    for key, text in extra.items():
        t = targets[key]
        digits = (
            3
            if key
            in (
                "idle_worker_rss_ratio",
                "isolation_ratio",
                "sticky_over_fresh",
                "python_vs_c_throughput",
                "python_fresh_activation_ms",
                "python_idle_worker_rss_ratio",
            )
            else 1
        )
        detail = f" ({t['note']})" if t.get("note") else ""
        lines.append(
            f"{text:<34} {_f(t['measured'], digits):>6}   target {t['target']}:"
            f" {_verdict(t['met'])}{detail}"
        )
    return "\n".join(lines)


def _verdict(met: bool | None) -> str:
    return "-" if met is None else "met" if met else "MISSED"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _f(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
