"""`amber bench`: throughput, idle latency and cost of `chain` runs, measured like the peers.

Use it to put a number on a change, and beside `../shared/bench/peers` (Temporal dev server,
DBOS) with the same workload: N workflows × K sequential trivial activities (`add_one`, from
`abi/samples/chain.c`), started by W concurrent starters, then `latency_runs` sequential runs on
the idle system, then the database's raw commit rate (`_bench_commit_rate`). This module is
Amber's run; the command's flags, the peers' harness and the side-by-side table are in
`_cmd_bench`, `_bench_peers` and `_bench_compare`.

The engine runs as it does in production: `amber server` and `--workers` `amber worker` are
separate OS processes on loopback (or `--target` names a running server). A database URL
(`--database-url`, else `AMBER_DATABASE_URL`) gets a fresh `amber_bench_<random>` database that
is dropped afterwards, so old rows skew nothing; without one the server starts the embedded
PostgreSQL in a temporary `AMBER_HOME`. Everything started is stopped by pid on the way out.

Costs are deltas over the throughput phase, read from `/proc` (user+system CPU, VmHWM) rather
than sampled: no sampler competes for the two cores. PostgreSQL's CPU is found through the pid of
our own backend (`pg_backend_pid()` → its postmaster), so it is measured only when the server is
local. Commits come from `pg_stat_database`, which backends publish lazily (idle ones within
`PGSTAT_IDLE_INTERVAL`, 10 s): both readings wait `stats_settle_s` first. The few SQL statements
here address the PostgreSQL *server* (create/drop a database, statistics), not Amber's store,
which is why they are not in `history/`.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import platform
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import psycopg
from psycopg import sql

from amber import abi
from amber.abi import AmberError
from amber.history import DATABASE_URL_ENV, HOME_ENV, Database, RunStatus
from amber.runtime.client import AmberClient, decode

from ._bench_auth import measure_auth
from ._bench_commit_rate import measure_commit_rate
from ._bench_idle import PARK_SOURCE, IdleOptions, measure_idle_cost
from ._bench_isolation import ISOLATION_ROUNDS, KINDS, IsolationOptions, measure_isolation
from ._bench_metrics import counter_deltas, scrape_counters
from ._bench_python import (
    PYTHON_CHAIN_SOURCE,
    PYTHON_CHAIN_TYPE,
    PYTHON_PARK_TYPE,
    build_python_chain,
    measure_python_sandbox,
    measure_python_throughput,
)
from ._bench_recovery import CrashControl, RecoveryOptions, measure_recovery
from ._bench_sandbox import measure_sandbox
from ._build import build_module

CHAIN_SOURCE: Final = Path(abi.__file__).resolve().parent / "samples" / "chain.c"
_ROOT: Final = Path(__file__).resolve().parent.parent
_TICKS: Final = os.sysconf("SC_CLK_TCK")
_OUTAGE_GRACE_S: Final = 5.0
"""Warnings logged this long after the restarted server listens are still the outage's echo
(a worker's backoff between reconnections reaches 5 s)."""


def default_output() -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path("bench") / "results" / f"amber-{stamp}.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchOptions:
    """What to run and where. The defaults are the peers' workload."""

    n: int = 1000
    """Workflows started in the throughput phase."""
    k: int = 5
    """Sequential `add_one` activities per throughput workflow."""
    w: int = 16
    """Concurrent starters (threads sharing one client)."""
    latency_runs: int = 50
    """Sequential runs of the latency phase."""
    latency_k: int = 5
    """Activities per latency run (the peers measure K=5)."""
    workers: int = 1
    """Worker processes to start (ignored with `target`)."""
    target: str | None = None
    """A running server to measure; None starts a server and workers."""
    database_url: str | None = None
    """PostgreSQL server for the fresh bench database (None: `AMBER_DATABASE_URL`, else the
    embedded one). With `target`: the server's database, read only for commit counts."""
    output: Path = field(default_factory=default_output)
    """Where the JSON goes (its directory is created)."""
    skip_latency: bool = False
    timeout_s: float = 900.0
    """Longest wait for the runs of one phase to close; later ones count as errors."""
    stats_settle_s: float = 11.0
    """Pause before each `pg_stat_database` reading, so idle backends have published theirs."""
    commit_probe_s: float = 3.0
    auth_calls: int = 2000
    """Calls per server in the auth-cost phase (0: skip it)."""
    """How long to measure the database's raw single-row commit rate at the end (0: skip)."""
    idle_runs: int = 10_000
    """Runs parked on a timer or signal in the idle-cost phase (0: skip it)."""
    recovery_runs: int = 100
    """Runs in flight when the recovery phases kill the worker, then the server (0: skip
    them)."""
    isolation_runs: int = 200
    """Healthy runs per batch of the isolation phase, beside 10 % poison runs (0: skip it)."""
    isolation_kinds: tuple[str, ...] = KINDS
    """The poison kinds of the isolation phase, started in turn."""
    isolation_rounds: int = ISOLATION_ROUNDS
    """Rounds of the isolation phase (a clean and a poisoned batch each)."""
    worker_fuel: int | None = None
    """The workers' fuel budget per activation (`amber worker --fuel`; None: its default)."""
    worker_args: tuple[str, ...] = ()
    """More `amber worker` options (`--unary`, `--streams N`, ...)."""
    sandbox_repetitions: int = 2000
    """Activations timed by the in-process sandbox microbenchmark (0: skip it)."""
    python_runs: int = 1000
    """Runs of the Python guests' throughput phase, `chain_py` at K (0: skip the Python
    phases)."""
    python_idle_runs: int = 1000
    """Python runs (`park_py`) parked after the Python throughput phase, whose worker memory
    is measured as the idle-cost phase's is (0: skip it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Child:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    args: tuple[str, ...]
    """The `amber` arguments it was started with."""
    env: dict[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Db:
    """Where commits and PostgreSQL CPU are read."""

    stats_url: str
    """A connection for readings; not to the bench database, so readings do not count."""
    name: str
    """The database the server uses."""
    description: str
    exclusive: bool
    """The cluster was started for this benchmark: all of its CPU is ours."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Stack:
    target: str
    server: _Child | None
    workers: tuple[_Child, ...]
    db: _Db | None
    restarted: list[_Child] = field(default_factory=list)
    """Servers started in place of `server` (the server-kill phase): stopped where it is."""
    workers_restarted: dict[str, _Child] = field(default_factory=dict)
    """The worker started in place of each killed one, by the killed one's name."""

    def worker_pids(self) -> list[int]:
        """The workers serving now: each started one, or the one started in its place."""
        return [self.workers_restarted.get(w.name, w).popen.pid for w in self.workers]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Sample:
    """CPU seconds used so far, per process group."""

    server: float | None
    workers: tuple[float, ...]
    client: float
    pg_cluster: float | None
    pg_backends: dict[int, float]
    machine_busy: float
    machine_irq: float


def run_bench(options: BenchOptions) -> dict[str, Any]:
    """Run the benchmark, write its JSON to `options.output` and return it."""
    if options.n < 1 or options.k < 0 or options.w < 1 or options.workers < 1:
        raise ValueError("need n >= 1, k >= 0, w >= 1 and workers >= 1")
    tag = secrets.token_hex(4)
    problems: dict[str, list[str]] = {}
    outages: list[tuple[float, float]] = []
    """Unix-time windows of the deliberate server kill, from the kill until its replacement
    listens (and `_OUTAGE_GRACE_S`): warnings logged then are expected."""
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="amber-bench-")))

        def keep_logs(failed: type[BaseException] | None, *_: object) -> bool:
            return _collect_logs(tmp / "logs", options.output, failed, problems, outages)

        stack.push(keep_logs)  # runs once everything pushed later has been stopped
        setup = _attach(options) if options.target else _start(options, tmp, stack, tag)
        client = stack.enter_context(AmberClient(setup.target, timeout_s=60.0))
        client.wait_ready(timeout_s=60.0)
        progress(f"server {setup.target}; building and uploading {CHAIN_SOURCE.name}")
        built = build_module(CHAIN_SOURCE, tmp / "chain.wasm")
        client.upload_version(built.output.read_bytes(), promote=True)
        postmaster = _postmaster(setup.db)
        warm = _run_batch(client, [(f"bench-{tag}-warm", 0)], options.latency_k, 120.0, 1)
        if warm["errors"]:
            raise RuntimeError(f"warm-up run failed: {warm['messages']}")

        commits_before = _commits(setup.db, options.stats_settle_s)
        metrics_url = client.status().metrics_url
        if metrics_url:
            progress(f"server metrics at {metrics_url} (curl it while the bench runs)")
        progress(f"throughput: {options.n} runs x {options.k} activities, {options.w} starters")
        counted_before = scrape_counters(metrics_url)
        before = _sample(setup, postmaster)
        jobs = [(f"bench-{tag}-{i}", 0) for i in range(options.n)]
        throughput = _run_batch(client, jobs, options.k, options.timeout_s, options.w)
        after = _sample(setup, postmaster)
        counted = counter_deltas(counted_before, scrape_counters(metrics_url))
        commits_after = _commits(setup.db, options.stats_settle_s)

        latency: dict[str, Any] = {"runs": 0, "errors": 0}
        if not options.skip_latency and options.latency_runs > 0:
            progress(f"latency: {options.latency_runs} sequential runs of K={options.latency_k}")
            jobs = [(f"bench-{tag}-lat-{i}", i) for i in range(options.latency_runs)]
            latency = _run_batch(client, jobs, options.latency_k, options.timeout_s, 1)
        peak_rss = {
            "server": _peak_rss_mb(setup.server),
            "workers": max((_peak_rss_mb(c) or 0.0 for c in setup.workers), default=None),
            "workers_each": [_peak_rss_mb(c) for c in setup.workers],
        }
        # Idle cost before isolation: the hostile guests' memory bombs would inflate the
        # worker's RSS that parking is measured against (it then shrank 40 % while 10,000 runs
        # parked, which says nothing about what parked runs cost).
        idle, recovery, server_kill = _crash_and_idle_phases(
            options, setup, client, stack, tmp, tag
        )
        if server_kill is not None:
            begin, end = server_kill["outage_unix"]
            outages.append((begin, end + _OUTAGE_GRACE_S))
        # After idle cost (live Python instances, ~8 MiB each, would inflate the worker RSS
        # that parking is measured against) and before isolation (whose poison runs the
        # surgical pool retries for minutes, on the same cores).
        python = None
        if options.python_runs > 0:
            progress(f"python guests: building {PYTHON_CHAIN_SOURCE.name} (componentize-py)")
            started_here = setup.server is not None  # the workers' AMBER_HOME is tmp/home
            cache = tmp / "home" / "artifacts" if started_here else None
            python_built, build_s = build_python_chain(tmp, cache)
            python_wasm = python_built.output.read_bytes()  # the sandbox phase comes after tmp
            progress(f"python guests: {options.python_runs} runs x {options.k} activities")

            def python_batch(jobs: Sequence[tuple[str, int]]) -> dict[str, Any]:
                return _run_batch(
                    client, jobs, options.k, options.timeout_s, options.w, PYTHON_CHAIN_TYPE
                )

            python = measure_python_throughput(
                client, python_built, python_batch, options.python_runs, tag
            ) | {"build_s": round(build_s, 1)}
            if options.python_idle_runs > 0 and setup.server is not None and setup.db is not None:
                progress(f"python guests: {options.python_idle_runs} runs parked (park_py)")
                park = IdleOptions(
                    runs=options.python_idle_runs, workflow=PYTHON_PARK_TYPE, starters=options.w,
                    timeout_s=options.timeout_s, tag=f"bench-{tag}-py-idle",
                )  # fmt: skip
                store = _store(setup.db, stack)
                python["idle"] = measure_idle_cost(
                    client, store, setup.worker_pids(), setup.server.popen.pid, park
                )

        isolation = None
        if options.isolation_runs > 0 and setup.server is not None:
            isolation = _isolation_phase(options, setup, client, stack, tmp, tag)
        raw_rate = None
        if setup.db is not None and options.commit_probe_s > 0:  # while the database is up
            progress(f"raw commit rate: single-row commits for {options.commit_probe_s} s")
            url = psycopg.conninfo.make_conninfo(setup.db.stats_url, dbname=setup.db.name)
            raw_rate = measure_commit_rate(url, options.commit_probe_s).to_json()
        auth = None
        if setup.db is not None and options.auth_calls > 0:
            progress(f"auth cost: {options.auth_calls} calls with and without credentials")
            url = psycopg.conninfo.make_conninfo(setup.db.stats_url, dbname=setup.db.name)
            auth = measure_auth(url, options.auth_calls)
    sandbox = None
    if options.sandbox_repetitions > 0:  # in this process, once the engine's are stopped
        # What the phases before left on this process's heap (their results, the peers'
        # reports) is no worker's: keep the collector from walking it while activations are
        # timed. A 3-million-object heap moved a live Python step from 340 to 385 µs.
        gc.collect()
        gc.freeze()
        progress(f"sandbox: {options.sandbox_repetitions} activations, 20-step replays")
        replays = max(1, options.sandbox_repetitions // 10)
        sandbox = measure_sandbox(options.sandbox_repetitions, replays)
        if python is not None:
            progress("sandbox: Python guest compile, cache load and fresh activations")
            python["sandbox"] = measure_python_sandbox(
                python_wasm, max(20, options.sandbox_repetitions // 20)
            )
    n = options.n
    cpu = _cpu_report(before, after, n, setup.db)
    ok = n - throughput["errors"]  # only runs that returned the right result count
    commits = (
        None if commits_before is None or commits_after is None else commits_after - commits_before
    )
    workflows_per_s = round(ok / throughput["wall_s"], 2)
    if raw_rate is not None:  # what K+2 commits per workflow would allow on this database
        ceiling = raw_rate["commits_per_s"] / (options.k + 2)
        raw_rate |= {
            "floor_commits_per_workflow": options.k + 2,
            "ceiling_workflows_per_s": round(ceiling, 1),
            "amber_fraction_of_ceiling": round(workflows_per_s / ceiling, 4) if ceiling else None,
        }
    result: dict[str, Any] = {
        "engine": "amber",
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": {
            "n": n,
            "k": options.k,
            "w": options.w,
            "workers": len(setup.workers) if setup.server else None,
            "latency_runs": options.latency_runs,
            "latency_k": options.latency_k,
            "server": setup.target if options.target else f"started by the bench ({setup.target})",
            "db": setup.db.description if setup.db else None,
            "module_sha256": built.sha256,
            "worker_fuel": options.worker_fuel,
            "source_revision": _source_revision(),
        },
        "throughput": {
            "n": n,
            "k": options.k,
            "w": options.w,
            "wall_s": throughput["wall_s"],
            "workflows_per_s": workflows_per_s,
            "activities_per_s": round(ok * options.k / throughput["wall_s"], 2),
            "starts_per_s": round(n / throughput["start_phase_s"], 1),
            "errors": throughput["errors"],
            "error_messages": throughput["messages"],
            "wf_latency_under_load_ms": throughput["server_side_ms"],
        },
        "latency_ms": {k: latency.get(k) for k in ("p50", "p99", "mean", "min", "max")}
        | {"runs": latency["runs"], "k": options.latency_k, "errors": latency["errors"]},
        "cpu_ms_per_workflow": cpu["per_workflow"],
        "cpu_s": cpu["seconds"],
        "db_commits": commits,
        "db_commits_per_workflow": None if commits is None else round(commits / n, 2),
        "raw_commit_rate": raw_rate,
        "db_commits_note": f"pg_stat_database.xact_commit delta of the bench database; includes"
        f" the server's background commits (lease sweeper, ~1/s) over the phase and the"
        f" {options.stats_settle_s} s settle before the second reading",
        "peak_rss_mb": peak_rss,
        "idle_cost": idle,
        "recovery": recovery,
        "recovery_server_kill": server_kill,
        "isolation": isolation,
        "sandbox": sandbox,
        "python": python,
        "python_vs_c_throughput": None
        if python is None or not workflows_per_s
        else round(python["workflows_per_s"] / workflows_per_s, 3),
        "auth": auth,
        "server_metrics": {"url": metrics_url, "throughput_phase": counted},
        "log_problems": problems,
        "machine": {
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_at_end": list(os.getloadavg()),
        },
    }
    if latency["runs"]:  # the peers' key names, for one table beside them
        result["latency"] = {"k": options.latency_k, "runs": latency["runs"]} | {
            f"{k}_ms": latency[k] for k in ("p50", "p99", "mean")
        }
    write_json(options.output, result)
    return result


def _crash_and_idle_phases(
    options: BenchOptions,
    setup: _Stack,
    client: AmberClient,
    stack: contextlib.ExitStack,
    tmp: Path,
    tag: str,
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any] | None]:
    """The idle-cost and recovery phases (worker kill, server kill); they need the store and
    processes of our own, so they are skipped (None) with `--target`."""
    if setup.server is None or setup.db is None or not setup.workers:
        return None, None, None
    store = _store(setup.db, stack)
    idle = recovery = server_kill = None
    if options.idle_runs > 0:
        progress(f"idle cost: {options.idle_runs} runs parked on a timer or signal")
        built = build_module(PARK_SOURCE, tmp / "park.wasm")
        client.upload_version(built.output.read_bytes(), promote=True)
        pids = setup.worker_pids()
        park = IdleOptions(
            runs=options.idle_runs, starters=options.w, timeout_s=options.timeout_s,
            tag=f"bench-{tag}-idle",
        )  # fmt: skip
        idle = measure_idle_cost(client, store, pids, setup.server.popen.pid, park)
    if options.recovery_runs > 0:
        progress(f"recovery: SIGKILL the worker with {options.recovery_runs} runs in flight")
        crash = RecoveryOptions(
            runs=options.recovery_runs, k=options.k, starters=options.w,
            timeout_s=options.timeout_s, tag=f"bench-{tag}-recovery",
        )  # fmt: skip
        recovery = measure_recovery(client, store, _worker_control(setup, 0, stack), crash)
        progress(f"recovery: SIGKILL the server with {options.recovery_runs} runs in flight")
        crash = replace(crash, tag=f"bench-{tag}-server-kill")
        server_kill = measure_recovery(client, store, _server_control(setup), crash)
    return idle, recovery, server_kill


