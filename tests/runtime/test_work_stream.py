"""The workers' stream (`Work`) and the group commit behind it, against a real server, database
and sandbox: each item of a batch is kept or refused on its own, and a stream cut while a batch
is at the server loses nothing and applies nothing twice."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from amber.abi import InvalidInput, RetryableError
from amber.history import Database, EventType, LeaseLost, RunStatus, VersionConflict
from amber.runtime.api import amber_pb2 as pb
from amber.runtime.api import amber_pb2_grpc as pb_grpc
from amber.runtime.api import grpc_options
from amber.runtime.client import AmberClient, decode
from amber.runtime.client import _calls as client_calls
from amber.runtime.client import _stream as client_stream
from amber.runtime.client._reports import workflow_request
from amber.runtime.model import LeasedTask, ManualClock, WorkflowCompletion
from amber.runtime.replay import WorkflowActivation, activate_workflow
from amber.runtime.sandbox import Sandbox, SandboxLimits
from amber.runtime.server import _server as server_module
from amber.runtime.server import _worker_rpc as worker_rpc
from amber.runtime.server._worker_rpc import split_answers
from amber.runtime.worker import Worker, WorkerSettings
from amber.runtime.worker._worker import _completion
from tests.conftest import InProcessServer, wait_for
from tests.history._proxy import PgProxy
from tests.runtime._engine_helpers import serving


def _start_chains(srv: InProcessServer, modules: dict[str, bytes], n: int, k: int) -> list[str]:
    srv.client.upload_version(modules["chain"], promote=True)
    return [srv.client.start_run("chain", {"k": k, "value": 0}).run.run_id for _ in range(n)]


def _proxy_in_front_of(srv: InProcessServer) -> PgProxy:
    """The TCP proxy of the database outage tests (it forwards any TCP), before the server's
    gRPC port: a test can cut or silence the worker's connections."""
    return PgProxy(("127.0.0.1", int(srv.target.rsplit(":", 1)[1])))


def _lease_all(client: AmberClient, n: int) -> list[LeasedTask]:
    tasks = []
    for _ in range(n):
        task = client.poll_task(worker_id="w", wait_s=5)
        assert task is not None
        tasks.append(task)
    return tasks


def _activate(sandbox: Sandbox, task: LeasedTask) -> WorkflowCompletion:
    """What a worker would report for a leased workflow task."""
    activation = WorkflowActivation(
        run_id=task.run_id,
        workflow_type=task.name,
        digest=task.digest,
        input=task.input,
        events=task.events,
        limits=SandboxLimits(deadline_s=5.0),
    )
    return _completion(activate_workflow(sandbox, activation))


