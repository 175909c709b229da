"""Shared fixtures: a real PostgreSQL database per test session, built guest modules, and real
server/worker processes on loopback.

The database comes from `AMBER_DATABASE_URL` when it is set (a fresh database is created on that
server for the session and dropped afterwards); otherwise Amber's embedded PostgreSQL is started
in a temporary directory. Wasmtime engines are created lazily inside fixtures, never at import.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

# Before any engine exists: the test guest `exiter` imports the test-only host import test_exit.
os.environ.setdefault("AMBER_TEST_HOST_IMPORTS", "1")

from amber.abi import ActivityInput, pack
from amber.history import DATABASE_URL_ENV, Database, start_embedded_postgres
from amber.runtime.client._client import AmberClient
from amber.runtime.model._clock import ManualClock, SystemClock
from amber.runtime.model._settings import EngineSettings
from amber.runtime.replay import ActivityAttempt
from amber.runtime.sandbox import ActivityHost, ParallelSandbox, guest_runner
from amber.runtime.sandbox._engine import SandboxEngine
from amber.runtime.sandbox._sandbox import Sandbox, SandboxLimits
from amber.runtime.server._server import AmberServer, migrate_all
from amber.tools._build import BuildResult, build_module
from amber.versions import VersionNotFound
from tests._python_builds import PythonBuilds

ROOT = Path(__file__).resolve().parents[1]
GUEST_SOURCES: dict[str, tuple[Path, dict[str, str]]] = {
    "orders": (ROOT / "abi" / "samples" / "orders.c", {}),
    "orders_reordered": (ROOT / "abi" / "samples" / "orders.c", {"AMBER_VARIANT_REORDERED": "1"}),
    "orders_reordered_strict": (
        ROOT / "abi" / "samples" / "orders.c",
        {"AMBER_VARIANT_REORDERED": "1", "AMBER_VARIANT_STRICT": "1"},
    ),
    "chain": (ROOT / "abi" / "samples" / "chain.c", {}),
    "shipment": (ROOT / "abi" / "samples" / "shipment.c", {}),
    "payments": (ROOT / "abi" / "samples" / "payments.c", {}),
    "expense": (ROOT / "abi" / "samples" / "expense.c", {}),
    "poison": (ROOT / "abi" / "samples" / "poison.c", {}),
    "hostile": (ROOT / "tests" / "guests" / "hostile.c", {}),
    "exiter": (ROOT / "tests" / "guests" / "exiter.c", {}),
    "recursion": (ROOT / "tests" / "guests" / "recursion.c", {}),
    "sticky": (ROOT / "tests" / "guests" / "sticky.c", {}),
    "heavy": (ROOT / "tests" / "guests" / "heavy.c", {}),
    "waits": (ROOT / "tests" / "guests" / "waits.c", {}),
    "probe": (ROOT / "tests" / "abi" / "sdk_probe.c", {}),
    **{
        f"rollout_v{v}": (ROOT / "abi" / "samples" / "rollout.c", {"ROLLOUT_V": str(v)})
        for v in (1, 2, 3)
    },
}
PYTHON_GUEST_SOURCES: dict[str, Path] = {
    "py_guest": ROOT / "tests" / "guests" / "py_guest.py",
    "py_orders": ROOT / "abi" / "samples" / "orders.py",
    "py_expense": ROOT / "abi" / "samples" / "expense.py",
    "py_rollout_v1": ROOT / "abi" / "samples" / "rollout_v1.py",
    "py_rollout_v2": ROOT / "abi" / "samples" / "rollout_v2.py",
    "py_rollout_v3": ROOT / "abi" / "samples" / "rollout_v3.py",
}
"""Python guests (components): each build takes 10–60 s, so they are built once per session
(`PythonBuilds`), in the background from the end of collection, and only when a selected test
needs them."""
AMBER_TABLES = (
    "amber_task_failures, amber_tasks, amber_events, amber_runs, amber_workflow_types,"
    " amber_module_workflows, amber_modules, amber_workflow_ids, amber_timers,"
    " amber_signal_ids, amber_discarded, amber_query_results, amber_audit,"
    " amber_version_labels, amber_version_stats, amber_version_checks, amber_approvals,"
    " amber_approval_tokens, amber_approval_decisions, amber_approver_roles, amber_audit_head,"
    " amber_principals"
)
"""Every table but the schema's migration record: each test starts from an empty engine."""


