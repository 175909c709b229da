"""Outages and races around a worker's reports: the database going away while a worker reports,
a heartbeat racing with eager dispatch, and a server that refuses malformed completions."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from amber.abi import InvalidInput, ScheduleActivity, WorkflowStatus
from amber.history import Database, EventType, LeaseLost, RunStatus, TaskKind
from amber.runtime.client._client import AmberClient, decode
from amber.runtime.model._tasks import HeartbeatAck, LeasedTask, NewCommand, WorkflowCompletion
from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.server._server import AmberServer
from amber.runtime.worker._heartbeat import Heartbeats
from tests.conftest import InProcessServer, wait_for
from tests.history._proxy import PgProxy, upstream_of

from ._engine_helpers import drive, make_worker

ORDER = {"order_id": "R-1", "sku": "S", "quantity": 1, "amount_cents": 100}


class _SlowLosingClient:
    """Heartbeats for task A block, then report A's lease as lost (A was just completed)."""

    def __init__(self, a: LeasedTask) -> None:
        self.a = a
        self.sent: list[int] = []
        self.release = threading.Event()

    def heartbeat(
        self, task: LeasedTask, *, worker_id: str, details: bytes | None = None
    ) -> HeartbeatAck:
        self.sent.append(task.task_id)
        if task is self.a:
            self.release.wait(5)
            raise LeaseLost(task.task_id, task.fencing)
        until = datetime.now(UTC) + timedelta(seconds=30)
        return HeartbeatAck(lease_expires_at=until, cancel_requested=False)


def _leased(task_id: int, lease_s: float) -> LeasedTask:
    return LeasedTask(
        task_id=task_id, fencing=1, kind=TaskKind.ACTIVITY, run_id="r", tenant="default",
        digest="d", name="n", attempt=1,
        lease_expires_at=datetime.now(UTC) + timedelta(seconds=lease_s),
    )  # fmt: skip


def test_a_late_lease_lost_for_the_last_task_does_not_stop_renewing_the_next() -> None:
    a, b = _leased(1, 0.3), _leased(2, 0.3)
    client = _SlowLosingClient(a)
    from amber.runtime.model._clock import SystemClock

    beat = Heartbeats(client, "w", SystemClock())  # type: ignore[arg-type]
    beat.start()
    try:
        beat.track(a)
        deadline = time.monotonic() + 5
        while not client.sent and time.monotonic() < deadline:
            time.sleep(0.01)
        beat.track(b)  # eager dispatch handed over B while A's heartbeat was in flight
        client.release.set()
        deadline = time.monotonic() + 5
        while 2 not in client.sent and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        beat.stop()
    assert 2 in client.sent


@pytest.fixture
def proxied_server(database_url: str, db: Database) -> Iterator[tuple[InProcessServer, PgProxy]]:
    upstream = upstream_of(database_url)
    if upstream is None:
        pytest.skip("cannot tell where the test database listens")
    proxy = PgProxy(upstream)
    from amber.runtime.model._clock import SystemClock
    from amber.runtime.model._settings import EngineSettings

    # A server that gives up on the database quickly, so the outage reaches the worker.
    proxied_db = Database(proxy.dsn(database_url), connect_timeout_s=0.5, attempts=2).open()
    server = AmberServer(
        proxied_db, listen="127.0.0.1:0", settings=EngineSettings(lease=timedelta(seconds=30))
    )
    port = server.start()
    client = AmberClient(f"127.0.0.1:{port}", timeout_s=10)
    yield InProcessServer(server=server, client=client, clock=SystemClock(), target=""), proxy
    client.close()
    server.stop(grace_s=0.5)
    proxied_db.close()
    proxy.close()


class _CutOnFirstActivation(Sandbox):
    """Cuts the database just as the worker starts its first activation (after its claim)."""

    def __init__(self, inner: Sandbox, proxy: PgProxy, outage_s: float) -> None:
        self._inner, self._proxy, self._outage_s = inner, proxy, outage_s
        self.cut_at: float | None = None

    def run(self, request):  # type: ignore[no-untyped-def]
        if self.cut_at is None:
            self.cut_at = time.monotonic()
            self._proxy.cut()
            threading.Timer(self._outage_s, self._proxy.restore).start()
        return self._inner.run(request)

    def activities(self, digest: str) -> frozenset[str]:
        return self._inner.activities(digest)

    def http_policy(self, digest: str):  # type: ignore[no-untyped-def]
        return self._inner.http_policy(digest)