def _isolation_phase(
    options: BenchOptions,
    setup: _Stack,
    client: AmberClient,
    stack: contextlib.ExitStack,
    tmp: Path,
    tag: str,
) -> dict[str, Any]:
    """Healthy batches with and without poison runs beside them, a surgical pool serving the
    poisoned tasks as in production."""
    progress(
        f"isolation: {options.isolation_runs} healthy runs per batch, clean and beside 10 %"
        f" poison runs ({', '.join(options.isolation_kinds)}), {options.isolation_rounds} rounds"
        " after a warm-up batch"
    )
    worker = setup.workers[0]
    surgeon = _spawn(
        "surgical",
        ["--server", setup.target, "worker", "--pool", "surgical", "--poll-wait", "1"]
        + ([] if options.worker_fuel is None else ["--fuel", str(options.worker_fuel)]),
        worker.env,
        worker.log.parent,
    )
    stack.callback(_stop, surgeon)

    def batch(jobs: Sequence[tuple[str, int]]) -> dict[str, Any]:
        return _run_batch(client, jobs, 3, options.timeout_s, options.w)

    phase = IsolationOptions(
        runs=options.isolation_runs,
        rounds=options.isolation_rounds,
        kinds=options.isolation_kinds,
        tag=f"bench-{tag}-iso",
    )
    return measure_isolation(client, batch, phase, tmp)


