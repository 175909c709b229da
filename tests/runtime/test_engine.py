"""The engine end to end in one process: real PostgreSQL, real gRPC on loopback, real sandbox."""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import timedelta

import pytest

from amber.abi import InvalidInput
from amber.history import EventType, LeaseLost, RunStatus, VersionConflict, WorkflowIdInUse
from amber.runtime.client._client import decode
from amber.runtime.model._errors import PayloadTooLarge
from amber.runtime.model._settings import EngineSettings, RetryPolicy
from amber.runtime.model._tasks import WorkflowCompletion
from amber.runtime.sandbox._sandbox import Sandbox
from amber.versions import InvalidModule, UnknownWorkflowType
from tests.conftest import InProcessServer

from ._engine_helpers import drive, make_worker, run_one_task

ORDER = {"order_id": "A-7", "sku": "BOOK-1", "quantity": 2, "amount_cents": 2500}


def _upload(srv: InProcessServer, modules: dict[str, bytes], name: str) -> str:
    return srv.client.upload_version(modules[name], promote=True).version.digest


def test_an_order_runs_to_completion_with_a_complete_history(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv = make_server()
    digest = _upload(srv, modules, "orders")
    started = srv.client.start_run("orders", ORDER, workflow_id="order-A-7")
    run = drive(make_worker(srv.client, sandbox), srv.client, started.run.run_id)

    assert run.status is RunStatus.COMPLETED
    result = decode(run.result)
    assert result["status"] == "shipped"
    assert result["tracking"] == "trk-A-7"
    events = srv.client.history(run.run_id)
    types = [e.type for e in events]
    assert types[0] is EventType.RUN_STARTED and types[-1] is EventType.RUN_COMPLETED
    assert types.count(EventType.ACTIVITY_SCHEDULED) == 4
    assert types.count(EventType.ACTIVITY_COMPLETED) == 4
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {e.digest for e in events} == {digest}
    names = [e.payload["name"] for e in events if e.type is EventType.ACTIVITY_SCHEDULED]
    assert names == ["reserve_inventory", "charge_payment", "ship_order", "send_confirmation"]


def test_a_declined_payment_is_compensated(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv = make_server()
    _upload(srv, modules, "orders")
    started = srv.client.start_run("orders", {**ORDER, "card": "declined"})
    run = drive(make_worker(srv.client, sandbox), srv.client, started.run.run_id)
    assert decode(run.result)["status"] == "payment_declined"
    names = [
        e.payload["name"]
        for e in srv.client.history(run.run_id)
        if e.type is EventType.ACTIVITY_SCHEDULED
    ]
    assert names == ["reserve_inventory", "charge_payment", "release_inventory"]


def test_a_retryable_activity_error_is_retried_and_the_next_attempt_succeeds(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    fast = RetryPolicy(initial=timedelta(milliseconds=10), max_attempts=3)
    srv = make_server(settings=EngineSettings(activity_retry=fast))
    _upload(srv, modules, "orders")
    started = srv.client.start_run("orders", {**ORDER, "card": "flaky"})
    run = drive(make_worker(srv.client, sandbox), srv.client, started.run.run_id)
    assert decode(run.result)["status"] == "shipped"
    completed = [
        e for e in srv.client.history(run.run_id) if e.type is EventType.ACTIVITY_COMPLETED
    ]
    assert [e.payload["attempt"] for e in completed] == [1, 2, 1, 1]
    failures = srv.client.describe(run.run_id).recent_failures
    assert [(f.reason, f.attempt) for f in failures] == [("application_error", 1)]


def test_a_crashing_activity_is_poisoned_not_failed(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    from amber.runtime.model._settings import PoisonPolicy

    fast = PoisonPolicy(crash_backoff=timedelta(milliseconds=10))
    srv = make_server(settings=EngineSettings(poison=fast))
    _upload(srv, modules, "hostile")
    run_id = srv.client.start_run("good", {"crash": True}).run.run_id
    worker = make_worker(srv.client, sandbox)
    for _ in range(50):
        tasks = srv.client.describe(run_id).tasks
        if tasks and tasks[0].pool == "surgical":
            break
        worker.run_once(wait_s=0.1)
    (task,) = srv.client.describe(run_id).tasks
    assert task.kind.value == "activity" and task.pool == "surgical"
    assert srv.client.result(run_id).status is RunStatus.RUNNING  # crashes spend no attempts
    failures = srv.client.describe(run_id).recent_failures
    assert [(f.reason, f.trap_code, f.attempt) for f in failures] == [
        ("trap", "unreachable", 3),
        ("trap", "unreachable", 2),
        ("trap", "unreachable", 1),
    ]
    assert len({f.fingerprint for f in failures}) == 1 and failures[0].fingerprint
    assert all(f.fuel_used for f in failures)
    assert not worker.run_once(wait_s=0.2)  # the main pool does not see it any more


def test_starting_twice_with_one_workflow_id_is_idempotent(
    make_server, modules: dict[str, bytes]
) -> None:
    srv = make_server()
    _upload(srv, modules, "orders")
    first = srv.client.start_run("orders", ORDER, workflow_id="same-id")
    second = srv.client.start_run("orders", ORDER, workflow_id="same-id")
    assert not first.already_started and second.already_started
    assert first.run.run_id == second.run.run_id
    # The refusal says why (it used to be retried as a race, then reported as one).
    with pytest.raises(WorkflowIdInUse, match=f"already used by run {first.run.run_id}"):
        srv.client.start_run("orders", {**ORDER, "quantity": 3}, workflow_id="same-id")
    assert len(srv.client.list_runs()[0]) == 1


def test_a_nul_character_in_any_text_is_the_caller_s_error_and_changes_nothing(
    make_server, modules: dict[str, bytes]
) -> None:
    # PostgreSQL text cannot hold NUL: every such request is refused as bad input, not INTERNAL.
    srv = make_server()
    _upload(srv, modules, "orders")
    run_id = srv.client.start_run("orders", ORDER, workflow_id="nul-1").run.run_id
    calls = [
        lambda: srv.client.terminate(run_id, reason="a\x00b", operator="ops"),
        lambda: srv.client.cancel(run_id, reason="a\x00b", operator="ops"),
        lambda: srv.client.describe("nul\x00"),
        lambda: srv.client.history("nul\x00"),
        lambda: srv.client.list_runs(workflow_type="orders\x00"),
        lambda: srv.client.start_run("orders", ORDER, workflow_id="nul\x002"),
    ]
    for call in calls:
        with pytest.raises(InvalidInput, match=r"NUL character|printable characters"):
            call()
    assert srv.client.result(run_id).status is RunStatus.RUNNING
    assert [r.run_id for r in srv.client.list_runs()[0]] == [run_id]


def test_a_signal_payload_that_is_not_one_msgpack_value_is_refused_and_writes_nothing(
    make_server, modules: dict[str, bytes]
) -> None:
    srv = make_server()
    _upload(srv, modules, "orders")
    run_id = srv.client.start_run("orders", ORDER).run.run_id
    before = len(srv.client.history(run_id))
    for raw in (b"\xc1", b"\xa3ab", b"\x01\x02"):
        with pytest.raises(InvalidInput, match="signal payload is not msgpack"):
            srv.client.signal(run_id, "poke", raw_payload=raw)
    assert len(srv.client.history(run_id)) == before
    assert srv.client.signal(run_id, "poke", raw_payload=b"")  # no payload at all


def test_a_lookup_by_an_oversized_id_is_not_found_not_a_transport_error(
    make_server, modules: dict[str, bytes]
) -> None:
    # The refusal quotes the id; whole, 20,000 characters went over gRPC's metadata limit and
    # the caller saw RESOURCE_EXHAUSTED "received metadata size exceeds hard limit".
    from amber.abi import NotFound

    srv = make_server()
    for huge in ("x" * 20_000, "請" * 7_000):  # past ASCII, each byte travels as three
        for call in (
            lambda ref: srv.client.describe(ref),
            lambda ref: srv.client.signal(ref, "poke", {"n": 1}),
            lambda ref: srv.client.history(ref),
        ):
            with pytest.raises(NotFound, match=f"{huge[0] * 3}…$"):
                call(huge)


def test_a_workflow_id_that_is_another_runs_run_id_is_refused(
    make_server, modules: dict[str, bytes]
) -> None:
    # Commands take a run id or a workflow id, run ids first: such a run could never be
    # reached by its workflow id.
    srv = make_server()
    _upload(srv, modules, "orders")
    named = srv.client.start_run("orders", ORDER, workflow_id="named-1").run
    with pytest.raises(InvalidInput, match="is another run's run id"):
        srv.client.start_run("orders", ORDER, workflow_id=named.run_id)
    unnamed = srv.client.start_run("orders", ORDER).run  # its workflow id is its run id
    again = srv.client.start_run("orders", ORDER, workflow_id=unnamed.run_id)
    assert again.already_started and again.run.run_id == unnamed.run_id
    assert len(srv.client.list_runs()[0]) == 2


def test_bad_starts_are_refused_and_write_nothing(make_server, modules: dict[str, bytes]) -> None:
    srv = make_server(settings=EngineSettings(max_payload_bytes=1024))
    _upload(srv, modules, "orders")
    with pytest.raises(UnknownWorkflowType, match="no uploaded module declares"):
        srv.client.start_run("no_such_type", ORDER)
    with pytest.raises(PayloadTooLarge, match="limit is 1024"):
        srv.client.start_run("orders", {"blob": "x" * 2000})
    # Over what one gRPC call carries, gRPC itself refuses it: still Amber's own error.
    with pytest.raises(PayloadTooLarge, match=r"the request is \d+ bytes, more than one call"):
        srv.client.start_run("orders", raw_input=b"x" * (65 * 2**20))
    with pytest.raises(InvalidInput):
        srv.client.start_run("", ORDER)
    # A queue is named as a workflow id is (it becomes a metrics label and a NOTIFY payload),
    # `*` is no tenant (it means every tenant in a grant), and an input is one msgpack value.
    for queue in ("Q" * 100_000, "Q" * 257, "bad queue\n\x1b[31m"):
        with pytest.raises(InvalidInput, match="queue must be 1"):
            srv.client.start_run("orders", ORDER, queue=queue)
        with pytest.raises(InvalidInput, match="queue must be 1"):  # a worker's poll too
            srv.client.poll_task(worker_id="w", queue=queue, wait_s=0.1)
    with pytest.raises(InvalidInput, match="not a tenant"):
        srv.client.start_run("orders", ORDER, tenant="*")
    for raw in (b"\xc1\xc1", b"\x80\x00garbage", b"\x92\x01"):
        with pytest.raises(InvalidInput, match="input is not msgpack"):
            srv.client.start_run("orders", raw_input=raw)
    chain = hashlib.sha256(modules["chain"]).hexdigest()
    srv.client.upload_version(modules["chain"])
    with pytest.raises(InvalidModule, match="does not declare workflow type 'orders'"):
        srv.client.start_run("orders", ORDER, version=chain)
    assert srv.client.list_runs()[0] == []


def test_malformed_guest_output_fails_the_activation_and_the_worker_keeps_serving(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv = make_server()
    _upload(srv, modules, "hostile")
    _upload(srv, modules, "orders")
    bad = srv.client.start_run("garbage", None)
    worker = make_worker(srv.client, sandbox)
    assert worker.run_once(wait_s=1)
    desc = srv.client.describe(bad.run.run_id)
    assert desc.run.status is RunStatus.RUNNING
    assert [f.reason for f in desc.recent_failures] == ["malformed_output"]
    assert "not valid msgpack" in desc.recent_failures[0].message
    (task,) = desc.tasks
    assert task.state.value == "pending" and task.consecutive_failures == 1
    good = srv.client.start_run("orders", ORDER)
    assert drive(worker, srv.client, good.run.run_id).status is RunStatus.COMPLETED
    assert worker.failed == 1


def test_a_late_duplicate_activity_result_is_rejected_by_the_fencing_token(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv = make_server(
        settings=EngineSettings(
            lease=timedelta(milliseconds=300), sweep_interval=timedelta(milliseconds=50)
        )
    )
    _upload(srv, modules, "orders")
    started = srv.client.start_run("orders", ORDER)
    run_id = started.run.run_id
    run_one_task(srv.client, sandbox)  # the workflow schedules reserve_inventory

    slow = srv.client.poll_task(worker_id="slow", wait_s=2)
    assert slow is not None and slow.kind.value == "activity"
    # "slow" stalls past its lease; the sweeper re-queues the task and "fast" takes it over.
    fast = srv.client.poll_task(worker_id="fast", wait_s=5)
    assert fast is not None and fast.task_id == slow.task_id and fast.fencing > slow.fencing
    assert fast.attempt == slow.attempt + 1

    from amber.abi import ActivityOutcome, ActivityStatus

    outcome = ActivityOutcome(status=ActivityStatus.COMPLETED, result=b"\x80")
    srv.client.complete_activity(fast, outcome, worker_id="fast")
    with pytest.raises(LeaseLost):
        srv.client.complete_activity(slow, outcome, worker_id="slow")
    events = srv.client.history(run_id)
    assert sum(e.type is EventType.ACTIVITY_COMPLETED for e in events) == 1
    reasons = [f.reason for f in srv.client.describe(run_id).recent_failures]
    assert reasons == ["worker_lost"]


def test_a_stale_workflow_completion_is_a_typed_version_conflict(
    make_server, modules: dict[str, bytes]
) -> None:
    srv = make_server()
    _upload(srv, modules, "orders")
    started = srv.client.start_run("orders", ORDER)
    task = srv.client.poll_task(worker_id="w", wait_s=2)
    assert task is not None
    stale = WorkflowCompletion(expected_last_seq=0, commands=(), status=task_status("suspended"))
    with pytest.raises(VersionConflict, match="expected history to end at seq 0"):
        srv.client.complete_workflow(task, stale, worker_id="w")
    assert srv.client.result(started.run.run_id).last_seq == 1
    # The conflicting task was dropped, and the run still has pending work.
    (pending,) = srv.client.describe(started.run.run_id).tasks
    assert pending.kind.value == "workflow" and pending.state.value == "pending"


def test_a_stale_completion_scheduling_a_step_already_scheduled_is_a_version_conflict(
    make_server, modules: dict[str, bytes]
) -> None:
    """Two activations of one run in flight at once (a signal came while the first was leased):
    the stale one is refused as a conflict before its activity task is inserted, never as the
    task row's duplicate key, which the worker used to record as a `worker_error` crash."""
    from amber.abi import ScheduleActivity
    from amber.runtime.model._tasks import NewCommand

    srv = make_server()
    _upload(srv, modules, "orders")
    run_id = srv.client.start_run("orders", ORDER).run.run_id
    first = srv.client.poll_task(worker_id="a", wait_s=2)
    assert first is not None
    srv.client.signal(run_id, "poke", {"n": 1}, request_id="poke-1")
    second = srv.client.poll_task(worker_id="b", wait_s=2)
    assert second is not None and second.task_id != first.task_id

    def scheduling(after: int) -> WorkflowCompletion:
        step = NewCommand(cmd=0, command=ScheduleActivity(name="reserve_inventory", args=b"\x80"))
        return WorkflowCompletion(
            expected_last_seq=after, commands=(step,), status=task_status("suspended")
        )

    srv.client.complete_workflow(second, scheduling(second.events[-1].seq), worker_id="b")
    with pytest.raises(VersionConflict, match="expected history to end at seq 1"):
        srv.client.complete_workflow(first, scheduling(first.events[-1].seq), worker_id="a")
    assert srv.client.describe(run_id).recent_failures == ()
    scheduled = [e for e in srv.client.history(run_id) if e.type is EventType.ACTIVITY_SCHEDULED]
    assert len(scheduled) == 1


def task_status(value: str):
    from amber.abi import WorkflowStatus

    return WorkflowStatus(value)


def test_each_activity_completion_is_recorded_once_per_step(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv = make_server()
    _upload(srv, modules, "chain")
    started = srv.client.start_run("chain", {"k": 5, "value": 10})
    run = drive(make_worker(srv.client, sandbox), srv.client, started.run.run_id)
    assert decode(run.result) == {"value": 15}
    completed = Counter(
        e.payload["cmd"]
        for e in srv.client.history(run.run_id)
        if e.type is EventType.ACTIVITY_COMPLETED
    )
    assert completed == {0: 1, 1: 1, 2: 1, 3: 1, 4: 1}


def test_limits_fail_activations_with_their_own_reasons_and_the_worker_goes_on(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    from amber.runtime.model._settings import PoisonPolicy
    from amber.runtime.sandbox._sandbox import SandboxLimits
    from amber.runtime.worker._worker import Worker, WorkerSettings

    tight = SandboxLimits(fuel=20_000_000, memory_bytes=8 * 2**20, deadline_s=0.5)
    settings = WorkerSettings(
        worker_id="limits", poll_wait_s=0.2, workflow_limits=tight, activity_limits=tight
    )
    later = PoisonPolicy(crash_backoff=timedelta(hours=1))  # each crash is seen exactly once
    srv = make_server(settings=EngineSettings(poison=later))
    srv_client = srv.client
    worker = Worker(srv_client, sandbox, settings)
    srv_client.upload_version(modules["hostile"], promote=True)
    srv_client.upload_version(modules["orders"], promote=True)
    bad = {
        "out_of_fuel": srv_client.start_run("spin", None).run.run_id,
        "memory_limit": srv_client.start_run("hog", None).run.run_id,
        "abi_violation": srv_client.start_run("sleepy_wf", None).run.run_id,
    }
    good = srv_client.start_run("orders", ORDER).run.run_id
    assert drive(worker, srv_client, good).status is RunStatus.COMPLETED
    for reason, run_id in bad.items():
        desc = srv.client.describe(run_id)
        assert desc.run.status is RunStatus.RUNNING
        assert desc.recent_failures[0].reason == reason, desc.recent_failures
    assert worker.failed == 3


def test_reporting_a_task_hands_back_the_next_one_in_the_same_transaction(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    from amber.runtime.model._tasks import NewCommand
    from amber.runtime.replay._replay import WorkflowActivation, activate_workflow
    from amber.runtime.sandbox._sandbox import SandboxLimits

    srv = make_server()
    _upload(srv, modules, "orders")
    run_id = srv.client.start_run("orders", ORDER).run.run_id
    task = srv.client.poll_task(worker_id="eager", wait_s=2)
    assert task is not None
    step = activate_workflow(
        sandbox,
        WorkflowActivation(
            run_id=run_id, workflow_type="orders", digest=task.digest, input=task.input,
            events=task.events, limits=SandboxLimits(),
        ),
    )  # fmt: skip
    done = WorkflowCompletion(
        expected_last_seq=step.expected_last_seq,
        commands=tuple(
            NewCommand(cmd=step.first_new_cmd + i, command=c)
            for i, c in enumerate(step.new_commands)
        ),
        status=step.status,
    )
    following = srv.client.complete_workflow(task, done, worker_id="eager", next_queue="main")
    assert following is not None
    assert following.kind.value == "activity" and following.name == "reserve_inventory"
    (leased,) = srv.client.describe(run_id).tasks
    assert leased.state.value == "leased" and leased.lease_owner == "eager"
    assert srv.client.poll_task(worker_id="other", wait_s=0) is None