@pytest.mark.slow
def test_a_database_outage_while_a_worker_reports_costs_no_extra_attempt(
    proxied_server: tuple[InProcessServer, PgProxy], modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv, proxy = proxied_server
    srv.client.upload_version(modules["orders"], promote=True)
    run_id = srv.client.start_run("orders", ORDER).run.run_id
    cutting = _CutOnFirstActivation(sandbox, proxy, outage_s=3.0)
    worker = make_worker(srv.client, cutting)
    try:
        run = drive(worker, srv.client, run_id, 60)
    finally:
        proxy.restore()
    assert cutting.cut_at is not None
    assert run.status is RunStatus.COMPLETED, srv.client.describe(run_id)
    events = srv.client.history(run_id)
    completed = [e.payload for e in events if e.type is EventType.ACTIVITY_COMPLETED]
    assert [p["attempt"] for p in completed] == [1, 1, 1, 1]
    assert Counter(p["cmd"] for p in completed) == {1: 1, 2: 1, 3: 1, 4: 1}
    assert srv.client.describe(run_id).recent_failures == ()


def test_runs_started_within_one_millisecond_are_all_listed_page_by_page(
    make_server, modules: dict[str, bytes]
) -> None:
    srv = make_server()
    srv.client.upload_version(modules["orders"], promote=True)
    started = {srv.client.start_run("orders", {**ORDER, "order_id": str(i)}).run.run_id
               for i in range(7)}  # fmt: skip
    seen: list[str] = []
    token = ""
    while True:
        runs, token = srv.client.list_runs(limit=2, page_token=token)
        seen += [r.run_id for r in runs]
        if not token:
            break
    assert sorted(seen) == sorted(started) and len(seen) == len(set(seen))
    assert seen == sorted(seen, reverse=True)  # newest first


def _suspended_with(commands: tuple[NewCommand, ...], last_seq: int) -> WorkflowCompletion:
    return WorkflowCompletion(
        expected_last_seq=last_seq, commands=commands, status=WorkflowStatus.SUSPENDED
    )


@pytest.mark.parametrize(
    ("commands", "message"),
    [
        (
            (
                NewCommand(cmd=0, command=ScheduleActivity(name="a", args=b"\x80")),
                NewCommand(cmd=7, command=ScheduleActivity(name="b", args=b"\x80")),
            ),
            "consecutive",
        ),
        ((NewCommand(cmd=0, command=ScheduleActivity(name="9bad", args=b"")),), "not a valid"),
        (
            tuple(
                NewCommand(cmd=i, command=ScheduleActivity(name="a", args=b"")) for i in range(1001)
            ),
            "cap is 1000",
        ),
    ],
)
def test_the_server_refuses_malformed_completions_and_writes_nothing(
    make_server, modules: dict[str, bytes], commands: tuple[NewCommand, ...], message: str
) -> None:
    srv = make_server()
    srv.client.upload_version(modules["orders"], promote=True)
    run_id = srv.client.start_run("orders", ORDER).run.run_id
    task = srv.client.poll_task(worker_id="w", wait_s=2)
    assert task is not None
    with pytest.raises(InvalidInput, match=message):
        srv.client.complete_workflow(task, _suspended_with(commands, 1), worker_id="w")
    assert [e.type for e in srv.client.history(run_id)] == [EventType.RUN_STARTED]


def test_runs_are_found_by_workflow_id_and_only_within_their_tenant(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    from amber.history import RunNotFound

    srv = make_server()
    srv.client.upload_version(modules["orders"], promote=True)
    mine = srv.client.start_run("orders", ORDER, workflow_id="wf-1", tenant="acme").run
    drive(make_worker(srv.client, sandbox), srv.client, mine.run_id, tenant="acme")
    assert srv.client.describe("wf-1", tenant="acme").run.run_id == mine.run_id
    assert decode(srv.client.result("wf-1", tenant="acme").result)["status"] == "shipped"
    assert srv.client.history("wf-1", tenant="acme")[0].run_id == mine.run_id
    for ref in ("wf-1", mine.run_id):
        with pytest.raises(RunNotFound):
            srv.client.describe(ref)  # the default tenant does not see acme's runs
        with pytest.raises(RunNotFound):
            srv.client.history(ref, tenant="other")


def test_an_activity_blocked_past_its_deadline_fails_typed_and_the_worker_goes_on(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    from amber.runtime.model._settings import EngineSettings, PoisonPolicy
    from amber.runtime.sandbox._sandbox import SandboxLimits
    from amber.runtime.worker._worker import Worker, WorkerSettings

    later = PoisonPolicy(crash_backoff=timedelta(hours=1))  # a crash is not retried in the test
    srv = make_server(settings=EngineSettings(poison=later))
    srv.client.upload_version(modules["hostile"], promote=True)
    srv.client.upload_version(modules["orders"], promote=True)
    limits = SandboxLimits(deadline_s=0.5)
    worker = Worker(
        srv.client, sandbox, WorkerSettings(worker_id="d", poll_wait_s=0.2, activity_limits=limits)
    )
    napping = srv.client.start_run("call", {"activity": "nap", "args": None}).run.run_id
    good = srv.client.start_run("orders", ORDER).run.run_id
    assert drive(worker, srv.client, good).status is RunStatus.COMPLETED
    for _ in range(20):
        if srv.client.describe(napping).recent_failures:
            break
        worker.run_once(wait_s=0.2)
    (failure,) = srv.client.describe(napping).recent_failures
    assert failure.reason == "deadline" and "sleep" in failure.message
    assert srv.client.result(napping).status is RunStatus.RUNNING  # a crash: counted, retried


def test_a_sleeping_activity_of_a_terminated_run_gives_its_slot_back(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    # `nap` sleeps ten minutes in the host. Once its run is terminated, its lease is gone and
    # nothing it returns can be recorded: the sleep ends at the next heartbeat, not at the
    # activity's 60 s deadline, and the worker's only slot serves the next run.
    import threading

    from amber.runtime.model._settings import EngineSettings
    from amber.runtime.sandbox._sandbox import SandboxLimits
    from amber.runtime.worker._worker import Worker, WorkerSettings

    srv = make_server(settings=EngineSettings(lease=timedelta(seconds=1.5)))
    srv.client.upload_version(modules["hostile"], promote=True)
    srv.client.upload_version(modules["orders"], promote=True)
    limits = SandboxLimits(deadline_s=60.0)
    settings = WorkerSettings(worker_id="n", poll_wait_s=0.2, slots=1, activity_limits=limits)
    worker = Worker(srv.client, sandbox, settings)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        napping = srv.client.start_run("call", {"activity": "nap", "args": None}).run.run_id

        def napping_now() -> bool:
            tasks = srv.client.describe(napping).tasks
            return any(t.kind.value == "activity" and t.state.value == "leased" for t in tasks)

        wait_for(napping_now, 20, "the nap to be leased")
        srv.client.terminate(napping, reason="not needed", operator="ops")
        good = srv.client.start_run("orders", ORDER).run.run_id
        # Long before the nap's deadline, the slot it held has served the next run.
        assert srv.client.result(good, wait_s=30).status is RunStatus.COMPLETED
    finally:
        worker.stop()
        thread.join(timeout=70)
    failures = [(f.reason, f.message) for f in srv.client.describe(napping).recent_failures]
    assert failures == []  # a lost lease is no crash


@pytest.fixture
def quiet_proxied_server(
    database_url: str, db: Database
) -> Iterator[tuple[InProcessServer, PgProxy]]:
    """A server whose database is behind a proxy, with no sweeps of its own: every transaction
    through the proxy is one a test asked for."""
    upstream = upstream_of(database_url)
    if upstream is None:
        pytest.skip("cannot tell where the test database listens")
    proxy = PgProxy(upstream)
    from amber.runtime.model._clock import SystemClock
    from amber.runtime.model._settings import EngineSettings

    proxied_db = Database(proxy.dsn(database_url), connect_timeout_s=2, attempts=3).open()
    settings = EngineSettings(sweep_interval=timedelta(hours=1))
    server = AmberServer(proxied_db, listen="127.0.0.1:0", settings=settings)
    port = server.start()
    client = AmberClient(f"127.0.0.1:{port}", timeout_s=20)
    yield InProcessServer(server=server, client=client, clock=SystemClock(), target=""), proxy
    client.close()
    server.stop(grace_s=0.5)
    proxied_db.close()
    proxy.close()


def test_commits_whose_answer_is_lost_apply_once(
    quiet_proxied_server: tuple[InProcessServer, PgProxy],
    modules: dict[str, bytes],
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The connection drops right after the server committed: a signal (which has no key that
    # would refuse a second copy) and combined activity + workflow reports must apply once.
    srv, proxy = quiet_proxied_server
    srv.client.upload_version(modules["chain"], promote=True)
    run_id = srv.client.start_run("chain", {"k": 3, "value": 0}).run.run_id
    proxy.lose_commit_answer()
    srv.client.signal(run_id, "nudge", {"n": 1})
    assert proxy.commits_lost == 1
    history = srv.client.history(run_id)
    assert [e.type for e in history].count(EventType.SIGNAL_RECEIVED) == 1

    worker = make_worker(srv.client, sandbox)
    assert worker.stream is not None
    real = worker.stream.report_activity
    combined: list[bool] = []

    def losing_its_answer(task: LeasedTask, outcome: object, **kwargs: object) -> object:
        proxy.lose_commit_answer()
        reported = real(task, outcome, **kwargs)  # type: ignore[arg-type]
        combined.append(reported.combined)
        return reported

    monkeypatch.setattr(worker.stream, "report_activity", losing_its_answer)
    run = drive(worker, srv.client, run_id, 60)
    assert run.status is RunStatus.COMPLETED and decode(run.result) == {"value": 3}
    assert proxy.commits_lost == 4 and any(combined)
    events = srv.client.history(run_id)
    completed = [e.payload for e in events if e.type is EventType.ACTIVITY_COMPLETED]
    assert Counter(p["cmd"] for p in completed) == {0: 1, 1: 1, 2: 1}
    assert [e.type for e in events].count(EventType.RUN_COMPLETED) == 1
