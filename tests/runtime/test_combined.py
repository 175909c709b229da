"""An activity reported together with the workflow activation the worker ran after it.

The worker keeps the histories of the runs it serves; after an activity completes it runs the
run's next activation on its copy and reports both at once. The server applies both in one
transaction only if the run's head is still where the worker saw it; otherwise it records the
activity alone and the ordinary workflow task runs. Either way the history must be the one the
reference path (one task per activation, fresh full replay) writes.
"""

from __future__ import annotations

from typing import Any

import pytest

from amber.abi import ActivityOutcome, ActivityStatus, ScheduleActivity, WorkflowStatus, pack
from amber.history import ActivityCompleted, EventType, RunStatus, TaskKind
from amber.runtime.client._client import AmberClient, decode
from amber.runtime.model import (
    LeasedTask,
    NewCommand,
    Reported,
    ThenWorkflow,
    WorkflowCompletion,
)
from amber.runtime.replay import WorkflowActivation, activate_workflow
from amber.runtime.sandbox._sandbox import Sandbox, SandboxLimits
from amber.runtime.worker._worker import Worker, WorkerSettings
from tests.conftest import InProcessServer

from ._engine_helpers import drive

K = 4


def _worker(client: AmberClient, sandbox: Sandbox, *, copies: int = 1024) -> Worker:
    settings = WorkerSettings(worker_id="combiner", poll_wait_s=0.2, run_copies=copies)
    return Worker(client, sandbox, settings)


