"""`amber bench`'s command: its flags, and the order of the parts.

Amber's own run (`_bench`) comes first and its JSON is written at once; with `--peers` the peers'
harness runs next (`_bench_peers`), and then the side-by-side table and the ratios
(`_bench_compare`) are printed and merged into the same JSON. A failing harness only costs the
peers' rows: Amber's figures are printed and kept either way.
"""

from __future__ import annotations

import argparse
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from amber.abi import InvalidInput

from ._bench_compare import compare, format_table
from ._bench_peers import (
    DEFAULT_SCRIPT,
    DEFAULT_WORK,
    HEADLINE_DBOS,
    HEADLINE_TEMPORAL,
    PeersOptions,
    PeersOutcome,
    parse_configs,
    run_peers,
)
from ._output import emit_json

_ROOT: Final = Path(__file__).resolve().parent.parent
LATEST: Final = _ROOT / "bench" / "results" / "latest.json"
"""The committed copy of the latest full run (`--latest`)."""
SCALING_LATEST: Final = _ROOT / "bench" / "results" / "scaling.json"
"""The committed copy of the latest scaling run (`--scaling --latest`)."""


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `amber bench` to the CLI."""
    parser = sub.add_parser(
        "bench",
        parents=[common],
        help="N workflows x K activities (--peers: beside Temporal and DBOS); writes JSON",
    )
    parser.set_defaults(local=bench)
    parser.add_argument("--n", type=int, default=1000, help="workflows in the throughput phase")
    parser.add_argument("--k", type=int, default=5, help="sequential activities per workflow")
    parser.add_argument("--w", type=int, default=16, help="concurrent starters")
    parser.add_argument("--latency-runs", type=int, default=50, help="sequential K=5 runs")
    parser.add_argument("--workers", type=int, default=1, help="worker processes to start")
    parser.add_argument("--target", help="measure this running server instead of starting one")
    parser.add_argument(
        "--database-url",
        help="PostgreSQL server for a fresh bench database (default $AMBER_DATABASE_URL, else"
        " embedded); with --target: the server's own database, read for statistics only",
    )
    parser.add_argument("--output", help="JSON file (default bench/results/amber-<UTC>.json)")
    parser.add_argument(
        "--latest", action="store_true", help=f"also write the JSON to {LATEST.relative_to(_ROOT)}"
    )
    parser.add_argument("--no-latency", action="store_true", help="skip the latency phase")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per phase")
    parser.add_argument(
        "--stats-settle",
        type=float,
        default=11.0,
        help="seconds to wait before each commit-count reading (PostgreSQL publishes lazily)",
    )
    parser.add_argument(
        "--commit-probe",
        type=float,
        default=3.0,
        metavar="SECONDS",
        help="measure the raw single-row commit rate this long (0: skip)",
    )
    parser.add_argument(
        "--auth-calls",
        type=int,
        default=2000,
        metavar="N",
        help="measure what checking credentials costs per RPC over N calls (0: skip)",
    )
    parser.add_argument(
        "--idle-runs",
        type=int,
        default=10_000,
        help="runs parked on a timer or signal for the idle-cost phase (0: skip)",
    )
    parser.add_argument(
        "--recovery-runs",
        type=int,
        default=100,
        help="runs in flight when the recovery phase SIGKILLs the worker (0: skip)",
    )
    parser.add_argument(
        "--worker-fuel",
        type=int,
        help="the workers' fuel budget per activation (default: amber worker's own)",
    )
    parser.add_argument(
        "--scaling",
        action="store_true",
        help="instead: the throughput phase alone with 1, 2 and 4 workers, W = 1, 16, 64, K = 5"
        " and 20, and unary reports against the stream, --n workflows each (with --latest:"
        " bench/results/scaling.json)",
    )
    parser.add_argument(
        "--worker-unary",
        action="store_true",
        help="workers report with a unary call each instead of their stream (to compare)",
    )
    parser.add_argument(
        "--worker-slice-fuel",
        type=int,
        metavar="FUEL",
        help="fuel an activity runs on before it moves to the background lane (amber worker"
        " --slice-fuel; 0: never; default: its own)",
    )
    parser.add_argument(
        "--worker-slice-cpu-ms",
        type=float,
        metavar="MS",
        help="CPU an activity runs on before it moves to the background lane (amber worker"
        " --slice-cpu-ms; 0: fuel alone; default: its own)",
    )
    parser.add_argument(
        "--worker-warm-activities",
        type=int,
        metavar="RUNS",
        help="runs whose Python activity instance each worker process keeps (amber worker"
        " --warm-activities; default: its own; 0 instantiates every activity afresh, to compare)",
    )
    parser.add_argument(
        "--worker-sticky",
        type=int,
        metavar="RUNS",
        help="live workflow instances each worker keeps (amber worker --sticky; default: its"
        " own; 0 replays every activation from the top, to compare)",
    )
    parser.add_argument(
        "--isolation-runs",
        type=int,
        default=200,
        help="healthy runs per batch of the isolation phase, beside 10 %% poison runs (0: skip)",
    )
    parser.add_argument(
        "--isolation-rounds",
        type=int,
        help="rounds of the isolation phase, each a clean and a poisoned batch (default: 6)",
    )
    parser.add_argument(
        "--isolation-kinds",
        metavar="KIND,...",
        help="poison kinds of the isolation phase, started in turn, from trap, fuel and memory"
        " (default: all three; one alone shows what that kind costs)",
    )
    parser.add_argument(
        "--sandbox-repetitions",
        type=int,
        default=2000,
        help="activations timed by the in-process sandbox microbenchmark (0: skip)",
    )
    parser.add_argument(
        "--python-runs",
        type=int,
        default=1000,
        help="runs of the Python guests' phase (abi/samples/chain.py at --k; 0: skip)",
    )
    parser.add_argument(
        "--python-idle-runs",
        type=int,
        default=1000,
        help="Python runs parked on a timer or signal after the Python guests' phase, to"
        " measure what they cost the worker's memory (0: skip)",
    )
    peers = parser.add_argument_group("peers (../shared/bench/peers, same workload, after Amber)")
    peers.add_argument("--peers", action="store_true", help="also run the peers' harness")
    for engine, headline in (("temporal", HEADLINE_TEMPORAL), ("dbos", HEADLINE_DBOS)):
        peers.add_argument(
            f"--peers-{engine}",
            type=_configs(engine),
            default=",".join(headline),
            metavar="CONFIGS",
            help=f"{engine} configs, comma-separated, 'all' or 'none' (default: %(default)s)",
        )
    peers.add_argument(
        "--peers-work", default=str(DEFAULT_WORK), help="PEERS_WORK: venvs, logs, results"
    )
    peers.add_argument("--peers-script", default=str(DEFAULT_SCRIPT), help="the harness")
    peers.add_argument(
        "--peers-timeout", type=float, default=3600.0, help="seconds for the whole harness"
    )


def _configs(engine: str) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        try:
            return parse_configs(text, engine)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _isolation_rounds(given: int | None, default: int) -> int:
    if given is None:
        return default
    if given < 1:
        raise InvalidInput(f"--isolation-rounds takes a count of at least 1, not {given}")
    return given


def _isolation_kinds(text: str | None, known: tuple[str, ...]) -> tuple[str, ...]:
    if text is None:
        return known
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = sorted(set(kinds) - set(known))
    if not kinds or unknown:
        raise InvalidInput(f"--isolation-kinds takes some of {', '.join(known)}, not {text!r}")
    return kinds


def bench(args: argparse.Namespace) -> int:
    """`amber bench`: run Amber (and with `--peers` the peers), print the summary and the
    side-by-side table, write the JSON; exit status 1 if any run or the asked-for peers failed.
    """
    from . import _bench  # wasmtime, psycopg: loaded only when the verb runs
    from ._bench_isolation import ISOLATION_ROUNDS, KINDS

    peers = None
    if args.peers:  # checked before the long run, so a mistake costs nothing
        peers = PeersOptions(
            n=args.n,
            k=args.k,
            w=args.w,
            latency_runs=args.latency_runs,
            temporal=args.peers_temporal,
            dbos=args.peers_dbos,
            script=Path(args.peers_script),
            work=Path(args.peers_work),
            timeout_s=args.peers_timeout,
        )
        if not peers.temporal + peers.dbos:
            raise InvalidInput("--peers with neither a Temporal nor a DBOS config")
        if not peers.script.is_file():
            raise InvalidInput(f"no peers' harness at {peers.script}")
    options = _bench.BenchOptions(
        n=args.n,
        k=args.k,
        w=args.w,
        latency_runs=args.latency_runs,
        workers=args.workers,
        target=args.target,
        database_url=args.database_url,
        output=Path(args.output) if args.output else _bench.default_output(),
        skip_latency=args.no_latency,
        timeout_s=args.timeout,
        stats_settle_s=args.stats_settle,
        commit_probe_s=args.commit_probe,
        auth_calls=args.auth_calls,
        idle_runs=args.idle_runs,
        recovery_runs=args.recovery_runs,
        isolation_runs=args.isolation_runs,
        isolation_kinds=_isolation_kinds(args.isolation_kinds, KINDS),
        isolation_rounds=_isolation_rounds(args.isolation_rounds, ISOLATION_ROUNDS),
        worker_fuel=args.worker_fuel,
        worker_args=(("--unary",) if args.worker_unary else ())
        + (() if args.worker_sticky is None else ("--sticky", str(args.worker_sticky)))
        + (() if args.worker_slice_fuel is None else ("--slice-fuel", str(args.worker_slice_fuel)))
        + (
            ()
            if args.worker_slice_cpu_ms is None
            else ("--slice-cpu-ms", str(args.worker_slice_cpu_ms))
        )
        + (
            ()
            if args.worker_warm_activities is None
            else ("--warm-activities", str(args.worker_warm_activities))
        ),
        sandbox_repetitions=args.sandbox_repetitions,
        python_runs=args.python_runs,
        python_idle_runs=args.python_idle_runs,
    )
    signal.signal(signal.SIGTERM, _interrupt)  # stop what we started, as on Ctrl-C
    if args.scaling:
        return _scaling(args, options)
    began = time.monotonic()
    result = _bench.run_bench(options)
    amber_s = time.monotonic() - began
    if not args.json:
        print(_bench.format_summary(result), flush=True)
    outcome: PeersOutcome | None = None
    if peers is not None:
        _bench.progress(
            f"Amber done in {amber_s:.0f} s; the peers' harness now (this takes a while)"
        )
        outcome = run_peers(peers)
        _bench.progress(
            f"peers: {'done' if outcome.ok else outcome.error} in {outcome.wall_s:.0f} s"
        )
    full = result | compare(result, outcome)
    peers_s = None if outcome is None else round(outcome.wall_s, 1)
    full["timing_s"] = {"amber": round(amber_s, 1), "peers": peers_s}
    _bench.write_json(options.output, full)
    if args.latest:
        _bench.write_json(LATEST, full)
    if args.json:  # the document it wrote; where it went is progress, on stderr
        emit_json(full)
        _bench.progress(f"written to {options.output}" + (f" and {LATEST}" if args.latest else ""))
    else:
        print()
        print(format_table(full, result))
        print(f"written to {options.output}")
        if args.latest:
            print(f"and to {LATEST}")
    failed = result["throughput"]["errors"] or result["latency_ms"]["errors"]
    return 1 if failed or (outcome is not None and not outcome.ok) else 0


def _scaling(args: argparse.Namespace, options: Any) -> int:
    """`amber bench --scaling`: the matrix of throughput runs, one table, one JSON."""
    import tempfile

    from . import _bench
    from ._bench_scaling import format_scaling, run_scaling

    with tempfile.TemporaryDirectory(prefix="amber-scaling-") as scratch:
        scaling = run_scaling(options, Path(scratch))
    output = (
        Path(args.output)
        if args.output
        else SCALING_LATEST.with_name(
            f"scaling-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
        )
    )
    _bench.write_json(output, scaling)
    if args.latest:
        _bench.write_json(SCALING_LATEST, scaling)
    print(format_scaling(scaling))
    print(f"written to {output}" + (f" and {SCALING_LATEST}" if args.latest else ""))
    return 1 if any(row["errors"] for row in scaling["rows"]) else 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