def _worker_control(setup: _Stack, index: int, stack: contextlib.ExitStack) -> CrashControl:
    """Kill worker `index`'s process group; start a replacement with the same arguments."""
    worker = setup.workers[index]

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.popen.pid, signal.SIGKILL)
        worker.popen.wait(timeout=30)

    def restart() -> None:
        child = _spawn(f"{worker.name}-restarted", list(worker.args), worker.env, worker.log.parent)
        stack.callback(_stop, child)
        setup.workers_restarted[worker.name] = child

    return CrashControl(victim="worker", kill=kill, restart=restart)


def _server_control(setup: _Stack) -> CrashControl:
    """Kill the server (not the embedded PostgreSQL it started: a restarted server reuses it);
    start a replacement on the same port, as a supervisor would, and wait until it listens."""
    server = setup.server
    assert server is not None
    args = list(server.args)
    args[args.index("--listen") + 1] = setup.target
    port_file = Path(args[args.index("--port-file") + 1])

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server.popen.pid, signal.SIGKILL)
        server.popen.wait(timeout=30)

    def restart() -> None:
        port_file.unlink(missing_ok=True)
        child = _spawn("server-restarted", args, server.env, server.log.parent)
        setup.restarted.append(child)  # stopped after the workers, as the first one is
        _wait_listening(child, port_file)

    return CrashControl(victim="server", kill=kill, restart=restart)