def _record_group_sizes(srv: InProcessServer, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    real = srv.server.tasks.record_group

    def counted(reports):  # type: ignore[no-untyped-def]
        sizes.append(len(reports))
        return real(reports)

    monkeypatch.setattr(srv.server.tasks, "record_group", counted)
    return sizes


def _exactly_once(client: AmberClient, run_id: str, k: int) -> None:
    events = client.history(run_id)
    kinds = Counter(e.type for e in events)
    scheduled = Counter(e.payload["cmd"] for e in events if e.type is EventType.ACTIVITY_SCHEDULED)
    completed = Counter(e.payload["cmd"] for e in events if e.type is EventType.ACTIVITY_COMPLETED)
    assert scheduled == completed == dict.fromkeys(range(k), 1), run_id
    assert kinds[EventType.RUN_COMPLETED] == 1


def test_a_group_commits_every_report_but_the_refused_ones(
    make_server: Callable[..., InProcessServer],
    db: Database,
    modules: dict[str, bytes],
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    srv = make_server()
    runs = _start_chains(srv, modules, 3, k=1)
    tasks = _lease_all(srv.client, 3)
    reports = {
        t.run_id: workflow_request(
            t, _activate(sandbox, t), worker_id="w", next_queue=None, stats=None
        )
        for t in tasks
    }
    moved = runs[1]
    srv.client.signal(moved, "nudge", {"n": 1})  # its head moves after the activation read it
    sizes = _record_group_sizes(srv, monkeypatch)

    items = [pb.WorkItem(id=i + 1, complete=reports[run]) for i, run in enumerate(runs)]
    items.append(pb.WorkItem(id=4, complete=reports[runs[0]]))  # the same report again
    items.append(pb.WorkItem(id=5))  # carries nothing
    stub = pb_grpc.AmberStub(grpc.insecure_channel(srv.target))  # type: ignore[no-untyped-call]
    (answers,) = list(stub.Work(iter([pb.WorkBatch(items=items)]), timeout=20))
    by_id = {a.id: a for a in answers.answers}

    assert sizes == [4]  # the four reports went to the database as one group
    assert sorted(by_id) == [1, 2, 3, 4, 5]
    assert by_id[1].WhichOneof("answer") == "complete"
    assert by_id[3].WhichOneof("answer") == "complete"
    assert by_id[2].error.type == VersionConflict.wire_name
    assert by_id[4].error.type == LeaseLost.wire_name  # applied once: the copy is refused
    assert by_id[5].error.type == InvalidInput.wire_name
    assert by_id[5].error.code == "INVALID_ARGUMENT"

    def scheduled(run: str) -> int:
        return [e.type for e in srv.client.history(run)].count(EventType.ACTIVITY_SCHEDULED)

    assert [scheduled(run) for run in runs] == [1, 0, 1]
    # Nothing of the refused report stayed: no activity task for the run that moved on.
    kinds = db.run(
        lambda cur: cur.execute(
            "SELECT kind FROM amber_tasks WHERE run_id = %s", (moved,)
        ).fetchall()
    )
    assert kinds == [("workflow",)]
    # The refused run is not lost: its workflow task runs again and the run completes.
    worker = Worker(srv.client, sandbox, WorkerSettings(worker_id="after", poll_wait_s=0.2))
    deadline = time.monotonic() + 30
    while not all(srv.client.result(r).status.closed for r in runs):
        assert time.monotonic() < deadline, "runs did not complete"
        worker.run_once(wait_s=0.2)
    for run in runs:
        assert srv.client.result(run).status is RunStatus.COMPLETED
        _exactly_once(srv.client, run, 1)


def test_the_stream_raises_each_items_own_typed_error(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv = make_server()
    _start_chains(srv, modules, 1, k=1)
    (task,) = _lease_all(srv.client, 1)
    done = _activate(sandbox, task)
    stream = srv.client.work_stream()
    try:
        assert stream.heartbeat(task, worker_id="w").cancel_requested is False
        reported = stream.report_workflow(task, done, worker_id="w")
        assert [e.type for e in reported.appended] == [EventType.ACTIVITY_SCHEDULED]
        with pytest.raises(LeaseLost):
            stream.report_workflow(task, done, worker_id="w")
        with pytest.raises(LeaseLost):
            stream.heartbeat(task, worker_id="w")
        assert stream.batches >= 4 and stream.items == 4
    finally:
        stream.close()


def test_a_server_that_vanishes_without_closing_its_connections_is_left_behind(
    make_server: Callable[..., InProcessServer],
    modules: dict[str, bytes],
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A host lost or a partition: the worker's stream and its long poll sit on connections
    # that answer nothing and never close. No call gives up on its own within the test (an
    # hour's timeout): keepalive pings must find the dead connections, and the worker must
    # carry on over new ones (to the replacement behind the same address).
    quick = grpc_options(keepalive_s=0.5, keepalive_timeout_s=0.5)
    monkeypatch.setattr(server_module, "GRPC_OPTIONS", quick)
    monkeypatch.setattr(client_calls, "GRPC_OPTIONS", quick)
    srv = make_server()
    first = _start_chains(srv, modules, 2, k=2)
    proxy = _proxy_in_front_of(srv)
    client = AmberClient(f"127.0.0.1:{proxy.port}", timeout_s=3600)
    settings = WorkerSettings(worker_id="stranded", slots=4, poll_wait_s=0.5, streams=1)
    try:
        with serving(Worker(client, sandbox, settings)):
            wait_for(lambda: all(srv.client.result(r).status.closed for r in first), 60, "warm")
            proxy.strand()
            later = _start_chains(srv, modules, 2, k=2)
            wait_for(
                lambda: all(srv.client.result(r).status.closed for r in later),
                60,
                "the runs started after the connections went silent to close",
            )
    finally:
        client.close()
        proxy.close()
    for run in first + later:
        assert decode(srv.client.result(run).result) == {"value": 2}


def test_a_stream_cut_while_a_batch_is_at_the_server_loses_and_duplicates_nothing(
    make_server: Callable[..., InProcessServer],
    modules: dict[str, bytes],
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    srv = make_server()
    runs = _start_chains(srv, modules, 8, k=3)
    proxy = _proxy_in_front_of(srv)
    client = AmberClient(f"127.0.0.1:{proxy.port}", timeout_s=20)
    cut_groups: list[int] = []
    real = srv.server.tasks.record_group

    def committed_then_cut(reports):  # type: ignore[no-untyped-def]
        time.sleep(0.05)  # the slots' next reports gather meanwhile: a batch of several
        results = real(reports)
        if len(cut_groups) < 3 and len(reports) > 1:
            # The group committed; its answer never reaches the worker.
            cut_groups.append(len(reports))
            proxy.cut()
            threading.Timer(0.3, proxy.restore).start()
        return results

    monkeypatch.setattr(srv.server.tasks, "record_group", committed_then_cut)
    settings = WorkerSettings(worker_id="cut", slots=8, poll_wait_s=0.2, streams=1)
    try:
        with serving(Worker(client, sandbox, settings)):
            wait_for(
                lambda: all(srv.client.result(r).status.closed for r in runs),
                60,
                "every run to close across the cuts",
            )
    finally:
        client.close()
        proxy.close()
    assert len(cut_groups) == 3, cut_groups
    for run in runs:
        result = srv.client.result(run)
        assert result.status is RunStatus.COMPLETED and decode(result.result) == {"value": 3}
        _exactly_once(srv.client, run, 3)


def test_a_stopping_server_ends_the_streams_and_the_worker_moves_to_the_next(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    first = make_server()
    runs = _start_chains(first, modules, 1, k=2)
    (task,) = _lease_all(first.client, 1)
    stream = first.client.work_stream()
    try:
        assert stream.heartbeat(task, worker_id="w").cancel_requested is False
        # The stop ends the idle stream itself: with an hour's grace, waiting for the stream
        # to end by itself would never finish within the join.
        stopping = threading.Thread(target=lambda: first.server.stop(grace_s=3600))
        stopping.start()
        stopping.join(60)
        assert not stopping.is_alive()  # the open stream did not hold the stop back
        with pytest.raises(RetryableError):
            stream.heartbeat(task, worker_id="w")
    finally:
        stream.close()
    # Another server on the same database takes over; the lease is still the worker's.
    second = make_server()
    other = second.client.work_stream()
    try:
        assert other.heartbeat(task, worker_id="w").cancel_requested is False
        done = _activate(sandbox, task)
        assert other.report_workflow(task, done, worker_id="w").appended
    finally:
        other.close()
    assert [e.type for e in second.client.history(runs[0])].count(EventType.ACTIVITY_SCHEDULED) == 1


def test_a_busy_worker_that_never_polls_is_still_seen_by_its_reports(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    srv = make_server(clock=clock)
    _start_chains(srv, modules, 1, k=2)
    (task,) = _lease_all(srv.client, 1)  # its poll is the last time it was seen polling
    clock.advance(timedelta(minutes=10))  # long past "lately"
    assert [w.worker_id for w in srv.client.status().workers] == []
    stream = srv.client.work_stream()
    try:
        reported = stream.report_workflow(
            task, _activate(sandbox, task), worker_id="w", next_queue="main"
        )
        assert reported.next is not None  # eager dispatch: it has work and no reason to poll
    finally:
        stream.close()
    (seen,) = srv.client.status().workers
    assert (seen.worker_id, seen.queue, seen.pool) == ("w", "main", "main")
    assert seen.last_seen == clock.now()


def test_a_batchs_answers_are_split_to_fit_and_the_worker_reads_them_all(
    make_server: Callable[..., InProcessServer],
    modules: dict[str, bytes],
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = pb.WorkAnswers(
        answers=[pb.WorkAnswer(id=i, error=pb.WorkError(message="x" * 100)) for i in range(5)]
    )
    parts = list(split_answers(answers, budget=250))
    assert len(parts) == 3 and [p.more for p in parts] == [True, True, False]
    assert [a.id for p in parts for a in p.answers] == list(range(5))
    assert list(split_answers(answers)) == [answers]  # within the budget: one message

    # Every answer in a message of its own: the worker waits for a batch's last one.
    monkeypatch.setattr(worker_rpc, "STREAM_MESSAGE_BUDGET", 1)
    srv = make_server()
    runs = _start_chains(srv, modules, 6, k=2)
    settings = WorkerSettings(worker_id="split", slots=6, poll_wait_s=0.2, streams=1)
    with serving(Worker(srv.client, sandbox, settings)):
        wait_for(lambda: all(srv.client.result(r).status.closed for r in runs), 60, "every run")
    for run in runs:
        assert srv.client.result(run).status is RunStatus.COMPLETED
        _exactly_once(srv.client, run, 2)


def test_a_long_batch_is_recorded_in_groups_of_bounded_size(
    make_server: Callable[..., InProcessServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    srv = make_server()
    sizes = _record_group_sizes(srv, monkeypatch)
    failure = pb.Failure(reason="trap", message="stale")
    items = [
        pb.WorkItem(
            id=i,
            fail=pb.FailTaskRequest(task_id=10_000 + i, fencing=1, worker_id="w", failure=failure),
        )
        for i in range(2 * worker_rpc.MAX_GROUP + 2)
    ]
    stub = pb_grpc.AmberStub(grpc.insecure_channel(srv.target))  # type: ignore[no-untyped-call]
    (answers,) = list(stub.Work(iter([pb.WorkBatch(items=items)]), timeout=20))
    assert sizes == [worker_rpc.MAX_GROUP, worker_rpc.MAX_GROUP, 2]
    assert {a.error.type for a in answers.answers} == {LeaseLost.wire_name}
    assert sorted(a.id for a in answers.answers) == list(range(len(items)))


def test_a_stopping_server_answers_the_batch_it_is_recording_before_ending_its_stream(
    make_server: Callable[..., InProcessServer],
    modules: dict[str, bytes],
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    srv = make_server()
    _start_chains(srv, modules, 1, k=1)
    (task,) = _lease_all(srv.client, 1)
    done = _activate(sandbox, task)
    recording, release = threading.Event(), threading.Event()
    real = srv.server.tasks.record_group

    def held(reports):  # type: ignore[no-untyped-def]
        recording.set()
        release.wait(10)
        return real(reports)

    monkeypatch.setattr(srv.server.tasks, "record_group", held)
    stream = srv.client.work_stream(lines=1)
    outcome: list[object] = []
    reporting = threading.Thread(
        target=lambda: outcome.append(stream.report_workflow(task, done, worker_id="w"))
    )
    reporting.start()
    try:
        assert recording.wait(10)
        stopping = threading.Thread(target=lambda: srv.server.stop(grace_s=10))
        stopping.start()
        calls = srv.server._servicer._worker_calls  # the stop has begun: streams are ending
        wait_for(lambda: calls._ending.is_set(), 10, "the stop to end the streams")
        release.set()
        reporting.join(10)
        stopping.join(15)
        assert not stopping.is_alive()
    finally:
        release.set()
        stream.close()
    (reported,) = outcome  # the committed batch's answer arrived: nothing to resend
    assert [e.type for e in reported.appended] == [EventType.ACTIVITY_SCHEDULED]  # type: ignore[attr-defined]


def test_an_item_that_would_overflow_the_batch_budget_leads_the_next_batch(
    make_server: Callable[..., InProcessServer],
    modules: dict[str, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    srv = make_server()
    _start_chains(srv, modules, 1, k=1)
    (task,) = _lease_all(srv.client, 1)
    monkeypatch.setattr(client_stream, "STREAM_MESSAGE_BUDGET", 1)  # one item per batch
    stream = srv.client.work_stream(lines=1)
    acks: list[object] = []

    def beat() -> None:
        for _ in range(5):
            acks.append(stream.heartbeat(task, worker_id="w"))

    beating = [threading.Thread(target=beat) for _ in range(4)]
    try:
        for thread in beating:
            thread.start()
        for thread in beating:
            thread.join(20)
    finally:
        stream.close()
    assert len(acks) == 20  # every item answered, none lost at a batch's edge
    assert stream.items == stream.batches == 20
