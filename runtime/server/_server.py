"""The server process: gRPC frontend, lease sweeper and notification listener, over one database.

The server holds no run state of its own — everything is in PostgreSQL — so several servers can
share one database, and any of them can be killed at any time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from amber import __version__ as amber_version
from amber import history, versions
from amber.abi import RetryableError
from amber.history import Database, StoreGauges, store_gauges_txn
from amber.runtime.api import GRPC_OPTIONS, ServerTls
from amber.runtime.api import amber_pb2_grpc as pb_grpc
from amber.runtime.approvals import ApprovalPage, ApprovalService, ApprovalSink
from amber.runtime.console import Console, ConsoleOperators, ConsoleServices
from amber.runtime.metrics import OpsEndpoint, OpsListen, ServerMetrics
from amber.runtime.model import Clock, EngineSettings, SystemClock
from amber.runtime.sandbox import check_capabilities
from amber.runtime.services import (
    AuditService,
    CredentialService,
    HealthCounter,
    Lifecycle,
    MigrationService,
    Notifier,
    RunService,
    TaskService,
    TimerService,
    TriageService,
)
from amber.runtime.tracing import exporting, tracer

from ._access import AccessCheck
from ._observed import RpcFrame
from ._operators import Operators
from ._servicer import AmberServicer
from ._status import StatusBoard, StatusSources

_log = logging.getLogger(__name__)


PROBE_INTERVAL_S = 1.0
PROBE_TIMEOUT_S = 2.0
HEALTH_SERVICES = ("", "amber.v1.Amber")
"""What the gRPC health service answers for: the server as a whole, and the Amber API."""


def migrate_all(db: Database) -> None:
    """Bring the schema up to date (every package that owns tables)."""
    history.migrate(db)
    versions.migrate(db)


class _Sweeper(threading.Thread):
    """Periodically reclaims expired leases, enforces activity timeouts and fires due timers.

    Every step is a conditional update in the database, so several servers can sweep at once.
    """

    def __init__(
        self, steps: Sequence[tuple[str, Callable[[], int]]], interval_s: float, name: str
    ) -> None:
        super().__init__(name=name, daemon=True)
        self._steps = tuple(steps)
        self._interval = interval_s
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.wait(self._interval):
            self.sweep()

    def sweep(self) -> None:
        """One pass over every step (tests call this after moving a manual clock)."""
        for what, step in self._steps:
            try:
                count = step()
                if count:
                    _log.info("swept %d %s", count, what)
            except RetryableError as exc:
                _log.warning("sweep of %s skipped: %s", what, exc)
            except Exception:
                _log.exception("sweep of %s failed; will retry", what)

    def stop(self) -> None:
        self._stop.set()


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalPageOptions:
    """Where to serve the approval page, and the secret its sessions (CSRF) are signed with
    (every server behind one public URL needs the same one, of at least 32 bytes)."""

    host: str = "127.0.0.1"
    port: int = 0
    any_port_if_taken: bool = False
    """Serve on a free port when `port` is taken (`amber dev`: the same port every start,
    unless something else holds it)."""
    public_url: str | None = None
    secret_key: bytes
    console: bool = True
    """Serve the operators' console on the same port (`runtime.console`)."""


