"""The bodies of `amber server` and `amber worker`, the two long-running processes.

They load the engine (psycopg, wasmtime, Flask), so `_cmd_processes`, which declares their flags,
imports this module only when one of them runs.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import secrets
import signal
import sys
import threading
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from types import FrameType

from amber.abi import InvalidInput, RetryableError
from amber.history import Database, amber_home, resolve_database_url
from amber.runtime.api import ServerTls
from amber.runtime.approvals import WEBHOOK_ENV, ApprovalSink, WebhookSink
from amber.runtime.client import AmberClient
from amber.runtime.metrics import OpsEndpoint, OpsListen
from amber.runtime.model import EngineSettings, SystemClock
from amber.runtime.sandbox import (
    SLICE_CPU_S,
    SLICE_FUEL,
    WARM_RUNS,
    ParallelSandbox,
    SandboxEngine,
    SandboxLimits,
    StickySandbox,
    guest_runner,
    lower_priority,
    pool_instances,
)
from amber.runtime.server import AmberServer, ApprovalPageOptions
from amber.runtime.worker import Budgets, Worker, WorkerSettings, configure_tracing

from ._operator import api_token, client_tls

APPROVAL_SECRET_ENV = "AMBER_APPROVAL_SECRET"
_log = logging.getLogger("amber.server")


def on_signals(stop: threading.Event) -> None:
    """SIGINT/SIGTERM set `stop` (a second one exits at once)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            sys.exit(128 + signum)
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def engine_settings(args: argparse.Namespace) -> EngineSettings:
    return EngineSettings(
        lease=timedelta(seconds=args.lease_seconds),
        sweep_interval=timedelta(seconds=min(1.0, args.lease_seconds / 4)),
    )


def _approval_sink() -> ApprovalSink | None:
    url = os.environ.get(WEBHOOK_ENV)
    return WebhookSink(url) if url else None


def _approval_page(args: argparse.Namespace) -> ApprovalPageOptions | None:
    """The approval page's options from `--approvals-listen`/`--approvals-url` and
    `AMBER_APPROVAL_SECRET` (hex; servers behind one URL share it)."""
    if not args.approvals_listen:
        return None
    host, _, port = args.approvals_listen.rpartition(":")
    secret_hex = os.environ.get(APPROVAL_SECRET_ENV, "")
    if secret_hex:
        secret = bytes.fromhex(secret_hex)
    else:
        logging.getLogger(__name__).warning(
            "%s is not set: approval page sessions are signed with a key of this process only",
            APPROVAL_SECRET_ENV,
        )
        secret = secrets.token_bytes(32)
    return ApprovalPageOptions(
        host=host or "127.0.0.1",
        port=int(port),
        public_url=args.approvals_url,
        secret_key=secret,
    )


def _ops_listen(text: str | None) -> OpsListen | None:
    """`--metrics-listen HOST:PORT`."""
    if not text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise InvalidInput(f"--metrics-listen takes HOST:PORT, not {text!r}")
    where = OpsListen(host=host.strip("[]") or "127.0.0.1", port=int(port))
    if not is_loopback(f"[{where.host}]:{port}" if ":" in where.host else f"{where.host}:{port}"):
        _log.warning(
            "metrics on %s are plain HTTP and need no credential (as Prometheus scrapes them):"
            " they name queues, workers and workflow types; keep that address private",
            text,
        )
    return where


def worker_ready(client: AmberClient) -> tuple[bool, str]:
    """A worker is ready when its server answers."""
    try:
        client.wait_ready(timeout_s=2.0)
    except Exception as exc:
        return False, f"server unavailable: {exc}"
    return True, "server reachable"


def serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    configure_tracing("amber-server")  # spans per RPC and transaction when exporting
    check_credentials, tls = _exposure(args)
    db = Database(resolve_database_url(), max_size=args.db_pool).open()
    server = AmberServer(
        db,
        check_credentials=check_credentials,
        tls=tls,
        listen=args.listen,
        settings=engine_settings(args),
        approval_sink=_approval_sink(),
        approval_page=_approval_page(args),
        ops_listen=_ops_listen(args.metrics_listen),
    )
    try:
        port = server.start()
    except (OSError, InvalidInput) as exc:  # a used port: say so, not a traceback
        db.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    host = args.listen.rsplit(":", 1)[0]
    print(f"amber server listening on {host}:{port}", flush=True)
    if server.approval_link_base:
        print(f"approval page on {server.approval_link_base}", flush=True)
    if server.ops is not None:
        print(f"metrics on {server.ops.url}/metrics", flush=True)
    if args.port_file:
        Path(args.port_file).write_text(str(port))
    stop = threading.Event()
    on_signals(stop)
    stop.wait()
    server.stop()
    db.close()
    return 0