def _with_database(url: str, name: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo("", **info)


@pytest.fixture(scope="session")
def server_url() -> str:
    """A PostgreSQL server: `AMBER_DATABASE_URL`, or an embedded one for this session."""
    url = os.environ.get(DATABASE_URL_ENV)
    if url:
        return url
    # Not under pytest's basetemp: its 0700 parents and its clean-up of old sessions get in the
    # way of the server's own system user.
    home = Path(tempfile.mkdtemp(prefix="amber-test-pg-"))
    home.chmod(0o755)
    # atexit runs last-registered first: the server (registered by embedded-postgres when it
    # starts) is stopped before its directory is removed.
    atexit.register(shutil.rmtree, home, True)
    return start_embedded_postgres(home / "pgdata")


@pytest.fixture(scope="session")
def database_url(server_url: str) -> Iterator[str]:
    """A fresh, migrated database for this test session, dropped at the end."""
    name = f"amber_test_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = _with_database(server_url, name)
    with Database(url) as db:
        migrate_all(db)
    yield url
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture(scope="session")
def session_db(database_url: str) -> Iterator[Database]:
    with Database(database_url, max_size=16) as db:
        yield db


@pytest.fixture
def db(session_db: Database) -> Database:
    """The session database, emptied of Amber's rows before the test."""
    session_db.run(lambda cur: cur.execute(f"TRUNCATE {AMBER_TABLES}"))
    return session_db


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, BuildResult]:
    """Every sample and test guest, compiled from source once per session."""
    out = tmp_path_factory.mktemp("modules")
    return {
        name: build_module(source, out / f"{name}.wasm", defines=defines)
        for name, (source, defines) in GUEST_SOURCES.items()
    }


@pytest.fixture(scope="session")
def modules(built: dict[str, BuildResult]) -> dict[str, bytes]:
    return {name: result.output.read_bytes() for name, result in built.items()}


def _session_dir() -> Path:
    """A directory for the whole test session: created by the first pytest process (the xdist
    controller, or the only process) and inherited by its workers through the environment."""
    shared = os.environ.get(_SESSION_DIR_ENV)
    if shared:
        return Path(shared)
    path = Path(tempfile.mkdtemp(prefix="amber-test-session-"))
    os.environ[_SESSION_DIR_ENV] = str(path)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