class AmberServer:
    """Everything `amber server` runs, startable in-process for `amber dev` and tests."""

    def __init__(
        self,
        db: Database,
        *,
        listen: str = "127.0.0.1:7233",
        clock: Clock | None = None,
        settings: EngineSettings | None = None,
        max_threads: int = 256,  # each worker holds three: its two streams and a long poll
        operators: Operators | None = None,
        approval_sink: ApprovalSink | None = None,
        approval_page: ApprovalPageOptions | None = None,
        ops_listen: OpsListen | None = None,
        status_login_links: bool = False,
        check_credentials: bool = False,
        tls: ServerTls | None = None,
    ) -> None:
        """`approval_sink` delivers approval tokens to approvers (without one, operators mint
        them with `amber approvals issue`); `approval_page` serves the approvers' HTTP page;
        `status_login_links` (`amber dev`): `amber status` shows a fresh single-use console
        login link rather than the console's address; `ops_listen` serves `/metrics`,
        `/healthz` and `/readyz`; `check_credentials`: every RPC needs a bearer token whose
        principal's role and tenants allow the call (`_access`), and the console takes API
        credentials (without it, anyone who reaches the port may call anything); `tls`: serve
        gRPC, the approval page and the console over TLS (mutual with a client CA)."""
        self.db = db
        self.clock = clock or SystemClock()
        self.settings = settings or EngineSettings()
        self.metrics = ServerMetrics(gauges=self._store_gauges)
        db.observe(self.metrics.transaction)
        self.notifier = Notifier(db)
        life = Lifecycle(self.clock, self.settings, watch=self.metrics)
        self.runs = RunService(db, life, self.notifier)
        self.health = HealthCounter(on_record=self.metrics.task_finished)
        self.tasks = TaskService(db, life, self.notifier, self.health)
        self.timers = TimerService(db, life, self.notifier)
        self.registry = versions.VersionRegistry(db, manifest_checks=(check_capabilities,))
        self.rollout = versions.Rollout(db)
        self.migration = MigrationService(db, self.clock, self.notifier, self.rollout)
        self.triage = TriageService(
            db, life, self.notifier, migration=self.migration, registry=self.registry
        )
        self.approvals = ApprovalService(
            db,
            life,
            self.notifier,
            sink=approval_sink,
            link_base=lambda: self.approval_link_base,
        )
        self.audit = AuditService(db)
        self.credentials = CredentialService(db, self.clock)
        self.checks_credentials = check_credentials
        self.approval_link_base = ""
        """Where the approval page is served (set when it starts), for the links in tokens."""
        self.approval_page = (
            None
            if approval_page is None
            else ApprovalPage(
                self.approvals,
                secret_key=approval_page.secret_key,
                host=approval_page.host,
                port=approval_page.port,
                any_port_if_taken=approval_page.any_port_if_taken,
                public_url=approval_page.public_url,
                ssl_context=None if tls is None else tls.ssl_context(),
            )
        )
        self.status_board = StatusBoard(
            self.clock,
            StatusSources(
                version=amber_version,
                database_down=lambda: self.database_down,
                gauges=self._store_gauges,
                console_url=lambda: (
                    (status_login_links and self.console_login_link()) or self.console_url
                ),
                metrics_url=lambda: f"{self.ops.url}/metrics" if self.ops is not None else "",
            ),
        )
        operators = operators or Operators.from_environment()
        self.console = (
            None
            if approval_page is None or self.approval_page is None or not approval_page.console
            else self._console(operators, status_login_links)
        )
        """The operators' console, mounted on the approval page's app (None without a page)."""
        self.console_url = ""
        """Where the console is served (set when the page starts; "" when it is not served)."""
        self.database_down: str | None = None
        """Why the database did not answer the last probe, or None: while set, RPCs fail at
        once with `StoreUnavailable` and the gRPC health service says NOT_SERVING."""
        spans = tracer() if exporting() else None
        if spans is not None:
            db.wrap_transactions(lambda: spans.start_as_current_span("amber.db.transaction"))
        self._grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="amber-rpc"),
            # Exclusive bind: with gRPC's default SO_REUSEPORT a second server on a used port
            # starts "fine" and calls land on either at random.
            options=[*GRPC_OPTIONS, ("grpc.so_reuseport", 0)],
            interceptors=[
                RpcFrame(
                    self.metrics.rpc,
                    lambda: self.database_down,
                    spans,
                    AccessCheck(
                        self.credentials.by_hash,
                        self.settings.default_queue,
                    )
                    if check_credentials
                    else None,
                    batches=self.metrics.work_batch,
                )
            ],
        )
        self.health_service = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health_service, self._grpc)
        servicer = AmberServicer(
            self.runs,
            self.tasks,
            self.registry,
            self.notifier,
            self.clock,
            self.settings.default_queue,
            self.rollout,
            self.migration,
            self.triage,
            operators,
            self.approvals,
            self.audit,
            self.status_board,
            self.credentials,
            check_credentials,
        )
        pb_grpc.add_AmberServicer_to_server(servicer, self._grpc)  # type: ignore[no-untyped-call]
        self._servicer = servicer
        self._listen = listen
        self._tls = None if tls is None else tls.grpc_credentials()  # a bad file fails here
        interval = self.settings.sweep_interval.total_seconds()
        self._sweeper = _Sweeper(
            [
                (
                    "expired leases",
                    lambda: self.metrics.leases_expired(self.tasks.sweep_expired_leases()),
                ),
                ("activity timeouts", self.tasks.sweep_timeouts),
                ("due timers", self.timers.fire_due),
                ("health counters", lambda: self.health.flush(self.db)),
            ],
            interval,
            "amber-sweeper",
        )
        # Its own thread: a probe must not wait behind a sweep stuck on the database.
        self._prober = _Sweeper(
            [("database probe", self.probe_database)], PROBE_INTERVAL_S, "amber-db-probe"
        )
        # Its own thread: a slow delivery sink (a webhook timing out) must not delay leases,
        # timeouts and timers.
        self._deliverer = _Sweeper(
            [("approval deliveries", self.approvals.deliver_pending)],
            interval,
            "amber-approval-delivery",
        )
        self.port = 0
        self._ops_listen = ops_listen
        self.ops: OpsEndpoint | None = None
        """The operations endpoint, once started (with `ops_listen`)."""

    def _console(self, operators: Operators, login_links: bool) -> Console:
        assert self.approval_page is not None
        console = Console(
            ConsoleServices(
                runs=self.runs,
                tasks=self.tasks,
                triage=self.triage,
                registry=self.registry,
                rollout=self.rollout,
                approvals=self.approvals,
                audit=self.audit,
                clock=self.clock,
            ),
            ConsoleOperators(
                authorise=self.credentials.operator_of,
                holder_of=self.credentials.holder_of,
                login_links=login_links,
            )
            if self.checks_credentials
            else ConsoleOperators(
                authorise=operators.authorise,
                holder_of=None if operators.by_hash is None else operators.by_hash.get,
            ),
        )
        console.mount(self.approval_page.app)
        return console

    def console_login_link(self) -> str | None:
        """A single-use link that logs a browser into the console as operator `dev` (for
        `amber dev`); None when the console is not served or operators need tokens."""
        if self.console is None or not self.console_url:
            return None
        return self.console.login_link(self.console_url)

    def _store_gauges(self) -> StoreGauges:
        return self.db.run(lambda cur: store_gauges_txn(cur, self.clock.now()))

    def ready(self) -> tuple[bool, str]:
        """Whether this server can serve: its database answers (the readiness probe)."""
        problem = self.probe_database_now()
        return (problem is None), (problem or "database reachable")

    def probe_database(self) -> int:
        """Probe the database and publish the answer (the prober's step); returns 0."""
        self.probe_database_now()
        return 0

    def probe_database_now(self) -> str | None:
        """Ask the database now; set `database_down` and the health service from the answer."""
        problem = self.db.ping(timeout_s=PROBE_TIMEOUT_S)
        if problem != self.database_down:
            if problem is None:
                _log.info("database reachable again")
            else:
                _log.warning("%s: RPCs fail fast until it answers", problem)
        self.database_down = problem
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if problem is None
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for service in HEALTH_SERVICES:
            self.health_service.set(service, status)
        return problem

    def start(self) -> int:
        """Migrate, start listening; returns the bound port (useful with port 0)."""
        migrate_all(self.db)
        try:
            if self._tls is None:
                self.port = self._grpc.add_insecure_port(self._listen)
            else:
                self.port = self._grpc.add_secure_port(self._listen, self._tls)
        except RuntimeError:  # grpcio raises where older versions returned 0
            self.port = 0
        if self.port == 0:
            raise OSError(
                f"cannot listen on {self._listen}: the address is in use (another Amber server?)"
                " or not this machine's"
            )
        # Bound before anything starts: a taken address fails the start with nothing to stop.
        ops = None
        if self._ops_listen is not None:
            ops = OpsEndpoint(self.metrics.registry, self.ready, self._ops_listen)
        self.notifier.start()
        self._grpc.start()
        if self.approval_page is not None:
            self.approval_page.start()
            self.approval_link_base = self.approval_page.base_url
            if self.console is not None:
                self.console_url = f"{self.approval_page.base_url}/"
        if ops is not None:
            self.ops = ops.start()
        self.probe_database_now()
        self._prober.start()
        self._sweeper.start()
        self._deliverer.start()
        return self.port

    def sweep(self) -> None:
        """Run one sweep now (leases, activity timeouts, timers, approval deliveries) instead
        of waiting for it."""
        self._sweeper.sweep()
        self._deliverer.sweep()

    def wait(self) -> None:
        self._grpc.wait_for_termination()

    def stop(self, grace_s: float = 2.0) -> None:
        self._prober.stop()
        self.health_service.enter_graceful_shutdown()
        self._sweeper.stop()
        self._deliverer.stop()
        if self.approval_page is not None:
            self.approval_page.stop()
        if self.ops is not None:
            self.ops.stop()
        stopped = self._grpc.stop(grace_s)  # no new calls from here on
        self._servicer.end_streams()  # they never end by themselves: the grace would run out
        stopped.wait()
        self.notifier.stop()
        try:
            self.health.flush(self.db)
        except Exception:
            _log.warning("could not flush health counters at shutdown", exc_info=True)