# -- processes -------------------------------------------------------------------------------


def _start(options: BenchOptions, tmp: Path, stack: contextlib.ExitStack, tag: str) -> _Stack:
    """Start server and workers (and a fresh database); their stops are pushed on `stack`."""
    (tmp / "logs").mkdir()
    env = {**os.environ, HOME_ENV: str(tmp / "home")}
    env.pop(DATABASE_URL_ENV, None)
    url = options.database_url or os.environ.get(DATABASE_URL_ENV)
    db: _Db | None = None
    if url:
        name = f"amber_bench_{tag}"
        _create_database(url, name)
        stack.callback(_drop_database, url, name)
        env[DATABASE_URL_ENV] = psycopg.conninfo.make_conninfo(url, dbname=name)
        where = psycopg.conninfo.conninfo_to_dict(url)
        description = f"fresh database {name} on {where.get('host')}:{where.get('port', 5432)}"
        db = _Db(stats_url=url, name=name, description=description, exclusive=False)

    port_file = tmp / "server.port"
    args = ["server", "--listen", "127.0.0.1:0", "--port-file", str(port_file)]
    args += ["--metrics-listen", "127.0.0.1:0"]  # `curl` it while the bench runs
    server = _spawn("server", args, env, tmp / "logs")
    pgdata = tmp / "home" / "pgdata"
    restarted: list[_Child] = []
    stack.callback(_stop_server, server, None if url else pgdata, restarted)
    target = f"127.0.0.1:{_wait_listening(server, port_file)}"
    if db is None:
        db = _embedded_db(pgdata)

    workers = []
    for i in range(options.workers):
        # A stable id, as under a supervisor: a restarted worker gives up its predecessor's
        # leases at once (the recovery phase).
        args = ["--server", target, "worker", "--poll-wait", "1", "--worker-id", f"bench-{tag}-{i}"]
        if options.worker_fuel is not None:
            args += ["--fuel", str(options.worker_fuel)]
        args += options.worker_args
        child = _spawn(f"worker-{i}", args, env, tmp / "logs")
        stack.callback(_stop, child)
        workers.append(child)
    return _Stack(target=target, server=server, workers=tuple(workers), db=db, restarted=restarted)