def _server_tls(args: argparse.Namespace) -> ServerTls | None:
    if not args.tls_cert and not args.tls_key:
        if args.tls_client_ca:
            raise InvalidInput("--tls-client-ca needs --tls-cert and --tls-key")
        return None
    if not (args.tls_cert and args.tls_key):
        raise InvalidInput("TLS needs both --tls-cert and --tls-key")
    ca = Path(args.tls_client_ca) if args.tls_client_ca else None
    return ServerTls(Path(args.tls_cert), Path(args.tls_key), ca)


def _exposure(args: argparse.Namespace) -> tuple[bool, ServerTls | None]:
    """Whether the server checks credentials, and its TLS. On loopback anything goes (a line
    says what is off); beyond it, `--auth` and TLS, or `--insecure`, which is logged loudly."""
    tls = _server_tls(args)
    exposed = [a for a in (args.listen, args.approvals_listen) if a and not is_loopback(a)]
    if not exposed:
        if not args.auth:
            _log.info("credentials are not checked (loopback only; --auth to check them)")
        return args.auth, tls
    if args.auth and tls is not None:
        return True, tls
    if not args.insecure:
        raise InvalidInput(
            f"{exposed[0]} is reachable beyond this machine: start with --auth (credentials from"
            " `amber auth`) and --tls-cert/--tls-key, or knowingly with --insecure"
        )
    if not args.auth:
        _log.warning(
            "INSECURE: credentials are not checked (--insecure); anyone who reaches %s may start,"
            " read, change and approve anything",
            ", ".join(exposed),
        )
    if tls is None:
        _log.warning(
            "INSECURE: no TLS (--insecure); credentials, tokens and payloads cross the network"
            " in clear to %s",
            ", ".join(exposed),
        )
    return args.auth, tls


def is_loopback(listen: str) -> bool:
    """Whether HOST:PORT listens on this machine only (127.0.0.0/8, ::1, localhost)."""
    host = listen.rsplit(":", 1)[0].strip("[]") if ":" in listen else listen
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name, 0.0.0.0 and :: count as reachable


def worker_settings(args: argparse.Namespace) -> WorkerSettings:
    if args.slots < 1 or args.slots > 256:
        raise InvalidInput("--slots must be between 1 and 256")
    if args.streams < 1 or args.streams > 16:
        raise InvalidInput("--streams must be between 1 and 16")
    settings = WorkerSettings(
        queue=args.queue,
        slots=args.slots,
        poll_wait_s=args.poll_wait,
        workflow_limits=SandboxLimits(
            fuel=args.fuel,
            memory_bytes=(args.memory_mb or 64) * 2**20,
            deadline_s=args.workflow_deadline,
        ),
        activity_limits=SandboxLimits(
            fuel=args.fuel,
            memory_bytes=(args.memory_mb or 64) * 2**20,
            deadline_s=args.activity_deadline,
        ),
        stream=not args.unary,
        streams=args.streams,
    )
    if args.worker_id:
        settings = replace(settings, worker_id=args.worker_id, release_on_start=True)
    if args.budgets:
        settings = replace(settings, budgets=Budgets.from_file(Path(args.budgets)))
    return settings


def _be_nice(niceness: int | None, *, surgical: bool) -> None:
    """Lower this process's CPU priority (its guest children inherit it), and its session's
    where it leads one (a service under a supervisor): across sessions, only that counts."""
    if niceness is None:
        from amber.surgical_pool import SURGICAL_NICENESS

        niceness = SURGICAL_NICENESS if surgical else 0
    if not 0 <= niceness <= 19:
        raise InvalidInput("--nice must be between 0 and 19")
    lower_priority(os.getpid(), niceness)


@dataclass(frozen=True, slots=True, kw_only=True)
class _GuestOptions:
    """A main-pool worker's guest options, checked."""

    warm_runs: int
    slice_fuel: int
    slice_cpu_s: float | None