_SESSION_DIR_ENV = "_AMBER_TEST_SESSION_DIR"
SESSION_DIR = _session_dir()
ARTIFACTS = SESSION_DIR / "artifacts"
"""The session's artifact cache, shared by every in-process sandbox of every worker process (a
Python guest compiles once per session, with its build)."""
_python_builds = PythonBuilds(PYTHON_GUEST_SOURCES, SESSION_DIR / "python-guests", ARTIFACTS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests of Python guests run last: their guests build on a thread meanwhile (minutes of
    CPU), and a test that waits for a build would hold the session up."""
    needs = [item for item in items if "python_built" in getattr(item, "fixturenames", ())]
    if needs:
        waiting = set(map(id, needs))
        items[:] = [item for item in items if id(item) not in waiting] + needs


def pytest_collection_finish(session: pytest.Session) -> None:
    if any("python_built" in getattr(item, "fixturenames", ()) for item in session.items):
        _python_builds.start()


@pytest.fixture(scope="session")
def python_built() -> Mapping[str, BuildResult]:
    """The Python guests (`PYTHON_GUEST_SOURCES`) by name, built with `amber build`; a lookup
    waits for that guest's build."""
    return _python_builds


class _ModuleBytes(Mapping[str, bytes]):
    def __getitem__(self, name: str) -> bytes:
        return _python_builds[name].output.read_bytes()

    def __iter__(self) -> Iterator[str]:
        return iter(PYTHON_GUEST_SOURCES)

    def __len__(self) -> int:
        return len(PYTHON_GUEST_SOURCES)


@pytest.fixture(scope="session")
def python_modules(python_built: Mapping[str, BuildResult]) -> Mapping[str, bytes]:
    """The Python guests' bytes by name (a lookup waits for that build)."""
    return _ModuleBytes()


@pytest.fixture(scope="session")
def sandbox_engine() -> Iterator[SandboxEngine]:
    engine = SandboxEngine(ARTIFACTS)
    yield engine
    engine.close()


@pytest.fixture
def sandbox(sandbox_engine: SandboxEngine, modules: dict[str, bytes]) -> Sandbox:
    """A sandbox that serves the built test modules by digest (no server involved)."""

    return Sandbox(sandbox_engine, SystemClock(), _serving(modules))


@pytest.fixture
def py_sandbox(
    sandbox_engine: SandboxEngine,
    modules: dict[str, bytes],
    python_built: Mapping[str, BuildResult],
) -> Sandbox:
    """`sandbox`, also serving the Python guests (compiled once per session, like the rest);
    a Python guest's bytes are read when first needed, waiting for its build."""
    c_guests = _serving(modules)

    def source(digest: str) -> bytes:
        name = _python_builds.digests().get(digest)
        return c_guests(digest) if name is None else _python_builds[name].output.read_bytes()

    return Sandbox(sandbox_engine, SystemClock(), source)


def _serving(modules: dict[str, bytes]) -> Callable[[str], bytes]:
    import hashlib

    by_digest = {hashlib.sha256(m).hexdigest(): m for m in modules.values()}

    def source(digest: str) -> bytes:
        if digest not in by_digest:
            raise VersionNotFound(f"no module version {digest}")
        return by_digest[digest]

    return source


@dataclass
class InProcessServer:
    server: AmberServer
    client: AmberClient
    clock: ManualClock | SystemClock
    target: str


@pytest.fixture
def make_server(db: Database) -> Iterator[Callable[..., InProcessServer]]:
    """Start an in-process server (real gRPC on loopback) with the given settings."""
    started: list[InProcessServer] = []

    def make(
        *,
        settings: EngineSettings | None = None,
        clock: ManualClock | None = None,
        **server_options: Any,
    ) -> InProcessServer:
        the_clock = clock or SystemClock()
        server = AmberServer(
            db, listen="127.0.0.1:0", settings=settings, clock=the_clock, **server_options
        )
        port = server.start()
        target = f"127.0.0.1:{port}"
        client = AmberClient(target, timeout_s=20)
        handle = InProcessServer(server=server, client=client, clock=the_clock, target=target)
        started.append(handle)
        return handle

    yield make
    for handle in started:
        handle.client.close()
        handle.server.stop(grace_s=0.5)


@dataclass
class Process:
    """A real `amber` OS process started by a test."""

    popen: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(timeout=10)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def amber_process(tmp_path: Path, database_url: str) -> Iterator[Callable[..., Process]]:
    """Start `amber <args>` as a separate OS process; every one is stopped at teardown."""
    procs: list[Process] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Process:
        log = tmp_path / f"proc-{len(procs)}-{args[0]}.log"
        full_env = {
            **os.environ,
            DATABASE_URL_ENV: database_url,
            "AMBER_HOME": str(tmp_path / "home"),
        }
        full_env.update(env or {})
        popen = subprocess.Popen(
            [sys.executable, "-m", "amber.tools.cli", *args],
            cwd=ROOT,
            env=full_env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        proc = Process(popen=popen, log=log)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.stop()


BUSY_N = 3 * 10**9
"""`count_to` (`tests/guests/heavy.c`) up to this computes for seconds (about 1 ns a count)."""


def attempt_of(
    module: bytes,
    name: str,
    args: object,
    *,
    run_id: str,
    limits: SandboxLimits,
    host: ActivityHost | None = None,
) -> ActivityAttempt:
    """Attempt 1 of activity `name` of `module` in run `run_id`, on `args` (packed here)."""
    return ActivityAttempt(
        digest=hashlib.sha256(module).hexdigest(),
        cmd=0,
        input=ActivityInput(
            run_id=run_id,
            activity=name,
            args=pack(args),
            attempt=1,
            idempotency_key=f"{run_id}/0",
            deadline_ms=0,
        ),
        limits=limits,
        host=host,
    )


def busy_attempt(modules: Mapping[str, bytes], run_id: str = "busy") -> ActivityAttempt:
    """An activity that computes for seconds and holds the sandbox that runs it: give its
    runner no slices (`slice_fuel=0`), or the background lane takes it over. (A sleeping
    activity would not do: a guest waiting in a host call gives its place up.)"""
    limits = SandboxLimits(fuel=50 * BUSY_N, deadline_s=60.0)
    return attempt_of(modules["heavy"], "count_to", {"n": BUSY_N}, run_id=run_id, limits=limits)


@contextlib.contextmanager
def parallel_runner(
    artifacts: Path, modules: Mapping[str, bytes], **options: Any
) -> Iterator[ParallelSandbox]:
    """A worker's two-guest runner (`guest_runner` with `options`) on its own engine, serving
    `modules` by digest; closed after the block."""
    by_digest = {hashlib.sha256(m).hexdigest(): m for m in modules.values()}
    engine = SandboxEngine(artifacts)
    runner = guest_runner(
        engine, SystemClock(), by_digest.__getitem__, artifact_dir=artifacts, guests=2, **options
    )
    assert isinstance(runner, ParallelSandbox)
    try:
        yield runner
    finally:
        runner.close()
        engine.close()


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `predicate` until true (for tests coordinating with other processes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture
def server_process(
    amber_process: Callable[..., Process], tmp_path: Path
) -> Callable[..., tuple[Process, str]]:
    """Start `amber server` on a free port; returns (process, target)."""

    def start(*extra: str) -> tuple[Process, str]:
        port_file = tmp_path / f"port-{secrets.token_hex(2)}"
        proc = amber_process(
            "server", "--listen", "127.0.0.1:0", "--port-file", str(port_file), *extra
        )
        wait_for(lambda: port_file.exists() or proc.popen.poll() is not None, 60, "server start")
        if not port_file.exists():
            raise AssertionError(f"server did not start:\n{proc.output()}")
        return proc, f"127.0.0.1:{port_file.read_text()}"

    return start