def _store(db: _Db, stack: contextlib.ExitStack) -> Database:
    """A connection to the bench database for the phases that read it, closed with `stack`."""
    url = psycopg.conninfo.make_conninfo(db.stats_url, dbname=db.name)
    return stack.enter_context(Database(url, max_size=2))


def _attach(options: BenchOptions) -> _Stack:
    db = None
    if options.database_url:
        name = psycopg.conninfo.conninfo_to_dict(options.database_url).get("dbname")
        db = _Db(
            stats_url=options.database_url,
            name=str(name),
            exclusive=False,
            description=f"the target's database {name}",
        )
    assert options.target is not None
    return _Stack(target=options.target, server=None, workers=(), db=db)


def _spawn(name: str, args: list[str], env: dict[str, str], logs: Path) -> _Child:
    log = logs / f"{name}.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(
            [sys.executable, "-m", "amber.tools.cli", *args],
            cwd=_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the bench only; it stops them in order
        )
    return _Child(name=name, popen=popen, log=log, args=tuple(args), env=env)


def _stop(child: _Child, timeout_s: float = 30.0) -> None:
    if child.popen.poll() is None:
        child.popen.send_signal(signal.SIGTERM)
        try:
            child.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.popen.kill()
            child.popen.wait(timeout=timeout_s)