def _guest_options(args: argparse.Namespace) -> _GuestOptions:
    if not 1 <= args.guests <= 64:
        raise InvalidInput("--guests must be between 1 and 64")
    if not 0 <= args.sticky <= 10_000:
        raise InvalidInput("--sticky must be between 0 and 10000")
    warm_runs = WARM_RUNS if args.warm_activities is None else args.warm_activities
    if not 0 <= warm_runs <= 1_000:
        raise InvalidInput("--warm-activities must be between 0 and 1000")
    slice_fuel = SLICE_FUEL if args.slice_fuel is None else args.slice_fuel
    if not 0 <= slice_fuel <= args.fuel:
        raise InvalidInput("--slice-fuel must be between 0 and --fuel")
    slice_cpu_ms = SLICE_CPU_S * 1000 if args.slice_cpu_ms is None else args.slice_cpu_ms
    if not 0 <= slice_cpu_ms <= 60_000:
        raise InvalidInput("--slice-cpu-ms must be between 0 and 60000")
    return _GuestOptions(
        warm_runs=warm_runs,
        slice_fuel=slice_fuel,
        slice_cpu_s=slice_cpu_ms / 1000 if slice_cpu_ms else None,
    )


def work(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    surgical = args.pool == "surgical"
    _be_nice(args.nice, surgical=surgical)
    traces = amber_home() / "traces" / "surgical.jsonl" if surgical else None
    configure_tracing(f"amber-worker-{args.pool}", default_file=traces)
    guests = None if surgical else _guest_options(args)  # a typo fails before the connection
    client = AmberClient(args.server, token=api_token(), tls=client_tls())
    try:
        client.wait_ready(timeout_s=args.connect_timeout)
    except TimeoutError as exc:
        raise RetryableError(
            f"{exc}: start one (`amber server`, or `amber dev`) or point --server (AMBER_SERVER)"
            " at it"
        ) from None
    artifacts = Path(args.artifacts) if args.artifacts else amber_home() / "artifacts"
    settings = worker_settings(args)
    if surgical:
        from amber.surgical_pool import SurgicalWorker, surgical_settings

        if args.memory_mb is None:
            settings = surgical_settings(settings)
        else:
            settings = surgical_settings(settings, memory_bytes=args.memory_mb * 2**20)
        pool = SurgicalWorker(client, settings, artifact_dir=artifacts)
        worker, close = pool.worker, pool.close
    else:
        assert guests is not None
        instances = pool_instances(
            sticky_runs=args.sticky, warm_runs=guests.warm_runs, slots=settings.slots
        )
        engine = SandboxEngine(artifacts, instances=instances)
        runner = guest_runner(
            engine,
            SystemClock(),
            client.get_module,
            artifact_dir=artifacts,
            guests=min(args.guests, settings.slots),
            sticky_runs=args.sticky,
            slice_fuel=guests.slice_fuel,
            slice_cpu_s=guests.slice_cpu_s,
            warm_runs=guests.warm_runs,
        )

        def close() -> None:
            if isinstance(runner, ParallelSandbox | StickySandbox):
                runner.close()
            engine.close()

        worker = Worker(client, runner, settings)
        worker.metrics.watch_warm(runner.warm_instances)
        worker.metrics.watch_waiting(runner.waiting_now)
        if isinstance(runner, ParallelSandbox | StickySandbox):
            worker.metrics.watch_live(runner.live_runs)
        if isinstance(runner, ParallelSandbox):
            worker.metrics.watch_background(runner.in_background_now)
    stop = threading.Event()
    on_signals(stop)

    def stop_worker() -> None:
        stop.wait()
        worker.stop()

    threading.Thread(target=stop_worker, daemon=True).start()
    ops_at = _ops_listen(args.metrics_listen)
    ops = None
    if ops_at is not None:
        ops = OpsEndpoint(worker.metrics.registry, lambda: worker_ready(client), ops_at).start()
        print(f"metrics on {ops.url}/metrics", flush=True)
    where = f", traces in {traces}" if traces and not os.environ.get("AMBER_TRACE_FILE") else ""
    print(
        f"amber worker {worker.settings.worker_id} serving queue {args.queue}"
        f" ({args.pool} pool{where})",
        flush=True,
    )
    worker.run()
    if ops is not None:
        ops.stop()
    close()
    client.close()
    if worker.refused is not None:
        raise worker.refused  # exit 2 with the server's reason
    return 0
