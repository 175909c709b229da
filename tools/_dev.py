"""The body of `amber dev`: embedded PostgreSQL + server + a worker (and, when it keeps serving,
a surgical worker) + the sample module + a demo run.

It loads the whole engine, so `_cmd_dev`, which declares the flags, imports this module only when
`amber dev` runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from amber import abi
from amber.history import HOME_ENV, Database, resolve_database_url
from amber.runtime.approvals import ConsoleSink
from amber.runtime.client import AmberClient
from amber.runtime.metrics import OpsEndpoint, OpsListen
from amber.runtime.model import SystemClock
from amber.runtime.sandbox import Sandbox, SandboxEngine
from amber.runtime.server import AmberServer, ApprovalPageOptions
from amber.runtime.worker import JsonLinesExporter, Worker, WorkerSettings, configure_tracing
from amber.surgical_pool import SurgicalWorker

from . import _output as out
from ._build import build_module
from ._build_python import build_python_guest
from ._operator import TOKEN_FILE, save_token
from ._processes import on_signals, worker_ready

DEV_APPROVAL_PORT = 7234
DEV_METRICS_PORT = 7235
"""The server's /metrics, /healthz and /readyz under `amber dev` (a free port if taken)."""
"""Where `amber dev` serves the approval page (the same port every start, when free)."""
WORKER_TOKEN_FILE = "worker-token"
"""The dev workers' credential, beside the admin's `token` under the home."""
SAMPLE_SOURCE = Path(abi.__file__).resolve().parent / "samples" / "orders.c"
PYTHON_SAMPLE_SOURCE = SAMPLE_SOURCE.with_suffix(".py")
"""The same workflow in Python (`amber dev --python`)."""
DEMO_INPUT = {"order_id": "A-1001", "sku": "BOOK-42", "quantity": 2, "amount_cents": 3998}


def dev(args: argparse.Namespace) -> int:
    home = Path(args.home).resolve()
    os.environ[HOME_ENV] = str(home)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    # The engine stays quiet, but what the guest logs is the developer's own output.
    logging.getLogger("amber.guest").setLevel(logging.INFO)
    configure_tracing("amber-dev")
    started = time.monotonic()
    where = "AMBER_DATABASE_URL" if os.environ.get("AMBER_DATABASE_URL") else "embedded PostgreSQL"
    print(f"[dev] database: {where} (home {home})", flush=True)
    db = Database(resolve_database_url(home)).open()
    server = AmberServer(
        db,
        listen=args.listen,
        approval_sink=ConsoleSink(lambda line: print(line, flush=True)),
        approval_page=ApprovalPageOptions(
            port=DEV_APPROVAL_PORT, any_port_if_taken=True, secret_key=secrets.token_bytes(32)
        ),
        ops_listen=OpsListen(port=DEV_METRICS_PORT, any_port_if_taken=True),
        status_login_links=True,  # `amber status` hands out a console link that logs in
        check_credentials=True,
    )
    port = server.start()
    admin = _credential(server, home, "dev", "admin", TOKEN_FILE)
    worker_token = _credential(server, home, "dev-worker", "worker", WORKER_TOKEN_FILE)
    target = f"127.0.0.1:{port}"
    print(f"[dev] server listening on {target}", flush=True)
    print(
        f"[dev] credentials checked; the CLI uses admin 'dev' from {home / TOKEN_FILE}", flush=True
    )
    print(f"[dev] approval page on {server.approval_link_base}", flush=True)
    if server.console_url:
        # A single-use login link (operator "dev") when operators name themselves; with an
        # operator token file the console asks for a token instead.
        login = server.console_login_link()
        print(f"[dev] console on {login or server.console_url}", flush=True)
    if server.ops is not None:
        print(f"[dev] server metrics on {server.ops.url}/metrics", flush=True)
    client = AmberClient(target, token=admin)
    workers = AmberClient(target, token=worker_token)
    engine = SandboxEngine(home / "artifacts")
    worker = Worker(
        workers,
        Sandbox(engine, SystemClock(), workers.get_module),
        WorkerSettings(poll_wait_s=1.0),
    )
    worker_thread = threading.Thread(target=worker.run, name="amber-dev-worker", daemon=True)
    worker_thread.start()
    worker_ops = OpsEndpoint(worker.metrics.registry, lambda: worker_ready(workers), OpsListen())
    worker_ops.start()
    print(f"[dev] worker started (metrics on {worker_ops.url}/metrics)", flush=True)
    surgeon = None if args.once else _surgical_worker(workers, home)
    status = 0
    try:
        if not args.no_demo:
            status = _demo(client, home, python=args.python)
        print(f"[dev] ready in {time.monotonic() - started:.1f} s", flush=True)
        if not args.once:
            print(
                f"[dev] serving on {target}; try: amber --server {target} run list  (Ctrl-C stops)"
            )
            stop = threading.Event()
            on_signals(stop)
            stop.wait()
    finally:
        if surgeon is not None:
            surgeon.close()
        worker.stop()
        worker_thread.join(timeout=5)
        worker_ops.stop()
        server.stop(grace_s=1.0)
        engine.close()
        db.close()
    return status