def _history_shape(client: AmberClient, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The run's events after RunStarted, as (type, payload map): what both paths must agree on."""
    return [(e.type.value, e.payload.to_doc()) for e in client.history(run_id)[1:]]


def _start_chain(srv: InProcessServer, modules: dict[str, bytes], k: int = K) -> str:
    srv.client.upload_version(modules["chain"], promote=True)
    return srv.client.start_run("chain", {"k": k, "value": 10}).run.run_id


def test_combined_reports_write_the_history_the_reference_path_writes(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv: InProcessServer = make_server()
    combined_run = _start_chain(srv, modules)
    combiner = _worker(srv.client, sandbox)
    closed = drive(combiner, srv.client, combined_run)
    assert closed.status is RunStatus.COMPLETED and decode(closed.result) == {"value": 10 + K}
    assert combiner.combined == K  # every activity carried the activation after it
    assert combiner.completed == 2 * K + 1

    reference_run = _start_chain(srv, modules)
    reference = _worker(srv.client, sandbox, copies=0)
    drive(reference, srv.client, reference_run)
    assert reference.combined == 0
    assert _history_shape(srv.client, combined_run) == _history_shape(srv.client, reference_run)


def test_a_signal_between_activation_and_report_falls_back_and_loses_neither(
    make_server, modules: dict[str, bytes], sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    srv: InProcessServer = make_server()
    run_id = _start_chain(srv, modules, k=2)
    worker = _worker(srv.client, sandbox)
    reports: list[Reported] = []
    assert worker.stream is not None  # reports travel on the worker's stream
    real = worker.stream.report_activity

    def signal_first(task: LeasedTask, outcome: ActivityOutcome, **kwargs: Any) -> Reported:
        if not reports:  # the run's head moves after the worker ran the next activation
            srv.client.signal(run_id, "nudge", {"n": 1})
        reports.append(real(task, outcome, **kwargs))
        return reports[-1]

    monkeypatch.setattr(worker.stream, "report_activity", signal_first)
    closed = drive(worker, srv.client, run_id)
    assert decode(closed.result) == {"value": 12}
    assert [r.combined for r in reports] == [False, True]
    events = srv.client.history(run_id)
    types = [e.type for e in events]
    assert types.count(EventType.SIGNAL_RECEIVED) == 1
    completed = [e.payload for e in events if isinstance(e.payload, ActivityCompleted)]
    assert sorted(p.cmd for p in completed) == [0, 1]  # each activity recorded once
    # The fallback put the activity after the signal, and the workflow task replayed both.
    assert types.index(EventType.SIGNAL_RECEIVED) < types.index(EventType.ACTIVITY_COMPLETED)


def _activity_task(
    srv: InProcessServer, modules: dict[str, bytes], sandbox: Sandbox
) -> tuple[str, LeasedTask]:
    """A chain run whose first activity is leased (its scheduling workflow task done by the
    reference path)."""
    run_id = _start_chain(srv, modules, k=2)
    workflow = srv.client.poll_task(worker_id="w", wait_s=2)
    assert workflow is not None
    reference = _worker(srv.client, sandbox, copies=0)
    reference.stop()  # report without taking the next task
    reference._execute(workflow)
    task = srv.client.poll_task(worker_id="w", wait_s=2)
    assert task is not None and task.name == "add_one"
    return run_id, task


def _then(expected_last_seq: int, digest: str, *commands: NewCommand) -> ThenWorkflow:
    done = WorkflowCompletion(
        expected_last_seq=expected_last_seq, commands=commands, status=WorkflowStatus.SUSPENDED
    )
    return ThenWorkflow(done=done, digest=digest)


OUTCOME = ActivityOutcome(status=ActivityStatus.COMPLETED, result=pack({"value": 11}))


@pytest.mark.parametrize("wrong", ["head", "digest"])
def test_an_activation_computed_on_another_head_or_version_is_not_applied(
    wrong: str, make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv: InProcessServer = make_server()
    run_id, task = _activity_task(srv, modules, sandbox)
    head = srv.client.describe(run_id).run.last_seq
    then = _then(head + 5, task.digest) if wrong == "head" else _then(head + 1, "0" * 64)
    reported = srv.client.report_activity(task, OUTCOME, worker_id="w", then=then)
    assert not reported.combined and reported.appended == ()
    assert srv.client.history(run_id)[-1].type is EventType.ACTIVITY_COMPLETED  # kept
    assert [t.kind for t in srv.client.describe(run_id).tasks] == [TaskKind.WORKFLOW]
    closed = drive(_worker(srv.client, sandbox, copies=0), srv.client, run_id)
    assert decode(closed.result) == {"value": 12}


def test_an_activation_with_commands_out_of_sequence_is_refused_and_the_activity_kept(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv: InProcessServer = make_server()
    run_id, task = _activity_task(srv, modules, sandbox)
    head = srv.client.describe(run_id).run.last_seq
    wrong_index = NewCommand(cmd=7, command=ScheduleActivity(name="add_one", args=pack({})))
    then = _then(head + 1, task.digest, wrong_index)
    reported = srv.client.report_activity(task, OUTCOME, worker_id="w", then=then)
    assert not reported.combined
    assert srv.client.history(run_id)[-1].type is EventType.ACTIVITY_COMPLETED
    closed = drive(_worker(srv.client, sandbox, copies=0), srv.client, run_id)
    assert decode(closed.result) == {"value": 12}


def test_a_workflow_report_hands_back_the_activity_it_scheduled_before_older_work(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv: InProcessServer = make_server()
    first = _start_chain(srv, modules, k=1)
    workflow = srv.client.poll_task(worker_id="w", wait_s=2)
    assert workflow is not None and workflow.run_id == first
    for _ in range(3):  # older work waiting in the same queue
        srv.client.start_run("chain", {"k": 1, "value": 0})
    activation = WorkflowActivation(
        run_id=first,
        workflow_type="chain",
        digest=workflow.digest,
        input=workflow.input,
        events=workflow.events,
        limits=SandboxLimits(deadline_s=5.0),
    )
    step = activate_workflow(sandbox, activation)
    done = WorkflowCompletion(
        expected_last_seq=step.expected_last_seq,
        commands=tuple(NewCommand(cmd=i, command=c) for i, c in enumerate(step.new_commands)),
        status=step.status,
    )
    reported = srv.client.report_workflow(workflow, done, worker_id="w", next_queue="main")
    assert reported.next is not None
    assert reported.next.run_id == first and reported.next.name == "add_one"
    assert [e.type for e in reported.appended] == [EventType.ACTIVITY_SCHEDULED]
    assert reported.appended[0].seq == workflow.events[-1].seq + 1
