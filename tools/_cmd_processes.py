"""`amber server` and `amber worker`: the two long-running processes (their flags here, their
bodies in `_processes`)."""

from __future__ import annotations

import argparse
import os


def serve(args: argparse.Namespace) -> int:
    from . import _processes  # wasmtime, psycopg, Flask: loaded only when the verb runs

    return _processes.serve(args)


def work(args: argparse.Namespace) -> int:
    from . import _processes  # wasmtime, psycopg, Flask: loaded only when the verb runs

    return _processes.work(args)


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `amber server` and `amber worker` to the CLI."""
    p = sub.add_parser(
        "server", parents=[common], help="run the gRPC server (AMBER_DATABASE_URL or embedded)"
    )
    p.add_argument("--listen", default="127.0.0.1:7233")
    p.add_argument("--port-file", help="write the bound port here (with --listen host:0)")
    p.add_argument("--lease-seconds", type=float, default=30.0)
    p.add_argument("--db-pool", type=int, default=16)
    p.add_argument("--approvals-listen", help="serve the approval page on HOST:PORT")
    p.add_argument("--approvals-url", help="the page's public URL, for the links sent out")
    p.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve /metrics (Prometheus), /healthz and /readyz (the database answers) here",
    )
    p.add_argument(
        "--auth",
        action="store_true",
        help="check API credentials on every call and page (amber auth); needed beyond loopback",
    )
    p.add_argument(
        "--tls-cert", metavar="PEM", help="serve gRPC, the page and the console over TLS"
    )
    p.add_argument("--tls-key", metavar="PEM", help="the key of --tls-cert")
    p.add_argument(
        "--tls-client-ca", metavar="PEM", help="mutual TLS: clients need a certificate from this CA"
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="serve beyond loopback without --auth or without TLS (logged loudly)",
    )
    p.set_defaults(local=serve)

    p = sub.add_parser("worker", parents=[common], help="run a worker polling the server")
    p.add_argument("--pool", choices=["main", "surgical"], default="main")
    p.add_argument(
        "--slots", type=int, default=16, help="tasks run at once (the surgical pool runs one)"
    )
    p.add_argument(
        "--guests",
        type=int,
        default=os.cpu_count() or 1,
        help="guests run at once: one in the worker process, the others in reused child"
        " processes (default: the number of cores; 1 runs everything in process)",
    )
    p.add_argument(
        "--sticky",
        type=int,
        default=64,
        metavar="RUNS",
        help="live workflow instances kept in process, one per running workflow, each going on"
        " from its last wait instead of replaying from the top (0: always replay; main pool)",
    )
    p.add_argument(
        "--warm-activities",
        type=int,
        metavar="RUNS",
        help="runs whose Python activity instance each worker process keeps for the run's next"
        " activity, instead of instantiating afresh (default 16, about 7 MiB resident each, in the"
        " worker and in each reused child; 0: always afresh; main pool)",
    )
    p.add_argument(
        "--budgets",
        help='JSON file of limits per workflow type and activity: {"workflows": {NAME: {"fuel":'
        ' N, "deadline_s": S, "memory_mb": M}}, "activities": {...}}',
    )
    p.add_argument("--queue", default="main")
    p.add_argument("--artifacts", help="precompiled module cache (default $AMBER_HOME/artifacts)")
    p.add_argument("--fuel", type=int, default=1_000_000_000)
    p.add_argument(
        "--slice-fuel",
        type=int,
        metavar="FUEL",
        help="an activity that uses this much fuel runs again from the start, on its whole"
        " budget, in a background process at low CPU priority, held back while other guests"
        " run, so long guests get only the CPU healthy work leaves (default 5e7, about 20 ms;"
        " 0: never; needs --guests of 2 or more)",
    )
    p.add_argument(
        "--slice-cpu-ms",
        type=float,
        metavar="MS",
        help="so does an activity that uses this much CPU, whatever its fuel (a memory bomb's"
        " page faults count: default 10; 0: fuel alone)",
    )
    p.add_argument(
        "--memory-mb", type=int, help="linear memory per activation (default 64, both pools)"
    )
    p.add_argument("--workflow-deadline", type=float, default=5.0, help="seconds")
    p.add_argument("--activity-deadline", type=float, default=60.0, help="seconds")
    p.add_argument(
        "--nice",
        type=int,
        help="CPU niceness of the worker and its guests (default: 10 for the surgical pool, so"
        " poisoned tasks get the CPU healthy ones leave; 0 for the main pool)",
    )
    p.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve /metrics (Prometheus), /healthz and /readyz (the server answers) here",
    )
    p.add_argument("--poll-wait", type=float, default=5.0, help="long-poll seconds")
    p.add_argument("--connect-timeout", type=float, default=30.0)
    p.add_argument(
        "--streams",
        type=int,
        default=2,
        help="streams to the server carrying reports in batches (each has one batch at the"
        " server at a time, so a second lets the next batch gather meanwhile)",
    )
    p.add_argument(
        "--unary",
        action="store_true",
        help="send each report as its own call instead of in batches on one stream (to compare)",
    )
    p.add_argument(
        "--worker-id",
        help="a stable identity, unique among live workers (e.g. the pod or unit name): on start"
        " the worker gives up the leases its previous process held instead of waiting for them"
        " to expire (default host:pid, nothing released)",
    )
    p.set_defaults(local=work)