def _credential(server: AmberServer, home: Path, name: str, role: str, file: str) -> str:
    """The token of dev's principal `name`: the one saved under `home` while it still works,
    else a new grant (audited) saved there, readable by this user only."""
    path = home / file
    try:
        token = path.read_text().strip()
    except OSError:
        token = ""
    known = server.credentials.authenticate(token) if token else None
    if known is not None and known.name == name and known.role == role:
        return token
    issued = server.credentials.grant(
        name, role, by="amber dev", reason="local credentials of amber dev"
    )
    save_token(home, issued.token, file)
    return issued.token


def _surgical_worker(client: AmberClient, home: Path) -> SurgicalWorker:
    """A surgical-pool worker beside the main one, tracing into $AMBER_HOME/traces."""
    traces = home / "traces" / "surgical.jsonl"
    traces.parent.mkdir(parents=True, exist_ok=True)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(str(traces))))
    surgeon = SurgicalWorker(
        client,
        WorkerSettings(worker_id="dev-surgical", poll_wait_s=1.0),
        artifact_dir=home / "artifacts",
        spans=provider.get_tracer("amber"),
    )
    threading.Thread(target=surgeon.run, name="amber-dev-surgical", daemon=True).start()
    print(f"[dev] surgical worker started (traces in {traces})", flush=True)
    return surgeon


def _demo(client: AmberClient, home: Path, *, python: bool = False) -> int:
    if python:
        source = PYTHON_SAMPLE_SOURCE
        wasm_path = home / "build" / "orders_py.wasm"
        print(f"[dev] building {source.name} with componentize-py (20-60 s)", flush=True)
        built = build_python_guest(source, wasm_path, artifacts=home / "artifacts")
    else:
        source = SAMPLE_SOURCE
        wasm_path = home / "build" / "orders.wasm"
        built = build_module(source, wasm_path)
    print(f"[dev] built {source.name} -> {wasm_path} ({built.size} bytes)", flush=True)
    uploaded = client.upload_version(wasm_path.read_bytes(), promote=True)
    version = uploaded.version
    print(f"[dev] version {version.digest[:16]} serves {', '.join(version.manifest.workflows)}")
    workflow_id = f"demo-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%f')}"
    started = client.start_run("orders", DEMO_INPUT, workflow_id=workflow_id)
    print(f"[dev] started run {started.run.run_id} (workflow id {workflow_id})", flush=True)
    run = client.result(started.run.run_id, wait_s=180 if python else 60)
    print()
    print(out.run_text(run))
    print()
    print(out.history_text(client.history(run.run_id)))
    print()
    if run.status.value != "completed":
        print(f"[dev] demo run did not complete: {run.status.value}")
        return 1
    return 0