def _wait_listening(server: _Child, port_file: Path) -> str:
    """The port `server` wrote to `port_file` once it listens (RuntimeError with the end of its
    log if it died or took over two minutes)."""
    deadline = time.monotonic() + 120.0
    while not (port_file.exists() and port_file.read_text().strip().isdigit()):
        if server.popen.poll() is not None or time.monotonic() > deadline:
            log = server.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the server did not start; the end of its log:\n{log}")
        time.sleep(0.05)
    return port_file.read_text().strip()


def _stop_server(server: _Child, pgdata: Path | None, restarted: Sequence[_Child] = ()) -> None:
    """Stop the server (and those restarted in its place); it stops the embedded PostgreSQL it
    started, unless it was killed."""
    for child in (*restarted, server):
        _stop(child)
    if pgdata is None:
        return
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return  # stopped cleanly (PostgreSQL removes the file), or never started
    for sig in (signal.SIGINT, signal.SIGKILL):  # fast shutdown, then no choice
        deadline = time.monotonic() + 15.0
        while _is_postmaster(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not _is_postmaster(pid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _is_postmaster(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _collect_logs(
    logs: Path,
    output: Path,
    failed: object,
    problems: dict[str, list[str]],
    outages: Sequence[tuple[float, float]] = (),
) -> bool:
    """Note suspicious log lines, except those logged during a deliberate outage (a line
    without a time of its own, as a traceback's, has its predecessor's); keep the logs beside
    the JSON when there are any."""
    for log in sorted(logs.glob("*.log")) if logs.is_dir() else []:
        bad, at = [], 0.0
        for line in log.read_text(errors="replace").splitlines():
            at = _logged_at(line) or at
            if any(w in line for w in (" ERROR ", " WARNING ", "Traceback")) and not any(
                begin <= at <= end for begin, end in outages
            ):
                bad.append(line)
        if bad:
            problems[log.stem] = bad[:20]
    if (problems or failed is not None) and logs.is_dir():
        kept = output.with_suffix(".logs")
        shutil.copytree(logs, kept, dirs_exist_ok=True)
        progress(f"server/worker logs kept in {kept}")
    return False


def _logged_at(line: str) -> float | None:
    """The Unix time of a line logged as `2026-12-03 14:20:09,123 WARNING ...` (local time)."""
    try:
        return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


# -- the runs --------------------------------------------------------------------------------


def _run_batch(
    client: AmberClient,
    jobs: Sequence[tuple[str, int]],
    k: int,
    timeout_s: float,
    w: int,
    workflow: str = "chain",
) -> dict[str, Any]:
    """Start `chain` runs (or another type with its contract, as `chain_py`) of
    `(workflow_id, value)` from `w` threads, then wait for all.

    With w=1 each run is started and awaited before the next: the latency phase.
    """
    messages: list[str] = []
    durations: list[float] = []  # client-observed start → result (meaningful when w == 1)
    server_side: list[float] = []  # created_at → closed_at as the server recorded them
    starts_done: list[float] = []
    deadline = time.monotonic() + timeout_s
    cancelled = threading.Event()  # Ctrl-C: the starters give up within one short wait

    def one_run(workflow_id: str, value: int) -> str | None:
        if cancelled.is_set():
            return None
        try:
            started = client.start_run(workflow, {"k": k, "value": value}, workflow_id=workflow_id)
        except AmberError as exc:
            messages.append(f"{workflow_id}: start failed: {exc}")
            return None
        return started.run.run_id

    def wait(workflow_id: str, run_id: str, value: int) -> None:
        run = None
        try:
            while not cancelled.is_set():
                remaining = deadline - time.monotonic()
                run = client.result(run_id, wait_s=max(0.0, min(5.0, remaining)))
                if run.status.closed or remaining <= 0:
                    break
        except AmberError as exc:
            messages.append(f"{workflow_id}: result failed: {exc}")
            return
        if run is None:
            return
        if run.status is not RunStatus.COMPLETED:
            reason = run.error_message or "not closed before the timeout"
            messages.append(f"{workflow_id}: {run.status.value}: {run.error_type}: {reason}")
        elif decode(run.result) != {"value": value + k}:
            messages.append(f"{workflow_id}: wrong result {decode(run.result)!r}")
        elif run.closed_at is not None:
            server_side.append((run.closed_at - run.created_at).total_seconds())

    def starter(first: int) -> None:
        mine = jobs[first::w]
        if w == 1:
            for workflow_id, value in mine:
                began = time.perf_counter()
                run_id = one_run(workflow_id, value)
                if run_id is not None:
                    wait(workflow_id, run_id, value)
                    durations.append(time.perf_counter() - began)
            return
        run_ids = [one_run(workflow_id, value) for workflow_id, value in mine]
        starts_done.append(time.perf_counter())
        for (workflow_id, value), run_id in zip(mine, run_ids, strict=True):
            if run_id is not None:
                wait(workflow_id, run_id, value)

    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=w, thread_name_prefix="bench-starter") as pool:
        try:
            list(pool.map(starter, range(w)))
        except BaseException:
            cancelled.set()
            raise
    wall = time.perf_counter() - began
    return {
        "wall_s": round(wall, 3),
        "start_phase_s": max(starts_done, default=began + wall) - began,
        "runs": len(durations),
        "errors": len(messages),
        "messages": messages[:20],
        "server_side_ms": _summary_ms(server_side),
        **_summary_ms(durations),
    }


def _summary_ms(values_s: Sequence[float]) -> dict[str, float | None]:
    """p50/p99 by linear interpolation, as the peers' `benchlib.percentile` computes them."""
    ms = sorted(v * 1000.0 for v in values_s)
    if not ms:
        return {"p50": None, "p99": None, "mean": None, "min": None, "max": None}
    cuts = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else ms * 99
    figures = {"p50": cuts[49], "p99": cuts[98], "mean": statistics.fmean(ms)}
    return {k: round(v, 2) for k, v in (figures | {"min": ms[0], "max": ms[-1]}).items()}


# -- accounting ------------------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    """`/proc/<pid>/stat` from field 3 (state) on; fields[11:15] = utime stime cutime cstime."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _cpu_s(pid: int, *, reaped_children: bool = False) -> float | None:
    fields = _stat_fields(pid)
    if fields is None:
        return None
    ticks = sum(int(f) for f in fields[11 : 15 if reaped_children else 13])
    return ticks / _TICKS


def _backend_database(pid: int) -> str | None:
    """The database a PostgreSQL backend serves, from its title `postgres: [cluster:] user db
    host state` (auxiliary processes have fewer words)."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().split()
    except (OSError, UnicodeDecodeError):
        return None
    if not words or words[0] != "postgres:":
        return None
    words = words[2:] if len(words) > 1 and words[1].endswith(":") else words[1:]
    return words[1] if len(words) >= 3 else None


def _postmaster(db: _Db | None) -> int | None:
    """The postmaster's pid when the PostgreSQL server runs on this machine, else None."""
    if db is None:
        return None
    with psycopg.connect(db.stats_url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_backend_pid(), current_database()").fetchone()
        # Read /proc while the backend still exists: it exits with the connection.
        fields = _stat_fields(row[0]) if row else None
        if row is None or fields is None or _backend_database(row[0]) != row[1]:
            return None  # a remote server, or another pid namespace
    return int(fields[1])


def _sample(setup: _Stack, postmaster: int | None) -> _Sample:
    cluster: float | None = None
    backends: dict[int, float] = {}
    if postmaster is not None and setup.db is not None:
        # Exited children are in the postmaster's cutime+cstime, so the cluster sum is exact.
        cluster = _cpu_s(postmaster, reaped_children=True) or 0.0
        for entry in os.scandir("/proc"):
            fields = _stat_fields(int(entry.name)) if entry.name.isdigit() else None
            if fields is None or int(fields[1]) != postmaster:
                continue
            cpu = (int(fields[11]) + int(fields[12])) / _TICKS
            cluster += cpu
            if _backend_database(int(entry.name)) == setup.db.name:
                backends[int(entry.name)] = cpu
    times = os.times()
    stat = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in stat)
    return _Sample(
        server=_cpu_s(setup.server.popen.pid) if setup.server else None,
        workers=tuple(_cpu_s(c.popen.pid) or 0.0 for c in setup.workers),
        client=times.user + times.system,
        pg_cluster=cluster,
        pg_backends=backends,
        machine_busy=(user + nice + system + irq + softirq + steal) / _TICKS,
        machine_irq=(irq + softirq) / _TICKS,
    )


def _cpu_report(before: _Sample, after: _Sample, n: int, db: _Db | None) -> dict[str, Any]:
    """CPU seconds of each group over the throughput phase, and the same in ms per workflow."""

    def delta(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(b - a, 3)

    backends = sum(cpu - before.pg_backends.get(pid, 0.0) for pid, cpu in after.pg_backends.items())
    exclusive = db is not None and db.exclusive
    s: dict[str, Any] = {
        "server": delta(before.server, after.server),
        "workers": delta(sum(before.workers), sum(after.workers)) if after.workers else None,
        "postgres_cluster": delta(before.pg_cluster, after.pg_cluster),
        "postgres_bench_backends": None if after.pg_cluster is None else round(backends, 3),
        "client": round(after.client - before.client, 3),
        "machine_busy": round(after.machine_busy - before.machine_busy, 3),
        "kernel_irq": round(after.machine_irq - before.machine_irq, 3),
    }
    s["postgres"] = s["postgres_cluster" if exclusive else "postgres_bench_backends"]
    ours = sum(s[k] or 0.0 for k in ("server", "workers", "postgres", "client", "kernel_irq"))
    s["other_tenants"] = round(s["machine_busy"] - ours, 3)
    s["postgres_scope"] = (
        "not measured: the server is not local" if s["postgres"] is None
        else "the cluster started for the bench: postmaster and all its processes" if exclusive
        else "backends connected to the bench database (the cluster's other databases and its"
        " shared WAL writer/checkpointer excluded)"
    )  # fmt: skip
    per = {k: None if s[k] is None else round(s[k] * 1000 / n, 2)
           for k in ("server", "workers", "postgres", "client")}  # fmt: skip
    total = None if per["server"] is None else round(per["server"] + (per["workers"] or 0)
                                                     + (per["postgres"] or 0), 2)  # fmt: skip
    with_client = None if total is None else round(total + per["client"], 2)
    return {"per_workflow": per | {"total": total, "total_with_client": with_client}, "seconds": s}


def _peak_rss_mb(child: _Child | None) -> float | None:
    try:
        status = Path(f"/proc/{child.popen.pid}/status").read_text() if child else ""
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


# -- the database server ---------------------------------------------------------------------


def _create_database(url: str, name: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _drop_database(url: str, name: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _embedded_db(pgdata: Path) -> _Db:
    """The embedded server the `amber server` process started (it uses database `postgres`)."""
    lines = (pgdata / "postmaster.pid").read_text().splitlines()
    port, socket_dir = lines[3], lines[4]
    stats = psycopg.conninfo.make_conninfo(
        host=socket_dir, port=port, user="postgres", dbname="template1"
    )
    return _Db(
        stats_url=stats,
        name="postgres",
        exclusive=True,
        description=f"embedded PostgreSQL started by the server in {pgdata}",
    )


def _commits(db: _Db | None, settle_s: float) -> int | None:
    if db is None:
        return None
    time.sleep(settle_s)
    with psycopg.connect(db.stats_url, autocommit=True) as conn:
        query = "SELECT xact_commit FROM pg_stat_database WHERE datname = %s"
        row = conn.execute(query, (db.name,)).fetchone()
    return int(row[0]) if row else None


# -- output ----------------------------------------------------------------------------------


def _batches(result: dict[str, Any]) -> str:
    """Items per batch on the workers' streams over the throughput phase (a batch's reports
    commit together)."""
    counted = (result.get("server_metrics") or {}).get("throughput_phase") or {}
    batches, items = counted.get("stream_batches"), counted.get("stream_items")
    if not batches or items is None:
        return "- (unary reports, or no metrics)"
    return f"{items / batches:.2f} items per batch ({batches:.0f} batches)"


def format_summary(result: dict[str, Any]) -> str:
    """The figures a reader wants first, one per line."""
    c, t, lat = result["config"], result["throughput"], result["latency_ms"]
    cpu, rss, secs = result["cpu_ms_per_workflow"], result["peak_rss_mb"], result["cpu_s"]
    load = t["wf_latency_under_load_ms"]

    def f(value: Any, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    rows = [
        ("workload", f"N={c['n']} x K={c['k']}, W={c['w']}, workers={c['workers']}"),
        ("server / db", f"{c['server']}; {c['db']}"),
        ("workflows/s", f"{f(t['workflows_per_s'])} (wall {f(t['wall_s'], 2)} s)"),
        ("activities/s", f(t["activities_per_s"])),
        ("errors", f"throughput {t['errors']}, latency {lat['errors']}"),
        ("under load ms", f"created→closed p50 {f(load['p50'])}, p99 {f(load['p99'])}"),
        (f"idle K={lat['k']} ms", f"p50 {f(lat['p50'])}, p99 {f(lat['p99'])}, mean"
                                  f" {f(lat['mean'])} ({lat['runs']} runs)"),
        ("CPU ms/workflow", f"server {f(cpu['server'])}, workers {f(cpu['workers'])},"
                            f" postgres {f(cpu['postgres'])}, total {f(cpu['total'])}"),
        ("", f"+ client {f(cpu['client'])} = {f(cpu['total_with_client'])}"),
        ("commits/workflow", f(result["db_commits_per_workflow"], 2)),
        ("stream batches", _batches(result)),
        ("peak RSS MB", f"server {f(rss['server'], 0)}, largest worker {f(rss['workers'], 0)}"),
        ("not ours, CPU s", f"other tenants {f(secs['other_tenants'])},"
                            f" kernel irq {f(secs['kernel_irq'])}"),
    ]  # fmt: skip
    auth = result.get("auth")
    if auth:
        rows.append(("auth µs/RPC", f"{f(auth['auth_us_per_call'])} ({f(auth['open_us_per_call'])}"
                     f" open → {f(auth['checked_us_per_call'])} checked; the check alone"
                     f" {f(auth['access_check_alone_us'], 2)})"))  # fmt: skip
    return "\n".join(f"{name:<18} {value}" for name, value in rows)


def write_json(path: Path, result: dict[str, Any]) -> None:
    """Write `result` to `path` atomically (its directory is created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    os.replace(partial, path)


def _source_revision() -> str | None:
    command = ["git", "describe", "--always", "--dirty"]
    try:
        done = subprocess.run(command, cwd=_ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def progress(message: str) -> None:
    """A progress line on stderr (stdout carries the figures)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
